"""Single-thread latency baseline of a classifier directory in Python onnxruntime.

The Rust runtime is compared against these figures in the same run on the same machine, so the
setup matches what the runtime does per request: one intra-op thread, the shipped tokenizer,
inputs padded to the batch's longest. Two prompt lengths (about 16 and exactly 256 tokens),
each single and in a batch of 32; medians of repeated runs after a warm-up, reported both for
the graph alone and end to end (tokenize + run + softmax), as wall time and as CPU time.

Usage: bench.py [MODEL_DIR] [--quick]      (default models/prompt_guard; prints JSON)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import onnxruntime as ort
from reference import ModelDir, softmax, tokenize

ROOT = Path(__file__).resolve().parents[2]
SHORT = "Please summarise the main points of this article about solar power."
PARAGRAPH = (
    "The committee reviewed the quarterly results, discussed the supply chain delays that "
    "affected deliveries in the northern region, and asked the operations team to prepare a "
    "detailed plan for the next meeting, including staffing, budget and risk estimates. "
)
BATCH = 32


def median_ms(fn, reps: int, warmup: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this thread, in ms.

    With one intra-op thread onnxruntime computes on the calling thread, so the CPU time is
    what the work costs even when other processes share the cores and stretch the wall time.
    """
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        cpu.append((time.thread_time() - start_cpu) * 1000.0)
        wall.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(wall), statistics.median(cpu)


def case(model: ModelDir, texts: list[str], reps: int) -> dict:
    batch = tokenize(model.tokenizer, texts)
    feeds = batch.feeds(model.inputs)

    def graph_only() -> None:
        model.session.run([model.output], feeds)

    def end_to_end() -> None:
        b = tokenize(model.tokenizer, texts)
        (logits,) = model.session.run([model.output], b.feeds(model.inputs))
        softmax(logits)

    graph, graph_cpu = median_ms(graph_only, reps, warmup=3)
    full, full_cpu = median_ms(end_to_end, reps, warmup=1)
    n = len(texts)
    return {
        "batch": n,
        "tokens": int(batch.attention_mask.shape[1]),
        "graph_ms_per_call": round(graph, 2),
        "graph_ms_per_item": round(graph / n, 2),
        "end_to_end_ms_per_call": round(full, 2),
        "end_to_end_ms_per_item": round(full / n, 2),
        "end_to_end_cpu_ms_per_item": round(full_cpu / n, 2),
        "reps": reps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, nargs="?", default=ROOT / "models" / "prompt_guard")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    model = ModelDir(args.model_dir, threads=1)
    long_text = PARAGRAPH * 12  # well over 256 tokens; truncated to exactly 256
    scale = 0.2 if args.quick else 1.0
    results = {}
    for name, text, reps_single, reps_batch in (
        ("short", SHORT, 200, 30),
        ("long", long_text, 40, 6),
    ):
        # Distinct texts of one length, so a batch is 32 real requests, not one repeated.
        texts = [f"{i} {text}" for i in range(BATCH)]
        single = case(model, texts[:1], max(3, int(reps_single * scale)))
        batched = case(model, texts, max(2, int(reps_batch * scale)))
        gain = single["end_to_end_ms_per_item"] / max(batched["end_to_end_ms_per_item"], 1e-9)
        gain_cpu = single["end_to_end_cpu_ms_per_item"] / max(batched["end_to_end_cpu_ms_per_item"], 1e-9)
        results[name] = {
            "single": single,
            "batch_32": batched,
            "batching_gain_per_item": round(gain, 2),
            "batching_gain_per_item_cpu": round(gain_cpu, 2),
        }
    report = {
        "model": str(args.model_dir),
        "onnxruntime": ort.__version__,
        "intra_op_threads": 1,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
