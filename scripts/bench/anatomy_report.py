#!/usr/bin/env python3
"""The report of scripts/bench/anatomy.sh: per-request counts from `perf stat` beside the wrk
figures, as markdown tables.

Arguments: the run folder (its manifest.txt, the wrk outputs and the perf stat files), the
number of cores, the load average after the run. A manifest line is `GROUP NAME CONNS LOAD SETS
LABEL...`: set 0 is the proxy (Envoy for the external processor's rows), set 1 the upstream,
set 2 the external processor.
"""

import os
import re
import sys

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(path):
    """req/s, requests, p50 and p99 in microseconds of a wrk --latency output."""
    text = open(path).read()
    requests = int(re.search(r"^\s*(\d+) requests in", text, re.M).group(1))
    rps = float(re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M).group(1))
    lat = {}
    for p, value, unit in re.findall(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
        lat[p] = float(value) * UNITS[unit] * 1000
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses:\s*(\d+)", text))
    took = re.search(r"requests in ([\d.]+)(us|ms|s|m),", text)
    seconds = float(took.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[took.group(2)]
    return {
        "rps": rps,
        "requests": requests,
        "p50": lat.get("50"),
        "p99": lat.get("99"),
        "errors": errors,
        "wall": seconds * 1e6 / requests,
    }


def user_share(path):
    """The share of a process set's CPU spent in its own code (not the kernel), from the
    before/after clock ticks anatomy.sh reads from /proc."""
    if not os.path.exists(path):
        return None
    lines = [line.split() for line in open(path) if line.strip()]
    if len(lines) != 2:
        return None
    user = int(lines[1][0]) - int(lines[0][0])
    system = int(lines[1][1]) - int(lines[0][1])
    return user / (user + system) if user + system else None


def perf(path):
    """event -> value of a `perf stat -x,` output (task-clock in microseconds)."""
    counts = {}
    if not os.path.exists(path):
        return counts
    for line in open(path):
        fields = line.strip().split(",")
        if len(fields) < 3 or line.startswith("#") or not fields[0]:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        event = fields[2]
        if event == "task-clock":
            value *= 1000.0 if fields[1] == "msec" else 1.0
        counts[event] = counts.get(event, 0.0) + value
    return counts


def per_request(counts, requests):
    return {k: v / requests for k, v in counts.items()}


def load(run):
    rows = []
    for line in open(os.path.join(run, "manifest.txt")):
        group, name, conns, avg, sets, label = line.rstrip("\n").split(" ", 5)
        prefix = os.path.join(run, f"{name}-{conns}")
        counted = wrk(prefix + "-wrk.txt")
        n = counted["requests"]
        row = {
            "group": group,
            "name": name,
            "conns": int(conns),
            "load": avg,
            "label": label,
            "plain": wrk(f"{prefix}-plain.txt"),
            "counted": counted,
            "sets": [per_request(perf(f"{prefix}-{i}.csv"), n) for i in range(int(sets))],
            "user": [user_share(f"{prefix}-{i}.ticks") for i in range(int(sets))],
            "wrk": per_request(perf(prefix + "-wrk.csv"), n),
        }
        rows.append(row)
    return rows


def cpu(counts):
    return counts.get("task-clock", 0.0)


def counts_cell(counts):
    """Context switches, wake-ups issued and system calls a request."""
    if not counts:
        return "—"
    return " / ".join(fmt(counts.get(k, 0.0), 2) for k in ("context-switches", "sched:sched_wakeup", "raw_syscalls:sys_enter"))


def cpu_cell(counts, shares, i):
    """CPU µs a request of set i, with its user-space share."""
    if not counts:
        return "—"
    share = shares[i] if i < len(shares) else None
    return f"{fmt(cpu(counts))} ({pct(share)})"


def fmt(x, digits=1):
    return "—" if x is None else f"{x:,.{digits}f}"


def pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def syscall_kinds(rows, role):
    kinds = {}
    for r in rows:
        if len(r["sets"]) <= role:
            continue
        for k, v in r["sets"][role].items():
            if k.startswith("syscalls:sys_enter_") and v >= 0.005:
                kinds[k[len("syscalls:sys_enter_"):]] = True
    return sorted(kinds)


def syscall_table(rows, role, title):
    rows = [r for r in rows if len(r["sets"]) > role and r["sets"][role]]
    if not rows:
        return
    kinds = syscall_kinds(rows, role)
    print(f"\n{title}\n")
    print("| kind | " + " | ".join(f"{r['name']} ({r['conns']})" for r in rows) + " |")
    print("| --- |" + " ---: |" * len(rows))
    for k in kinds:
        print(f"| `{k}` | " + " | ".join(fmt(r["sets"][role].get(f"syscalls:sys_enter_{k}", 0.0), 2) for r in rows) + " |")
    other = []
    for r in rows:
        s = r["sets"][role]
        listed = sum(v for key, v in s.items() if key.startswith("syscalls:sys_enter_"))
        other.append(s.get("raw_syscalls:sys_enter", 0.0) - listed)
    print("| other | " + " | ".join(fmt(o, 2) for o in other) + " |")
    print("| **all** | " + " | ".join(f"**{fmt(r['sets'][role].get('raw_syscalls:sys_enter', 0.0), 2)}**" for r in rows) + " |")


def main():
    run, cores, load_after = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rows = load(run)
    many = max((r["conns"] for r in rows), default=16)
    print(f"\nWall-clock anatomy ({cores} cores, loopback; load average after: {load_after}).")
    print("Per request: CPU µs (task-clock), context switches (cs), wake-ups issued (wk), system calls (sc).")

    for group, title in (("pass", "Pass-through"), ("extproc", "The external processor behind Envoy")):
        grows = [r for r in rows if r["group"] == group]
        if not grows:
            continue
        print(f"\n### {title}, {many} connections\n")
        print("| target | load | req/s | req/s counted | proxy CPU (user) | upstream CPU | wrk CPU | processor CPU (user) | all CPU | predicted req/s | cores busy | proxy cs / wk / sc | processor cs / wk / sc |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        busy = [r for r in grows if r["conns"] == many]
        for r in busy:
            sets = r["sets"]
            proxy, upstream = sets[0], sets[1] if len(sets) > 1 else {}
            processor = sets[2] if len(sets) > 2 else {}
            total = cpu(proxy) + cpu(upstream) + cpu(r["wrk"]) + cpu(processor)
            r["total"] = total
            busy_cores = total * r["counted"]["rps"] / 1e6
            print(
                f"| {r['label']} | {r['load']} | {fmt(r['plain']['rps'], 0)} | {fmt(r['counted']['rps'], 0)} | {cpu_cell(proxy, r['user'], 0)} | {fmt(cpu(upstream))} | "
                f"{fmt(cpu(r['wrk']))} | {cpu_cell(processor, r['user'], 2)} | {fmt(total)} | "
                f"{fmt(cores * 1e6 / total, 0) if total else '—'} | {fmt(busy_cores, 2)} | "
                f"{fmt(proxy.get('context-switches', 0), 2)} / {fmt(proxy.get('sched:sched_wakeup', 0), 2)} / "
                f"{fmt(proxy.get('raw_syscalls:sys_enter', 0), 2)} | {counts_cell(processor)} |"
            )
        base_names = ["nginx", "envoy"] if group == "pass" else ["alone", "null"]
        bases = {r["name"]: r for r in busy if r["name"] in base_names}
        if bases:
            print("\nRatios of throughput, measured (the plain runs; the counted runs) against predicted (the inverse ratio of all CPU a request, which holds where each target's path gets the same cores):\n")
            print("| target | " + " | ".join(f"measured / {b} | counted / {b} | predicted / {b}" for b in bases) + " |")
            print("| --- |" + " ---: | ---: | ---: |" * len(bases))
            for r in busy:
                cells = []
                for b in bases.values():
                    cells.append(fmt(r["plain"]["rps"] / b["plain"]["rps"], 3))
                    cells.append(fmt(r["counted"]["rps"] / b["counted"]["rps"], 3))
                    cells.append(fmt(b["total"] / r["total"], 3) if r.get("total") else "—")
                print(f"| {r['label']} | " + " | ".join(cells) + " |")

        print(f"\n### {title}, one connection\n")
        print("Wall a request is the mean (wrk's duration over its requests: one at a time); off CPU is what of it no process on the path spent on a CPU (the wake-ups, the scheduler, other work on the machine). Added: over " + ("direct" if group == "pass" else "Envoy alone") + ".\n")
        print("| target | load | p50 µs | p99 µs | wall a request | proxy CPU (user) | processor CPU (user) | upstream CPU | wrk CPU | off CPU | added p50 | added wall | of it CPU | of it off CPU | proxy cs / wk / sc | processor cs / wk / sc |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        single = [r for r in grows if r["conns"] == 1]
        floor = next((r for r in single if r["name"] in ("direct", "alone")), None)
        for r in single:
            sets = r["sets"]
            proxy = sets[0]
            upstream = sets[1] if len(sets) > 1 else {}
            processor = sets[2] if len(sets) > 2 else {}
            wall = r["counted"]["wall"]
            all_cpu = cpu(proxy) + cpu(upstream) + cpu(processor) + cpu(r["wrk"])
            r["all_cpu"] = all_cpu
            cells = ["—"] * 4
            if floor is not None and r is not floor:
                added_wall = wall - floor["counted"]["wall"]
                added_cpu = all_cpu - floor["all_cpu"]
                cells = [fmt(r["plain"]["p50"] - floor["plain"]["p50"]), fmt(added_wall), fmt(added_cpu), fmt(added_wall - added_cpu)]
            print(
                f"| {r['label']} | {r['load']} | {fmt(r['plain']['p50'])} | {fmt(r['plain']['p99'])} | {fmt(wall)} | "
                f"{cpu_cell(proxy, r['user'], 0)} | {cpu_cell(processor, r['user'], 2)} | {fmt(cpu(upstream))} | {fmt(cpu(r['wrk']))} | "
                f"{fmt(wall - all_cpu)} | " + " | ".join(cells) + " | "
                f"{fmt(proxy.get('context-switches', 0), 2)} / {fmt(proxy.get('sched:sched_wakeup', 0), 2)} / "
                f"{fmt(proxy.get('raw_syscalls:sys_enter', 0), 2)} | {counts_cell(processor)} |"
            )
        if group == "extproc":
            print("\n(For the external processor's rows, the proxy is Envoy; its added CPU is over Envoy alone's.)")

        ordered = [r for r in grows if r["conns"] == many] + single
        syscall_table(ordered, 0, f"System calls a request by kind, {title.lower()}: the proxy (Envoy for the processor's rows)")
        if group == "extproc":
            syscall_table(ordered, 2, "System calls a request by kind: the processor")
    errors = [r for r in rows if r["plain"]["errors"] or r["counted"]["errors"]]
    for r in errors:
        print(f"\nnote: {r['label']} at {r['conns']}: {r['plain']['errors'] + r['counted']['errors']} non-2xx answers")


if __name__ == "__main__":
    main()
