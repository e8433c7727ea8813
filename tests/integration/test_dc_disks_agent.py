#!/usr/bin/env python3
"""The agent's disk tasks on a real lab: jobs on a server's queue (test workflows of
this file's own, posted to /workflows) run dc.disk_apply, dc.disk_usage and dc.disk_undo
inside the server's agent, and every step is checked on the files: sizes, sparseness,
checksums of the first MiB before and after, file names by PCI slot, snapshot
directories, no .part left, and vm.json agreeing with the files.

* an instance made with disk ids and slots (0:4:0 and 0:4:2);
* a disk added in 0:4:1, resized (grow keeps the bytes, adds a hole), deleted (its
  snapshot copies with it); snapshots made, measured (3 blocks overwritten = 12288
  bytes; writes into holes count nothing), deleted; an add undone;
* the agent killed -9 in the middle of a long snapshot copy (a boot disk holding 768 MiB
  of data): restarted, the step runs again and leaves the snapshot whole, vm.json
  agreeing, no .part anywhere;
* destroy removes the snapshots with the instance.

Usage: test_dc_disks_agent.py SOURCE_ROOT BUILD_ROOT [TEST...]. Every wait is bounded
and polls what it waits for; every process is stopped by its pid (tools/lab down).
"""
import glob
import hashlib
import json
import os
import signal
import sys
import time

from lab_harness import Lab, wait_for, run_tests

SOURCE, BUILD = sys.argv[1], sys.argv[2]
MIB = 1024 * 1024
CN1 = "a0000000-0000-4000-8000-000000000001"
NET = "b0000000-0000-4000-8000-000000000001"
OS_IMG = "d0000000-0000-4000-8000-000000000001"   # 4 MiB of data
BIG_IMG = "d0000000-0000-4000-8000-000000000002"  # 768 MiB: a copy that takes a moment
VM = "e0000000-0000-4000-8000-000000000001"
VM_BIG = "e0000000-0000-4000-8000-000000000002"
BOOT, DATA, ADDED, OTHER = ("f0000000-0000-4000-8000-000000000001",
                            "f0000000-0000-4000-8000-000000000002",
                            "f0000000-0000-4000-8000-000000000003",
                            "f0000000-0000-4000-8000-000000000004")

DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 2097152, "data_root": "servers/cn1"}],
    "networks": [{"uuid": NET, "name": "external", "subnet": "203.0.113.0/24",
                  "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
                  "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500}],
    "packages": [],
    "images": [
        {"uuid": OS_IMG, "name": "lab-os", "version": "1.0", "size_mib": 10240,
         "data_mib": 4, "file": "images/lab-os.img", "brand": "bhyve"},
        {"uuid": BIG_IMG, "name": "lab-big", "version": "1.0", "size_mib": 10240,
         "data_mib": 768, "file": "images/lab-big.img", "brand": "bhyve"},
    ],
    "settings": {},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-disks-agent-")
RETRY = {"max_attempts": 5, "backoff": "exponential", "initial_ms": 100, "max_ms": 1000}


def post_workflows():
    queue = "server:" + CN1
    vm = "${params.vm_uuid}"
    flows = {
        "t-instance": [
            {"name": "image", "task": "dc.image_ensure",
             "args": {"image_uuid": "${params.image_uuid}"}},
            {"name": "create", "task": "dc.instance_create",
             "args": {"vm_uuid": vm, "image_uuid": "${params.image_uuid}",
                      "disks": "${params.disks}"}}],
        "t-apply": [{"name": "apply", "task": "dc.disk_apply", "retry": RETRY,
                     "args": {"vm_uuid": vm, "change": "${params.change}"}}],
        "t-undo": [{"name": "undo", "task": "dc.disk_undo", "retry": RETRY,
                    "args": {"vm_uuid": vm, "change": "${params.change}"}}],
        "t-usage": [{"name": "usage", "task": "dc.disk_usage", "args": {"vm_uuid": vm}}],
        "t-destroy": [{"name": "destroy", "task": "dc.instance_destroy",
                       "args": {"vm_uuid": vm}}],
    }
    for name, chain in flows.items():
        status, body = lab.http("/workflows", "POST",
                                {"name": name, "version": "1.0.0", "queue": queue,
                                 "chain": chain})
        assert status == 201, (name, status, body)


def step(workflow, params, want="succeeded"):
    """Runs a test workflow to its end: the result of its one agent step (the last)."""
    job = lab.run_job(workflow, f"/{workflow}-{params['vm_uuid']}-{os.urandom(4).hex()}",
                      params)
    assert job["execution"] == want, json.dumps(job, indent=1)
    if want != "succeeded":
        return job
    return job["chain_results"][-1]["result"]


def apply(vm, change, want="succeeded"):
    return step("t-apply", {"vm_uuid": vm, "change": change}, want)


def vm_dir(vm):
    return lab.vm_dir(CN1, vm)


def disk_file(vm, function):
    return os.path.join(vm_dir(vm), "disks", f"disk{function}.img")


def checksum(path, length):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(length))
    return h.hexdigest()


def write_at(path, at, byte, length):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes([byte]) * length, at)
        os.fsync(fd)
    finally:
        os.close(fd)


