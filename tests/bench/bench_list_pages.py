#!/usr/bin/env python3
"""bench_list_pages.py -- the time to answer one GET /jobs page of jobs with big params.

Starts its own redis-server (loopback, free port, no persistence) and an API-only ternd
(no runner: the jobs stay queued), creates N jobs whose params hold a string of
PARAM_KIB KiB each, then times `curl 'http://127.0.0.1:PORT/jobs?limit=1000'` R times
with list_max_bytes at the default (4 MiB) and at 1 GiB (a page as large as the count
allows: how pages were built before the size bound). Prints each time and the medians.
Stops what it started, by PID.

Usage: bench_list_pages.py TERND [-n 1000] [--param-kib 256] [-r 5]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import http.client


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout_s=15):
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on port {port} after {timeout_s} s")


def start_ternd(ternd, redis_url, d, list_max_bytes):
    port = free_port()
    cfg = os.path.join(d, f"ternd-{list_max_bytes}.json")
    with open(cfg, "w") as f:
        json.dump({"max_params_bytes": 400000, "list_max_bytes": list_max_bytes}, f)
    log = open(os.path.join(d, f"ternd-{list_max_bytes}.log"), "w")
    p = subprocess.Popen([ternd, "--config", cfg, "--role", "api", "--redis", redis_url,
                          "--listen", f"127.0.0.1:{port}", "--log-level", "warn"],
                         stdout=log, stderr=log)
    wait_port(port)
    return p, port


def time_page(port):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}",
                          f"http://127.0.0.1:{port}/jobs?limit=1000"],
                         capture_output=True, text=True, check=True, timeout=120)
    t, size = out.stdout.split()
    return float(t), int(size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ternd")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--param-kib", type=int, default=256)
    ap.add_argument("-r", type=int, default=5)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="tern-bench-list.")
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", d],
                             stdout=subprocess.DEVNULL)
    procs = [redis]
    try:
        wait_port(rport)
        url = f"redis://127.0.0.1:{rport}"
        ternd, port = start_ternd(a.ternd, url, d, 4 * 1024 * 1024)
        procs.append(ternd)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        wf = {"name": "big", "queue": "nobody-serves",
              "chain": [{"name": "n", "task": "core.noop"}]}
        c.request("POST", "/workflows", json.dumps(wf), {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        blob = "x" * (a.param_kib * 1024 - 64)
        for i in range(a.n):
            body = json.dumps({"workflow": "big", "params": {"i": i, "blob": blob}})
            c.request("POST", "/jobs", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            if r.status != 201:
                sys.exit(f"POST /jobs answered {r.status}")
        c.close()
        results = {}
        for label, bound in (("bounded (4 MiB)", 4 * 1024 * 1024),
                             ("unbounded (1 GiB)", 1024 * 1024 * 1024)):
            if bound != 4 * 1024 * 1024:
                ternd.send_signal(signal.SIGTERM)
                ternd.wait(30)
                procs.remove(ternd)
                ternd, port = start_ternd(a.ternd, url, d, bound)
                procs.append(ternd)
            times = []
            for _ in range(a.r):
                t, size = time_page(port)
                times.append(t)
                print(f"{label}: {t * 1000:.0f} ms, {size} bytes", flush=True)
            results[label] = statistics.median(times)
        for label, m in results.items():
            print(f"median {label}: {m * 1000:.0f} ms")
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
