#!/usr/bin/env python3
"""bench_view_streams.py -- many watchers of one streaming view (TERN_VIEW_STREAM).

Opens N HTTP/1.1 streams (plain sockets, one process, no threads) of the itest plugin's
view /itest/feeds/<feed> (tests/integration/plugin/itest.c), which answers a history
list then follows the stream tern:p:itest:feed:<feed>. Waits until every stream has its
history line, reads ternd's RSS, then XADDs one live line and measures how long until
every watcher has it, then XADDs the end line and measures how long until every
watcher has its final chunk. Every wait is bounded (--bound-s). Not run by CI.

Usage (ternd running with the itest plugin in its --plugin-dir, api role, on --url,
against the Redis of --redis-port; see docs/PERFORMANCE.md for the whole command):
    ulimit -n 20000
    tests/bench/bench_view_streams.py --url http://127.0.0.1:8080 --redis-port 6399 \\
        --pid $(pidof ternd) -n 1000
"""
import argparse
import selectors
import socket
import subprocess
import sys
import time
import uuid


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def redis(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], check=True,
                         capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="ternd's pid, for its RSS")
    ap.add_argument("-n", type=int, default=1000, help="watchers to open")
    ap.add_argument("--bound-s", type=float, default=60, help="bound of each wait")
    a = ap.parse_args()
    host, port = a.url.split("//")[1].split(":")
    port = int(port.rstrip("/"))
    feed = "bench-" + uuid.uuid4().hex[:8]
    key = f"tern:p:itest:feed:{feed}"
    redis(a.redis_port, "RPUSH", key + ":history", '{"type":"progress","n":"history"}')

    rss0 = rss_mib(a.pid)
    sel = selectors.DefaultSelector()
    got = {}
    t0 = time.time()
    for _ in range(a.n):
        s = socket.create_connection((host, port))
        s.sendall(f"GET /itest/feeds/{feed} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""

    def pump(done, bound_s):
        end = time.time() + bound_s
        while time.time() < end:
            if all(done(v) for v in got.values()):
                return True
            for k, _ in sel.select(0.05):
                try:
                    got[k.fileobj] += k.fileobj.recv(65536)
                except BlockingIOError:
                    pass
        return False

    ok = pump(lambda b: b'"n":"history"' in b, a.bound_s)
    t1 = time.time()
    rss1 = rss_mib(a.pid)
    print(f"{a.n} watchers with their history line after {t1 - t0:.2f} s (all: {ok}); "
          f"ternd RSS {rss0:.1f} -> {rss1:.1f} MiB "
          f"({(rss1 - rss0) * 1024 / a.n:.1f} KiB per watcher)")

    tl = time.time()
    redis(a.redis_port, "XADD", key, "*", "e", '{"type":"progress","n":"live"}')
    ok_live = pump(lambda b: b'"n":"live"' in b, a.bound_s)
    print(f"XADD of a live line -> on all {a.n} watchers in {(time.time() - tl) * 1000:.0f} ms "
          f"(all: {ok_live})")

    te = time.time()
    redis(a.redis_port, "XADD", key, "*", "e", '{"type":"end","n":"end"}')
    ok_end = pump(lambda b: b.endswith(b"0\r\n\r\n"), a.bound_s)
    print(f"XADD of the end line -> final chunk on all {a.n} watchers in "
          f"{(time.time() - te) * 1000:.0f} ms (all: {ok_end}); "
          f"ternd RSS then {rss_mib(a.pid):.1f} MiB")
    for s in got:
        s.close()
    redis(a.redis_port, "DEL", key, key + ":history")
    return 0 if ok and ok_live and ok_end else 1


if __name__ == "__main__":
    sys.exit(main())
