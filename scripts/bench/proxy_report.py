#!/usr/bin/env python3
"""The report of scripts/bench/proxy.sh: one markdown table of every target with its ratios
against direct, nginx proxy_pass and Envoy of the same run, then the targets, each met or
missed.

    proxy_report.py RESULTS.jsonl NOTES.txt

RESULTS has one JSON object per target (wrk figures in ms and req/s, RSS in KiB, the path of
sse.py's output); NOTES has `key: value` lines (soak samples, Redis figures, skipped rows).
"""

import json
import sys


def pct(values, q):
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def fmt(value, digits=3):
    return "—" if value is None else f"{value:.{digits}f}"


def signed(value, digits=3):
    return "—" if value is None else f"{value:+.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            with open(row["stream"], encoding="utf-8") as s:
                stream = json.load(s)
            row["ttft_p50"] = pct(stream["ttft_ms"], 50)
            row["ttft_p99"] = pct(stream["ttft_ms"], 99)
            row["gap_p99"] = pct(stream["gap_ms"], 99)
            row["gap_max"] = max(stream["gap_ms"]) if stream["gap_ms"] else None
            row["stream_errors"] = stream["errors"]
            row["stream_error"] = stream["last_error"]
            rows.append(row)
    return rows


def notes(path):
    out, skipped = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(": ")
            if key == "skipped":
                skipped.append(value)
            else:
                out[key] = value
    return out, skipped


