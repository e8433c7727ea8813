"""The lab of the flexible disk tests (test_disks.py, test_disk_ops.py) and what they
check with: its description (a 102400 MiB flexible package P, the same with a zone
quota, an inflexible one, packages whose default layout is [{"size": "remaining"}] or
[{}], images of 10 GiB, 90 GiB and 1 TiB, all sparse, and a server with disk room for
exactly one instance of P), the data plane read as a user would (content digests over
data extents, holes, blocks), check_vm (a VM's record and files agree), fingerprint (what
a refused request must leave as it was), and the API calls.

    import disk_lab
    from disk_lab import check_vm, provision, ...
    lab = disk_lab.open_lab(SOURCE, BUILD, "tern-disks-")
"""
import errno
import glob
import hashlib
import json
import os
import re
import uuid as uuidlib

from lab_harness import MIB, Lab

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


lab = None


def open_lab(source, build, prefix):
    """The lab every helper here works on (one per test program)."""
    global lab
    lab = Lab(source, build, DATACENTER, prefix=prefix)
    return lab


# ---- the data plane ----------------------------------------------------------------

def content_digest(path, mib):
    """sha256 of the first `mib` MiB of the file as a reader sees them, holes and the
    bytes past its end reading as zeros: every 4 KiB block that is not all zeros, with
    its offset. So a file grown with a hole has the digest it had, and a hole and
    written zeros are the same content; sizes are checked on their own. Only data
    extents are read (SEEK_DATA/SEEK_HOLE): a 10 GiB disk holding a few MiB costs a few
    MiB."""
    h = hashlib.sha256()
    zero = bytes(4096)
    with open(path, "rb") as f:
        fd = f.fileno()
        end = min(mib * MIB, os.fstat(fd).st_size)
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


def fingerprint(vm_uuids, live=()):
    """What a refused request must not change: the VMs' records, every file and
    directory in their instance directories (size, blocks, mtime; of the files in
    `live`, which a running workload writes, only the size; of the workload's log, that
    it is there), the number of jobs and the servers' counters."""
    out = {"jobs": lab.user_job_count(),
           "servers": sorted(json.dumps(s, sort_keys=True) for s in lab.list_all("/servers"))}
    for v in vm_uuids:
        out[v] = lab.vm_of(v)
        files = {}
        for d in instance_dirs(v):
            for root, dirs, names in os.walk(d):
                for n in dirs + names:
                    p = os.path.join(root, n)
                    st = os.lstat(p)
                    if n == "workload.log":
                        files[p] = st.st_mode
                    elif p in live:
                        files[p] = (st.st_mode, st.st_size)
                    else:
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
    before = lab.user_job_count()
    status, body = lab.create_job("provision", "/provision-" + vm_uuid,
                                  provision_params(vm_uuid, **kw))
    assert (status, body.get("code")) == (want_status, want_code), (kw, status, body)
    for w in words:
        assert w in body["message"], (w, body)
    assert lab.vm_of(vm_uuid) is None
    assert instance_dirs(vm_uuid) == []
    assert lab.user_job_count() == before
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


def refused(workflow, vm_uuid, want_status, want_code, words=(), others=(), live=(),
            **params):
    """A disk job refused at POST /jobs with its status and code, its message naming
    each of `words`, and nothing changed: no job stored, no record or file of the VM
    (or of `others`) touched (but for the contents of `live` files, which a running
    workload writes)."""
    vms = [vm_uuid, *others] if lab.vm_of(vm_uuid) else list(others)
    before = fingerprint(vms, live)
    status, body = disk_job(workflow, vm_uuid, **params)
    assert (status, body.get("code")) == (want_status, want_code), (workflow, params, status, body)
    for w in words:
        assert str(w) in body["message"], (w, body)
    after = fingerprint(vms, live)
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
