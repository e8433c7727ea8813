#!/usr/bin/env python3
"""Flexible disks on a real lab (tools/lab up on a description of the test's own, with
its own Redis, control ternd and one agent per server): the acceptance tests of the
flexible disk space (test_N_* below is test N of the list in docs/DATACENTER.md
"Flexible disks"), the scenario "resize while running, then shrink guard", and every
kind of bad input, through POST /jobs and the workflows provision, disk-add,
disk-resize, disk-delete, vm-snapshot-create, vm-snapshot-delete and vm-disk-usage.

Every test checks the records AND the data plane (check_vm): each disk's file is
disk<N>.img for PCI slot 0:4:N and its apparent size is exactly size * 2^20; the
record's free_space is flexible_disk_size - the sizes - the snapshot sizes; vm.json's
disks are the record's; no `.part` is left; the snapshots on disk are the record's;
the server's committed disk is the sum over its VMs (check_inventory). Growth keeps
every byte (content digests before and after) and adds a hole (SEEK_DATA finds
nothing past the old end); a shrink keeps the first `size` MiB; a refused operation
changes no file and no record, and stores no job. A few MiB written with pwrite stand
in for a guest's writes, so snapshot sizes are checked to the MiB.

Sizes are those of the rules' own examples (a 102400 MiB package, images of 10 GiB,
90 GiB and 1 TiB): every file is sparse, so they cost nothing.

Usage: test_disks.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into. Every wait is bounded and polls what it waits for;
the lab's processes are stopped by pid (tools/lab down); the one agent this test kills
is checked to be that agent first.
"""
import errno
import glob
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib

from lab_harness import MIB, Lab, run_tests, wait_for, workload_pids

SOURCE, BUILD = sys.argv[1], sys.argv[2]
WORKLOAD = os.path.join(BUILD, "lab", "tern-workload")
OWNER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"
TIB = 1024 * 1024  # MiB
MAX_DISK = 64 * TIB  # MiB: the largest disk size there is

CN1, CN2, CN3 = ("a1000000-0000-4000-8000-000000000001", "a1000000-0000-4000-8000-000000000002",
                 "a1000000-0000-4000-8000-000000000003")
EXTERNAL = "b1000000-0000-4000-8000-000000000001"
P, PQ, FIXED, REMAINING, ONE = ("c1000000-0000-4000-8000-000000000001",
                                "c1000000-0000-4000-8000-000000000002",
                                "c1000000-0000-4000-8000-000000000003",
                                "c1000000-0000-4000-8000-000000000004",
                                "c1000000-0000-4000-8000-000000000005")
I10, I90, I1T = ("d1000000-0000-4000-8000-000000000001", "d1000000-0000-4000-8000-000000000002",
                 "d1000000-0000-4000-8000-000000000003")
IMAGE_MIB = {I10: 10240, I90: 92160, I1T: TIB}
IMAGE_DATA_MIB = 8

