#!/usr/bin/env python3
"""Disk operations on flexible disk instances, on a real lab (tools/lab up on
disk_lab.DATACENTER, with its own Redis, control ternd and one agent per server),
through the workflows disk-add, disk-resize, disk-delete, vm-snapshot-create,
vm-snapshot-delete and vm-disk-usage: grows (while running too) that keep every byte,
the shrink guard, the space rule with snapshots measured fresh, "remaining", sticky
PCI slots, add/delete only while stopped, two concurrent grows of which exactly one
fits, an agent killed -9 mid-resize, the control ternd killed -9 (and restarted with
`tools/lab restart-control`) at each point of a resize, the scenario "resize while
running, then shrink guard", and every kind of bad input. test_N_* is acceptance test
N of the flexible disk rules (docs/DISKS.md); test_disks.py has the others.

Every test checks the records AND the data plane (disk_lab.check_vm): each disk's file
is disk<N>.img for PCI slot 0:4:N with an apparent size of exactly size * 2^20;
free_space is flexible_disk_size - the sizes - the snapshot sizes; vm.json's disks are
the record's; no `.part` is left; the snapshots on disk are the record's. Growth keeps
every byte (content digests before and after) and adds a hole (SEEK_DATA finds nothing
past the old end); a shrink keeps the first `size` MiB; a refused request changes no
file and no record and stores no job (disk_lab.fingerprint). A few MiB written with
pwrite stand in for a guest's writes, so snapshot sizes are checked to the MiB.

Usage: test_disk_ops.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into. Every wait is bounded and polls what it waits for;
the lab's processes are stopped by pid (tools/lab down); the one agent this test kills
(and the one it pauses), and the control ternd, are checked to be what they are first.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid as uuidlib

import disk_lab
from disk_lab import (MAX_DISK, CN2, ONE, MIB, content_digest, data_from, allocated,
                      guest_write, vm_dir, check_vm, disk, fingerprint, provision_params,
                      provision, disk_job, ok_disk, refused, step_result, power, delete,
                      usage, agent_of, dead)
from lab_harness import run_tests, wait_for, workload_pids

SOURCE, BUILD = sys.argv[1], sys.argv[2]
WORKLOAD = os.path.join(BUILD, "lab", "tern-workload")
lab = disk_lab.open_lab(SOURCE, BUILD, "tern-disk-ops-")


# ---- resize: tests 11-15, 24 --------------------------------------------------------

def test_11_grow_without_space():
    """The default layout leaves nothing free: a grow of the data disk is refused at
    once, with the disk and the numbers, and the file keeps its size."""
    vm_uuid = provision()
    vm = check_vm(vm_uuid)
    data = disk(vm, "0:4:1")
    body = refused("disk-resize", vm_uuid, 409, "InsufficientSpace",
                   ["0:4:1", data["id"], "92160", "102400", "10240"], pci_slot="0:4:1",
                   size=102400)
    assert "free_space is 0" in body["message"], body
    # The same by id.
    refused("disk-resize", vm_uuid, 409, "InsufficientSpace", ["0:4:1"], id=data["id"],
            size=102400)
    assert os.stat(data["path"]).st_size == 92160 * MIB
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_12_grow_boot():
    """Layout [{}] running: the boot disk grows 10240 -> 20480 while the instance runs;
    its first 10240 MiB are byte for byte the same, the new 10240 a hole."""
    vm_uuid = provision(package=ONE, autoboot=True)
    vm = check_vm(vm_uuid)
    pids = workload_pids(vm_dir(vm_uuid))
    assert len(pids) == 1, pids
    boot = disk(vm, "0:4:0")
    before = content_digest(boot["path"], 10240)
    blocks = allocated(boot["path"])
    job = ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=20480)
    commit = step_result(job, "commit")
    assert (commit["before"], commit["after"]) == (10240, 20480), commit
    assert commit["free_space"] == 81920, commit
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:0")["size"] == 20480 and vm["free_space"] == 81920, vm
    assert disk(vm, "0:4:0")["id"] == boot["id"]
    assert os.stat(boot["path"]).st_size == 20480 * MIB
    assert content_digest(boot["path"], 20480) == before
    assert not data_from(boot["path"], 10240 * MIB)
    assert allocated(boot["path"]) == blocks
    assert workload_pids(vm_dir(vm_uuid)) == pids and vm["state"] == "running"
    lab.check_inventory()
    delete(vm_uuid)


def test_13_shrink_guard():
    """20480 -> 10240: refused without dangerous_allow_shrink (nothing changes);
    with it the file is 10240 MiB, its first 10240 MiB unchanged, the tail gone; the
    flag is kept nowhere."""
    vm_uuid = provision(disks=[{"size": 20480}])
    vm = check_vm(vm_uuid)
    boot = disk(vm, "0:4:0")["path"]
    guest_write(boot, 100 * MIB, MIB)
    guest_write(boot, 15000 * MIB, MIB)
    head = content_digest(boot, 10240)
    whole = content_digest(boot, 20480)
    body = refused("disk-resize", vm_uuid, 422, "InvalidArgument", ["20480", "10240"],
                   pci_slot="0:4:0", size=10240)
    assert "shrink" in body["message"].lower(), body
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", ["shrink"], pci_slot="0:4:0",
            size=10240, dangerous_allow_shrink=False)
    assert content_digest(boot, 20480) == whole
    job = ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=10240,
                  dangerous_allow_shrink=True)
    commit = step_result(job, "commit")
    assert (commit["before"], commit["after"]) == (20480, 10240), commit
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:0")["size"] == 10240 and vm["free_space"] == 92160, vm
    assert os.stat(boot).st_size == 10240 * MIB
    assert content_digest(boot, 10240) == head
    assert not data_from(boot, 10240 * MIB)
    # Grown back, the discarded tail does not come back: it reads as a hole.
    ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=20480)
    assert not data_from(boot, 10240 * MIB) and content_digest(boot, 20480) == head
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_14_same_size():
    vm_uuid = provision(package=ONE)
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", ["size", "10240"],
            pci_slot="0:4:0", size=10240)
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_15_missing():
    """A disk id or slot the VM does not have, a VM that does not exist:
    ResourceNotFound naming them."""
    vm_uuid = provision(package=ONE)
    missing = str(uuidlib.uuid4())
    refused("disk-resize", vm_uuid, 404, "ResourceNotFound", [missing, vm_uuid], id=missing,
            size=20480)
    refused("disk-resize", vm_uuid, 404, "ResourceNotFound", ["0:4:3", vm_uuid],
            pci_slot="0:4:3", size=20480)
    refused("disk-delete", vm_uuid, 404, "ResourceNotFound", [missing], id=missing)
    nobody = str(uuidlib.uuid4())
    refused("disk-resize", nobody, 404, "ResourceNotFound", [nobody], others=[vm_uuid],
            pci_slot="0:4:0", size=20480)
    refused("disk-add", nobody, 404, "ResourceNotFound", [nobody], others=[vm_uuid], size=1024)
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_24_misspelt_flag():
    """The seed's own typo is an unknown key: refused, naming it, size unchanged."""
    vm_uuid = provision(disks=[{"size": 20480}])
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", ["dangrous_allow_shrink"],
            pci_slot="0:4:0", size=10240, dangrous_allow_shrink=True)
    assert disk(check_vm(vm_uuid), "0:4:0")["size"] == 20480
    delete(vm_uuid)


