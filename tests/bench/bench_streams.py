#!/usr/bin/env python3
"""bench_streams.py -- many GET /jobs/:uuid/events streams on one ternd.

Opens N HTTP/1.1 event streams (plain sockets, one process, no threads) on one running
job of a workflow that sleeps, waits until every stream has the job's history, reads
ternd's RSS and /metrics, then cancels the job and measures how long it takes until
every stream has received its final chunk. Not run by CI.

Usage (ternd already running against a Redis, api role, on --url):
    ulimit -n 20000
    tests/bench/bench_streams.py --url http://127.0.0.1:8080 --pid $(pidof ternd) -n 10000
"""
import argparse
import json
import selectors
import socket
import sys
import time
import urllib.request


def call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    # urllib would send a body as application/x-www-form-urlencoded, which ternd refuses.
    headers = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(base + path, method=method, data=data, headers=headers)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--pid", type=int, required=True, help="ternd's pid, for its RSS")
    ap.add_argument("-n", type=int, default=1000, help="streams to open")
    a = ap.parse_args()
    host, port = a.url.split("//")[1].split(":")
    port = int(port.rstrip("/"))

    call(a.url, "POST", "/workflows", {
        "name": "bench-streams", "version": "1.0.0",
        "chain": [{"name": "wait", "task": "core.sleep", "args": {"ms": 600000}}]})
    rss0 = rss_mib(a.pid)
    job = call(a.url, "POST", "/jobs", {"workflow": "bench-streams"})["uuid"]

    sel = selectors.DefaultSelector()
    got = {}
    t0 = time.time()
    for _ in range(a.n):
        s = socket.create_connection((host, port))
        s.sendall(f"GET /jobs/{job}/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""

    def pump(done, bound_s):
        end = time.time() + bound_s
        while time.time() < end:
            if all(done(v) for v in got.values()):
                return True
            for key, _ in sel.select(0.05):
                try:
                    got[key.fileobj] += key.fileobj.recv(65536)
                except BlockingIOError:
                    pass
        return False

    ok = pump(lambda b: b'"type":"running"' in b, 120)
    t1 = time.time()
    with urllib.request.urlopen(a.url + "/metrics") as r:
        page = r.read().decode()
    streams = [l for l in page.splitlines() if l.startswith("tern_event_streams_open ")]
    print(f"{a.n} streams with their history after {t1 - t0:.2f} s (all: {ok}); "
          f"ternd RSS {rss0:.1f} -> {rss_mib(a.pid):.1f} MiB; {streams[0] if streams else '?'}")

    tc = time.time()
    call(a.url, "POST", f"/jobs/{job}/cancel", {})
    ok = pump(lambda b: b.endswith(b"0\r\n\r\n"), 120)
    print(f"cancel -> final chunk on all {a.n} streams in {(time.time() - tc) * 1000:.0f} ms "
          f"(all: {ok})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