# cn1 and cn2 hold any number of the instances here (8 TiB of disk each); cn3 has
# disk room for exactly one instance of P (test 23).
DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 262144,
         "disk_mib": 8 * TIB, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 262144,
         "disk_mib": 8 * TIB, "data_root": "servers/cn2"},
        {"uuid": CN3, "hostname": "cn3", "rack": "r2", "ram_mib": 65536,
         "disk_mib": 102400 + 51200, "data_root": "servers/cn3"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
    ],
    "packages": [
        {"uuid": P, "name": "flex-100g", "brand": "bhyve", "ram_mib": 256, "vcpus": 1,
         "disk_mib": 102400, "flexible_disk": True},
        {"uuid": PQ, "name": "flex-100g-quota", "brand": "bhyve", "ram_mib": 256, "vcpus": 1,
         "disk_mib": 102400, "flexible_disk": True, "quota_mib": 2048},
        {"uuid": FIXED, "name": "fixed-100g", "brand": "bhyve", "ram_mib": 256, "vcpus": 1,
         "disk_mib": 102400},
        {"uuid": REMAINING, "name": "flex-100g-one-disk", "brand": "bhyve", "ram_mib": 256,
         "vcpus": 1, "disk_mib": 102400, "flexible_disk": True,
         "disks": [{"size": "remaining"}]},
        {"uuid": ONE, "name": "flex-100g-image-disk", "brand": "bhyve", "ram_mib": 256,
         "vcpus": 1, "disk_mib": 102400, "flexible_disk": True, "disks": [{}]},
    ],
    "images": [
        {"uuid": I10, "name": "lab-10g", "version": "1.0", "size_mib": 10240,
         "data_mib": IMAGE_DATA_MIB, "file": "images/lab-10g.img", "brand": "bhyve"},
        {"uuid": I90, "name": "lab-90g", "version": "1.0", "size_mib": 92160,
         "data_mib": 2, "file": "images/lab-90g.img", "brand": "bhyve"},
        {"uuid": I1T, "name": "lab-1t", "version": "1.0", "size_mib": TIB,
         "data_mib": 2, "file": "images/lab-1t.img", "brand": "bhyve"},
    ],
    "settings": {},
}
PACKAGES = {p["uuid"]: p for p in DATACENTER["packages"]}
IMAGES = {i["uuid"]: i for i in DATACENTER["images"]}
SLOT = re.compile(r"^0:4:([0-7])$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-disks-")


# ---- the data plane ----------------------------------------------------------------

def content_digest(path, mib):
    """sha256 of the first `mib` MiB of the file as a reader sees them (holes read as
    zeros): every 4 KiB block that is not all zeros, with its offset, and the length
    read. Only data extents are read (SEEK_DATA/SEEK_HOLE), so a 10 GiB disk holding a
    few MiB costs a few MiB; a hole and written zeros are the same content."""
    h = hashlib.sha256()
    zero = bytes(4096)
    with open(path, "rb") as f:
        fd = f.fileno()
        end = min(mib * MIB, os.fstat(fd).st_size)
        h.update(str(end).encode())
        off = 0
        while off < end:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            if start >= end:
                break
            stop = min(os.lseek(fd, start, os.SEEK_HOLE), end)
            pos = start - start % 4096
            while pos < stop:
                chunk = os.pread(fd, min(MIB, stop - pos), pos)
                for i in range(0, len(chunk), 4096):
                    block = chunk[i:i + 4096]
                    if block != zero[:len(block)]:
                        h.update(str(pos + i).encode() + b":" + block)
                pos += len(chunk)
            off = stop
    return h.hexdigest()