# ---- space with snapshots: tests 16, 17 ---------------------------------------------

def test_16_space_with_snapshots():
    """Disks 10240 + 20480 and a snapshot holding 5 MiB that the disk no longer has:
    free_space = 102400 - 30720 - 5 = 71675. The recorded number is stale until
    measured, so an add of 71676 passes admission, but the job measures first and
    fails InsufficientSpace before any file is made; then it is refused at once, and
    71675 fits exactly."""
    vm_uuid = provision(disks=[{}, {"size": 20480}])
    vm = check_vm(vm_uuid)
    assert vm["free_space"] == 71680, vm
    data = disk(vm, "0:4:1")["path"]
    boot = disk(vm, "0:4:0")["path"]
    guest_write(data, 100 * MIB, 5 * MIB)
    held = content_digest(data, 20480)
    held_boot = content_digest(boot, 10240)

    job = ok_disk("vm-snapshot-create", vm_uuid, name="s1")
    vm = check_vm(vm_uuid)
    assert [s["name"] for s in vm["snapshots"]] == ["s1"], vm
    assert all(x["snapshot_size"] == 0 for x in vm["disks"]), vm["disks"]
    assert vm["free_space"] == 71680, vm
    sdir = os.path.join(vm_dir(vm_uuid), "snapshots", "s1")
    assert sorted(os.listdir(sdir)) == ["disk0.img", "disk1.img"]
    for name, size, want in (("disk0.img", 10240, held_boot), ("disk1.img", 20480, held)):
        copy = os.path.join(sdir, name)
        assert os.stat(copy).st_size == size * MIB and content_digest(copy, size) == want, name
    assert allocated(os.path.join(sdir, "disk1.img")) < 6 * MIB

    guest_write(data, 100 * MIB, 5 * MIB)
    assert content_digest(os.path.join(sdir, "disk1.img"), 20480) == held
    assert lab.vm_of(vm_uuid)["free_space"] == 71680  # what was measured last

    status, job = disk_job("disk-add", vm_uuid, size=71676)
    assert status in (200, 201), (status, job)
    job = lab.wait_job(job["uuid"], timeout=60)
    assert job["execution"] == "failed" and job["error"]["code"] == "InsufficientSpace", job
    assert "71676" in job["error"]["message"] and "71675" in job["error"]["message"], job["error"]
    vm = check_vm(vm_uuid)
    assert len(vm["disks"]) == 2, vm["disks"]
    assert disk(vm, "0:4:1")["snapshot_size"] == 5 and disk(vm, "0:4:0")["snapshot_size"] == 0
    assert vm["free_space"] == 71675, vm

    job = usage(vm_uuid)
    measured = {x["pci_slot"]: x for x in step_result(job, "measure")["disks"]}
    assert measured["0:4:1"]["snapshot_bytes"] == 5 * MIB, measured
    assert measured["0:4:0"]["snapshot_bytes"] == 0, measured
    assert check_vm(vm_uuid)["free_space"] == 71675
    refused("disk-add", vm_uuid, 409, "InsufficientSpace", ["71676", "71675"], size=71676)
    ok_disk("disk-add", vm_uuid, size=71675)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == \
        [("0:4:0", 10240), ("0:4:1", 20480), ("0:4:2", 71675)], vm["disks"]
    assert vm["free_space"] == 0, vm
    assert not data_from(disk(vm, "0:4:2")["path"], 0)
    # The snapshot covers the disks it was taken of, not the new one.
    assert sorted(os.listdir(sdir)) == ["disk0.img", "disk1.img"]

    ok_disk("vm-snapshot-delete", vm_uuid, name="s1")
    vm = check_vm(vm_uuid)
    assert not os.path.exists(sdir) and not vm.get("snapshots"), vm
    assert all(x["snapshot_size"] == 0 for x in vm["disks"]) and vm["free_space"] == 5, vm
    lab.check_inventory()
    delete(vm_uuid)