def usage_of(answer, slot):
    for d in answer["disks"]:
        if d["pci_slot"] == slot:
            return d
    return None


def agrees(vm, snapshots):
    """vm.json agrees with the files; its snapshots are `snapshots`, oldest first; no
    .part anywhere. Returns vm.json."""
    with open(os.path.join(vm_dir(vm), "vm.json")) as f:
        doc = json.load(f)
    functions = [int(d["pci_slot"].split(":")[2]) for d in doc["disks"]]
    assert functions == sorted(functions), doc["disks"]
    for d, fn in zip(doc["disks"], functions):
        assert d["path"] == disk_file(vm, fn), d
        assert os.stat(d["path"]).st_size == d["size"] * MIB, d
    on_disk = sorted(os.listdir(os.path.join(vm_dir(vm), "disks")))
    assert on_disk == [f"disk{fn}.img" for fn in sorted(functions)], on_disk
    assert [s["name"] for s in doc.get("snapshots", [])] == snapshots, doc.get("snapshots")
    snap_dir = os.path.join(vm_dir(vm), "snapshots")
    have = sorted(os.listdir(snap_dir)) if os.path.isdir(snap_dir) else []
    assert have == sorted(snapshots), have
    assert not glob.glob(os.path.join(vm_dir(vm), "**", "*.part"), recursive=True)
    return doc


# ---- the tests --------------------------------------------------------------------------

def test_disks_and_snapshots():
    post_workflows()
    made = step("t-instance", {"vm_uuid": VM, "image_uuid": OS_IMG, "disks": [
        {"id": BOOT, "boot": True, "image": OS_IMG, "size": 10240, "pci_slot": "0:4:0"},
        {"id": DATA, "size": 20480, "pci_slot": "0:4:2"}]})
    assert [(d["id"], d["pci_slot"], d["path"]) for d in made["disks"]] == [
        (BOOT, "0:4:0", disk_file(VM, 0)), (DATA, "0:4:2", disk_file(VM, 2))], made
    agrees(VM, [])

    # add into 0:4:1: sparse, exact; run twice = once.
    add = {"op": "add", "id": ADDED, "pci_slot": "0:4:1", "new_size": 30000}
    answer = apply(VM, add)
    assert usage_of(answer, "0:4:1")["size"] == 30000, answer
    st = os.stat(disk_file(VM, 1))
    assert st.st_size == 30000 * MIB and st.st_blocks == 0, st
    apply(VM, add)
    assert os.stat(disk_file(VM, 1)).st_ino == st.st_ino
    agrees(VM, [])

    # grow: the first bytes identical, the new range a hole.
    write_at(disk_file(VM, 2), 0, 0x5a, 2 * MIB)
    before = checksum(disk_file(VM, 2), 2 * MIB)
    answer = apply(VM, {"op": "resize", "id": DATA, "pci_slot": "0:4:2", "old_size": 20480,
                        "new_size": 102400})
    assert usage_of(answer, "0:4:2")["size"] == 102400, answer
    assert usage_of(answer, "0:4:2")["data_bytes"] == 2 * MIB, answer
    assert checksum(disk_file(VM, 2), 2 * MIB) == before
    assert os.stat(disk_file(VM, 2)).st_blocks * 512 <= 2 * MIB + 64 * 1024
    agrees(VM, [])

    # A snapshot: 0 bytes; 3 blocks of the boot disk's data overwritten: 12288, 1 MiB;
    # writes into holes count nothing.
    answer = apply(VM, {"op": "snapshot_create", "name": "s1"})
    assert [usage_of(answer, s)["snapshot_bytes"] for s in ("0:4:0", "0:4:1", "0:4:2")] == \
        [0, 0, 0], answer
    assert answer["snapshots"] == ["s1"], answer
    boot_before = checksum(disk_file(VM, 0), MIB)
    write_at(disk_file(VM, 0), 8192, 0x11, 3 * 4096)
    write_at(disk_file(VM, 0), 5000 * MIB, 0x12, MIB)
    write_at(disk_file(VM, 1), 0, 0x13, MIB)
    usage = step("t-usage", {"vm_uuid": VM})
    assert usage_of(usage, "0:4:0")["snapshot_bytes"] == 3 * 4096, usage
    assert usage_of(usage, "0:4:0")["snapshot_size"] == 1, usage
    assert usage_of(usage, "0:4:1")["snapshot_bytes"] == 0, usage
    copy = os.path.join(vm_dir(VM), "snapshots", "s1", "disk0.img")
    assert checksum(copy, MIB) == boot_before
    agrees(VM, ["s1"])

    # delete the added disk: its file and its copy in s1 gone, the others in place.
    answer = apply(VM, {"op": "delete", "id": ADDED, "pci_slot": "0:4:1"})
    assert usage_of(answer, "0:4:1") is None, answer
    assert not os.path.exists(disk_file(VM, 1))
    assert not os.path.exists(os.path.join(vm_dir(VM), "snapshots", "s1", "disk1.img"))
    assert os.path.exists(os.path.join(vm_dir(VM), "snapshots", "s1", "disk2.img"))
    agrees(VM, ["s1"])

    # a refused change: another VM's, a slot another disk holds; nothing changed.
    job = apply(VM, {"op": "resize", "vm_uuid": VM_BIG, "id": DATA, "new_size": 10},
                want="failed")
    assert "InvalidArgument" in json.dumps(job), job
    job = apply(VM, {"op": "add", "id": OTHER, "pci_slot": "0:4:2", "new_size": 10},
                want="failed")
    assert "holds disk " + DATA in json.dumps(job), job
    assert os.stat(disk_file(VM, 2)).st_size == 102400 * MIB

    # undo of an add that got as far as its file: removed.
    add3 = {"op": "add", "id": OTHER, "pci_slot": "0:4:3", "new_size": 64}
    apply(VM, add3)
    answer = step("t-undo", {"vm_uuid": VM, "change": add3})
    assert usage_of(answer, "0:4:3") is None, answer
    assert not os.path.exists(disk_file(VM, 3))
    agrees(VM, ["s1"])

    answer = apply(VM, {"op": "snapshot_delete", "name": "s1"})
    assert answer["snapshots"] == [], answer
    assert all(d["snapshot_bytes"] == 0 for d in answer["disks"]), answer
    agrees(VM, [])
    step("t-destroy", {"vm_uuid": VM})
    assert not os.path.exists(vm_dir(VM))


