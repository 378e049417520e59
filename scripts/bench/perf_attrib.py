#!/usr/bin/env python3
"""Attributes a CPU profile of `src serve` to where a proxy's time goes: kernel TCP, hyper,
JSON, the decision, logging and metrics, the allocator, tokio, the router's own code.

Reads `perf script -F comm,ip,sym,dso` of a `perf record -g` profile on stdin and prints a
markdown table: share of samples per category. Each sample goes to the first frame, from the
leaf up, that names a category. Frames that say nothing about who asked for the work (memcpy,
core/alloc/std, bytes) are passed over, so a memcpy under serde_json counts as JSON. Kernel
samples are split by what the kernel was doing anywhere in their kernel stack (its call chains
are exact). A release build has no frame pointers, so a user stack above the leaf can be
wrong; the leaf itself always is right, and is what decides most samples.
"""

import re
import sys
from collections import Counter

KERNEL_NET = re.compile(
    r"tcp|^ip_|^ipv4|^inet|sock|skb|^__dev_|^dev_|net_rx|netif|loopback|napi|^__sys_(send|recv)|"
    r"sendmsg|recvmsg|^sk_|__x64_sys_(read|write|sendto|recvfrom|writev|readv)$"
)
KERNEL_SCHED = re.compile(r"epoll|schedule|futex|finish_task_switch|hrtimer|wake_up|try_to_wake|__switch_to|idle|sched")

# (category, pattern over the demangled symbol); first match wins within a frame.
USER_RULES = [
    ("allocator (mimalloc)", re.compile(
        r"^(_?mi_|mimalloc|libmimalloc|__rust_(alloc|dealloc|realloc|alloc_zeroed)|__rdl_|"
        r"malloc|free|realloc|calloc|cfree|_int_(malloc|free))")),
    ("logging and metrics", re.compile(
        r"^(src_runtime::(log|metrics|telemetry|trace|exposition)|tracing|tracing_core|"
        r"tracing_subscriber|prometheus_client|opentelemetry)\b")),
    ("JSON (serde_json)", re.compile(r"^(serde_json|serde|serde_core|ryu|itoa|simd_json|sonic_rs)\b")),
    ("decision (compiler, signals, JIT)", re.compile(
        r"^(src_compiler|src_dsl|aho_corasick|regex|regex_automata|regex_syntax|cranelift\w*)\b")),
    ("hyper and HTTP", re.compile(r"^(hyper|hyper_util|h2|http|httparse|http_body|http_body_util|httpdate)\b")),
    ("tokio runtime", re.compile(r"^(tokio|mio|futures_util|futures_core|futures_channel|parking_lot\w*)\b")),
    ("router code (src_runtime)", re.compile(r"^src_runtime\b")),
]
# Frames that do not say who asked: skipped while a more telling frame may follow.
NEUTRAL = re.compile(
    r"^(core|alloc|std|bytes|hashbrown|smallvec|<|__mem|mem(cpy|move|set|cmp)|str(len|cmp)|"
    r"__libc|__GI_|_dl_|\[unknown\])"
)


def demangle(sym):
    """The path of a legacy-mangled Rust symbol (`_ZN5hyper5proto...E`) when perf left it
    mangled; anything else unchanged."""
    if not sym.startswith("_ZN"):
        return sym
    parts, i = [], 3
    while i < len(sym) and sym[i].isdigit():
        j = i
        while j < len(sym) and sym[j].isdigit():
            j += 1
        n = int(sym[i:j])
        parts.append(sym[j:j + n])
        i = j + n
    return "::".join(parts) if parts else sym


def strip_impl(sym):
    """`<hyper::proto::X as core::Y>::poll` reads as hyper's; `<T as hyper::Z>::f` as the
    trait's; `<&T as core::Y>` and other generic-only names stay neutral (`core::`)."""
    m = re.match(r"^<+(?:&(?:mut )?)?([A-Za-z_][\w:]*)(?:<[^ ]*>)?(?: as ([A-Za-z_][\w:]*))?", sym)
    if not m:
        return sym
    for name in (m.group(1), m.group(2)):
        if name and "::" in name and not name.startswith(("core::", "alloc::", "std::")):
            return name
    return "core::" + sym


def classify(comm, frames):
    if comm.startswith("src-request-log"):
        return "logging and metrics"
    if comm.startswith("model-"):
        return "model inference (ONNX)"
    kernel = [sym for sym, dso in frames if "kernel" in dso]
    if frames and "kernel" in frames[0][1]:
        if any(KERNEL_NET.search(sym) for sym in kernel):
            return "kernel: TCP/IP on loopback (send, receive)"
        if any(KERNEL_SCHED.search(sym) for sym in kernel):
            return "kernel: epoll, futex, scheduling"
        return "kernel: other (syscall entry, memory)"
    first_neutral = None
    for sym, dso in frames:
        if "kernel" in dso:
            continue
        if dso in ("[unknown]", "") and sym == "[unknown]" and frames[0] == (sym, dso):
            # An executable anonymous mapping at the leaf: the JIT-compiled decision.
            return "decision (compiler, signals, JIT)"
        if "onnxruntime" in dso:
            return "model inference (ONNX)"
        name = strip_impl(demangle(sym))
        for category, pattern in USER_RULES:
            if pattern.search(name):
                return category
        if NEUTRAL.search(name):
            first_neutral = first_neutral or ("libc and std (memcpy, collections)")
            continue
        return "other"
    return first_neutral or "other"


FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def samples(lines):
    comm, frames = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
            continue
        m = FRAME.match(line)
        if m and comm is not None:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            frames.append((sym, m.group(2)))
        elif comm is None:
            comm = line.strip()
    if comm is not None:
        yield comm, frames


def main():
    counts = Counter(classify(comm, frames) for comm, frames in samples(sys.stdin))
    total = sum(counts.values())
    if total == 0:
        print("(no samples)")
        return
    print(f"| where (perf, {total:,} samples) | share |")
    print("| --- | ---: |")
    for category, n in counts.most_common():
        print(f"| {category} | {100.0 * n / total:.1f} % |")


if __name__ == "__main__":
    main()
