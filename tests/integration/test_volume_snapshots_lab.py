#!/usr/bin/env python3
"""A shared volume's snapshots, rollback and networks end to end on a real lab (tools/lab
up on a description of the test's own): the five workflows through POST /jobs, their
admission refusals, the agent's steps on the storage server, the records after.

Until volume-create exists on this tree the storage instance is made by hand from an
ordinary provision: a joyent instance provisioned on the owner's fabric network, its
vm.json given role nfsvolumestorage and an export/ of files, and a volume record
written into Redis as volume-create leaves one (ready, its share running). Its
workload (idle) stands in for the share process: the rollback stops and starts it.

* Acceptance 28: snapshot s1 (created), s1 again refused at POST /jobs; write X,
  snapshot s2, write Y, roll back to s1: neither X nor Y, s2 gone from the record and
  the server, the volume ready and its share running, the share process started again.
* 29 (the refusal for space itself is the unit test's): a snapshot job failing on the
  server leaves the snapshot failed and the volume ready with its data unchanged; the
  job retried makes it.
* A snapshot job canceled gives the volume back (oncancel runs the failure's steps).
* 31: attach to a second fabric network -> 2 networks, 2 NICs on the instance (record
  and vm.json); detach -> 1, the address freed; attach to a non-fabric network refused.
* 4.4 test 7: the rollback's steps stop, then start the share; the record goes
  rolling_back -> ready (polled while the job runs).

Usage: test_volume_snapshots_lab.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded;
tools/lab down stops what the lab started, by pid.
"""
import hashlib
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import Lab, run_tests, workload_pids  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
OWNER = "00000000-0000-0000-0000-000000000000"
OTHER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"
CN1 = "a0000000-0000-4000-8000-000000000001"
EXTERNAL = "b0000000-0000-4000-8000-000000000001"
FABRIC = "b0000000-0000-4000-8000-000000000002"
FABRIC2 = "b0000000-0000-4000-8000-000000000003"
ZONE = "c0000000-0000-4000-8000-000000000002"
BASE_IMG = "d0000000-0000-4000-8000-000000000004"
STORAGE = "e0000000-0000-4000-8000-000000000001"
VOL = "f0000000-0000-4000-8000-000000000001"
NS = "tern:p:dc:"

DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 2097152, "data_root": "servers/cn1"}],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500, "fabric": True,
         "owner_uuids": [OWNER]},
        {"uuid": FABRIC2, "name": "fabric2", "subnet": "192.168.129.0/24",
         "gateway": "192.168.129.1", "provision_start_ip": "192.168.129.200",
         "provision_end_ip": "192.168.129.250", "vlan_id": 129, "mtu": 8500, "fabric": True},
    ],
    "packages": [{"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512,
                  "vcpus": 1, "disk_mib": 10240}],
    "images": [{"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
                "file": "images/lab-base.img", "brand": "joyent"}],
    "settings": {"max_snapshots_per_volume": 3},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-volsnap-")


def volume():
    return json.loads("\n".join(lab.redis("GET", NS + "volume:" + VOL)))


def export_dir():
    return os.path.join(lab.vm_dir(CN1, STORAGE), "export")


