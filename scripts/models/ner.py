"""Builds `models/pii_ner`: a token classifier that finds names of people, places and organisations.

The encoder is the frozen MiniLM graph of `models/minilm`; a softmax regression reads, at each
word's first token, a middle layer's vector and the last layer's vectors of the token and its
two neighbours (`TokenEncoder.features`), and predicts a BIO label. The head
is appended to the encoder graph (`export.token_classifier`), so the directory is one ONNX file
with the usual inputs and `logits` [batch, seq, labels], read into spans by
`reference.entities` — the same rule the runtime implements.

Training data comes from `ner_data.py` (templates filled by `faker`, fixed seed). Token vectors
of the training sentences are cached under .cache/models/emb, keyed by encoder, tokenizer,
`max_length` and texts, so a rebuild of the head skips the encoder.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import export
import faker
import fetch
import heads
import ner_data
import numpy as np
import onnx
import onnxruntime as ort
import train
from reference import (
    Batch,
    ModelDir,
    entities,
    load_tokenizer,
    session_options,
    words_of,
)
from stamps import fingerprint, is_current, write_json, write_stamp

NAME = "pii_ner"
MAX_LENGTH = 128
THREADS = 2
EMBED_BATCH = 64
TYPES = ["PERSON", "LOCATION", "ORGANIZATION"]
LABELS = ["O"] + [f"{tag}-{kind}" for kind in TYPES for tag in ("B", "I")]
C_GRID = [0.0003, 0.001, 0.003]
ADAM_STEPS = 300
ADAM_RATE = 0.02
THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.9]
# Of the training templates, those at this position of every five choose C (see select_c).
VALIDATION_AT = 4
FEATURES = "middle(t), last(t-1), last(t), last(t+1)"
SOURCES = ("ner.py", "ner_data.py", "export.py", "fetch.py", "heads.py", "train.py", "reference.py", "stamps.py")


class DataError(Exception):
    """A generated sentence does not line up with the tokenizer's words."""


def tokenizer_json(minilm: Path) -> str:
    """The encoder's tokenizer with truncation at MAX_LENGTH (padding stays batch-longest)."""
    data = json.loads((minilm / "tokenizer.json").read_text(encoding="utf-8"))
    data["truncation"] = {
        "direction": "Right",
        "max_length": MAX_LENGTH,
        "strategy": "LongestFirst",
        "stride": 0,
    }
    return json.dumps(data, ensure_ascii=False)


def word_labels(sentence: ner_data.Sentence, words: list) -> list[int]:
    """BIO label index of every word; an entity must begin and end on word boundaries."""
    labels = [0] * len(words)
    for start, end, kind in sentence.entities:
        inside = [i for i, w in enumerate(words) if w.start >= start and w.end <= end]
        if not inside or words[inside[0]].start != start or words[inside[-1]].end != end:
            raise DataError(f"{sentence.text!r}: {sentence.text[start:end]!r} is not whole words")
        labels[inside[0]] = LABELS.index(f"B-{kind}")
        for i in inside[1:]:
            labels[i] = LABELS.index(f"I-{kind}")
    return labels


class TokenEncoder:
    """MiniLM's hidden states around the first token of every word (`features`)."""

    def __init__(self, minilm: Path, tokenizer_path: Path) -> None:
        graph = onnx.load(str(minilm / "model.onnx"))
        middle = onnx.helper.make_tensor_value_info(export.MIDDLE, onnx.TensorProto.FLOAT, None)
        graph.graph.output.append(middle)
        self.session = ort.InferenceSession(
            graph.SerializeToString(),
            sess_options=session_options(THREADS),
            providers=["CPUExecutionProvider"],
        )
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = load_tokenizer(tokenizer_path, MAX_LENGTH)
        self.key = "|".join(
            (
                fetch.sha256_file(minilm / "model.onnx"),
                fetch.sha256_file(tokenizer_path),
                str(MAX_LENGTH),
                FEATURES,
            )
        )

    def words(self, texts: list[str]) -> list[list]:
        return [words_of(e.word_ids, e.offsets) for e in self.tokenizer.encode_batch(texts)]

    def features(self, texts: list[str], what: str, cache: Path) -> np.ndarray:
        """Rows: every word of every text, in order; columns: for the word's first token t, the
        middle layer at t and the last layer at t-1, t, t+1 (what export.token_classifier reads).
        t-1 and t+1 always exist: [CLS] and [SEP] frame every word."""
        digest = hashlib.sha256(self.key.encode())
        for text in texts:
            digest.update(text.encode("utf-8") + b"\0")
        cached = cache / f"ner-{digest.hexdigest()}.npy"
        if cached.is_file():
            return np.load(cached)
        started = time.monotonic()
        per_text: list[np.ndarray] = [np.empty((0, 4 * 384), dtype=np.float32)] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for begin in range(0, len(order), EMBED_BATCH):
            rows = order[begin : begin + EMBED_BATCH]
            encodings = self.tokenizer.encode_batch([texts[i] for i in rows])
            batch = Batch(
                input_ids=np.array([e.ids for e in encodings], dtype=np.int64),
                attention_mask=np.array([e.attention_mask for e in encodings], dtype=np.int64),
                token_type_ids=np.array([e.type_ids for e in encodings], dtype=np.int64),
            )
            last, middle = self.session.run([export.HIDDEN, export.MIDDLE], batch.feeds(self.inputs))
            for k, (i, encoding) in enumerate(zip(rows, encodings, strict=True)):
                t = np.array([w.first for w in words_of(encoding.word_ids, encoding.offsets)], dtype=np.int64)
                parts = (middle[k, t], last[k, t - 1], last[k, t], last[k, t + 1])
                per_text[i] = np.concatenate(parts, axis=1).astype(np.float32)
        out = np.concatenate(per_text, axis=0)
        cache.mkdir(parents=True, exist_ok=True)
        np.save(cached, out)
        print(f"  encoded {len(texts)} {what} sentences in {time.monotonic() - started:.1f}s", flush=True)
        return out