def test_17_writes_raise_snapshot_size():
    """Writes into holes cost a snapshot nothing; writes over what it holds raise
    snapshot_size (rounded up to the MiB) as vm-disk-usage measures it, each time."""
    vm_uuid = provision(package=ONE)
    boot = disk(check_vm(vm_uuid), "0:4:0")["path"]
    ok_disk("vm-snapshot-create", vm_uuid, name="before")
    assert check_vm(vm_uuid)["free_space"] == 92160

    guest_write(boot, 5000 * MIB, 2 * MIB)
    usage(vm_uuid)
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:0")["snapshot_size"] == 0 and vm["free_space"] == 92160, vm

    guest_write(boot, 0, 3 * MIB + 4096)  # over the image's data, which the snapshot holds
    assert lab.vm_of(vm_uuid)["free_space"] == 92160
    job = usage(vm_uuid)
    measured = step_result(job, "measure")["disks"][0]
    assert measured["snapshot_bytes"] == 3 * MIB + 4096, measured
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:0")["snapshot_size"] == 4 and vm["free_space"] == 92156, vm

    guest_write(boot, 4 * MIB, 2 * MIB)
    job = usage(vm_uuid)
    assert step_result(job, "measure")["disks"][0]["snapshot_bytes"] == 5 * MIB + 4096
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:0")["snapshot_size"] == 6 and vm["free_space"] == 92154, vm
    assert math.ceil((5 * MIB + 4096) / MIB) == 6

    # A grow must leave room for what the snapshot holds.
    refused("disk-resize", vm_uuid, 409, "InsufficientSpace", ["92154"], pci_slot="0:4:0",
            size=10240 + 92155)
    ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=10240 + 92154)
    assert check_vm(vm_uuid)["free_space"] == 0
    delete(vm_uuid)


# ---- add and delete: tests 18-21 ----------------------------------------------------

def test_18_add_remaining():
    """30000 free: an add of "remaining" takes 30000 (a hole) and leaves 0; another is
    InsufficientSpace, no file made."""
    vm_uuid = provision(disks=[{}, {"size": 102400 - 10240 - 30000}])
    assert check_vm(vm_uuid)["free_space"] == 30000
    job = ok_disk("disk-add", vm_uuid, size="remaining")
    commit = step_result(job, "commit")
    assert (commit["before"], commit["after"], commit["free_space"]) == (None, 30000, 0), commit
    vm = check_vm(vm_uuid)
    new = disk(vm, "0:4:2")
    assert new["size"] == 30000 and vm["free_space"] == 0 and not new.get("boot"), vm
    assert new["id"] not in {x["id"] for x in vm["disks"] if x is not new}
    assert new["snapshot_size"] == 0
    assert allocated(new["path"]) < MIB and not data_from(new["path"], 0)
    refused("disk-add", vm_uuid, 409, "InsufficientSpace", ["remaining"], size="remaining")
    refused("disk-add", vm_uuid, 409, "InsufficientSpace", ["1"], size=1)
    assert not os.path.exists(os.path.join(vm_dir(vm_uuid), "disks", "disk3.img"))
    lab.check_inventory()
    delete(vm_uuid)


def test_19_running():
    """A running instance: add, delete and shrink are refused (InvalidState, naming the
    state), no file made or removed."""
    vm_uuid = provision(package=ONE, autoboot=True)
    refused("disk-add", vm_uuid, 409, "InvalidState", ["running"], size=1024)
    refused("disk-add", vm_uuid, 409, "InvalidState", ["running"], size="remaining")
    assert sorted(os.listdir(os.path.join(vm_dir(vm_uuid), "disks"))) == ["disk0.img"]
    power(vm_uuid, "stop")
    ok_disk("disk-add", vm_uuid, size=1024)
    power(vm_uuid, "start")
    refused("disk-delete", vm_uuid, 409, "InvalidState", ["running"], pci_slot="0:4:1")
    ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=20480)
    refused("disk-resize", vm_uuid, 409, "InvalidState", ["running"], pci_slot="0:4:0",
            size=10240, dangerous_allow_shrink=True)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 20480),
                                                                   ("0:4:1", 1024)]
    delete(vm_uuid)


def test_20_delete():
    """The boot disk cannot go; a data disk goes with its snapshot copies, and its
    size comes back as free space."""
    vm_uuid = provision()
    vm = check_vm(vm_uuid)
    boot, data = disk(vm, "0:4:0"), disk(vm, "0:4:1")
    guest_write(data["path"], 0, MIB)
    ok_disk("vm-snapshot-create", vm_uuid, name="keep")
    sdir = os.path.join(vm_dir(vm_uuid), "snapshots", "keep")
    assert sorted(os.listdir(sdir)) == ["disk0.img", "disk1.img"]
    boot_head = content_digest(boot["path"], 10240)
    refused("disk-delete", vm_uuid, 422, "InvalidArgument", ["boot"], pci_slot="0:4:0")
    refused("disk-delete", vm_uuid, 422, "InvalidArgument", ["boot"], id=boot["id"])
    job = ok_disk("disk-delete", vm_uuid, id=data["id"])
    vm = check_vm(vm_uuid)
    assert [x["id"] for x in vm["disks"]] == [boot["id"]], vm["disks"]
    assert vm["free_space"] == 92160, vm
    assert not os.path.exists(data["path"])
    assert sorted(os.listdir(sdir)) == ["disk0.img"]
    assert content_digest(boot["path"], 10240) == boot_head
    commit = step_result(job, "commit")
    assert (commit["before"], commit["after"], commit["free_space"]) == (92160, None, 92160), \
        commit
    lab.check_inventory()
    delete(vm_uuid)