def tree(path):
    """{relative path: sha256 of the content} of every file under path."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def write(rel, data):
    with open(os.path.join(export_dir(), rel), "wb") as f:
        f.write(data)


def params(**kw):
    return dict({"volume_uuid": VOL, "owner_uuid": OWNER}, **kw)


def job(workflow, **kw):
    j = lab.run_job(workflow, f"/{workflow}-{VOL}", params(**kw))
    assert j["execution"] == "succeeded", json.dumps(j, indent=1)[:3000]
    return j


def refused(workflow, status, code, part, **kw):
    got, body = lab.create_job(workflow, f"/{workflow}-{VOL}", params(**kw))
    text = json.dumps(body)
    assert got == status and code in text and part in text, (workflow, got, body)


def make_storage_instance():
    j = lab.run_job("provision", "/provision-" + STORAGE, {
        "vm_uuid": STORAGE, "owner_uuid": OWNER, "package": "lab-zone", "image_uuid": BASE_IMG,
        "networks": [{"uuid": FABRIC, "primary": True}]})
    assert j["execution"] == "succeeded", json.dumps(j)[:2000]
    vm_json = os.path.join(lab.vm_dir(CN1, STORAGE), "vm.json")
    with open(vm_json) as f:
        doc = json.load(f)
    doc["role"] = "nfsvolumestorage"
    with open(vm_json, "w") as f:
        json.dump(doc, f)
    os.mkdir(export_dir())
    os.mkdir(os.path.join(export_dir(), "www"))
    write("www/index.html", b"<h1>hello</h1>\n")
    write("data.bin", os.urandom(3 * 1024 * 1024))
    ip = lab.vm_of(STORAGE)["nics"][0]["ip"]
    v = {"uuid": VOL, "owner_uuid": OWNER, "name": "wp-uploads", "type": "tritonnfs",
         "create_timestamp": "2026-11-26T11:00:00.000Z", "state": "ready",
         "networks": [FABRIC], "snapshots": [], "tags": {}, "billing_id": None, "refs": [],
         "filesystem_path": ip + ":/exports/data", "vm_uuid": STORAGE, "size": 10240,
         "server_uuid": CN1, "export_path": export_dir(), "share_state": "running",
         "share_endpoint": f"nfs://{ip}/wp-uploads", "share_probed_at": None,
         "error_since": None, "created_by_job": None, "job_uuid": None, "version": 1}
    lab.redis("SET", NS + "volume:" + VOL, json.dumps(v))
    lab.redis("ZADD", NS + "volumes:state:ready", "0", VOL)


def test_snapshots_and_rollback():
    """Acceptance 28, 4.4 test 7."""
    make_storage_instance()
    at_s1 = tree(export_dir())
    j = job("volume-snapshot-create", name="s1")
    assert [r["name"] for r in j["chain_results"]] == ["begin", "copy", "commit"], j
    assert volume()["snapshots"][0]["state"] == "created", volume()
    assert tree(os.path.join(lab.vm_dir(CN1, STORAGE), "snapshots", "s1")) == at_s1
    refused("volume-snapshot-create", 409, "VolumeSnapshotAlreadyExists", "named s1", name="s1")

    write("X", b"x" * 4096)
    job("volume-snapshot-create", name="s2")
    write("www/Y", b"y" * 4096)
    write("www/index.html", b"changed\n")
    pid_before = workload_pids(lab.vm_dir(CN1, STORAGE))
    assert len(pid_before) == 1, pid_before

    # Watch the record while the rollback runs.
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            v = volume()
            pair = (v["state"], v["share_state"])
            if not seen or seen[-1] != pair:
                seen.append(pair)
    t = threading.Thread(target=watch)
    t.start()
    try:
        j = job("volume-rollback", name="s1")
    finally:
        stop.set()
        t.join(timeout=30)
    assert [r["name"] for r in j["chain_results"]] == [
        "begin", "stop", "rollback", "starting", "start", "commit"], j
    # What the polls saw is in the order of the state machine (a poll may miss a
    # short-lived pair, never reorder them), and ends ready and running.
    order = [("ready", "running"), ("rolling_back", "stopped"), ("rolling_back", "starting"),
             ("ready", "running")]
    at = 0
    for pair in seen:
        while at < len(order) and order[at] != pair:
            at += 1
        assert at < len(order), f"the rollback went through {seen}"
    assert seen[-1] == ("ready", "running"), seen
    print(f"# the record during the rollback: {seen}")
    assert tree(export_dir()) == at_s1, "the export is not s1's"
    v = volume()
    assert [s["name"] for s in v["snapshots"]] == ["s1"] and v["state"] == "ready" and \
        v["share_state"] == "running" and v["job_uuid"] is None, v
    assert not os.path.exists(os.path.join(lab.vm_dir(CN1, STORAGE), "snapshots", "s2"))
    pid_after = workload_pids(lab.vm_dir(CN1, STORAGE))
    assert len(pid_after) == 1 and pid_after != pid_before, (pid_before, pid_after)

    # The limit (3 in this description), then a delete makes room.
    job("volume-snapshot-create", name="s2")
    job("volume-snapshot-create", name="s3")
    refused("volume-snapshot-create", 409, "SnapshotLimitExceeded", "max_snapshots_per_volume 3",
            name="s4")
    job("volume-snapshot-delete", name="s3")
    assert [s["name"] for s in volume()["snapshots"]] == ["s1", "s2"]
    assert not os.path.exists(os.path.join(lab.vm_dir(CN1, STORAGE), "snapshots", "s3"))
    refused("volume-snapshot-delete", 404, "VolumeSnapshotNotFound", "no snapshot named s9",
            name="s9")
    refused("volume-rollback", 422, "InvalidArgument", "params.colour", name="s1", colour="red")
    got, body = lab.create_job("volume-rollback", f"/volume-rollback-{VOL}",
                               params(name="s1", owner_uuid=OTHER))
    assert got == 404 and "VolumeNotFound" in json.dumps(body), (got, body)


def test_a_failed_snapshot_leaves_the_volume_ready():
    """29: the copy fails on the server (here: a snapshots/ that is not a directory of
    its own); the snapshot is failed, the volume ready, the data unchanged."""
    snaps = os.path.join(lab.vm_dir(CN1, STORAGE), "snapshots")
    os.rename(snaps, snaps + ".kept")
    with open(snaps, "w") as f:
        f.write("not a directory")
    data = tree(export_dir())
    try:
        j = lab.run_job("volume-snapshot-create", f"/volume-snapshot-create-{VOL}",
                        params(name="broken"))
        assert j["execution"] == "failed", j
        assert [r["name"] for r in j["onerror_results"]] == ["fail"], j
    finally:
        os.unlink(snaps)
        os.rename(snaps + ".kept", snaps)
    v = volume()
    assert v["state"] == "ready" and v["snapshots"][-1]["name"] == "broken" and \
        v["snapshots"][-1]["state"] == "failed" and v["job_uuid"] is None, v
    assert tree(export_dir()) == data
    # A new job of that name is refused; the failed job retried (from begin) takes the
    # failed snapshot back and makes it.
    refused("volume-snapshot-create", 409, "VolumeSnapshotAlreadyExists", "named broken",
            name="broken")
    status, body = lab.http(f"/jobs/{j['uuid']}/retry", "POST", {})
    assert status == 200, (status, body)
    again = lab.wait_job(j["uuid"])
    assert again["execution"] == "succeeded", json.dumps(again)[:3000]
    v = volume()
    assert v["snapshots"][-1]["name"] == "broken" and v["snapshots"][-1]["state"] == "created"
    assert tree(os.path.join(snaps, "broken")) == data
    job("volume-snapshot-delete", name="broken")
    assert [s["name"] for s in volume()["snapshots"]] == ["s1", "s2"]


def test_a_canceled_snapshot_gives_the_volume_back():
    """A snapshot job canceled (most often mid-copy of 256 MiB): the job ends, the
    volume is no job's, the snapshot is created (the copy won the race) or failed
    (canceled), no partial copy is left, the data unchanged."""
    for i in range(8):
        write(f"bulk{i}", os.urandom(32 * 1024 * 1024))
    data = tree(export_dir())
    status, j = lab.create_job("volume-snapshot-create", f"/volume-snapshot-create-{VOL}",
                               params(name="canceled"))
    assert status == 201, (status, j)
    lab.http(f"/jobs/{j['uuid']}/cancel", "POST", {})
    j = lab.wait_job(j["uuid"])
    v = volume()
    snap = [s for s in v["snapshots"] if s["name"] == "canceled"]
    assert v["job_uuid"] is None and v["state"] == "ready", v
    if j["execution"] == "canceled":
        # A job canceled before it started ends at once, with nothing to give back.
        assert [r["name"] for r in j.get("oncancel_results") or []] in ([], ["cancel"]), j
        assert snap == [] or snap[0]["state"] == "failed", v
    else:
        assert j["execution"] == "succeeded" and snap[0]["state"] == "created", (j, v)
    print(f"# the snapshot job ended {j['execution']}")
    snaps = os.path.join(lab.vm_dir(CN1, STORAGE), "snapshots")
    assert not [n for n in os.listdir(snaps) if n.endswith(".part")], os.listdir(snaps)
    assert tree(export_dir()) == data
    if snap:
        job("volume-snapshot-delete", name="canceled")
    for i in range(8):
        os.unlink(os.path.join(export_dir(), f"bulk{i}"))


def test_attach_and_detach():
    """31."""
    refused("volume-attach-network", 422, "InvalidArgument", "is not a fabric network",
            network_uuid=EXTERNAL)
    refused("volume-detach-network", 422, "InvalidArgument", "is the last network",
            network_uuid=FABRIC)
    first_ip = lab.vm_of(STORAGE)["nics"][0]["ip"]
    job("volume-attach-network", network_uuid=FABRIC2)
    v, vm = volume(), lab.vm_of(STORAGE)
    assert v["networks"] == [FABRIC, FABRIC2] and len(vm["nics"]) == 2, (v, vm)
    with open(os.path.join(lab.vm_dir(CN1, STORAGE), "vm.json")) as f:
        on_disk = json.load(f)
    assert [n["mac"] for n in on_disk["nics"]] == [n["mac"] for n in vm["nics"]], on_disk
    assert len(workload_pids(lab.vm_dir(CN1, STORAGE))) == 1
    job("volume-detach-network", network_uuid=FABRIC)
    v, vm = volume(), lab.vm_of(STORAGE)
    assert v["networks"] == [FABRIC2] and len(vm["nics"]) == 1, (v, vm)
    assert vm["nics"][0]["network_uuid"] == FABRIC2 and vm["nics"][0]["primary"] is True
    taken = {r["ip"] for r in lab.list_all(f"/networks/{FABRIC}/ips") if r["state"] == "taken"}
    assert first_ip not in taken, taken
    assert v["filesystem_path"] == vm["nics"][0]["ip"] + ":/exports/data", v
    lab.check_inventory()


if __name__ == "__main__":
    run_tests(lab, [test_snapshots_and_rollback, test_a_failed_snapshot_leaves_the_volume_ready,
                    test_a_canceled_snapshot_gives_the_volume_back, test_attach_and_detach],
              only=sys.argv[3:])
