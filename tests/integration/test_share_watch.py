#!/usr/bin/env python3
"""volume-share-watch on a real lab: the storage instance made by dc.storage_create and
started by dc.instance_start on its server's agent (a test workflow of this file's own),
the volume and VM records written as the volume scripts leave them, and the watch run
as the lab's schedule runs it, one tick a job:

* a tick on a healthy share: running, probed; a consumer whose mount links are missing
  gets them (the link resolves to the export, its data seen through it);
* export/ renamed away: the share process exits after its failed health checks (pid
  file gone); the next tick: share error, volume failed, the consumer asked to remount;
  the next: restarted, which the share refuses (export still gone), the volume still
  failed; export/ back: the next tick restarts it, running, ready; the one after
  remounts the consumer; the data written before is intact;
* kill -9 of the share: error and failed on the next tick, ready again one tick later;
* the agent restarted: the share it did not start is found and left running;
* a share stopped on purpose (vm-stop's task): stopped, never restarted;
* the admission's refusals: a bad target, an unknown param, an unknown server.

Usage: test_share_watch.py SOURCE_ROOT BUILD_ROOT [TEST...]. Every wait is bounded and
polls what it waits for; every process is stopped by its pid (tools/lab down).
"""
import json
import os
import signal
import sys

from lab_harness import Lab, pid_alive, run_tests, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
CN1 = "a0000000-0000-4000-8000-000000000001"
NET = "b0000000-0000-4000-8000-000000000001"
OWNER = "00000000-0000-0000-0000-000000000000"
VOL = "a1000000-0000-4000-8000-000000000001"
STORAGE = "51000000-0000-4000-8000-000000000001"
CONSUMER = "c1000000-0000-4000-8000-000000000001"
NS = "tern:p:dc:"
IP = "192.168.128.200"

DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 2097152, "data_root": "servers/cn1"}],
    "networks": [{"uuid": NET, "name": "fabric", "subnet": "192.168.128.0/24",
                  "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
                  "provision_end_ip": "192.168.128.250", "vlan_id": 0, "mtu": 8500,
                  "fabric": True, "owner_uuids": [OWNER]}],
    "packages": [], "images": [],
    "settings": {"share_health_ms": 100, "share_watch_every_s": 1},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-share-watch-")


def post_workflows():
    vm = "${params.vm_uuid}"
    flows = {
        "t-storage": [
            {"name": "create", "task": "dc.storage_create",
             "args": {"vm_uuid": vm, "volume_uuid": "${params.volume_uuid}",
                      "alias": "volume-data-${params.volume_uuid}", "owner_uuid": OWNER,
                      "nics": [{"mac": "90:b8:d0:00:00:01", "ip": IP, "network_uuid": NET}]}},
            {"name": "start", "task": "dc.instance_start", "args": {"vm_uuid": vm}}],
        "t-stop": [{"name": "stop", "task": "dc.instance_stop", "args": {"vm_uuid": vm}}],
    }
    for name, chain in flows.items():
        status, body = lab.http("/workflows", "POST",
                                {"name": name, "version": "1.0.0", "queue": "server:" + CN1,
                                 "chain": chain})
        assert status == 201, (name, status, body)


def storage_dir():
    return lab.vm_dir(CN1, STORAGE)


def export():
    return os.path.join(storage_dir(), "export")


def link():
    return os.path.join(lab.vm_dir(CN1, CONSUMER), "mounts", "data", "shared")


def share_pid():
    try:
        with open(os.path.join(storage_dir(), "workload.pid")) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def record(key):
    return json.loads("\n".join(lab.redis("GET", NS + key)))


def volume():
    return record("volume:" + VOL)


def tick(want="succeeded"):
    """One tick of the watch, as the lab's schedule runs it: the finished job."""
    job = lab.run_job("volume-share-watch", "/volume-share-watch-" + CN1,
                      {"server_uuid": CN1}, timeout=60)
    assert job["execution"] == want, json.dumps(job, indent=1)
    return {r["name"]: r.get("result") for r in job["chain_results"]}


def states():
    v = volume()
    return v["state"], v["share_state"]


def test_setup():
    post_workflows()
    job = lab.run_job("t-storage", f"/t-storage-{STORAGE}", {"vm_uuid": STORAGE,
                                                            "volume_uuid": VOL})
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    pid = share_pid()
    assert pid and pid_alive(pid)
    with open(os.path.join(export(), "data.txt"), "w") as f:
        f.write("written before\n")
    # The records as volume-create and a provision that mounts the volume leave them.
    vol = {"uuid": VOL, "owner_uuid": OWNER, "name": "data", "type": "tritonnfs",
           "create_timestamp": "2026-11-26T12:00:00.000Z", "state": "ready",
           "networks": [NET], "snapshots": [], "tags": {}, "billing_id": None,
           "refs": [CONSUMER], "filesystem_path": IP + ":/exports/data", "vm_uuid": STORAGE,
           "size": 10240, "server_uuid": CN1, "export_path": export(),
           "share_state": "running", "share_endpoint": f"nfs://{IP}/data",
           "share_probed_at": None, "error_since": None, "created_by_job": None,
           "job_uuid": None, "version": 1}
    lab.redis("SET", NS + "volume:" + VOL, json.dumps(vol))
    lab.redis("ZADD", NS + "volumes:state:ready", "0", VOL)
    lab.redis("SET", NS + "vm:" + STORAGE, json.dumps(
        {"uuid": STORAGE, "server_uuid": CN1, "state": "running", "volume_uuid": VOL,
         "internal_metadata": {"sdc:system_role": "nfsvolumestorage"}}))
    mount = {"name": "data", "volume_uuid": VOL, "mountpoint": "/data/shared", "mode": "rw",
             "type": "tritonnfs"}
    lab.redis("SET", NS + "vm:" + CONSUMER, json.dumps(
        {"uuid": CONSUMER, "server_uuid": CN1, "state": "running", "volumes": [mount]}))
    os.makedirs(lab.vm_dir(CN1, CONSUMER))
    with open(os.path.join(lab.vm_dir(CN1, CONSUMER), "vm.json"), "w") as f:
        json.dump({"uuid": CONSUMER, "state": "running", "workload": "idle",
                   "volumes": [dict(mount, nfsvolume=IP + ":/exports/data",
                                    export_path=export())]}, f)


