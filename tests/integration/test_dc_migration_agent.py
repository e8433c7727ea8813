#!/usr/bin/env python3
"""The agent's migration tasks on a real lab of two servers: test workflows of this
file's own run each task inside a server's agent, and every step is checked on the
files (vm.json contents, modes, sizes, st_blocks, sha256 of the disks, processes):

* each agent's configuration has a migration_listen of its own, kept by restart-agent;
* dc.migration_target_create makes a hidden target (do_not_inventory, no autoboot, no
  NICs, migration_target) with an empty disks/, answers the same when run again,
  refuses InstanceExists for another migration; dc.instances_scan lists it hidden;
* dc.migration_recv_open writes session.json 0600 with the secret of the migration's
  record (no job shows it; an ended migration's is refused InvalidState) and answers
  the listener's address;
* dc.migration_send moves the disks (when the block transfer is built in: else it
  fails TransferFailed saying so), refuses its final pass InstanceRunning while the
  workload lives; dc.migration_verify agrees with the source's digests and fails
  VerifyFailed naming the disk when a block differs;
* dc.migration_flip and dc.migration_cleanup: a visible instance is never removed
  (InvalidState), a hidden one is, with its workload stopped;
* dc.migration_estimate counts the data blocks, not the holes.

The control's dc.migration_progress and migration_secret scripts are given a record of
the test's own in Redis (the migration's JSON, with its secret): the send's progress
events land on its stream, and a record whose secret differs from the target's session
makes the send fail TransferRefused.

Usage: test_dc_migration_agent.py SOURCE_ROOT BUILD_ROOT [TEST...].
"""
import hashlib
import json
import os
import signal
import stat
import sys

from lab_harness import Lab, wait_for, run_tests, pid_alive

SOURCE, BUILD = sys.argv[1], sys.argv[2]
MIB = 1024 * 1024
CN1 = "a0000000-0000-4000-8000-000000000001"
CN2 = "a0000000-0000-4000-8000-000000000002"
NET = "b0000000-0000-4000-8000-000000000001"
OS_IMG = "d0000000-0000-4000-8000-000000000001"
VM = "e0000000-0000-4000-8000-000000000001"
MIG = "c0000000-0000-4000-8000-000000000001"
OTHER_MIG = "c0000000-0000-4000-8000-000000000002"
SECRET = "ab" * 32
TRANSFER_BUILT = os.path.exists(os.path.join(SOURCE, "tasks", "dc", "sync", "sync_send.c"))