def test_21_sticky_slots():
    """Three disks; the second deleted: the others keep 0:4:0 and 0:4:2 (and their
    files and bytes); a new disk takes 0:4:1 (a fresh hole), the next 0:4:3."""
    vm_uuid = provision(disks=[{}, {"size": 10240}, {"size": 10240}])
    vm = check_vm(vm_uuid)
    second, third = disk(vm, "0:4:1"), disk(vm, "0:4:2")
    guest_write(second["path"], 0, MIB)
    guest_write(third["path"], 0, MIB)
    third_bytes = content_digest(third["path"], 10240)
    ok_disk("disk-delete", vm_uuid, pci_slot="0:4:1")
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["id"]) for x in vm["disks"]] == \
        [("0:4:0", vm["disks"][0]["id"]), ("0:4:2", third["id"])], vm["disks"]
    assert disk(vm, "0:4:2")["path"] == third["path"]
    assert content_digest(third["path"], 10240) == third_bytes
    ok_disk("disk-add", vm_uuid, size=2048)
    vm = check_vm(vm_uuid)
    new = disk(vm, "0:4:1")
    assert new["size"] == 2048 and new["id"] != second["id"], new
    assert new["path"] == second["path"] and not data_from(new["path"], 0)
    ok_disk("disk-add", vm_uuid, size=1024)
    vm = check_vm(vm_uuid)
    assert [x["pci_slot"] for x in vm["disks"]] == ["0:4:0", "0:4:1", "0:4:2", "0:4:3"]
    # An explicit slot is honoured; a used one is refused.
    ok_disk("disk-add", vm_uuid, size=1024, pci_slot="0:4:6")
    refused("disk-add", vm_uuid, 422, "InvalidArgument", ["pci_slot", "0:4:6"], size=1024,
            pci_slot="0:4:6")
    vm = check_vm(vm_uuid)
    assert [x["pci_slot"] for x in vm["disks"]] == ["0:4:0", "0:4:1", "0:4:2", "0:4:3", "0:4:6"]
    ok_disk("disk-add", vm_uuid, size=1024)
    assert [x["pci_slot"] for x in check_vm(vm_uuid)["disks"]][-2:] == ["0:4:4", "0:4:6"]
    # The gaps fill in order, up to eight disks; a ninth is refused.
    ok_disk("disk-add", vm_uuid, size=1024)
    ok_disk("disk-add", vm_uuid, size=1024)
    vm = check_vm(vm_uuid)
    assert [x["pci_slot"] for x in vm["disks"]] == [f"0:4:{i}" for i in range(8)]
    refused("disk-add", vm_uuid, 422, "InvalidArgument", ["8"], size=1024)
    delete(vm_uuid)


