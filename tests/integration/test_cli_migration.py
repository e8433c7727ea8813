#!/usr/bin/env python3
"""`tern migration` against a stand-in of the API's migration routes: what the built
client sends (the migrate-<action> job, its target and params, names resolved), how -w
waits for its job's phase and follows GET /migrations/:uuid/watch (a stream cut before
its end is read again without drawing anything twice), the exit statuses, a refusal's
code and message, list, get, and the flag M of `tern vm list`.

The stand-in (an HTTP server on a free loopback port, in this process) answers as the
dc plugin's views and admission check answer; the lab tests of the real migrations run
the same client against the real ternd.

Usage: test_cli_migration.py PATH_TO_TERN. Every run of the client is bounded.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TERN = sys.argv[1]
VM = "7b3b7d34-5b1e-4c3a-9a52-1f6f0a0c1d01"
DB = "7b3b7d34-5b1e-4c3a-9a52-1f6f0a0c1d02"
BUSY = "7b3b7d34-5b1e-4c3a-9a52-1f6f0a0c1d03"
CN1 = "4c4c4c4c-0000-4000-8000-000000000001"
CN2 = "4c4c4c4c-0000-4000-8000-000000000002"
OWNER = "0e0e0e0e-1111-4222-8333-444444444444"

VMS = [
    {"uuid": VM, "alias": "web0", "state": "running", "server_uuid": CN1, "migrating": True,
     "ram": 256, "nics": []},
    {"uuid": DB, "alias": "db0", "state": "running", "server_uuid": CN2, "ram": 256, "nics": []},
    {"uuid": BUSY, "alias": "busy0", "state": "running", "server_uuid": CN1, "ram": 256,
     "nics": []},
]


def entry(phase, state, message, start, **extra):
    e = {"type": "progress", "phase": phase, "state": state, "message": message,
         "started_timestamp": "2026-11-26T10:%sZ" % start, "current_progress": 0,
         "total_progress": 100}
    e.update(extra)
    return e


class World:
    """What the stand-in knows: the jobs posted, the migrations, the watch streams."""

    def __init__(self):
        self.lock = threading.Lock()
        self.posts = []           # bodies of POST /jobs
        self.requests = []        # every request line
        self.migrations = {}      # uuid -> record
        self.unclaimed = {}       # migration uuid -> GETs still answered 404
        self.watch_opens = {}     # migration uuid -> number of watch requests
        self.streams = {}         # migration uuid -> [first connection's lines, then's]
        self.jobs = {}            # job uuid -> what GET /jobs/:uuid answers, when not running


W = World()
HANGING = "9a9a9a9a-0000-4000-8000-0000000000ff"
RELEASE = threading.Event()


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, code, message):
        self.reply(status, {"code": code, "message": message})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        with W.lock:
            W.requests.append("POST " + self.path)
            W.posts.append(body)
        params = body.get("params", {})
        if params.get("vm_uuid") == BUSY:
            return self.refuse(409, "MigrationInProgress",
                               "An active migration already exists for this instance")
        job = "9a9a9a9a-0000-4000-8000-%012d" % len(W.posts)
        action = body["workflow"][len("migrate-"):]
        with W.lock:
            if action == "begin":
                # The job's uuid is the migration's; claimed after two reads.
                W.migrations[job] = {"uuid": job, "vm_uuid": params["vm_uuid"], "state": "running",
                                     "phase": "begin", "job_uuid": job, "automatic": False,
                                     "source_server_uuid": CN1, "target_server_uuid": CN2,
                                     "created_timestamp": "2026-11-26T10:00:00.000Z",
                                     "progress_history": []}
                W.unclaimed[job] = 2
                W.streams[job] = [
                    [entry("begin", "running", "making a reservation", "00:00.000"),
                     entry("begin", "successful", "making a reservation", "00:00.000",
                           duration_ms=2500)],
                    [entry("begin", "successful", "making a reservation", "00:00.000",
                           duration_ms=2500),
                     {"type": "end", "phase": "begin", "state": "paused"}],
                ]
            elif action == "estimate":
                W.jobs[job] = {"uuid": job, "execution": "succeeded", "chain_results": [
                    {"name": "measure", "result": {"size_bytes": 3 * 1048576 * 1024,
                                                   "total_seconds": 190,
                                                   "downtime_seconds": 15}}]}
            elif action == "sync":
                m = newest(params["vm_uuid"])
                # Its phase starts on the second read of the record.
                m["pending_job"] = job
                W.streams[m["uuid"]] = [[
                    entry("begin", "successful", "making a reservation", "00:00.000",
                          duration_ms=2500),
                    entry("sync", "running", "synchronizing filesystems", "00:10.000"),
                    {"type": "progress", "phase": "sync", "state": "running",
                     "current_progress": 300, "total_progress": 200,
                     "transfer_bytes_second": 1048576, "eta_ms": 0},
                    entry("sync", "failed", "synchronizing filesystems", "00:10.000",
                          duration_ms=4000, error="TransferRefused: bad key"),
                    {"type": "end", "phase": "sync", "state": "failed",
                     "message": "TransferRefused: bad key"},
                ]]
        self.reply(202, {"uuid": job, "workflow": body["workflow"], "target": body["target"]})

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        with W.lock:
            W.requests.append("GET " + self.path)
        if parts == ["vms"]:
            rows = [v for v in VMS if "alias" not in q or v["alias"] == q["alias"][0]]
            return self.reply(200, rows)
        if parts[0] == "vms" and len(parts) == 2:
            for v in VMS:
                if v["uuid"] == parts[1]:
                    return self.reply(200, v)
            return self.refuse(404, "ResourceNotFound", "no vm " + parts[1])
        if parts == ["servers"]:
            return self.reply(200, [{"uuid": CN1, "hostname": "cn1"},
                                    {"uuid": CN2, "hostname": "cn2"}])
        if parts[0] == "jobs" and len(parts) == 2:
            with W.lock:
                job = W.jobs.get(parts[1])
            return self.reply(200, job or {"uuid": parts[1], "execution": "running"})
        if parts == ["migrations"]:
            with W.lock:
                rows = [dict(m) for m in W.migrations.values()
                        if "vm_uuid" not in q or m["vm_uuid"] == q["vm_uuid"][0]]
            rows.sort(key=lambda m: m["uuid"], reverse=True)
            return self.reply(200, rows)
        if parts[0] == "migrations" and len(parts) == 2:
            with W.lock:
                m = W.migrations.get(parts[1])
                if m is not None and W.unclaimed.get(parts[1], 0) > 0:
                    W.unclaimed[parts[1]] -= 1
                    m = None
                if m is not None and m.get("pending_job"):
                    # The sync's phase starts now: the next read names its job.
                    m["job_uuid"], m["pending_job"] = m["pending_job"], None
                    m = dict(m, job_uuid="not yet")
            if m is None:
                return self.refuse(404, "MigrationNotFound", "no migration " + parts[1])
            return self.reply(200, m)
        if parts[0] == "migrations" and len(parts) == 3 and parts[2] == "watch":
            with W.lock:
                n = W.watch_opens.get(parts[1], 0)
                W.watch_opens[parts[1]] = n + 1
                streams = W.streams.get(parts[1], [[]])
                lines = streams[min(n, len(streams) - 1)]
            data = "".join(json.dumps(e) + "\n" for e in lines).encode()
            if parts[1] == HANGING:
                # A running migration: the lines, then the stream stays open (bounded).
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                RELEASE.wait(20)
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)  # the first connection of a begin ends without its end
            return
        self.refuse(404, "ResourceNotFound", "no route " + url.path)


def newest(vm):
    ms = [m for m in W.migrations.values() if m["vm_uuid"] == vm]
    return sorted(ms, key=lambda m: m["uuid"])[-1]


def tern(*args, owner=None, code=0):
    env = dict(os.environ, TERN_URL=URL, NO_COLOR="1")
    env.pop("TERN_OWNER_UUID", None)
    if owner:
        env["TERN_OWNER_UUID"] = owner
    p = subprocess.run([TERN, *args], capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != code:
        raise AssertionError(f"tern {' '.join(args)}: exit {p.returncode}, wanted {code}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
URL = "http://127.0.0.1:%d" % server.server_address[1]
threading.Thread(target=server.serve_forever, daemon=True).start()
try:
    # begin -w: names resolved, the job posted, its claim waited for, the watch cut
    # before its end and read again, each line drawn once.
    p = tern("migration", "begin", "web0", "--target", "cn2", "--limit-mbps", "80",
             "--affinity", "far=db0,rack=same", "-w")
    body = W.posts[-1]
    assert body["workflow"] == "migrate-begin", body
    assert body["target"] == "/migrate-begin-" + VM, body
    assert body["params"] == {"vm_uuid": VM, "target_server_uuid": CN2, "send_mbps_limit": 80,
                              "affinity": {"far": [DB], "rack": "same"}}, body
    mig = [u for u in W.migrations][0]
    assert W.watch_opens[mig] == 2, W.watch_opens
    out = p.stdout
    assert out.count("✓ making a reservation (2.5s)\n") == 1, out
    assert out.endswith("Begin migration phase was successful.\n"), out
    assert "Migration progress (%s):" % mig in out, out
    assert "job %s, migration %s" % (mig, mig) in out, out

    # sync -w as a user: owner_uuid sent, the watch started only once the record names
    # the sync's job, the failure drawn, exit 1; the percent stays within 100.
    p = tern("migration", "sync", VM, "-w", owner=OWNER, code=1)
    body = W.posts[-1]
    assert body["workflow"] == "migrate-sync" and body["target"] == "/migrate-sync-" + VM, body
    assert body["params"] == {"vm_uuid": VM, "owner_uuid": OWNER}, body
    out = p.stdout
    assert "✗ synchronizing filesystems (4.0s): TransferRefused: bad key\n" in out, out
    assert out.endswith("Migration failed: TransferRefused: bad key\n"), out
    assert "150%" not in out, out
    watch_reqs = [r for r in W.requests if r.startswith("GET /migrations/%s/watch" % mig)]
    assert watch_reqs[-1].endswith("?owner_uuid=" + OWNER), watch_reqs

    # A refusal: the API's code and message, exit 3.
    p = tern("migration", "begin", "busy0", code=3)
    assert "MigrationInProgress: An active migration already exists for this instance" in \
        p.stderr, p.stderr

    # Without -w: the job's and the migration's uuids, and how to watch.
    p = tern("migration", "begin", "db0")
    assert "Watch it with: tern migration watch " + DB in p.stdout, p.stdout

    # estimate waits for its job and prints its result.
    p = tern("migration", "estimate", "web0", "--limit-mbps", "100")
    assert W.posts[-1]["params"] == {"vm_uuid": VM, "send_mbps_limit": 100}, W.posts[-1]
    assert W.posts[-1]["target"] == "/migrate-estimate-" + VM, W.posts[-1]
    assert "would send 3.00 GiB and take about 3m10s, with about 15s of downtime" in p.stdout, \
        p.stdout
    p = tern("migration", "estimate", "web0", "-j")
    assert json.loads(p.stdout) == {"size_bytes": 3221225472, "total_seconds": 190,
                                    "downtime_seconds": 15}, p.stdout

    # list, get, vm list.
    p = tern("migration", "list", "--state", "active")
    assert p.stdout.split("\n")[0].split()[:5] == ["SHORTID", "VM", "PHASE", "STATE", "AGE"], \
        p.stdout
    assert mig[:8] in p.stdout, p.stdout
    assert any("state=active" in r for r in W.requests if r.startswith("GET /migrations?")), \
        W.requests
    with W.lock:
        W.migrations[mig].update(state="paused", num_sync_phases=1, last_sync_size=1048576,
                                 started_timestamp="2026-11-26T10:00:00.000Z",
                                 finished_timestamp=None,
                                 progress_history=[
                                     entry("begin", "successful", "making a reservation",
                                           "00:00.000", duration_ms=2500),
                                     entry("sync", "successful", "synchronizing filesystems",
                                           "00:10.000", duration_ms=4000)])
        W.migrations[mig]["progress_history"][1]["pass"] = 1
        W.migrations[mig]["progress_history"][1]["current_progress"] = 1048576
    p = tern("migration", "get", "web0")
    out = p.stdout
    for want in ("state", "paused", "total_runtime", "last_sync_size", "1.00 MiB", "passes:",
                 "history:", "making a reservation"):
        assert want in out, (want, out)
    with W.lock:
        W.migrations[mig].update(state="running", phase="sync", progress={
            "type": "progress", "phase": "sync", "state": "running", "current_progress": 300,
            "total_progress": 200, "transfer_bytes_second": 1048576, "eta_ms": 0})
    p = tern("migration", "get", "web0")
    assert "synchronizing filesystems (100% 1.00 MiB/s ETA 0s)" in p.stdout, p.stdout
    p = tern("migration", "get", mig, "-j")
    assert json.loads(p.stdout)["uuid"] == mig, p.stdout
    p = tern("vm", "list")
    rows = {line.split()[1]: line.split() for line in p.stdout.strip().split("\n")[1:]}
    assert rows["web0"][3] == "M" and rows["db0"][3] == "-", p.stdout

    # Ctrl-C stops the watching, never the migration: exit 130, nothing posted.
    with W.lock:
        W.migrations[HANGING] = {"uuid": HANGING, "vm_uuid": DB, "state": "running",
                                 "phase": "sync", "job_uuid": HANGING}
        W.streams[HANGING] = [[
            entry("sync", "running", "synchronizing filesystems", "00:10.000"),
            {"type": "progress", "phase": "sync", "state": "running", "current_progress": 5,
             "total_progress": 10, "transfer_bytes_second": 1024, "eta_ms": 5000}]]
        posts = len(W.posts)
    env = dict(os.environ, TERN_URL=URL, NO_COLOR="1")
    env.pop("TERN_OWNER_UUID", None)
    w = subprocess.Popen([TERN, "migration", "watch", HANGING], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = w.stdout.readline()  # the header, once the stream is open
        assert first.startswith("Migration progress (" + HANGING), first
        line = w.stdout.readline()
        assert line == "☐ synchronizing filesystems\n", line
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=10)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
        RELEASE.set()
    assert w.returncode == 130, (w.returncode, out, err)
    assert "stopped watching; migration %s goes on" % HANGING in err, err
    assert len(W.posts) == posts, W.posts[posts:]
    print("ok: tern migration against the stand-in API")
finally:
    server.shutdown()