def data_from(path, offset):
    """Whether the file holds any data at or past offset (bytes)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, offset, os.SEEK_DATA)
        return True
    except OSError as e:
        if e.errno == errno.ENXIO:
            return False
        raise
    finally:
        os.close(fd)


def allocated(path):
    return os.stat(path).st_blocks * 512


def guest_write(path, offset, length):
    """What a guest would do: `length` bytes of fresh random data at `offset` of a disk
    file, synced. Returns them."""
    data = os.urandom(length)
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == length
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


def slot_fn(slot):
    m = SLOT.match(slot)
    assert m, slot
    return int(m.group(1))


def vm_dir(vm_uuid):
    return lab.vm_dir(lab.vm_of(vm_uuid)["server_uuid"], vm_uuid)


def disk_path(vm_uuid, slot):
    return os.path.join(vm_dir(vm_uuid), "disks", f"disk{slot_fn(slot)}.img")


def instance_dirs(vm_uuid):
    return [d for s in lab.roots for d in [lab.vm_dir(s, vm_uuid)] if os.path.exists(d)]


def check_vm(vm_uuid):
    """The VM's record and its files agree, and the record agrees with itself: its
    disks (by PCI function, the first the boot disk), their files, vm.json, the space
    rule, the allocation, the snapshots. Returns the record."""
    vm = lab.vm_of(vm_uuid)
    assert vm is not None, vm_uuid
    pkg = PACKAGES[vm["billing_id"]]
    d = lab.vm_dir(vm["server_uuid"], vm_uuid)
    assert vm.get("disk_change") is None, vm
    disks = vm["disks"]
    assert 1 <= len(disks) <= 8, disks
    fns = [slot_fn(x["pci_slot"]) for x in disks]
    assert fns == sorted(set(fns)), ("disks not in PCI order or a function used twice", disks)
    ids = [x["id"] for x in disks]
    assert all(UUID.match(i) for i in ids) and len(set(ids)) == len(ids), disks
    for i, x in enumerate(disks):
        assert bool(x.get("boot")) == (i == 0), ("only the first disk boots", disks)
        assert x.get("image") == (vm["image_uuid"] if i == 0 else None), disks
        assert isinstance(x["size"], int) and x["size"] > 0, x
        path = os.path.join(d, "disks", f"disk{slot_fn(x['pci_slot'])}.img")
        assert x["path"] == path, (x, path)
        st = os.stat(path)
        assert st.st_size == x["size"] * MIB, (x, st.st_size)
        assert isinstance(x["snapshot_size"], int) and x["snapshot_size"] >= 0, x
    on_disk = sorted(os.listdir(os.path.join(d, "disks")))
    assert on_disk == sorted(os.path.basename(x["path"]) for x in disks), (on_disk, disks)
    assert not glob.glob(os.path.join(d, "**", "*.part"), recursive=True), \
        glob.glob(os.path.join(d, "**", "*.part"), recursive=True)
    with open(os.path.join(d, "vm.json")) as f:
        text = f.read()
    conf = json.loads(text)
    keys = ("id", "pci_slot", "path", "size")
    assert [{k: x[k] for k in keys} for x in conf["disks"]] == \
        [{k: x[k] for k in keys} for x in disks], (conf["disks"], disks)
    assert [(bool(x.get("boot")), x.get("image")) for x in conf["disks"]] == \
        [(bool(x.get("boot")), x.get("image")) for x in disks], (conf["disks"], disks)
    # The shrink flag is never kept.
    assert "dangerous_allow_shrink" not in text and "dangerous_allow_shrink" not in json.dumps(vm)

    sizes = sum(x["size"] for x in disks)
    snaps = sum(x["snapshot_size"] for x in disks)
    if pkg.get("flexible_disk"):
        assert vm["flexible"] is True, vm
        assert vm["flexible_disk_size"] == pkg["disk_mib"], vm
        assert vm["quota"] == pkg.get("quota_mib", 0), vm
        assert vm["free_space"] == pkg["disk_mib"] - sizes - snaps, vm
        assert vm["free_space"] >= 0, vm
        want_alloc = vm["quota"] + vm["flexible_disk_size"]
    else:
        assert vm["flexible"] is False, vm
        assert vm.get("flexible_disk_size") is None and vm.get("free_space") is None, vm
        assert vm["quota"] == pkg["disk_mib"], vm
        want_alloc = sizes
    assert vm["allocation"]["disk"] == want_alloc, (vm["allocation"], want_alloc)
    assert vm["allocation"]["server_uuid"] == vm["server_uuid"], vm

    names = sorted(s["name"] for s in vm.get("snapshots") or [])
    sdir = os.path.join(d, "snapshots")
    have = sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []
    assert have == names, (have, names)
    live = {os.path.basename(x["path"]) for x in disks}
    for n in names:
        copies = set(os.listdir(os.path.join(sdir, n)))
        assert copies <= live, ("a snapshot holds a copy of a disk that is gone", n, copies)
    if not names:
        assert snaps == 0, disks
    return vm


def disk(vm, slot):
    """The record of the disk at slot of VM record `vm`."""
    found = [x for x in vm["disks"] if x["pci_slot"] == slot]
    assert len(found) == 1, (slot, vm["disks"])
    return found[0]


def fingerprint(vm_uuids):
    """What a refused request must not change: the VMs' records, every file and
    directory in their instance directories (size, blocks, mtime), the number of jobs
    and the servers' counters."""
    out = {"jobs": len(lab.list_all("/jobs")),
           "servers": sorted(json.dumps(s, sort_keys=True) for s in lab.list_all("/servers"))}
    for v in vm_uuids:
        out[v] = lab.vm_of(v)
        files = {}
        for d in instance_dirs(v):
            for root, dirs, names in os.walk(d):
                for n in dirs + names:
                    p = os.path.join(root, n)
                    st = os.lstat(p)
                    files[p] = (st.st_mode, st.st_size, st.st_blocks, st.st_mtime_ns)
        out[v + " files"] = files
    return out