def test_22_concurrent_grows():
    """Two grows, each of 60 % or more of the free space, both admitted (the agent is
    paused so neither has reserved when the other is checked): exactly one succeeds,
    the other fails InsufficientSpace at its reserve; the winner's file has its new
    size, the loser's its old one."""
    vm_uuid = provision(disks=[{}, {"size": 10240}])
    vm = check_vm(vm_uuid)
    free = vm["free_space"]
    assert free == 81920, vm
    grows = {"0:4:0": 10240 + free * 6 // 10, "0:4:1": 10240 + free * 7 // 10}
    agent = agent_of("cn1")
    jobs = {}
    os.kill(agent, signal.SIGSTOP)
    try:
        for slot, size in grows.items():
            status, job = disk_job("disk-resize", vm_uuid, pci_slot=slot, size=size)
            assert status in (200, 201), (status, job)
            jobs[slot] = job["uuid"]
    finally:
        os.kill(agent, signal.SIGCONT)
    ends = {slot: lab.wait_job(j, timeout=60) for slot, j in jobs.items()}
    won = [s for s, j in ends.items() if j["execution"] == "succeeded"]
    lost = [s for s, j in ends.items() if j["execution"] != "succeeded"]
    assert len(won) == 1 and len(lost) == 1, {s: j["execution"] for s, j in ends.items()}
    err = ends[lost[0]]["error"]
    assert ends[lost[0]]["execution"] == "failed" and err["code"] == "InsufficientSpace", err
    assert lost[0] in err["message"], err
    vm = check_vm(vm_uuid)
    assert disk(vm, won[0])["size"] == grows[won[0]], vm["disks"]
    assert disk(vm, lost[0])["size"] == 10240, vm["disks"]
    assert os.stat(disk(vm, lost[0])["path"]).st_size == 10240 * MIB
    assert vm["free_space"] == free - (grows[won[0]] - 10240), vm
    print(f"  {won[0]} grew, {lost[0]} was refused at its reserve")
    lab.check_inventory()
    delete(vm_uuid)


# ---- an agent killed: test 27 -------------------------------------------------------

def test_27_agent_killed_mid_resize():
    """The agent of the instance's server killed -9 around a grow's apply step: paused
    (SIGSTOP) as soon as the job has passed its measure step, so the apply is most
    likely waiting for it, then killed; killed when the job's cursor reaches apply;
    killed once the file has changed size (the apply done, its result not committed).
    Restarted, the job finishes, and the file's size and the record agree, the content
    kept. Then an add, killed as the new file shows."""
    vm_uuid = provision(package=ONE, server=CN2)
    boot = disk(check_vm(vm_uuid), "0:4:0")["path"]
    head = content_digest(boot, 10240)
    for size, when in ((20480, "paused"), (30720, "cursor"), (40960, "file")):
        old = os.stat(boot).st_size // MIB
        agent = agent_of("cn2")
        status, job = disk_job("disk-resize", vm_uuid, pci_slot="0:4:0", size=size)
        assert status in (200, 201), (status, job)
        if when in ("paused", "cursor"):
            steps = ("reserve", "apply", "commit") if when == "paused" else ("apply", "commit")

            def reached():
                j = lab.job_of(job["uuid"])
                return j["cursor"]["step"] in steps or \
                    j["execution"] in ("succeeded", "failed", "canceled")
            wait_for(f"the job at {steps[0]}", reached, timeout=30, every=0.001)
        else:
            wait_for("the file to change size", lambda: os.stat(boot).st_size != old * MIB,
                     timeout=30, every=0.0005)
        # Paused, it is killed after the look at the job and the file; else before.
        os.kill(agent, signal.SIGSTOP if when == "paused" else signal.SIGKILL)
        at = lab.job_of(job["uuid"])["cursor"]["step"]
        seen = os.stat(boot).st_size // MIB
        if when == "paused":
            os.kill(agent, signal.SIGKILL)
        wait_for("the agent to die", lambda: dead(agent), timeout=10)
        lab.run("restart-agent", "cn2", "--dir", lab.dir)
        end = lab.wait_job(job["uuid"], timeout=120)
        assert end["execution"] in ("succeeded", "failed"), end
        vm = check_vm(vm_uuid)
        now = disk(vm, "0:4:0")["size"]
        assert now == os.stat(boot).st_size // MIB, (now, os.stat(boot).st_size)
        assert now == (size if end["execution"] == "succeeded" else old), (end, now)
        assert content_digest(boot, now) == head
        assert not data_from(boot, 10240 * MIB)
        print(f"  killed at {when}: the cursor at {at}, the file {seen} MiB; the job "
              f"{end['execution']}, the disk {now} MiB")
        assert end["execution"] == "succeeded", end
    # An add, the agent killed as soon as the new disk's file (or its .part) shows: the
    # disk is then in the record and on disk, or in neither.
    disks_dir = os.path.join(vm_dir(vm_uuid), "disks")
    agent = agent_of("cn2")
    status, job = disk_job("disk-add", vm_uuid, size=2048)
    assert status in (200, 201), (status, job)
    wait_for("the new disk's file", lambda: len(os.listdir(disks_dir)) > 1, timeout=30,
             every=0.0005)
    os.kill(agent, signal.SIGKILL)
    seen = sorted(os.listdir(disks_dir))
    wait_for("the agent to die", lambda: dead(agent), timeout=10)
    lab.run("restart-agent", "cn2", "--dir", lab.dir)
    end = lab.wait_job(job["uuid"], timeout=120)
    vm = check_vm(vm_uuid)
    print(f"  add killed with {seen}: the job {end['execution']}, disks "
          f"{[(x['pci_slot'], x['size']) for x in vm['disks']]}")
    assert end["execution"] == "succeeded", end
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 40960),
                                                                   ("0:4:1", 2048)]
    assert not data_from(disk(vm, "0:4:1")["path"], 0)
    lab.check_inventory()
    delete(vm_uuid)


# ---- the control plane killed ------------------------------------------------------

def control_of():
    """The pid of the lab's control ternd, checked to be it (ternd, runner id control,
    serving the API) before anyone signals it."""
    pid = lab.pid("control")
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert os.path.basename(argv[0]) == "ternd" and "control" in argv and \
        "--listen" in argv, argv
    return pid


def job_in_redis(job_uuid):
    """The job's cursor and where it waits, read from Redis (the API is the control's,
    and may be down): {idx, phase, step_queue, execution, fence}."""
    fields = ("idx", "phase", "step_queue", "execution", "fence", "queue_timeout")
    got = lab.redis("HMGET", "tern:job:" + job_uuid, *fields)
    assert len(got) == len(fields), got
    return dict(zip(fields, got))


def redis_list(key):
    return [x for x in lab.redis("LRANGE", key, "0", "-1") if x]


def kill_control(pid):
    os.kill(pid, signal.SIGKILL)
    wait_for("the control ternd to die", lambda: dead(pid), timeout=10)


def step_timeout(workflow, step):
    """A chain step's timeout (s) as the workflow file says."""
    with open(os.path.join(SOURCE, "workflows", workflow + ".json")) as f:
        return next(x["timeout"] for x in json.load(f)["chain"] if x["name"] == step)


