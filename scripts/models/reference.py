"""Reference inference for model directories, done the way the Rust runtime does it.

This module is the Python ground truth that the runtime's parity tests compare against, and the
one place the build scripts tokenize and run models, so training, evaluation and the reference
can never disagree about preprocessing. The rules it fixes:

- `tokenizer.json` is loaded as-is, then truncation is forced to the directory's `max_length`
  (config.json `max_length`, else `max_position_embeddings`, else 512) and padding to the
  longest sequence of the batch with the tokenizer's `[PAD]` id.
- The ONNX graph gets `input_ids`, `attention_mask` and `token_type_ids` as int64 [batch, seq]
  (only those of them it declares).
- A classifier's `logits` are turned into probabilities with a softmax; an encoder's
  `last_hidden_state` is mean-pooled over the attention mask and L2-normalised.

- A token classifier (config.json `"task": "token-classification"`, `logits` [batch, seq,
  labels] over BIO labels) is read into entity spans by `entities` (see `aggregate`), with
  offsets as UTF-8 byte offsets into the original text, which is what the runtime reports.
- With `--window N` each text is read in windows instead, as the runtime reads a long text:
  its tokens (no special tokens, no truncation) in runs of `min(N, max_length) - 2`, each run
  starting half a run after the previous one (the first at 0, the last where the text ends),
  each given `[CLS]` and `[SEP]`; every window is one row (see `windows`).

Command line:
    reference.py MODEL_DIR TEXTS [--batch N] [--threads N] [--window N | --entities]
TEXTS is a path to a JSON file holding a list of strings, `-` for standard input, or the JSON
list itself. Prints one JSON object (see `describe`; `--entities`, for a token classifier:
`{"kind": "token-classifier", ..., "results": [{"text", "tokens", "entities": [{"entity",
"start", "end", "score", "text"}]}]}`, every entity found, no threshold applied).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

DEFAULT_MAX_LENGTH = 512
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Same guards as the exported pooling graph: an all-padding row divides by 1e-9, not 0, and a
# zero vector stays zero instead of turning into NaN.
MASK_COUNT_FLOOR = np.float32(1e-9)
NORM_FLOOR = np.float32(1e-12)


class ModelDirError(Exception):
    """A model directory is missing a file or has an unusable config."""


@dataclass
class Batch:
    """One tokenized batch, padded to its longest sequence."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray

    def feeds(self, wanted: list[str]) -> dict[str, np.ndarray]:
        table = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
        }
        return {name: table[name] for name in wanted}

    def lengths(self) -> list[int]:
        return [int(n) for n in self.attention_mask.sum(axis=1)]