# ---- the API -----------------------------------------------------------------------

def provision_params(vm_uuid, package=P, image=I10, server=CN1, disks=None, autoboot=False,
                     workload=None):
    p = {"vm_uuid": vm_uuid, "owner_uuid": OWNER, "package": package, "image_uuid": image,
         "networks": [{"uuid": EXTERNAL, "primary": True}], "server_uuid": server,
         "autoboot": autoboot}
    if disks is not None:
        p["disks"] = disks
    if workload:
        p["customer_metadata"] = {"lab:workload": workload}
    return p


def provision(**kw):
    """A new instance (stopped unless autoboot): its uuid, once checked whole."""
    vm_uuid = str(uuidlib.uuid4())
    job = lab.run_job("provision", "/provision-" + vm_uuid, provision_params(vm_uuid, **kw))
    assert job["execution"] == "succeeded", job
    vm = check_vm(vm_uuid)
    assert vm["state"] == ("running" if kw.get("autoboot") else "stopped"), vm
    return vm_uuid


def refused_provision(want_status, want_code, words, **kw):
    """A provision refused at POST /jobs, naming `words`; nothing stored."""
    vm_uuid = str(uuidlib.uuid4())
    before = len(lab.list_all("/jobs"))
    status, body = lab.create_job("provision", "/provision-" + vm_uuid,
                                  provision_params(vm_uuid, **kw))
    assert (status, body.get("code")) == (want_status, want_code), (kw, status, body)
    for w in words:
        assert w in body["message"], (w, body)
    assert lab.vm_of(vm_uuid) is None
    assert instance_dirs(vm_uuid) == []
    assert len(lab.list_all("/jobs")) == before
    return body


def disk_job(workflow, vm_uuid, target=None, **params):
    """POST /jobs of a disk workflow: (status, body)."""
    return lab.create_job(workflow, target or f"/{workflow}-{vm_uuid}",
                          dict(params, vm_uuid=vm_uuid))


def run_disk(workflow, vm_uuid, **params):
    """A disk job accepted and finished: the job."""
    status, job = disk_job(workflow, vm_uuid, **params)
    assert status in (200, 201), (workflow, params, status, job)
    return lab.wait_job(job["uuid"], timeout=60)


def ok_disk(workflow, vm_uuid, **params):
    job = run_disk(workflow, vm_uuid, **params)
    assert job["execution"] == "succeeded", job
    return job


def refused(workflow, vm_uuid, want_status, want_code, words=(), others=(), **params):
    """A disk job refused at POST /jobs with its status and code, its message naming
    each of `words`, and nothing changed: no job stored, no record or file of the VM
    (or of `others`) touched."""
    before = fingerprint([vm_uuid, *others] if lab.vm_of(vm_uuid) else list(others))
    status, body = disk_job(workflow, vm_uuid, **params)
    assert (status, body.get("code")) == (want_status, want_code), (workflow, params, status, body)
    for w in words:
        assert str(w) in body["message"], (w, body)
    after = fingerprint([vm_uuid, *others] if lab.vm_of(vm_uuid) else list(others))
    assert after == before, (workflow, params, "changed something", before, after)
    return body