DATACENTER = {
    "servers": [{"uuid": u, "hostname": h, "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 2097152, "data_root": "servers/" + h}
                for u, h in ((CN1, "cn1"), (CN2, "cn2"))],
    "networks": [{"uuid": NET, "name": "external", "subnet": "203.0.113.0/24",
                  "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
                  "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500}],
    "packages": [],
    "images": [{"uuid": OS_IMG, "name": "lab-os", "version": "1.0", "size_mib": 64,
                "data_mib": 4, "file": "images/lab-os.img", "brand": "bhyve"}],
    "settings": {},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-migration-agent-")
TASKS = {
    "create": ("dc.instance_create", {"vm_uuid": "${params.vm_uuid}",
                                      "image_uuid": "${params.image_uuid}",
                                      "disks": "${params.disks}"}),
    "image": ("dc.image_ensure", {"image_uuid": "${params.image_uuid}"}),
    "start": ("dc.instance_start", {"vm_uuid": "${params.vm_uuid}"}),
    "stop": ("dc.instance_stop", {"vm_uuid": "${params.vm_uuid}"}),
    "scan": ("dc.instances_scan", {}),
    "target": ("dc.migration_target_create", {"migration_uuid": "${params.migration_uuid}",
                                              "vm": "${params.vm}"}),
    "open": ("dc.migration_recv_open", {"migration_uuid": "${params.migration_uuid}",
                                        "vm_uuid": "${params.vm_uuid}"}),
    "send": ("dc.migration_send", {"migration_uuid": "${params.migration_uuid}",
                                   "vm_uuid": "${params.vm_uuid}", "addr": "${params.addr}",
                                   "mode": "${params.mode}",
                                   "send_mbps_limit": "${params.limit}", "block_kib": 1024,
                                   "window_blocks": 16,
                                   "converge": {"max_mib": 50, "max_passes": 4,
                                                "stall_passes": 2, "min_reduction_pct": 10}}),
    "verify": ("dc.migration_verify", {"migration_uuid": "${params.migration_uuid}",
                                       "vm_uuid": "${params.vm_uuid}",
                                       "digests": "${params.digests}"}),
    "flip": ("dc.migration_flip", {"migration_uuid": "${params.migration_uuid}",
                                   "vm_uuid": "${params.vm_uuid}",
                                   "do_not_inventory": "${params.hidden}",
                                   "nics": "${params.nics}"}),
    "cleanup": ("dc.migration_cleanup", {"migration_uuid": "${params.migration_uuid}",
                                         "vm_uuid": "${params.vm_uuid}",
                                         "remove_instance": "${params.remove}"}),
    "estimate": ("dc.migration_estimate", {"vm_uuid": "${params.vm_uuid}",
                                           "send_mbps_limit": 500}),
}


def post_workflows():
    for host, server in (("cn1", CN1), ("cn2", CN2)):
        for name, (task, args) in TASKS.items():
            status, body = lab.http("/workflows", "POST", {
                "name": f"t-{name}-{host}", "version": "1.0.0", "queue": "server:" + server,
                "chain": [{"name": name, "task": task, "args": args}]})
            assert status == 201, (name, status, body)


def step(name, host, want="succeeded", **params):
    """Runs the one-step workflow `name` on host's agent: its result (or the job)."""
    params.setdefault("vm_uuid", VM)
    params.setdefault("limit", 500)
    job = lab.run_job(f"t-{name}-{host}", f"/t-{name}-{host}-{os.urandom(4).hex()}", params)
    assert job["execution"] == want, json.dumps(job, indent=1)
    return job["chain_results"][-1]["result"] if want == "succeeded" else job


def error_of(job):
    r = job["chain_results"][-1]
    return r.get("error") or {}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def vm_json(host_uuid):
    with open(os.path.join(lab.vm_dir(host_uuid, VM), "vm.json")) as f:
        return json.load(f)


def agent_listen(host):
    with open(os.path.join(lab.dir, "agents", host, "ternd.json")) as f:
        return json.load(f)["plugins"]["dc"]["migration_listen"]


def put_migration(uuid, **fields):
    rec = {"uuid": uuid, "vm_uuid": VM, "state": "running", "phase": "sync",
           "pause_requested": False, "abort_requested": False, "send_mbps_limit": 500,
           "secret": SECRET}
    rec.update(fields)
    lab.redis("SET", "tern:p:dc:migration:" + uuid, json.dumps(rec))


def record():
    """The VM's record as the control has it, as the migration's claim hands it on."""
    doc = vm_json(CN1)
    return {k: doc.get(k) for k in ("uuid", "image_uuid", "disks", "customer_metadata",
                                    "alias", "owner_uuid", "brand", "ram", "vcpus")}


# ---- tests ----------------------------------------------------------------------------


def test_listen_per_agent():
    a, b = agent_listen("cn1"), agent_listen("cn2")
    assert a.startswith("127.0.0.1:") and b.startswith("127.0.0.1:") and a != b, (a, b)
    lab.run("restart-agent", "cn2", "--dir", lab.dir)
    assert agent_listen("cn2") == b, (agent_listen("cn2"), b)


def test_source_instance():
    post_workflows()
    step("image", "cn1", image_uuid=OS_IMG)
    step("create", "cn1", image_uuid=OS_IMG, disks=[{"size": 64}, {"size": 128}])
    # Data in the middle of the data disk, a hole around it.
    path = os.path.join(lab.vm_dir(CN1, VM), "disks", "disk1.img")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, os.urandom(3 * MIB), 8 * MIB)
    os.fsync(fd)
    os.close(fd)
    est = step("estimate", "cn1")
    # 3 MiB written plus the image's 4 MiB of data at most: holes are not counted.
    assert 3 * MIB <= est["size_bytes"] <= 8 * MIB, est
    assert est["total_seconds"] >= 10 and est["downtime_seconds"] > 0, est


def test_target_create():
    put_migration(MIG)
    rec = record()
    out = step("target", "cn2", migration_uuid=MIG, vm=rec)
    d = lab.vm_dir(CN2, VM)
    assert out["dir"] == d, out
    doc = vm_json(CN2)
    assert doc["do_not_inventory"] is True and doc["autoboot"] is False, doc
    assert doc["nics"] == [] and doc["migration_target"] == MIG, doc
    assert [x["path"] for x in doc["disks"]] == [
        os.path.join(d, "disks", f"disk{i}.img") for i in range(2)], doc["disks"]
    assert os.listdir(os.path.join(d, "disks")) == []
    again = step("target", "cn2", migration_uuid=MIG, vm=rec)
    assert again == out and vm_json(CN2) == doc
    job = step("target", "cn2", want="failed", migration_uuid=OTHER_MIG, vm=rec)
    assert error_of(job).get("code") == "InstanceExists", error_of(job)
    assert vm_json(CN2) == doc
    # The agent's scan lists it hidden: the NIC reconcile leaves it alone.
    scan = step("scan", "cn2")
    entry = [i for i in scan["instances"] if i["uuid"] == VM]
    assert entry and entry[0]["do_not_inventory"] is True, scan


def test_recv_open():
    out = step("open", "cn2", migration_uuid=MIG)
    assert out["addr"] == agent_listen("cn2"), out
    path = os.path.join(lab.vm_dir(CN2, VM), ".migration", "session.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as f:
        assert json.load(f) == {"migration_uuid": MIG, "secret": SECRET}
    # The secret came from the migration's record: no step's args or result show it.
    job = lab.run_job("t-open-cn2", "/t-open-cn2-" + os.urandom(4).hex(),
                      {"vm_uuid": VM, "migration_uuid": MIG})
    assert job["execution"] == "succeeded" and SECRET not in json.dumps(job), job
    # An ended migration's transfer is not reopened.
    put_migration(MIG, state="aborted")
    job = step("open", "cn2", want="failed", migration_uuid=MIG)
    err = error_of(job)
    assert err.get("code") == "InvalidState" and "closed" in err.get("message", ""), err
    put_migration(MIG)
    job = step("open", "cn2", want="failed", migration_uuid=OTHER_MIG)
    assert error_of(job).get("code") == "InvalidState", error_of(job)
    job = step("target", "cn2", want="failed", migration_uuid=MIG, vm={"uuid": "x"})
    err = error_of(job)
    assert err.get("code") == "InvalidArgument" and "vm.uuid" in err.get("message", ""), err


def test_send_and_verify():
    addr = agent_listen("cn2")
    step("start", "cn1")
    job = step("send", "cn1", want="failed", migration_uuid=MIG, addr=addr,
               mode="final")
    assert error_of(job).get("code") == "InstanceRunning", error_of(job)
    step("stop", "cn1")
    if not TRANSFER_BUILT:
        job = step("send", "cn1", want="failed", migration_uuid=MIG, addr=addr,
                   mode="pass")
        assert error_of(job).get("code") == "TransferFailed", error_of(job)
        assert "not built" in error_of(job).get("message", ""), error_of(job)
        return
    job = step("send", "cn1", want="failed", migration_uuid=MIG, addr=addr,
               mode="fast")
    err = error_of(job)
    assert err.get("code") == "InvalidArgument" and "mode" in err.get("message", ""), err
    # A wrong secret (the record's changed after the target's session was written):
    # refused before the target's files are touched.
    put_migration(MIG, secret="cd" * 32)
    job = step("send", "cn1", want="failed", migration_uuid=MIG, addr=addr, mode="pass")
    assert error_of(job).get("code") == "TransferRefused", error_of(job)
    assert os.listdir(os.path.join(lab.vm_dir(CN2, VM), "disks")) == []
    # ... and the target's agent says so in its log, naming the migration.
    with open(os.path.join(lab.dir, "agents", "cn2", "ternd.log"), encoding="utf-8") as f:
        refused = [line for line in f if "dc.migration_listener" in line and MIG in line]
    assert refused, "the target agent's log has no line of the refused sender"
    put_migration(MIG)
    out = step("send", "cn1", migration_uuid=MIG, addr=addr, mode="pass")
    assert out["outcome"] == "done" and len(out["passes"]) == 1, out
    src, dst = lab.vm_dir(CN1, VM), lab.vm_dir(CN2, VM)
    for name in ("disk0.img", "disk1.img"):
        a, b = os.path.join(src, "disks", name), os.path.join(dst, "disks", name)
        assert os.path.getsize(a) == os.path.getsize(b), name
        assert sha256(a) == sha256(b), name
        # Sparse on the target too: not more blocks than the source's, give a block.
        assert os.stat(b).st_blocks <= os.stat(a).st_blocks + 2048, name
    # The target stays hidden after the pass brought the source's vm.json.
    doc = vm_json(CN2)
    assert doc["do_not_inventory"] is True and doc["migration_target"] == MIG, doc
    events = lab.redis("XRANGE", f"tern:p:dc:migration:{MIG}:events", "-", "+")
    assert any("pass_done" in e or "progress" in e for e in events), events
    final = step("send", "cn1", migration_uuid=MIG, addr=addr, mode="final")
    assert final["outcome"] == "done" and len(final["digests"]) == 2, final
    v = step("verify", "cn2", migration_uuid=MIG, digests=final["digests"])
    assert [x["digest"] for x in v["disks"]] == [x["digest"] for x in final["digests"]], v
    # One byte changed on the target: VerifyFailed names the disk and both digests.
    path = os.path.join(dst, "disks", "disk1.img")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"\x01", 8 * MIB)
    os.close(fd)
    job = step("verify", "cn2", want="failed", migration_uuid=MIG, digests=final["digests"])
    err = error_of(job)
    assert err.get("code") == "VerifyFailed" and "disk1.img" in err.get("message", ""), err


def events_of(uuid):
    """The migration's stream: each entry's event, decoded."""
    lines = lab.redis("XRANGE", f"tern:p:dc:migration:{uuid}:events", "-", "+")
    return [json.loads(x) for x in lines if x.startswith("{")]


def test_progress_pause_converge():
    if not TRANSFER_BUILT:
        return
    # 40 MiB more data, sent at 80 Mbit/s (10 MB/s): about 4 s, progress each second.
    path = os.path.join(lab.vm_dir(CN1, VM), "disks", "disk1.img")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, os.urandom(40 * MIB), 16 * MIB)
    os.fsync(fd)
    os.close(fd)
    lab.redis("DEL", f"tern:p:dc:migration:{MIG}:events")
    params = {"vm_uuid": VM, "migration_uuid": MIG, "addr": agent_listen("cn2"),
              "mode": "pass", "limit": 80}
    status, job = lab.create_job("t-send-cn1", "/t-send-pause-" + os.urandom(4).hex(), params)
    assert status in (200, 201), (status, job)

    def moving():
        evs = [e for e in events_of(MIG) if e.get("type") == "progress"]
        return evs if evs and evs[-1]["current_progress"] > 0 else None
    evs = wait_for("a progress event with bytes sent", moving, timeout=20)
    e = evs[-1]
    assert e["phase"] == "sync" and e["state"] == "running", e
    assert e["total_progress"] >= 40 * MIB and e["current_progress"] <= e["total_progress"], e
    put_migration(MIG, pause_requested=True)
    done = lab.wait_job(job["uuid"], timeout=30)
    assert done["execution"] == "succeeded", json.dumps(done, indent=1)
    out = done["chain_results"][-1]["result"]
    assert out["outcome"] == "paused" and out["passes"] == [], out
    # A rate was measured while bytes moved, and an ETA with it.
    rated = [x for x in events_of(MIG) if x.get("transfer_bytes_second", 0) > 0]
    assert rated and rated[-1]["eta_ms"] is not None, events_of(MIG)
    assert all(x["transfer_bytes_second"] < 20 * 1000 * 1000 for x in rated), rated
    # Cancelled in the middle of a pass (40 MiB more at 10 MB/s): the job ends, the
    # agent goes on serving.
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, os.urandom(40 * MIB), 64 * MIB)
    os.fsync(fd)
    os.close(fd)
    put_migration(MIG)
    status, job = lab.create_job("t-send-cn1", "/t-send-cancel-" + os.urandom(4).hex(), params)
    assert status in (200, 201), (status, job)
    seen = len(events_of(MIG))
    wait_for("the cancelled send's first progress",
             lambda: len([e for e in events_of(MIG)[seen:] if e.get("current_progress")]) > 0,
             timeout=20)
    lab.http(f"/jobs/{job['uuid']}/cancel", "POST", {})
    done = lab.wait_job(job["uuid"], timeout=30)
    assert done["execution"] == "canceled", done["execution"]
    # Resumed: converge sends what is left, then less than max_mib: switch for size.
    out = step("send", "cn1", migration_uuid=MIG, addr=agent_listen("cn2"),
               mode="converge", limit=500)
    assert out["outcome"] == "done" and out["switch_reason"] == "size", out
    # What the paused and the cancelled passes had sent is not sent again.
    assert out["passes"][0]["bytes"] < 80 * MIB, out
    assert len(out["passes"]) >= 1 and out["passes"][-1]["bytes"] <= 50 * MIB, out
    # The target's file equals the source's.
    dst = os.path.join(lab.vm_dir(CN2, VM), "disks", "disk1.img")
    with open(path, "rb") as a, open(dst, "rb") as b:
        a.seek(16 * MIB)
        b.seek(16 * MIB)
        assert a.read(96 * MIB) == b.read(96 * MIB)


def test_target_agent_killed():
    if not TRANSFER_BUILT:
        return
    # 20 MiB more at 10 MB/s; the target's agent killed -9 while they move.
    path = os.path.join(lab.vm_dir(CN1, VM), "disks", "disk1.img")
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, os.urandom(20 * MIB), 105 * MIB)
    os.fsync(fd)
    os.close(fd)
    params = {"vm_uuid": VM, "migration_uuid": MIG, "addr": agent_listen("cn2"),
              "mode": "pass", "limit": 80}
    status, job = lab.create_job("t-send-cn1", "/t-send-kill-" + os.urandom(4).hex(), params)
    assert status in (200, 201), (status, job)
    seen = len(events_of(MIG))
    wait_for("the send's first progress",
             lambda: len([e for e in events_of(MIG)[seen:] if e.get("current_progress")]) > 0,
             timeout=20)
    os.kill(lab.pid("agent-cn2"), signal.SIGKILL)
    done = lab.wait_job(job["uuid"], timeout=60)
    assert done["execution"] == "failed", done["execution"]
    assert error_of(done).get("code") == "TransferFailed", error_of(done)
    lab.run("restart-agent", "cn2", "--dir", lab.dir)
    # The same address; the next pass completes what the killed one began.
    out = step("send", "cn1", migration_uuid=MIG, addr=agent_listen("cn2"),
               mode="pass")
    assert out["outcome"] == "done" and out["passes"][0]["bytes"] <= 20 * MIB, out
    dst = os.path.join(lab.vm_dir(CN2, VM), "disks", "disk1.img")
    with open(path, "rb") as a, open(dst, "rb") as b:
        a.seek(16 * MIB)
        b.seek(16 * MIB)
        assert a.read(112 * MIB) == b.read(112 * MIB)