def max_length_of(config: dict) -> int:
    for key in ("max_length", "max_position_embeddings"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MAX_LENGTH


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    pad_id = tokenizer.token_to_id("[PAD]")
    if pad_id is None:
        pad_id = 0
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
    return tokenizer


def tokenize(tokenizer: Tokenizer, texts: list[str]) -> Batch:
    encodings = tokenizer.encode_batch(texts, add_special_tokens=True)
    return Batch(
        input_ids=np.array([e.ids for e in encodings], dtype=np.int64),
        attention_mask=np.array([e.attention_mask for e in encodings], dtype=np.int64),
        token_type_ids=np.array([e.type_ids for e in encodings], dtype=np.int64),
    )


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def mean_pool(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Masked mean over the sequence, then L2 normalisation, in float32."""
    mask = attention_mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * mask).sum(axis=1)
    count = np.maximum(mask.sum(axis=1), MASK_COUNT_FLOOR)
    mean = summed / count
    norm = np.sqrt((mean * mean).sum(axis=1, keepdims=True))
    return mean / np.maximum(norm, NORM_FLOOR)


def session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return options


class ModelDir:
    """A loaded model directory: encoder (`last_hidden_state`) or classifier (`logits`)."""

    def __init__(self, path: Path, threads: int = 1) -> None:
        self.path = Path(path)
        for name in ("model.onnx", "tokenizer.json", "config.json"):
            if not (self.path / name).is_file():
                raise ModelDirError(f"{self.path} has no {name}")
        try:
            self.config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ModelDirError(f"{self.path}/config.json is not JSON: {err}") from err
        self.max_length = max_length_of(self.config)
        # Both libraries raise their own exception types (tokenizers: a bare Exception).
        try:
            self.tokenizer = load_tokenizer(self.path / "tokenizer.json", self.max_length)
        except Exception as err:  # noqa: BLE001
            raise ModelDirError(f"{self.path}/tokenizer.json: {err}") from err
        try:
            self.session = ort.InferenceSession(
                str(self.path / "model.onnx"),
                sess_options=session_options(threads),
                providers=["CPUExecutionProvider"],
            )
        except Exception as err:  # noqa: BLE001
            raise ModelDirError(f"{self.path}/model.onnx: {err}") from err
        self.inputs = [i.name for i in self.session.get_inputs() if i.name in INPUT_NAMES]
        outputs = [o.name for o in self.session.get_outputs()]
        if "logits" in outputs and self.config.get("task") == "token-classification":
            self.kind = "token-classifier"
            self.output = "logits"
            self.labels = labels_of(self.config)
        elif "logits" in outputs:
            self.kind = "classifier"
            self.output = "logits"
            self.labels = labels_of(self.config)
        elif "last_hidden_state" in outputs:
            self.kind = "encoder"
            self.output = "last_hidden_state"
            self.labels = []
        else:
            raise ModelDirError(f"{self.path}/model.onnx has neither `logits` nor `last_hidden_state`")

    def run_batch(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Logits [n, labels] for a classifier, embeddings [n, dim] for an encoder."""
        batch = tokenize(self.tokenizer, texts)
        (out,) = self.session.run([self.output], batch.feeds(self.inputs))
        if self.kind == "encoder":
            out = mean_pool(out, batch.attention_mask)
        return out.astype(np.float32), batch.lengths()

    def run(self, texts: list[str], batch_size: int = 0) -> tuple[np.ndarray, list[int]]:
        """Runs `texts` in order, in batches of `batch_size` (0: all in one batch)."""
        size = batch_size if batch_size > 0 else max(len(texts), 1)
        outs, lengths = [], []
        for start in range(0, len(texts), size):
            out, lens = self.run_batch(texts[start : start + size])
            outs.append(out)
            lengths.extend(lens)
        if not outs:
            width = len(self.labels) if self.kind == "classifier" else 0
            return np.zeros((0, width), dtype=np.float32), []
        return np.concatenate(outs, axis=0), lengths


def labels_of(config: dict) -> list[str]:
    id2label = config.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        raise ModelDirError("classifier config.json has no `id2label`")
    try:
        ids = sorted(int(k) for k in id2label)
    except ValueError as err:
        raise ModelDirError(f"`id2label` keys must be integers: {err}") from err
    if ids != list(range(len(ids))):
        raise ModelDirError("`id2label` keys must be 0..n-1")
    return [str(id2label[str(i)]) for i in ids]


@dataclass
class Word:
    """One word of an encoding: its token rows and its character span in the text."""

    first: int
    last: int
    start: int
    end: int


def words_of(word_ids: list[int | None], offsets: list[tuple[int, int]]) -> list[Word]:
    """Groups tokens into words by the tokenizer's word ids; special and padding tokens
    (word id None) belong to no word. Offsets are character offsets into the text."""
    words: list[Word] = []
    current: int | None = None
    for row, word in enumerate(word_ids):
        if word is None:
            current = None
            continue
        if word == current and words:
            words[-1].last = row
            words[-1].end = offsets[row][1]
        else:
            words.append(Word(row, row, offsets[row][0], offsets[row][1]))
            current = word
    return words


def byte_offsets(text: str) -> list[int]:
    """UTF-8 byte offset of every character index of `text` (and of its end)."""
    table = [0]
    for ch in text:
        table.append(table[-1] + len(ch.encode("utf-8")))
    return table


def aggregate(text: str, words: list[Word], probs: np.ndarray, labels: list[str]) -> list[dict]:
    """Entity spans from per-token probabilities [seq, labels] over BIO labels.

    A word takes the argmax label and probability of its first token. An entity starts at a
    word labelled B-X, or at I-X when the previous word is not part of an X entity, and goes on
    over the following words labelled I-X; its score is the mean of its words' scores and its
    span runs from its first word's start to its last word's end (byte offsets in UTF-8).
    """
    found: list[tuple[str, int, int, list[float]]] = []
    open_type: str | None = None
    for word in words:
        best = int(np.argmax(probs[word.first]))
        score = float(probs[word.first][best])
        tag, _, kind = labels[best].partition("-")
        if tag == "I" and open_type == kind:
            _, start, _, scores = found[-1]
            scores.append(score)
            found[-1] = (kind, start, word.end, scores)
        elif tag in ("B", "I") and kind:
            found.append((kind, word.start, word.end, [score]))
            open_type = kind
        else:
            open_type = None
    table = byte_offsets(text)
    return [
        {
            "entity": kind,
            "start": table[start],
            "end": table[end],
            "score": float(np.mean(scores)),
            "text": text[start:end],
        }
        for kind, start, end, scores in found
    ]


def entities(model: ModelDir, texts: list[str], batch_size: int = 0) -> list[dict]:
    """Per text: its token count and every entity span found (no threshold applied)."""
    if model.kind != "token-classifier":
        raise ModelDirError(f"{model.path} is not a token classifier (config.json `task`)")
    size = batch_size if batch_size > 0 else max(len(texts), 1)
    results = []
    for begin in range(0, len(texts), size):
        chunk = texts[begin : begin + size]
        encodings = model.tokenizer.encode_batch(chunk, add_special_tokens=True)
        batch = Batch(
            input_ids=np.array([e.ids for e in encodings], dtype=np.int64),
            attention_mask=np.array([e.attention_mask for e in encodings], dtype=np.int64),
            token_type_ids=np.array([e.type_ids for e in encodings], dtype=np.int64),
        )
        (logits,) = model.session.run([model.output], batch.feeds(model.inputs))
        probs = softmax(logits.astype(np.float64))
        for row, (text, encoding) in enumerate(zip(chunk, encodings, strict=True)):
            words = words_of(encoding.word_ids, encoding.offsets)
            results.append(
                {
                    "text": text,
                    "tokens": int(sum(encoding.attention_mask)),
                    "entities": aggregate(text, words, probs[row], model.labels),
                }
            )
    return results


def describe(model: ModelDir, texts: list[str], batch_size: int) -> dict:
    if model.kind == "token-classifier":
        return {
            "kind": model.kind,
            "model": str(model.path),
            "labels": model.labels,
            "max_length": model.max_length,
            "batch_size": batch_size if batch_size > 0 else len(texts),
            "results": entities(model, texts, batch_size),
        }
    out, lengths = model.run(texts, batch_size)
    results = []
    if model.kind == "classifier":
        probs = softmax(out)
        for i, text in enumerate(texts):
            best = int(np.argmax(probs[i]))
            results.append(
                {
                    "text": text,
                    "tokens": lengths[i],
                    "logits": [float(x) for x in out[i]],
                    "probabilities": [float(x) for x in probs[i]],
                    "label": model.labels[best],
                }
            )
    else:
        for i, text in enumerate(texts):
            results.append({"text": text, "tokens": lengths[i], "embedding": [float(x) for x in out[i]]})
    return {
        "kind": model.kind,
        "model": str(model.path),
        "labels": model.labels,
        "max_length": model.max_length,
        "batch_size": batch_size if batch_size > 0 else len(texts),
        "results": results,
    }


def windows(model: ModelDir, text: str, window: int) -> list[list[float]]:
    """The rows of `text` read in windows of `window` tokens (special tokens included)."""
    plain = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    plain.no_truncation()
    plain.no_padding()
    ids = plain.encode(text, add_special_tokens=False).ids
    cls, sep = plain.token_to_id("[CLS]"), plain.token_to_id("[SEP]")
    content = max(min(window, model.max_length) - 2, 1)
    step = content - content // 2
    starts = [0]
    while starts[-1] + content < len(ids):
        starts.append(starts[-1] + step)
    rows = [[cls, *ids[s : s + content], sep] for s in starts]
    width = max(len(r) for r in rows)
    batch = Batch(
        input_ids=np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.int64),
        attention_mask=np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=np.int64),
        token_type_ids=np.zeros((len(rows), width), dtype=np.int64),
    )
    (out,) = model.session.run([model.output], batch.feeds(model.inputs))
    if model.kind == "encoder":
        out = mean_pool(out, batch.attention_mask)
    return [[float(x) for x in row] for row in out.astype(np.float32)]