def step_result(job, name):
    found = [r for r in job.get("chain_results", []) if r["name"] == name]
    assert found, (name, job)
    return found[-1]["result"]


def power(vm_uuid, verb):
    job = lab.run_job(f"vm-{verb}", f"/{verb}-{vm_uuid}", {"vm_uuid": vm_uuid})
    assert job["execution"] == "succeeded", job


def delete(vm_uuid):
    server = lab.vm_of(vm_uuid)["server_uuid"]
    power(vm_uuid, "delete")
    assert not os.path.exists(lab.vm_dir(server, vm_uuid))
    assert lab.vm_of(vm_uuid)["state"] == "destroyed"


def usage(vm_uuid):
    """vm-disk-usage: fresh measures recorded. The job."""
    return ok_disk("vm-disk-usage", vm_uuid)


def agent_of(hostname):
    """The pid of a server's agent, checked to be that agent (ternd, runner id
    agent-<hostname>) before anyone signals it."""
    pid = lab.pid("agent-" + hostname)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert os.path.basename(argv[0]) == "ternd" and "agent-" + hostname in argv, argv
    return pid


def dead(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] in "ZX"
    except OSError:
        return True


# ---- provisioning: tests 1-10 -------------------------------------------------------

def test_1_default_layout():
    """P + the 10 GiB image, no disks anywhere: boot 10240 from the image, data 92160,
    nothing free; the boot disk is the image (its content), the data disk a hole."""
    vm_uuid = provision()
    vm = check_vm(vm_uuid)
    assert vm["flexible"] is True and vm["free_space"] == 0, vm
    assert [(x["pci_slot"], x["size"], bool(x.get("boot")), x.get("image"))
            for x in vm["disks"]] == [("0:4:0", 10240, True, I10), ("0:4:1", 92160, False, None)]
    boot, data = (x["path"] for x in vm["disks"])
    image = os.path.join(lab.dir, IMAGES[I10]["file"])
    assert content_digest(boot, 10240) == content_digest(image, 10240)
    assert allocated(boot) <= (IMAGE_DATA_MIB + 1) * MIB, allocated(boot)
    assert allocated(data) < MIB and not data_from(data, 0), allocated(data)
    lab.check_inventory()
    delete(vm_uuid)


def test_2_given_layout():
    """disks [{}, {20480}, {remaining}]: the rule's 71680 for the third (the boot disk
    counts), not the seed example's 81920."""
    vm_uuid = provision(disks=[{}, {"size": 20480}, {"size": "remaining"}])
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == \
        [("0:4:0", 10240), ("0:4:1", 20480), ("0:4:2", 71680)], vm["disks"]
    assert vm["free_space"] == 0, vm
    for x in vm["disks"][1:]:
        assert allocated(x["path"]) < MIB and not data_from(x["path"], 0), x
    lab.check_inventory()
    delete(vm_uuid)


def test_3_package_remaining():
    """The package's [{remaining}]: one boot disk of 102400, the image at its start and
    a hole after it."""
    vm_uuid = provision(package=REMAINING)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"], x.get("image")) for x in vm["disks"]] == \
        [("0:4:0", 102400, I10)], vm["disks"]
    assert vm["free_space"] == 0, vm
    boot = vm["disks"][0]["path"]
    image = os.path.join(lab.dir, IMAGES[I10]["file"])
    assert content_digest(boot, 10240) == content_digest(image, 10240)
    assert not data_from(boot, 10240 * MIB)
    lab.check_inventory()
    delete(vm_uuid)


def test_4_package_image_disk():
    """The package's [{}]: one boot disk of the image's size, 92160 free."""
    vm_uuid = provision(package=ONE)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 10240)], vm["disks"]
    assert vm["free_space"] == 92160, vm
    lab.check_inventory()
    delete(vm_uuid)


