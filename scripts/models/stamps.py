"""The `build.json` stamps that let a rebuild skip a model directory that is already current.

A stamp holds a fingerprint of everything that went into a directory (the scripts that build
it, the tool versions and the input files) and the sha256 of every file the directory holds.
Each model lists its own scripts, so a change to one model's code leaves the others alone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import fetch
import numpy as np
import onnx
import onnxruntime as ort
import tokenizers

HERE = Path(__file__).resolve().parent


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(sources: tuple[str, ...], *parts: str | Path) -> str:
    """Hash of the given scripts, the tool versions and the given strings/files."""
    digest = hashlib.sha256()
    for name in sources:
        digest.update((HERE / name).read_bytes())
    for version in (np.__version__, onnx.__version__, ort.__version__, tokenizers.__version__):
        digest.update(version.encode())
    for part in parts:
        digest.update(fetch.sha256_file(part).encode() if isinstance(part, Path) else part.encode())
    return digest.hexdigest()


def is_current(out: Path, print_: str) -> bool:
    stamp = out / "build.json"
    if not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return False
    if recorded.get("fingerprint") != print_:
        return False
    files = recorded.get("files", {})
    return bool(files) and all(
        (out / name).is_file() and fetch.sha256_file(out / name) == digest for name, digest in files.items()
    )


def write_stamp(out: Path, print_: str, extra: dict | None = None) -> None:
    files = {
        p.name: fetch.sha256_file(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "build.json"
    }
    stamp = {"fingerprint": print_, "files": files}
    if extra:
        stamp.update(extra)
    (out / "build.json").write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")


def write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