def spans_of(sentence: ner_data.Sentence) -> set[tuple[int, int, str]]:
    """Gold spans as UTF-8 byte offsets, as the reference reports them."""
    prefix = [0]
    for ch in sentence.text:
        prefix.append(prefix[-1] + len(ch.encode("utf-8")))
    return {(prefix[s], prefix[e], kind) for s, e, kind in sentence.entities}


def span_scores(gold: list[set], found: list[list[dict]], threshold: float) -> dict:
    """Span-exact precision/recall/F1 per entity type: a hit needs type, start and end equal."""
    per_type = {}
    for kind in TYPES:
        tp = fp = fn = 0
        for truth, spans in zip(gold, found, strict=True):
            want = {g for g in truth if g[2] == kind}
            got = {
                (e["start"], e["end"], kind) for e in spans if e["entity"] == kind and e["score"] >= threshold
            }
            tp += len(want & got)
            fp += len(got - want)
            fn += len(want - got)
        per_type[kind] = heads.precision_recall_f1(tp, fp, fn) | {"support": tp + fn, "found": tp + fp}
    negatives = [i for i, truth in enumerate(gold) if not truth]
    flagged = sum(1 for i in negatives if any(e["score"] >= threshold for e in found[i]))
    return {
        "threshold": threshold,
        "per_type": per_type,
        "sentences_without_entities": len(negatives),
        "of_them_with_a_false_entity": flagged,
    }


def fit_softmax(x: np.ndarray, y: np.ndarray, c: float) -> train.Head:
    """Softmax regression on standardised features, folded back into one head on raw features.

    Minimises `C * sum_i cross_entropy + 0.5 * ||W||^2` (scikit-learn's convention, as train.py)
    by full-batch Adam for a fixed number of steps: tens of thousands of words times hundreds of
    features is too large for train.py's exact Newton solve to finish in a build's time, and a
    full batch with fixed steps keeps the result deterministic.
    """
    n = len(y)
    mean = x.mean(axis=0, dtype=np.float64).astype(np.float32)
    scale = np.maximum(x.std(axis=0, dtype=np.float64), 1e-3).astype(np.float32)
    xs = (x - mean) / scale
    onehot = np.eye(len(LABELS), dtype=np.float32)[y]
    w = np.zeros((x.shape[1], len(LABELS)), dtype=np.float32)
    b = np.zeros(len(LABELS), dtype=np.float32)
    moments = [np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)]
    beta1, beta2 = 0.9, 0.999
    for step in range(1, ADAM_STEPS + 1):
        z = xs @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) / n
        grads = (xs.T @ g + w / (c * n), g.sum(axis=0))
        for k, (param, grad) in enumerate(zip((w, b), grads, strict=True)):
            m, v = moments[2 * k], moments[2 * k + 1]
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= ADAM_RATE * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + 1e-8)
    weight = w / scale[:, None]
    return train.Head(weight.astype(np.float32), (b - mean @ weight).astype(np.float32))


def select_c(x: np.ndarray, y: np.ndarray, template_of_row: np.ndarray) -> tuple[float, list[dict]]:
    """C by word-level log-loss on whole training templates held back from the fit."""
    held = (template_of_row % ner_data.HELD_OUT_EVERY) == VALIDATION_AT
    trials = []
    for c in C_GRID:
        head = fit_softmax(x[~held], y[~held], c)
        probs = head.probabilities(x[held])
        loss = train.log_loss(probs, y[held])
        accuracy = float(np.mean(np.argmax(probs, axis=1) == y[held]))
        trials.append({"C": c, "val_log_loss": round(loss, 5), "val_word_accuracy": round(accuracy, 4)})
        print(f"  C={c:<6g} validation log-loss {loss:.4f} word accuracy {accuracy:.4f}", flush=True)
    return min(trials, key=lambda t: t["val_log_loss"])["C"], trials