def test_5_image_sizes_flexible():
    """A 90 GiB image on P: boot 92160 + data 10240. A 1 TiB image does not fit P:
    InsufficientSpace at once, and nothing anywhere."""
    vm_uuid = provision(image=I90)
    vm = check_vm(vm_uuid)
    assert [x["size"] for x in vm["disks"]] == [92160, 10240] and vm["free_space"] == 0, vm
    image = os.path.join(lab.dir, IMAGES[I90]["file"])
    assert content_digest(vm["disks"][0]["path"], 92160) == content_digest(image, 92160)
    delete(vm_uuid)
    servers = fingerprint([])
    refused_provision(409, "InsufficientSpace", ["1048576", "102400"], image=I1T)
    assert fingerprint([]) == servers
    lab.check_inventory()


def test_6_image_sizes_inflexible():
    """The same images on an inflexible 102400 package: boot = the image, data =
    102400, the allocation their sum; the 1 TiB one too."""
    for image in (I10, I90, I1T):
        vm_uuid = provision(package=FIXED, image=image, server=CN2)
        vm = check_vm(vm_uuid)
        size = IMAGE_MIB[image]
        assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == \
            [("0:4:0", size), ("0:4:1", 102400)], vm["disks"]
        assert vm["allocation"]["disk"] == size + 102400, vm
        assert not data_from(vm["disks"][1]["path"], 0)
        lab.check_inventory()
        delete(vm_uuid)
    lab.check_inventory()


def test_7_disks_on_inflexible():
    refused_provision(422, "InvalidArgument", ["disks"], package=FIXED,
                      disks=[{}, {"size": 10240}])


def test_8_disk_count():
    """9 disks refused; 8 take 0:4:0 ... 0:4:7 (disk0.img ... disk7.img)."""
    nine = [{}] + [{"size": 1024}] * 8
    refused_provision(422, "InvalidArgument", ["disks"], disks=nine)
    vm_uuid = provision(disks=[{}] + [{"size": 1024}] * 6 + [{"size": "remaining"}])
    vm = check_vm(vm_uuid)
    assert [x["pci_slot"] for x in vm["disks"]] == [f"0:4:{i}" for i in range(8)]
    assert [x["size"] for x in vm["disks"]] == [10240] + [1024] * 6 + [102400 - 10240 - 6144]
    assert sorted(os.listdir(os.path.join(vm_dir(vm_uuid), "disks"))) == \
        [f"disk{i}.img" for i in range(8)]
    delete(vm_uuid)


def test_9_boot_size():
    """A boot disk smaller than its image: InvalidArgument; larger than the package:
    InsufficientSpace."""
    refused_provision(422, "InvalidArgument", ["disks[0].size", "5120", "10240"],
                      disks=[{"size": 5120}])
    refused_provision(409, "InsufficientSpace", ["204800", "102400"], disks=[{"size": 204800}])


def test_10_remaining_twice():
    refused_provision(422, "InvalidArgument", ["disks[2].size", "remaining"],
                      disks=[{}, {"size": "remaining"}, {"size": "remaining"}])


def test_bad_provision_disks():
    """Each malformed `disks` refused with InvalidArgument naming the item."""
    cases = [
        ([{}, {"size": 1.5}], "disks[1].size"),
        ([{}, {"size": -1024}], "disks[1].size"),
        ([{}, {"size": 0}], "disks[1].size"),
        ([{}, {"size": "20480"}], "disks[1].size"),
        ([{}, {"size": "20G"}], "disks[1].size"),
        ([{}, {"size": True}], "disks[1].size"),
        ([{}, {"size": None}], "disks[1].size"),
        ([{}, {"size": MAX_DISK + 1}], "disks[1].size"),
        ([{}, {}], "disks[1]"),
        ([{}, {"size": 1024, "pci_slot": "0:4:5"}], "disks[1].pci_slot"),
        ([{}, "1024"], "disks[1]"),
        ([], "disks"),
        ({"size": 1024}, "disks"),
    ]
    for disks, path in cases:
        refused_provision(422, "InvalidArgument", [path], disks=disks)
    lab.check_inventory()


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
    assert commit["after"] == 30000 and commit["free_space"] == 0, commit
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
    assert step_result(job, "commit")["free_space"] == 92160
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
    delete(vm_uuid)


