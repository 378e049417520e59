"""Scores a classifier: confusion matrix, accuracy, per-label precision/recall/F1.

Held-out numbers always come from running the exported directory through `reference.ModelDir`
(Python onnxruntime on the shipped `model.onnx`, with the shipped tokenizer), never from the
numpy pipeline used in training — what is measured is what ships.
"""

from __future__ import annotations

import numpy as np
from heads import precision_recall_f1, ratio
from reference import ModelDir, softmax


def confusion(truth: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """Rows: true label; columns: predicted label."""
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (truth, predicted), 1)
    return matrix


def scores(truth: np.ndarray, predicted: np.ndarray, labels: list[str]) -> dict:
    matrix = confusion(truth, predicted, len(labels))
    per_label = {}
    for k, label in enumerate(labels):
        tp = matrix[k, k]
        fp = matrix[:, k].sum() - tp
        fn = matrix[k, :].sum() - tp
        per_label[label] = precision_recall_f1(tp, fp, fn) | {"support": int(matrix[k, :].sum())}
    return {
        "n": int(len(truth)),
        "accuracy": round(ratio(np.trace(matrix), matrix.sum()), 4),
        "macro_f1": round(float(np.mean([v["f1"] for v in per_label.values()])), 4),
        "per_label": per_label,
        "confusion": {"rows_true_cols_predicted": labels, "matrix": matrix.tolist()},
    }


def binary_predictions(probs: np.ndarray, positive: int, threshold: float) -> np.ndarray:
    """Positive when its probability is at least `threshold`, otherwise the other label."""
    negative = 1 - positive
    return np.where(probs[:, positive] >= threshold, positive, negative)


def best_threshold(p_positive: np.ndarray, truth_positive: np.ndarray) -> tuple[float, float]:
    """The threshold (on a 0.01 grid) with the highest F1 for the positive label, and that F1."""
    best = (0.5, -1.0)
    for t in np.round(np.arange(0.05, 0.96, 0.01), 2):
        pred = p_positive >= t
        tp = float(np.sum(pred & truth_positive))
        fp = float(np.sum(pred & ~truth_positive))
        fn = float(np.sum(~pred & truth_positive))
        f1 = ratio(2 * tp, 2 * tp + fp + fn)
        if f1 > best[1] + 1e-12:
            best = (float(t), f1)
    return best


def roc_auc(p_positive: np.ndarray, truth_positive: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos, neg = p_positive[truth_positive], p_positive[~truth_positive]
    if len(pos) == 0 or len(neg) == 0:
        return 0.0
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.concatenate([pos, neg])[order]
    # Average ranks over ties, 1-based.
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    rank_sum = ranks[: len(pos)].sum()
    return float((rank_sum - len(pos) * (len(pos) + 1) / 2.0) / (len(pos) * len(neg)))


def operating_points(
    p_positive: np.ndarray, truth_positive: np.ndarray, thresholds: list[float]
) -> list[dict]:
    """Precision, recall and false-positive rate of `score > t`, the form a policy writes."""
    points = []
    for t in thresholds:
        pred = p_positive > t
        tp = float(np.sum(pred & truth_positive))
        fp = float(np.sum(pred & ~truth_positive))
        fn = float(np.sum(~pred & truth_positive))
        tn = float(np.sum(~pred & ~truth_positive))
        points.append(
            {
                "threshold": t,
                "precision": round(ratio(tp, tp + fp), 4),
                "recall": round(ratio(tp, tp + fn), 4),
                "false_positive_rate": round(ratio(fp, fp + tn), 4),
            }
        )
    return points


def run_exported(model_dir, texts: list[str], batch_size: int = 64, threads: int = 2) -> np.ndarray:
    """Probabilities from the shipped directory, batched in length order, returned in input order."""
    model = ModelDir(model_dir, threads=threads)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    logits, _ = model.run([texts[i] for i in order], batch_size)
    probs = np.empty_like(logits)
    probs[np.array(order, dtype=np.int64)] = softmax(logits)
    return probs