def test_flip_and_cleanup():
    nics = [{"mac": "90:b8:d0:00:00:01", "ip": "203.0.113.10"}]
    out = step("flip", "cn2", migration_uuid=MIG, hidden=False, nics=nics)
    assert out["do_not_inventory"] is False, out
    doc = vm_json(CN2)
    assert doc["do_not_inventory"] is False and doc["nics"] == nics, doc
    # A later migration from the promoted target: it is that one's source now.
    step("flip", "cn2", migration_uuid=OTHER_MIG, hidden=True, nics=None)
    doc = vm_json(CN2)
    assert doc["do_not_inventory"] is True and "migration_target" not in doc, doc
    step("flip", "cn2", migration_uuid=OTHER_MIG, hidden=False, nics=None)
    assert vm_json(CN2)["do_not_inventory"] is False and vm_json(CN2)["nics"] == nics
    step("cleanup", "cn2", migration_uuid=MIG, remove=False)
    assert not os.path.exists(os.path.join(lab.vm_dir(CN2, VM), ".migration"))
    assert os.path.exists(os.path.join(lab.vm_dir(CN2, VM), "vm.json"))
    # The source is visible: never removed.
    job = step("cleanup", "cn1", want="failed", migration_uuid=MIG, remove=True)
    assert error_of(job).get("code") == "InvalidState", error_of(job)
    assert os.path.exists(lab.vm_dir(CN1, VM))
    # Hidden, with its workload running: stopped and removed.
    step("start", "cn1")
    with open(os.path.join(lab.vm_dir(CN1, VM), "workload.pid")) as f:
        pid = int(f.read())
    step("flip", "cn1", migration_uuid=MIG, hidden=True, nics=None)
    out = step("cleanup", "cn1", migration_uuid=MIG, remove=True)
    assert out["removed"] is True, out
    assert not os.path.exists(lab.vm_dir(CN1, VM))
    wait_for("the source's workload to end", lambda: not pid_alive(pid), timeout=10)
    # Run again: nothing left to do.
    out = step("cleanup", "cn1", migration_uuid=MIG, remove=True)
    assert out["removed"] is False, out


run_tests(lab, [test_listen_per_agent, test_source_instance, test_target_create,
                test_recv_open, test_send_and_verify, test_progress_pause_converge,
                test_target_agent_killed, test_flip_and_cleanup],
          only=sys.argv[3:])