# ---- concurrency and the inventory: tests 22, 23, 25, 26 -----------------------------

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


def test_23_provisions_racing():
    """cn3 has room for one P: two provisions at once, one succeeds, the other takes
    nothing; the committed disk never passes the server's, sampled all along."""
    stop = threading.Event()
    over, samples = [], [0]

    def sample():
        while not stop.is_set():
            status, s = lab.http("/servers/" + CN3)
            if status == 200:
                samples[0] += 1
                if s["disk_committed_mib"] > s["disk_mib"]:
                    over.append(s)
            time.sleep(0.005)

    vms = [str(uuidlib.uuid4()) for _ in range(2)]
    answers = [None, None]

    def submit(i):
        answers[i] = lab.create_job("provision", "/provision-" + vms[i],
                                    provision_params(vms[i], server=CN3))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        threads = [threading.Thread(target=submit, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # The loser is refused at once, or (both admitted) fails at placement; either
        # way for want of room on cn3.
        ends = []
        for status, body in answers:
            if status in (200, 201):
                ends.append(lab.wait_job(body["uuid"], timeout=120))
            else:
                assert status == 409, (status, body)
                ends.append({"execution": "refused", "error": body})
    finally:
        stop.set()
        sampler.join(30)
    won = [vms[i] for i, j in enumerate(ends) if j["execution"] == "succeeded"]
    lost = [(vms[i], j) for i, j in enumerate(ends) if j["execution"] != "succeeded"]
    assert len(won) == 1 and len(lost) == 1, [j["execution"] for j in ends]
    assert lost[0][1]["execution"] in ("failed", "refused"), lost[0][1]
    assert lost[0][1]["error"]["code"] in ("NoAllocatableServersError", "InsufficientSpace"), \
        lost[0][1]["error"]
    print(f"  the loser: {lost[0][1]['execution']} {lost[0][1]['error']['code']}")
    assert not over and samples[0] > 0, (over[:3], samples)
    vm = check_vm(won[0])
    loser = lab.vm_of(lost[0][0])
    assert loser is None or (loser["state"] == "failed" and loser["allocation"] is None), loser
    assert instance_dirs(lost[0][0]) == []
    s = lab.http("/servers/" + CN3)[1]
    assert s["disk_committed_mib"] == 102400 == vm["allocation"]["disk"], s
    lab.check_inventory()
    delete(won[0])


def test_25_inflexible():
    """Disk operations on an instance of an inflexible package are refused."""
    vm_uuid = provision(package=FIXED)
    words = ["not a flexible disk instance", vm_uuid]
    refused("disk-add", vm_uuid, 422, "InvalidArgument", words, size=1024)
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", words, pci_slot="0:4:1",
            size=204800)
    refused("disk-delete", vm_uuid, 422, "InvalidArgument", words, pci_slot="0:4:1")
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_26_quota_and_committed():
    """A package with a zone quota: after each add, resize and delete the VM's quota is
    the package's, its allocation quota + flexible_disk_size, and the server's committed
    disk the sum over its VMs."""
    vm_uuid = provision(package=PQ)
    other = provision(package=P)
    want = 2048 + 102400
    steps = [("disk-delete", {"pci_slot": "0:4:1"}), ("disk-add", {"size": 40960}),
             ("disk-resize", {"pci_slot": "0:4:1", "size": 51200}),
             ("disk-resize", {"pci_slot": "0:4:1", "size": 20480,
                              "dangerous_allow_shrink": True}),
             ("disk-add", {"size": "remaining"}), ("disk-delete", {"pci_slot": "0:4:2"})]
    for workflow, params in [(None, None)] + steps:
        if workflow:
            ok_disk(workflow, vm_uuid, **params)
        vm = check_vm(vm_uuid)
        assert vm["quota"] == 2048 and vm["allocation"]["disk"] == want, (workflow, vm)
        lab.check_inventory()
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 10240),
                                                                   ("0:4:1", 20480)]
    assert vm["free_space"] == 102400 - 30720, vm
    delete(vm_uuid)
    delete(other)
    lab.check_inventory()