def test_healthy_tick_and_links():
    out = tick()
    assert out["probe"]["storage"] == [{"vm_uuid": STORAGE, "volume_uuid": VOL,
                                        "state": "running", "alive": True,
                                        "pid": share_pid()}], out["probe"]
    assert out["probe"]["consumers"] == [{"vm_uuid": CONSUMER, "mounts_ok": False}]
    # exports: where each remounted consumer's volumes are served (a storage instance
    # migrated moves it); here where it always was.
    assert out["apply"] == {"restart": [], "remount": [CONSUMER],
                            "exports": {VOL: volume()["export_path"]}}, out["apply"]
    assert out["restart"]["remounted"] == [CONSUMER], out["restart"]
    assert states() == ("ready", "running")
    assert volume()["share_probed_at"] is not None
    assert os.readlink(link()) == export()
    with open(os.path.join(link(), "data.txt")) as f:
        assert f.read() == "written before\n"
    assert record("vm:" + CONSUMER)["remounted_at"] is not None


def test_export_gone_then_back():
    pid = share_pid()
    os.rename(export(), export() + ".away")
    # Its health checks fail 3 times (100 ms apart): the process ends, pid file gone.
    wait_for(f"share pid {pid} to exit", lambda: not pid_alive(pid), timeout=10)
    assert share_pid() is None
    out = tick()
    assert out["apply"] == {"restart": [], "remount": []}, out
    assert states() == ("failed", "error")
    first = volume()["error_since"]
    asked = record("vm:" + CONSUMER)["remount_requested_at"]
    assert first and asked == first
    # Seen dead by an earlier tick: restarted; the share refuses (no export).
    out = tick()
    assert out["apply"]["restart"] == [STORAGE], out
    assert out["restart"]["started"] == [] and \
        out["restart"]["failed"][0]["vm_uuid"] == STORAGE, out["restart"]
    assert "refusing to start" in out["restart"]["failed"][0]["reason"], out["restart"]
    assert states() == ("failed", "starting")
    assert volume()["error_since"] == first
    assert record("vm:" + CONSUMER)["remount_requested_at"] > asked
    assert share_pid() is None
    # The export back: the next tick restarts it; the one after remounts the consumer.
    os.rename(export() + ".away", export())
    out = tick()
    assert out["restart"]["started"] == [STORAGE], out
    assert states() == ("ready", "running")
    assert volume()["error_since"] is None
    pid2 = share_pid()
    assert pid2 and pid2 != pid and pid_alive(pid2)
    remounted = record("vm:" + CONSUMER)["remounted_at"]
    out = tick()
    assert out["apply"] == {"restart": [], "remount": [CONSUMER],
                            "exports": {VOL: volume()["export_path"]}}, out
    assert record("vm:" + CONSUMER)["remounted_at"] > remounted
    with open(os.path.join(link(), "data.txt")) as f:
        assert f.read() == "written before\n"
    out = tick()
    assert out["apply"] == {"restart": [], "remount": []}, out


def test_kill_9():
    pid = share_pid()
    os.kill(pid, signal.SIGKILL)
    wait_for(f"share pid {pid} to die", lambda: not pid_alive(pid))
    tick()
    assert states() == ("failed", "error")
    out = tick()
    assert out["restart"]["started"] == [STORAGE], out
    assert states() == ("ready", "running")
    assert share_pid() != pid


def test_agent_restart():
    pid = share_pid()
    lab.run("restart-agent", "cn1", "--dir", lab.dir)
    out = tick()
    assert out["probe"]["storage"][0]["pid"] == pid and pid_alive(pid), out
    assert out["apply"]["restart"] == [] and states() == ("ready", "running")


def test_stopped_on_purpose():
    pid = share_pid()
    job = lab.run_job("t-stop", f"/t-stop-{STORAGE}", {"vm_uuid": STORAGE})
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    assert not pid_alive(pid)
    for _ in range(3):
        out = tick()
        assert out["apply"]["restart"] == [], out
    assert states() == ("ready", "stopped")
    assert share_pid() is None


def test_admission():
    for target, params, status, part in (
            ("/volume-share-watch-x", {"server_uuid": CN1}, 422, "has the target"),
            ("/volume-share-watch-" + CN1, {"server_uuid": CN1, "x": 1}, 422, "x: unknown"),
            ("/volume-share-watch-" + NET, {"server_uuid": NET}, 404, "does not exist")):
        code, body = lab.create_job("volume-share-watch", target, params)
        assert code == status and part in json.dumps(body), (code, body)


def main():
    tests = [test_setup, test_healthy_tick_and_links, test_export_gone_then_back, test_kill_9,
             test_agent_restart, test_stopped_on_purpose, test_admission]
    run_tests(lab, tests, only=sys.argv[3:])


main()