def test_control_killed_mid_resize():
    """The control ternd, which admits a resize, grants its hold, runs its Redis steps
    (reserve, commit) and serves the API, killed -9 while the job is between or in those
    steps, then brought back by `tools/lab restart-control`: the job finishes,
    succeeded, and the file's apparent size, vm.json and the record agree at the new
    size, with free_space and the server's counters right. Each point is reached
    deterministically, the agent paused (SIGSTOP) while the job waits for it, or the
    control dead while the job waits for the control:
    * admitted: killed as soon as the job is created (the control takes the job first,
      to grant its hold, then sends it to the agent's queue): when the kill lands first,
      the job is on the dead control's list, and the control is left dead until its
      lease runs out and an agent's heartbeat puts the job back in the queue default;
      else the job goes on to wait at reserve, as below;
    * reserve: killed once the job waits on the paused agent's queue for its measure;
      the agent then measures and the job waits at reserve with nobody to run it;
    * commit: as at reserve, then restarted with the agent paused, so the reserve runs
      and the job waits at apply; killed again there; the agent applies (the file
      grows, vm.json says so) and the job waits at commit, the record still at the old
      size with the change pending;
    * claimed: as at reserve, but the control paused (SIGSTOP) instead, so its pending
      claim most likely moves the job onto its own list; then killed: the restarted
      control (the same runner id) adopts it;
    * expired: as claimed, the control left dead until its lease runs out and an
      agent's heartbeat puts the job back in the queue default;
    * outage: as at commit, the control left dead past the commit step's timeout: the
      job waits at commit, queued, until the control is back."""
    vm_uuid = provision(package=ONE, server=CN2)
    boot = disk(check_vm(vm_uuid), "0:4:0")["path"]
    head = content_digest(boot, 10240)
    flexible = disk_lab.PACKAGES[ONE]["disk_mib"]
    queue = "server:" + CN2
    for size, when in ((20480, "admitted"), (30720, "reserve"), (40960, "commit"),
                       (51200, "claimed"), (61440, "expired"), (71680, "outage")):
        old = os.stat(boot).st_size // MIB
        agent, control = agent_of("cn2"), control_of()
        paused = when in ("claimed", "expired")
        os.kill(agent, signal.SIGSTOP)
        try:
            status, job = disk_job("disk-resize", vm_uuid, pci_slot="0:4:0", size=size)
            assert status in (200, 201), (status, job)
            if when != "admitted":
                wait_for("the job on the agent's queue",
                         lambda: job_in_redis(job["uuid"])["step_queue"] == queue,
                         timeout=30, every=0.01)
            os.kill(control, signal.SIGSTOP if paused else signal.SIGKILL)
            if not paused:
                wait_for("the control ternd to die", lambda: dead(control), timeout=10)
            frozen = job_in_redis(job["uuid"])
        finally:
            os.kill(agent, signal.SIGCONT)
        if when == "admitted" and frozen["step_queue"] == queue:
            # The control sent the job on before the kill landed: the job goes on to
            # wait at reserve, as below.
            print(f"  the control sent the job to the agent before it died: {frozen}")
        if frozen["step_queue"] == queue:
            # The agent measures; the job then waits at reserve (cursor 1), which only
            # the control runs.
            wait_for("the job at reserve", lambda: job_in_redis(job["uuid"])["idx"] == "1",
                     timeout=30, every=0.01)
        held = job["uuid"] in redis_list("tern:r:control:jobs")
        if paused:
            kill_control(control)
        at = job_in_redis(job["uuid"])
        assert at["execution"] in ("queued", "running"), at
        assert at["idx"] == ("1" if frozen["step_queue"] == queue else ""), (frozen, at)
        if held and when in ("admitted", "expired"):
            # The dead control's lease runs out and an agent's heartbeat puts its job
            # back in the queue default, at the step it was at, where it waits (a job
            # the control had started gets a new fence and counts as re-queued; one its
            # claim had only moved onto its list goes back as it was).
            wait_for("the dead control's job re-queued",
                     lambda: job["uuid"] in redis_list("tern:q:default"),
                     timeout=60, every=0.1)
            assert redis_list("tern:r:control:jobs") == []
            now = job_in_redis(job["uuid"])
            assert now["idx"] == at["idx"], (at, now)
            assert now["fence"] == at["fence"] or at["execution"] == "running", (at, now)
        assert os.stat(boot).st_size == old * MIB
        if when in ("commit", "outage"):
            agent = agent_of("cn2")
            os.kill(agent, signal.SIGSTOP)
            try:
                lab.run("restart-control", "--dir", lab.dir)
                control = control_of()
                # The reserve ran (the change is on the record); apply waits for the
                # paused agent.
                wait_for("the job at apply", lambda: job_in_redis(job["uuid"])["idx"] == "2",
                         timeout=30, every=0.01)
                change = lab.vm_of(vm_uuid)["disk_change"]
                assert change["job_uuid"] == job["uuid"] and change["new_size"] == size, change
                kill_control(control)
            finally:
                os.kill(agent, signal.SIGCONT)
            wait_for("the job at commit", lambda: job_in_redis(job["uuid"])["idx"] == "3",
                     timeout=30, every=0.01)
            assert os.stat(boot).st_size == size * MIB
            # (The API is the control's: the files and the record are read directly.)
            with open(os.path.join(os.path.dirname(os.path.dirname(boot)), "vm.json")) as f:
                assert json.load(f)["disks"][0]["size"] == size
            record = json.loads("\n".join(lab.redis("GET", "tern:p:dc:vm:" + vm_uuid)))
            assert disk(record, "0:4:0")["size"] == old, record["disks"]
            assert record["disk_change"]["job_uuid"] == job["uuid"], record
        if when == "outage":
            # Down longer than the commit step's timeout and the dead control's lease:
            # the job waits at commit in the queue default (the workflow's own queue,
            # which bounds a wait only by the workflow's timeout), untouched: no runner
            # there takes it or fails it.
            bound = time.monotonic() + step_timeout("disk-resize", "commit") + 4
            while time.monotonic() < bound:
                at = job_in_redis(job["uuid"])
                assert (at["execution"], at["idx"], at["queue_timeout"]) == \
                    ("queued", "3", ""), at
                assert job["uuid"] in redis_list("tern:q:default")
                time.sleep(0.5)
        p = lab.run("restart-control", "--dir", lab.dir)
        assert "control: not running (stale pid file" in p.stdout, p.stdout
        assert control_of() != control
        end = lab.wait_job(job["uuid"], timeout=120)
        print(f"  control killed at {when}{' (the job on its list)' if held else ''}: the "
              f"job {end['execution']}, re-queued {end.get('retried', 0)} times")
        assert end["execution"] == "succeeded", end
        commit = step_result(end, "commit")
        assert (commit["before"], commit["after"]) == (old, size), commit
        vm = check_vm(vm_uuid)
        assert disk(vm, "0:4:0")["size"] == size, vm["disks"]
        assert os.stat(boot).st_size == size * MIB
        assert vm["free_space"] == flexible - size == commit["free_space"], (vm, commit)
        assert content_digest(boot, size) == head
        assert not data_from(boot, 10240 * MIB)
        lab.check_inventory()
    delete(vm_uuid)