# ---- an agent killed: test 27 -------------------------------------------------------

def test_27_agent_killed_mid_resize():
    """The agent of the instance's server killed -9 while a grow is at its apply step:
    once when the job's cursor reaches apply, once when the file has changed size (the
    apply done, its result not yet committed). Restarted, the job finishes, and the
    file's size and the record agree, the content kept."""
    vm_uuid = provision(package=ONE, server=CN2)
    boot = disk(check_vm(vm_uuid), "0:4:0")["path"]
    head = content_digest(boot, 10240)
    for size, when in ((20480, "cursor"), (30720, "file")):
        old = os.stat(boot).st_size // MIB
        agent = agent_of("cn2")
        status, job = disk_job("disk-resize", vm_uuid, pci_slot="0:4:0", size=size)
        assert status in (200, 201), (status, job)
        if when == "cursor":
            def at_apply():
                j = lab.job_of(job["uuid"])
                return j["cursor"]["step"] in ("apply", "commit") or \
                    j["execution"] in ("succeeded", "failed", "canceled")
            wait_for("the job at its apply step", at_apply, timeout=30, every=0.001)
        else:
            wait_for("the file to change size", lambda: os.stat(boot).st_size != old * MIB,
                     timeout=30, every=0.0005)
        os.kill(agent, signal.SIGKILL)
        at = lab.job_of(job["uuid"])["cursor"]["step"]
        seen = os.stat(boot).st_size // MIB
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
                   pci_slot="0:4:1", size=102400)
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


def test_snapshot_rules():
    """Snapshot names are unique per instance; a disk operation refuses an instance
    being provisioned."""
    vm_uuid = provision(package=ONE)
    ok_disk("vm-snapshot-create", vm_uuid, name="a.1")
    before = fingerprint([vm_uuid])
    status, body = disk_job("vm-snapshot-create", vm_uuid, name="a.1")
    assert status in (409, 422) and body["code"] in ("InvalidArgument", "InvalidState"), body
    assert "a.1" in body["message"], body
    assert fingerprint([vm_uuid]) == before
    ok_disk("vm-snapshot-delete", vm_uuid, name="a.1")
    vm = check_vm(vm_uuid)
    assert not vm.get("snapshots"), vm
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
    tests = [test_1_default_layout, test_2_given_layout, test_3_package_remaining,
             test_4_package_image_disk, test_5_image_sizes_flexible,
             test_6_image_sizes_inflexible, test_7_disks_on_inflexible, test_8_disk_count,
             test_9_boot_size, test_10_remaining_twice, test_bad_provision_disks,
             test_11_grow_without_space, test_12_grow_boot, test_13_shrink_guard,
             test_14_same_size, test_15_missing, test_24_misspelt_flag,
             test_16_space_with_snapshots, test_17_writes_raise_snapshot_size,
             test_18_add_remaining, test_19_running, test_20_delete, test_21_sticky_slots,
             test_22_concurrent_grows, test_23_provisions_racing, test_25_inflexible,
             test_26_quota_and_committed, test_27_agent_killed_mid_resize,
             test_x3_resize_while_running, test_bad_disk_params, test_snapshot_rules]
    run_tests(lab, tests, only=sys.argv[3:])


if __name__ == "__main__":
    main()