def read_texts(arg: str) -> list[str]:
    if arg == "-":
        raw = sys.stdin.read()
    elif arg.lstrip().startswith("["):
        raw = arg
    else:
        raw = Path(arg).read_text(encoding="utf-8")
    texts = json.loads(raw)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a JSON list of strings")
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("texts", help="JSON file, `-` for stdin, or an inline JSON list")
    parser.add_argument("--batch", type=int, default=0, help="batch size (0: one batch)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--window", type=int, default=0, help="read each text in windows of N tokens")
    parser.add_argument("--entities", action="store_true", help="entity spans of a token classifier")
    args = parser.parse_args(argv)
    try:
        texts = read_texts(args.texts)
        model = ModelDir(args.model_dir, threads=args.threads)
        if args.entities and model.kind != "token-classifier":
            raise ModelDirError(f"{model.path} is not a token classifier (config.json `task`)")
        if args.window > 0 and model.kind == "token-classifier":
            raise ModelDirError("--window reads sentence models; a token classifier reads one call")
    except (OSError, ValueError, ModelDirError) as err:
        print(f"reference: {err}", file=sys.stderr)
        return 2
    if args.window > 0:
        report = {"window": args.window, "windows": [windows(model, t, args.window) for t in texts]}
        json.dump(report, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    json.dump(describe(model, texts, args.batch), sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