# ---- the scenario: resize while running, then the shrink guard ----------------------

def test_x3_resize_while_running():
    """A writer instance: its data disk grows by 10 GiB while the writer writes, and
    not a second time (no free space left); no record of the writer is lost. Stopped:
    the data disk deleted frees its space, a new disk takes the freed slot, the boot
    disk grows with its content, and a shrink without the flag is refused."""
    vm_uuid = provision(disks=[{}, {"size": 81920}], autoboot=True, workload="writer")
    vm = check_vm(vm_uuid)
    d = vm_dir(vm_uuid)
    data = disk(vm, "0:4:1")["path"]
    pids = workload_pids(d)
    assert len(pids) == 1, pids

    def records():
        p = subprocess.run([WORKLOAD, "verify", data], capture_output=True, text=True,
                           timeout=30)
        words = p.stdout.split()
        return int(words[0]) if words and words[0].isdigit() else 0

    first = wait_for("the writer's first records", lambda: records() >= 5 and records())
    job = ok_disk("disk-resize", vm_uuid, pci_slot="0:4:1", size=92160)
    assert step_result(job, "commit")["after"] == 92160
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:1")["size"] == 92160 and vm["free_space"] == 0, vm
    assert os.stat(data).st_size == 92160 * MIB
    wait_for("records written after the grow", lambda: records() > first + 5)
    assert workload_pids(d) == pids
    body = refused("disk-resize", vm_uuid, 409, "InsufficientSpace", ["0:4:1", "102400"],
                   live=[data], pci_slot="0:4:1", size=102400)
    assert "free_space is 0" in body["message"], body

    power(vm_uuid, "stop")
    assert not workload_pids(d)
    p = subprocess.run([WORKLOAD, "verify", data], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)

    ok_disk("disk-delete", vm_uuid, pci_slot="0:4:1")
    vm = check_vm(vm_uuid)
    assert vm["free_space"] == 92160 and not os.path.exists(data), vm
    ok_disk("disk-add", vm_uuid, size=40960)
    vm = check_vm(vm_uuid)
    assert disk(vm, "0:4:1")["size"] == 40960 and disk(vm, "0:4:1")["path"] == data
    assert not data_from(data, 0)

    boot = disk(vm, "0:4:0")["path"]
    head = content_digest(boot, 10240)
    ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=20480)
    assert os.stat(boot).st_size == 20480 * MIB and content_digest(boot, 20480) == head
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", ["shrink"], pci_slot="0:4:0",
            size=10240)
    vm = check_vm(vm_uuid)
    assert vm["free_space"] == 102400 - 20480 - 40960, vm
    # It runs again on its new data disk.
    power(vm_uuid, "start")
    assert len(workload_pids(d)) == 1
    lab.check_inventory()
    delete(vm_uuid)


# ---- bad input ----------------------------------------------------------------------

