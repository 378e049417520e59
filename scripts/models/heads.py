"""What the heads built on the MiniLM encoder describe alike: the `config.json` of a classifier
directory, and the precision/recall/F1 of one label (a class of the sequence classifiers in
build.py, an entity type of the token classifier in ner.py), so the two report in one shape.
"""

from __future__ import annotations

import json
from pathlib import Path


def config(
    minilm: Path, architecture: str, task: dict, labels: list[str], max_length: int, reading: dict
) -> dict:
    """A head's `config.json`: its architecture, its `task` keys, its labels both ways, the
    encoder's sizes and source, and how the runtime reads its output (`reading`)."""
    base = json.loads((minilm / "config.json").read_text(encoding="utf-8"))
    return {
        "architectures": [architecture],
        "model_type": "bert",
        **task,
        "num_labels": len(labels),
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
        "hidden_size": base.get("hidden_size", 384),
        "max_position_embeddings": base.get("max_position_embeddings", 512),
        "max_length": max_length,
        **reading,
        "encoder": base.get("source", {}),
    }


def ratio(num: float, den: float) -> float:
    """`num / den`, or 0 where there is nothing to divide by."""
    return float(num / den) if den else 0.0


def precision_recall_f1(tp: int, fp: int, fn: int) -> dict:
    """One label's precision, recall and F1 from its true positives, false positives and misses."""
    precision = ratio(tp, tp + fp)
    recall = ratio(tp, tp + fn)
    f1 = ratio(2 * precision * recall, precision + recall)
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}
