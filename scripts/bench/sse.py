#!/usr/bin/env python3
"""Streaming probe of the proxy benchmark: sends N streamed chat completions one after the other
on one keep-alive connection and times, per stream, the first event (time to first token, from
the request's last byte) and every gap between two events. Prints one JSON object: the streams'
TTFTs and all gaps in milliseconds, and the errors (a non-200 answer, or a stream that ended
without `data: [DONE]`). Python's standard library only, so it runs wherever the benchmark does.

    sse.py URL --streams N --model ID [--header 'name: value']... [--warmup N]
"""

import argparse
import http.client
import json
import socket
import sys
import time
import urllib.parse


def one_stream(conn, path, body, headers):
    """Returns (ttft_ms, [gap_ms...]) or raises RuntimeError."""
    conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    sent = time.perf_counter()
    response = conn.getresponse()
    if response.status != 200:
        text = response.read()[:300]
        raise RuntimeError(f"status {response.status}: {text!r}")
    events = []
    pending = b""
    done = False
    while True:
        data = response.read1(65536)
        if not data:
            break
        now = time.perf_counter()
        pending += data
        # One timestamp per complete event; events that arrive in one read share it, which is
        # what a client sees.
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            if not event.strip():
                continue
            events.append(now)
            if event.strip() == b"data: [DONE]":
                done = True
    if not done:
        raise RuntimeError("stream ended without data: [DONE]")
    # The last event is `[DONE]`; the one before it may carry usage only. Both count as chunks:
    # a gateway that holds the end of a stream stalls the client just the same.
    ttft = (events[0] - sent) * 1000.0
    gaps = [(b - a) * 1000.0 for a, b in zip(events, events[1:])]
    return ttft, gaps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()

    url = urllib.parse.urlsplit(args.url)
    headers = {"Host": url.netloc, "Content-Type": "application/json", "Accept": "text/event-stream"}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    # No words of the policy's phrase list: the bench policy routes this to its default route,
    # whose model lives on the streaming upstream.
    body = json.dumps(
        {
            "model": args.model,
            "messages": [{"role": "user", "content": "tell me a short story about a lighthouse"}],
            "stream": True,
            "max_tokens": 64,
        }
    ).encode()

    def connect():
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=args.timeout)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    conn = connect()
    ttfts, gaps, errors, last_error = [], [], 0, None
    for index in range(args.warmup + args.streams):
        try:
            ttft, stream_gaps = one_stream(conn, url.path, body, headers)
        except (OSError, http.client.HTTPException, RuntimeError) as error:
            errors += index >= args.warmup
            last_error = str(error)
            conn.close()
            try:
                conn = connect()
            except OSError as error:
                last_error = str(error)
                errors += args.streams - max(0, index + 1 - args.warmup)
                break
            continue
        if index >= args.warmup:
            ttfts.append(ttft)
            gaps.extend(stream_gaps)
    conn.close()
    json.dump({"ttft_ms": ttfts, "gap_ms": gaps, "errors": errors, "last_error": last_error}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