def test_bad_disk_params():
    """Each malformed request refused at POST /jobs with InvalidArgument naming the
    field (a disk of another instance: ResourceNotFound naming it), no job stored,
    no record or file of either instance changed."""
    vm_uuid = provision(disks=[{}, {"size": 20480}])
    other = provision(package=ONE)
    theirs = disk(lab.vm_of(other), "0:4:0")["id"]
    bad = lambda workflow, field, **params: refused(  # noqa: E731
        workflow, vm_uuid, 422, "InvalidArgument", [field], others=[other], **params)

    for size in (1.5, -1024, 0, "1024", "20G", "", True, None, [1024], MAX_DISK + 1):
        bad("disk-add", "size", size=size)
        bad("disk-resize", "size", pci_slot="0:4:1", size=size)
    bad("disk-add", "size")
    bad("disk-resize", "size", pci_slot="0:4:1")
    bad("disk-resize", "size", pci_slot="0:4:1", size="remaining")
    # A size a file can have but the instance has no room for.
    refused("disk-add", vm_uuid, 409, "InsufficientSpace", [str(MAX_DISK)], others=[other],
            size=MAX_DISK)
    for slot in ("0:4:8", "0:3:2", "1:4:2", "0:4:", "0:4:02", "0:4:-1", "", 2, ["0:4:2"]):
        bad("disk-add", "pci_slot", size=1024, pci_slot=slot)
        bad("disk-resize", "pci_slot", pci_slot=slot, size=40960)
        bad("disk-delete", "pci_slot", pci_slot=slot)
    bad("disk-add", "pci_slot", size=1024, pci_slot="0:4:1")  # taken
    bad("disk-add", "pci_slot", size=1024, pci_slot="0:4:0")
    for workflow, extra in (("disk-resize", {"size": 40960}), ("disk-delete", {})):
        bad(workflow, "id", id="not-a-uuid", **extra)
        bad(workflow, "id", id=theirs.upper(), **extra)
        bad(workflow, "pci_slot", pci_slot="0:4:1", id=disk(lab.vm_of(vm_uuid), "0:4:1")["id"],
            **extra)
        bad(workflow, "pci_slot", **extra)
        # A disk of another instance is not this one's: not found, named, untouched.
        refused(workflow, vm_uuid, 404, "ResourceNotFound", [theirs, vm_uuid], others=[other],
                id=theirs, **extra)
    for flag in ("yes", 1, "true", {}):
        bad("disk-resize", "dangerous_allow_shrink", pci_slot="0:4:1", size=10240,
            dangerous_allow_shrink=flag)
    bad("disk-add", "dangerous_allow_shrink", size=1024, dangerous_allow_shrink=True)
    bad("disk-add", "colour", size=1024, colour="blue")
    bad("disk-delete", "size", pci_slot="0:4:1", size=1024)
    for name in ("", "-x", ".x", "a b", "a/b", "x" * 65, 7, None):
        bad("vm-snapshot-create", "name", name=name)
    bad("vm-snapshot-create", "name")
    bad("vm-snapshot-delete", "name", name="../x")
    bad("vm-disk-usage", "size", size=1024)
    refused("vm-snapshot-delete", vm_uuid, 404, "ResourceNotFound", ["nosuch"], others=[other],
            name="nosuch")
    # The target names the instance the params name.
    refused("disk-add", vm_uuid, 422, "InvalidArgument", ["target"], others=[other],
            target="/disk-add-" + other, size=1024)
    refused("disk-add", "not-a-uuid", 422, "InvalidArgument", ["vm_uuid"],
            others=[vm_uuid, other], size=1024)
    check_vm(vm_uuid)
    check_vm(other)
    delete(vm_uuid)
    delete(other)
    lab.check_inventory()


def test_snapshots_and_busy_instances():
    """Snapshot names are unique per instance and an instance has at most 16; a disk
    operation refuses an instance being migrated or provisioned."""
    vm_uuid = provision(package=ONE)
    ok_disk("vm-snapshot-create", vm_uuid, name="a.1")
    before = fingerprint([vm_uuid])
    status, body = disk_job("vm-snapshot-create", vm_uuid, name="a.1")
    assert status in (409, 422) and body["code"] in ("InvalidArgument", "InvalidState"), body
    assert "a.1" in body["message"], body
    assert fingerprint([vm_uuid]) == before
    for i in range(2, 17):
        ok_disk("vm-snapshot-create", vm_uuid, name=f"a.{i}")
    vm = check_vm(vm_uuid)
    assert [s["name"] for s in vm["snapshots"]] == [f"a.{i}" for i in range(1, 17)], vm
    refused("vm-snapshot-create", vm_uuid, 422, "InvalidArgument", ["16"], name="a.17")
    for i in range(1, 17):
        ok_disk("vm-snapshot-delete", vm_uuid, name=f"a.{i}")
    vm = check_vm(vm_uuid)
    assert not vm.get("snapshots"), vm

    # What a migration marks on the record (its workflow holds the instance meanwhile).
    key = "tern:p:dc:vm:" + vm_uuid
    record = json.loads("\n".join(lab.redis("GET", key)))
    record["migrating"] = True
    lab.redis("SET", key, json.dumps(record))
    try:
        for workflow, params in (("disk-resize", {"pci_slot": "0:4:0", "size": 20480}),
                                 ("disk-add", {"size": 1024}),
                                 ("vm-snapshot-create", {"name": "m"})):
            refused(workflow, vm_uuid, 409, "VmMigrating", ["is migrating"], **params)
    finally:
        record["migrating"] = False
        lab.redis("SET", key, json.dumps(record))
    ok_disk("disk-resize", vm_uuid, pci_slot="0:4:0", size=20480)
    check_vm(vm_uuid)
    delete(vm_uuid)
    # Provisioning: the provision holds the instance until it ends, and its record says
    # provisioning until then.
    busy = str(uuidlib.uuid4())
    agent = agent_of("cn1")
    os.kill(agent, signal.SIGSTOP)
    try:
        status, job = lab.create_job("provision", "/provision-" + busy,
                                     provision_params(busy))
        assert status in (200, 201), (status, job)
        wait_for("the provision's record", lambda: lab.vm_of(busy), timeout=30)
        status, body = disk_job("disk-add", busy, size=1024)
        assert (status, body.get("code")) == (409, "InvalidState"), (status, body)
        assert "provisioning" in body["message"], body
    finally:
        os.kill(agent, signal.SIGCONT)
    assert lab.wait_job(job["uuid"], timeout=120)["execution"] == "succeeded"
    check_vm(busy)
    delete(busy)


def main():
    tests = [test_11_grow_without_space, test_12_grow_boot, test_13_shrink_guard,
             test_14_same_size, test_15_missing, test_24_misspelt_flag,
             test_16_space_with_snapshots, test_17_writes_raise_snapshot_size,
             test_18_add_remaining, test_19_running, test_20_delete, test_21_sticky_slots,
             test_22_concurrent_grows, test_27_agent_killed_mid_resize,
             test_control_killed_mid_resize,
             test_x3_resize_while_running, test_bad_disk_params,
             test_snapshots_and_busy_instances]
    run_tests(lab, tests, only=sys.argv[3:])


if __name__ == "__main__":
    main()