def test_agent_killed_mid_snapshot():
    step("t-instance", {"vm_uuid": VM_BIG, "image_uuid": BIG_IMG, "disks": [
        {"id": BOOT, "size": 10240}, {"id": DATA, "size": 1024}]})
    live = checksum(disk_file(VM_BIG, 0), 768 * MIB)
    part = os.path.join(vm_dir(VM_BIG), "snapshots", "s2.part")
    status, job = lab.create_job("t-apply", "/t-apply-killed", {
        "vm_uuid": VM_BIG, "change": {"op": "snapshot_create", "name": "s2"}})
    assert status == 201, (status, job)
    # The .part directory appears when the copy begins; the copy of 768 MiB of data
    # takes a moment, the window in which the agent is killed.
    wait_for("the snapshot copy to begin", lambda: os.path.isdir(part), timeout=60, every=0.002)
    agent = lab.pid("agent-cn1")
    os.kill(agent, signal.SIGKILL)
    mid_copy = os.path.isdir(part)
    wait_for("the agent to die", lambda: not os.path.exists(f"/proc/{agent}/cmdline") or
             open(f"/proc/{agent}/stat").read().split(") ")[1][0] in "ZX")
    lab.run("restart-agent", "cn1", "--dir", lab.dir)
    end = lab.wait_job(job["uuid"], timeout=180)
    assert end["execution"] == "succeeded", json.dumps(end, indent=1)
    agrees(VM_BIG, ["s2"])
    copy = os.path.join(vm_dir(VM_BIG), "snapshots", "s2", "disk0.img")
    assert os.stat(copy).st_size == 10240 * MIB
    assert checksum(copy, 768 * MIB) == live
    t0 = time.monotonic()
    answer = step("t-usage", {"vm_uuid": VM_BIG})
    took = time.monotonic() - t0
    assert usage_of(answer, "0:4:0")["snapshot_bytes"] == 0, answer
    assert usage_of(answer, "0:4:0")["data_bytes"] == 768 * MIB, answer
    print(f"agent killed {'during' if mid_copy else 'after'} the snapshot copy; "
          f"vm-disk-usage job measuring 768 MiB of snapshot data: {took:.2f} s")
    step("t-destroy", {"vm_uuid": VM_BIG})
    assert not os.path.exists(vm_dir(VM_BIG))


if __name__ == "__main__":
    run_tests(lab, [test_disks_and_snapshots, test_agent_killed_mid_snapshot],
              only=sys.argv[3:])
