#!/usr/bin/env python3
"""provision_rate.py -- provisions per second end to end on a lab, and what each costs
the engine.

Each round starts a fresh lab (tools/lab up: its own Redis, the control ternd and one
agent per server) on a description of three servers with room for every instance, one
/16 network and one image of 10 GiB holding 1 MiB of data, then submits N provisions at
once (POST /jobs from 16 threads, each with its own keep-alive connection) and waits
until every job has finished. The rate is N over the time from the first POST to the
last job's finished_at. Autoboot is off: the shipped workflow starts the instance
whatever `autoboot` says (a workflow cannot skip a step), so the round stores
`provision-noboot`, the shipped provision without its `start` step and with `mark`
recording `stopped`: what autoboot off does. Every instance is made for real: its
directory, vm.json and sparse disks on its server.

Beside the rate, per provision: the steps run, Redis commands (INFO commandstats
calls), Redis CPU (used_cpu_sys + used_cpu_user), from before the first POST to after
the last job; and after the round, placement's outcome (instances per server, zero
over-commit checked on every server). The median of ROUNDS rounds is reported.

With --hold M, one more lab holds M instances (the same workflow, submitted in batches)
and reports INFO memory used_memory after less before, per instance: what the
inventory and the finished jobs cost Redis at that scale (jobs are kept: the lab's
retention is the engine's default).

Usage: tests/bench/provision_rate.py [-n N] [--rounds R] [--hold M] [--build DIR]
Prints a table and one JSON line.
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid as uuidlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OWNER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"
NET = "7e000000-0000-4000-8000-000000000001"
IMG = "c0000000-0000-4000-8000-000000000001"
SERVERS = [f"50000000-0000-4000-8000-00000000000{i}" for i in (1, 2, 3)]


def datacenter():
    return {
        "servers": [{"uuid": u, "hostname": f"cn{i + 1}", "rack": f"r{i % 2 + 1}",
                     "ram_mib": 8 << 20, "disk_mib": 1 << 30, "data_root": f"servers/cn{i + 1}"}
                    for i, u in enumerate(SERVERS)],
        "networks": [{"uuid": NET, "name": "big", "subnet": "10.0.0.0/16",
                      "gateway": "10.0.0.1", "provision_start_ip": "10.0.0.10",
                      "provision_end_ip": "10.0.255.250", "vlan_id": 0, "mtu": 1500}],
        "packages": [{"uuid": "b0000000-0000-4000-8000-000000000001", "name": "small",
                      "brand": "bhyve", "ram_mib": 1024, "vcpus": 1, "disk_mib": 20480,
                      "flexible_disk": True}],
        "images": [{"uuid": IMG, "name": "bench-os", "version": "1.0", "size_mib": 10240,
                    "data_mib": 1, "file": "images/bench-os.img", "brand": "bhyve"}],
        "settings": {},
    }


def noboot_workflow():
    with open(os.path.join(ROOT, "workflows", "provision.json")) as f:
        wf = json.load(f)
    wf["name"] = "provision-noboot"
    wf["chain"] = [s for s in wf["chain"] if s["name"] != "start"]
    for s in wf["chain"]:
        if s["name"] == "mark":
            s["args"]["state"] = "stopped"
    return wf


class Lab:
    def __init__(self, build):
        self.build = build
        self.dir = tempfile.mkdtemp(prefix="tern-bench-provision-")
        self.env = dict(os.environ, TERN_BUILD=build)

    def up(self):
        desc = self.dir + ".json"
        with open(desc, "w") as f:
            json.dump(datacenter(), f)
        p = subprocess.run([os.path.join(ROOT, "tools", "lab"), "up", "--datacenter", desc,
                            "--dir", self.dir], capture_output=True, text=True, timeout=120,
                           env=self.env)
        os.unlink(desc)
        if p.returncode != 0:
            raise SystemExit(f"tools/lab up failed:\n{p.stdout}\n{p.stderr}")
        url = p.stdout.strip().splitlines()[-1].split("=", 1)[1]
        self.host, self.port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
        status, body, _ = self.call("POST", "/workflows", noboot_workflow())
        assert status in (200, 201), (status, body)

    def down(self):
        p = subprocess.run([os.path.join(ROOT, "tools", "lab"), "down", "--dir", self.dir],
                           capture_output=True, text=True, timeout=300, env=self.env)
        if p.returncode != 0:
            print(f"tools/lab down --dir {self.dir}: exit {p.returncode}\n{p.stdout}{p.stderr}",
                  file=sys.stderr)
            return
        subprocess.run(["rm", "-rf", self.dir])

    def call(self, method, path, body=None, conn=None):
        c = conn or http.client.HTTPConnection(self.host, self.port, timeout=60)
        data = json.dumps(body) if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        text = r.read()
        if conn is None:
            c.close()
        return r.status, json.loads(text or b"null"), r

    def redis_info(self):
        p = subprocess.run(["redis-cli", "-s", os.path.join(self.dir, "redis", "redis.sock"),
                            "INFO", "all"], capture_output=True, text=True, timeout=30)
        info = {}
        calls = 0
        for line in p.stdout.splitlines():
            if line.startswith("cmdstat_"):
                fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
                calls += int(fields["calls"])
            elif ":" in line:
                k, v = line.split(":", 1)
                info[k] = v.strip()
        return {"calls": calls,
                "cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
                "memory": int(info["used_memory"])}

    def count(self, execution):
        status, _, r = self.call("GET", f"/jobs?execution={execution}&limit=1")
        return int(r.getheader("x-count") or 0)

    def submit(self, n, threads=16):
        vms = [str(uuidlib.uuid4()) for _ in range(n)]
        local = threading.local()

        def one(vm):
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            status, body, _ = self.call("POST", "/jobs", {
                "workflow": "provision-noboot", "target": "/provision-" + vm,
                "params": {"vm_uuid": vm, "owner_uuid": OWNER, "package": "small",
                           "image_uuid": IMG, "networks": [{"uuid": NET}],
                           "autoboot": False}}, conn=local.conn)
            if status not in (200, 201):
                raise RuntimeError(f"POST /jobs: {status} {body}")
            return body["uuid"]

        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            return list(ex.map(one, vms))

    def wait_all(self, jobs, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self.count("succeeded") + self.count("failed")
            if done >= jobs:
                return
            time.sleep(0.05)
        raise SystemExit(f"timed out: {done} of {jobs} jobs finished")


def last_finished(lab, n):
    """The latest finished_at among the provision jobs (ms since the epoch)."""
    latest, marker = 0, None
    for _ in range(n // 1000 + 2):
        q = "/jobs?limit=1000" + (f"&marker={urllib.parse.quote(marker)}" if marker else "")
        status, page, r = lab.call("GET", q)
        for j in page:
            if j.get("name") == "provision-noboot" and j.get("finished_at"):
                t = datetime.datetime.fromisoformat(j["finished_at"].replace("Z", "+00:00"))
                latest = max(latest, t.timestamp())
        marker = r.getheader("x-tern-next-marker")
        if not marker or not page:
            break
    return latest


def round_once(build, n):
    lab = Lab(build)
    try:
        lab.up()
        base_done = lab.count("succeeded") + lab.count("failed")  # the inventory load
        before = lab.redis_info()
        t0 = time.time()
        jobs = lab.submit(n)
        lab.wait_all(base_done + len(jobs), timeout=max(120, n))
        after = lab.redis_info()
        failed = lab.count("failed")
        t_end = last_finished(lab, n + 10)
        elapsed = t_end - t0
        status, servers, _ = lab.call("GET", "/servers")
        over = [s["hostname"] for s in servers if s["ram_committed_mib"] > s["ram_mib"] or
                s["disk_committed_mib"] > s["disk_mib"]]
        per_server = {s["hostname"]: s["instances"] for s in servers}
        dirs = sum(len([d for d in os.listdir(os.path.join(lab.dir, "servers", h))
                        if d != "images"]) for h in per_server)
        steps = 5  # place, nics, image, create, mark
        return {"n": n, "failed": failed, "elapsed_s": round(elapsed, 3),
                "rate": round(n / elapsed, 1),
                "redis_calls_per_provision": round((after["calls"] - before["calls"]) / n, 1),
                "redis_cpu_ms_per_provision": round((after["cpu"] - before["cpu"]) * 1000 / n, 3),
                "steps_per_provision": steps, "instances_per_server": per_server,
                "instance_dirs": dirs, "over_committed": over}
    finally:
        lab.down()


def hold(build, m):
    lab = Lab(build)
    try:
        lab.up()
        base_done = lab.count("succeeded") + lab.count("failed")
        before = lab.redis_info()
        done = 0
        while done < m:
            batch = min(1000, m - done)
            lab.submit(batch)
            done += batch
            lab.wait_all(base_done + done, timeout=max(120, batch))
        after = lab.redis_info()
        return {"held": m, "failed": lab.count("failed"),
                "redis_bytes_per_instance": round((after["memory"] - before["memory"]) / m)}
    finally:
        lab.down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hold", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    rounds = []
    for i in range(a.rounds):
        r = round_once(a.build, a.n)
        rounds.append(r)
        print(f"round {i + 1}: {r['n']} provisions in {r['elapsed_s']} s = {r['rate']}/s; "
              f"failed {r['failed']}; Redis {r['redis_calls_per_provision']} calls and "
              f"{r['redis_cpu_ms_per_provision']} ms CPU per provision; "
              f"instances {r['instances_per_server']}; over-committed {r['over_committed']}",
              flush=True)
    med = sorted(rounds, key=lambda r: r["rate"])[len(rounds) // 2]
    out = {"median": med, "rates": [r["rate"] for r in rounds]}
    if a.hold:
        out["hold"] = hold(a.build, a.hold)
        print(f"held {a.hold}: {out['hold']['redis_bytes_per_instance']} Redis bytes per "
              f"instance (inventory and finished jobs)", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