def main():
    rows = load(sys.argv[1])
    info, skipped = notes(sys.argv[2])
    by = {row["name"]: row for row in rows}
    direct, nginx, envoy = by.get("direct"), by.get("nginx"), by.get("envoy")

    def diff(row, base, key):
        if row is None or base is None or row.get(key) is None or base.get(key) is None:
            return None
        return row[key] - base[key]

    print(f"proxy benchmark: {info.get('setup', '')}")
    print(f"load average before: {info.get('load_before', '?')}; after: {info.get('load_after', '?')}")
    print()
    print(
        "| target | req/s (16) | × direct | × nginx | × Envoy | p50 / p99 ms (16) "
        "| p50 / p99 ms (1) | added p50 / p99 ms (1) | errors | RSS idle / peak MiB "
        "| TTFT p50 / p99 ms | added TTFT p50 / p99 | chunk gap p99 / max ms | added gap p99 / max |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        errors = row["errors"] + row["errors_1"] + row["stream_errors"]
        print(
            f"| {row['label']} | {row['rps']:,.0f} "
            f"| {fmt(ratio(row['rps'], direct and direct['rps']), 3)} "
            f"| {fmt(ratio(row['rps'], nginx and nginx['rps']), 3)} "
            f"| {fmt(ratio(row['rps'], envoy and envoy['rps']), 3)} "
            f"| {fmt(row['p50'])} / {fmt(row['p99'])} "
            f"| {fmt(row['p50_1'])} / {fmt(row['p99_1'])} "
            f"| {signed(diff(row, direct, 'p50_1'))} / {signed(diff(row, direct, 'p99_1'))} "
            f"| {errors} "
            f"| {row['idle_kib'] / 1024:.1f} / {row['peak_kib'] / 1024:.1f} "
            f"| {fmt(row['ttft_p50'])} / {fmt(row['ttft_p99'])} "
            f"| {signed(diff(row, direct, 'ttft_p50'))} / {signed(diff(row, direct, 'ttft_p99'))} "
            f"| {fmt(row['gap_p99'])} / {fmt(row['gap_max'])} "
            f"| {signed(diff(row, direct, 'gap_p99'))} / {signed(diff(row, direct, 'gap_max'))} |"
        )
    print()
    print(
        "(16) = wrk at 16 connections, (1) = one connection; errors = non-2xx, socket errors and "
        "failed streams; added = minus direct (streaming: minus the simulator direct); RSS sums "
        "all of a target's processes."
    )
    for line in skipped:
        print(f"Skipped: {line}")
    for row in rows:
        if row["stream_errors"]:
            print(f"{row['label']}: {row['stream_errors']} stream(s) failed: {row['stream_error']}")

    src, memory, redis = by.get("src"), by.get("src_memory"), by.get("src_redis")
    checks = []

    def check(what, value, unit, ok, target):
        checks.append((what, value, unit, ok, target))

    if src:
        if nginx:
            r = src["rps"] / nginx["rps"]
            check("bench policy / nginx proxy_pass throughput (16)", f"{r:.3f}", "×", r >= 0.8, "≥ 0.8×")
        if envoy:
            r = src["rps"] / envoy["rps"]
            check("bench policy / Envoy throughput (16)", f"{r:.3f}", "×", r >= 1.2, "≥ 1.2×")
        if direct:
            a = diff(src, direct, "p50_1")
            check("added p50, one connection", f"{a * 1000:.0f}", "µs", a <= 0.030, "≤ 30 µs")
            a = diff(src, direct, "p99_1")
            check("added p99, one connection", f"{a * 1000:.0f}", "µs", a <= 0.100, "≤ 100 µs")
            a = diff(src, direct, "ttft_p50")
            if a is not None:
                check("streaming: added TTFT (p50)", f"{a:.3f}", "ms", a <= 0.1, "≤ 0.1 ms")
            a = diff(src, direct, "gap_p99")
            if a is not None:
                check("streaming: added inter-chunk gap (p99)", f"{a:.3f}", "ms", a <= 1.0, "≤ 1 ms")
        idle = src["idle_kib"] / 1024
        check("idle RSS", f"{idle:.1f}", "MiB", idle <= 20, "≤ 20 MiB")
        if "soak" in info:
            samples = [int(s) for s in info["soak"].split()]
            growth = (samples[-1] - samples[0]) / 1024
            series = " → ".join(f"{s / 1024:.1f}" for s in samples)
            check(
                f"RSS growth over the soak ({series} MiB, {info.get('soak_rps', '?')} req/s, "
                f"{info.get('soak_errors', '?')} errors)",
                f"{growth:+.2f}", "MiB", growth <= 0.5, "none (≤ 0.5 MiB)")
    if src and memory:
        r = memory["rps"] / src["rps"]
        check("sessions (memory) / bench policy throughput", f"{r:.3f}", "×", r >= 0.95, "≥ 0.95×")
        a = memory["p99_1"] - src["p99_1"]
        check("sessions (memory): one-connection p99 over no sessions", f"{a:+.3f}", "ms", a <= 0.1, "≤ 0.1 ms")
    if memory and redis and "redis_rtt" in info:
        per = float(info.get("redis_round_trips_per_request", "nan"))
        check("Redis round trips per session call (MONITOR)", f"{per:.3f}", "", per <= 1.01, "1")
        rtt = float(info["redis_rtt"].split()[0])
        a = redis["p50_1"] - memory["p50_1"]
        check(
            f"Redis over memory, one-connection p50 (a PING round trip: {rtt * 1000:.0f} µs)",
            f"{a * 1000:.0f}", "µs", a <= rtt + 0.030, "≤ one round trip + 30 µs")
    peers = [by[n] for n in ("portkey", "litellm") if n in by]
    if src:
        for peer in peers:
            if not peer["rps"]:
                print(f"{peer['label']}: no request answered at 16 connections")
                continue
            print(f"bench policy / {peer['label']}: {src['rps'] / peer['rps']:,.0f}× the throughput, "
                  f"{src['idle_kib'] / max(peer['idle_kib'], 1):.3f}× the idle memory")
    guard = by.get("src_guard")
    if src and guard:
        print(
            f"guard model: one-connection p50 {guard['p50_1'] - src['p50_1']:+.3f} ms over the bench "
            f"policy (the model's cost), {guard['rps'] / src['rps']:.4f}× its throughput")

    if checks:
        print()
        print("| target | figure | goal | |")
        print("| --- | ---: | --- | --- |")
        for what, value, unit, ok, target in checks:
            print(f"| {what} | {value} {unit} | {target} | {'met' if ok else 'missed'} |")


if __name__ == "__main__":
    main()