def build(minilm: Path, models: Path, cache: Path) -> Path:
    out = models / NAME
    print_ = fingerprint(SOURCES, minilm / "model.onnx", minilm / "tokenizer.json", f"faker {faker.VERSION}")
    if is_current(out, print_):
        print(f"{NAME}: up to date")
        return out
    print(f"{NAME}: building", flush=True)
    started = time.monotonic()
    data = ner_data.generate()
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tokenizer_json(minilm), encoding="utf-8")
    encoder = TokenEncoder(minilm, out / "tokenizer.json")

    sentences = data["train"]
    texts = [s.text for s in sentences]
    x = encoder.features(texts, "training", cache)
    y, template_of_row = [], []
    for sentence, words in zip(sentences, encoder.words(texts), strict=True):
        labels = word_labels(sentence, words)
        y.extend(labels)
        template_of_row.extend([sentence.template] * len(labels))
    y_arr, templates = np.array(y, dtype=np.int64), np.array(template_of_row)
    if len(y_arr) != len(x):
        raise DataError(f"{len(x)} word vectors for {len(y_arr)} word labels")

    chosen, trials = select_c(x, y_arr, templates)
    head = fit_softmax(x, y_arr, chosen)
    print(f"  chose C={chosen:g}", flush=True)

    description = (
        "Name/place/organisation token classifier: all-MiniLM-L6-v2 (int8), layer 3 at each token and "
        "layer 6 at it and its neighbours, softmax regression over BIO labels, trained on sentences "
        "from scripts/models/ner_data.py."
    )
    encoder_graph = onnx.load(str(minilm / "model.onnx"))
    model = export.token_classifier(encoder_graph, head.weight, head.bias, LABELS, description)
    onnx.save(model, str(out / "model.onnx"))
    write_json(out / "config.json", config(minilm, chosen))

    shipped = ModelDir(out, threads=THREADS)
    held_out = data["held_out"]
    found = [r["entities"] for r in entities(shipped, [s.text for s in held_out], EMBED_BATCH)]
    gold = [spans_of(s) for s in held_out]
    metrics = {
        "data": {
            split: {
                "sentences": len(rows),
                "templates": len({s.template for s in rows}),
                "entities": {k: sum(1 for s in rows for e in s.entities if e[2] == k) for k in TYPES},
                "without_entities": sum(1 for s in rows if not s.entities),
            }
            for split, rows in data.items()
        },
        "training": {"words": len(y_arr), "selection": {"trials": trials, "C": chosen}},
        "held_out": {"argmax": span_scores(gold, found, 0.0)}
        | {f"at_{t}": span_scores(gold, found, t) for t in THRESHOLDS},
        "held_out_errors": errors(held_out, gold, found),
    }
    write_json(out / "metrics.json", metrics)
    write_stamp(out, print_)
    for kind, s in metrics["held_out"]["argmax"]["per_type"].items():
        print(
            f"  {NAME} held-out {kind}: precision {s['precision']:.4f} recall {s['recall']:.4f}"
            f" F1 {s['f1']:.4f}"
        )
    print(f"  {NAME}: built in {time.monotonic() - started:.1f}s")
    return out


def errors(sentences: list[ner_data.Sentence], gold: list[set], found: list[list[dict]]) -> list[dict]:
    """Held-out sentences whose entities (at argmax) differ from the truth, for reading."""
    rows = []
    for sentence, truth, spans in zip(sentences, gold, found, strict=True):
        got = {(e["start"], e["end"], e["entity"]) for e in spans}
        if got != truth:
            data = sentence.text.encode("utf-8")
            rows.append(
                {
                    "text": sentence.text,
                    "missed": sorted(f"{k}:{data[s:e].decode()}" for s, e, k in truth - got),
                    "wrong": sorted(f"{k}:{data[s:e].decode()}" for s, e, k in got - truth),
                }
            )
    return rows


def config(minilm: Path, c: float) -> dict:
    task = {"task": "token-classification"}
    reading = {"aggregation": "first sub-token of each word; BIO spans; score = mean of the words' scores"}
    described = heads.config(minilm, "MiniLMTokenLinear", task, LABELS, MAX_LENGTH, reading)
    described["training"] = {
        "data": f"scripts/models/ner_data.py (seed {ner_data.SEED}, faker {faker.VERSION})",
        "head": "L2 multinomial logistic regression per word (numpy, full-batch Adam), frozen encoder",
        "features": FEATURES,
        "C": c,
        "selection": "C by word log-loss on held-back training templates; held-out templates untouched",
    }
    return described
