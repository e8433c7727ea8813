"""The lab of the shared volume tests (test_volumes.py, test_volume_shares.py,
test_volume_provision.py) and what they check with: its description (fabric networks of
two owners, a non-fabric one, zone, flexible and kvm packages, short share and
reconcile settings), the volume workflows through POST /jobs, provisions that mount
volumes, and the data plane read as a user would: the storage instance's directory and
export/, the share process's pid, a consumer's mounts, file digests.

    import volume_lab
    from volume_lab import create_volume, wait_volume, check_volume, ...
    lab = volume_lab.open_lab(SOURCE, BUILD, "tern-volumes-")
    volume_lab.run(tests, sys.argv[3:])

Every wait is bounded and polls what it waits for (lab_harness.wait_for); a process is
signalled only once /proc shows it is the one meant (a tern-workload naming the
instance's directory, an agent ternd of its server).
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import uuid as uuidlib

# MIB and wait_for are the tests' too (they import them from here).
from lab_harness import MIB, Lab, pid_alive, run_tests, wait_for, workload_pids

OWNER = "00000000-0000-0000-0000-000000000000"  # the CLI's default owner
OTHER = "7e3a1c55-2b9d-4f60-8a0e-3c5d9b1f2a77"

CN1, CN2, CN3 = ("a2000000-0000-4000-8000-000000000001", "a2000000-0000-4000-8000-000000000002",
                 "a2000000-0000-4000-8000-000000000003")
EXTERNAL, FABRIC, FABRIC2, FABRIC_OTHER = ("b2000000-0000-4000-8000-000000000001",
                                           "b2000000-0000-4000-8000-000000000002",
                                           "b2000000-0000-4000-8000-000000000003",
                                           "b2000000-0000-4000-8000-000000000004")
ZONE, FLEX, KVM = ("c2000000-0000-4000-8000-000000000001",
                   "c2000000-0000-4000-8000-000000000002",
                   "c2000000-0000-4000-8000-000000000003")
BASE, OS_IMG, KVM_IMG, FRAIL = ("d2000000-0000-4000-8000-000000000001",
                                "d2000000-0000-4000-8000-000000000002",
                                "d2000000-0000-4000-8000-000000000003",
                                "d2000000-0000-4000-8000-000000000004")

# The 19 sizes of RFD 26 (MiB), ascending.
SIZES = [10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160, 102400, 204800,
         307200, 409600, 512000, 614400, 716800, 819200, 921600, 1024000]

# cn1 and cn2 hold anything here; cn3 is small, and test_volumes.py puts its data root
# on a small tmpfs (the "no free space" server of the snapshot test). Volumes and
# instances are pinned to a server wherever a test depends on where they are.
# FABRIC and FABRIC2 are OWNER's fabric networks (FABRIC first: a volume's default),
# FABRIC_OTHER another owner's, EXTERNAL no fabric at all. The settings are short so
# that the share watch (every second, a share checking its export every 200 ms) and
# the reconcile (every 2 s) act within a test's bounds.
DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 8 * 1024 * 1024, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 8 * 1024 * 1024, "data_root": "servers/cn2"},
        {"uuid": CN3, "hostname": "cn3", "rack": "r2", "ram_mib": 4096,
         "disk_mib": 40960, "data_root": "servers/cn3"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500,
         "fabric": True, "owner_uuids": [OWNER]},
        {"uuid": FABRIC2, "name": "fabric2", "subnet": "192.168.129.0/24",
         "gateway": "192.168.129.1", "provision_start_ip": "192.168.129.200",
         "provision_end_ip": "192.168.129.250", "vlan_id": 129, "mtu": 8500,
         "fabric": True, "owner_uuids": [OWNER]},
        {"uuid": FABRIC_OTHER, "name": "fabric-other", "subnet": "192.168.130.0/24",
         "gateway": "192.168.130.1", "provision_start_ip": "192.168.130.200",
         "provision_end_ip": "192.168.130.250", "vlan_id": 130, "mtu": 8500,
         "fabric": True, "owner_uuids": [OTHER]},
    ],
    "packages": [
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
        {"uuid": FLEX, "name": "flex-100g", "brand": "bhyve", "ram_mib": 1024, "vcpus": 1,
         "disk_mib": 102400, "flexible_disk": True},
        {"uuid": KVM, "name": "lab-kvm", "brand": "kvm", "ram_mib": 1024, "vcpus": 1,
         "disk_mib": 20480},
    ],
    "images": [
        {"uuid": BASE, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
        {"uuid": OS_IMG, "name": "lab-os", "version": "1.0", "size_mib": 10240,
         "file": "images/lab-os.img", "brand": "bhyve"},
        {"uuid": KVM_IMG, "name": "lab-kvm", "version": "1.0", "size_mib": 10240,
         "file": "images/lab-kvm.img", "brand": "kvm"},
        # Its data takes a while to copy: the window in which an agent is killed once
        # an instance's disks exist (X2).
        {"uuid": FRAIL, "name": "lab-frail", "version": "1.0", "size_mib": 10240,
         "data_mib": 256, "file": "images/lab-frail.img", "brand": "bhyve"},
    ],
    "settings": {"share_health_ms": 200, "share_watch_every_s": 1,
                 "net_reconcile_every_s": 2, "net_reconcile_start_delay_s": [1, 2]},
}
ROLE = "nfsvolumestorage"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

lab = None


def open_lab(source, build, prefix, tmpfs_cn3_mib=None):
    """The lab every helper here works on (one per test program). With tmpfs_cn3_mib,
    cn3's data root is a tmpfs of that many MiB (a server whose disk is nearly full)."""
    global lab
    lab = Lab(source, build, DATACENTER, prefix=prefix)
    if tmpfs_cn3_mib:
        root = os.path.join(lab.dir, "servers", "cn3")
        os.makedirs(root)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_cn3_mib}m", "tmpfs", root],
                       check=True, timeout=30)
        lab.mounts.append(root)
    return lab


def run(tests, only=()):
    """Brings the lab up, runs each test (those named in `only` when given) printing its
    time, takes the lab down and unmounts what open_lab mounted."""
    run_tests(lab, tests, only)


# ---- the volume API ----------------------------------------------------------------

def volume_job(workflow, vol_uuid, target=None, **params):
    """POST /jobs of a volume workflow on vol_uuid: (status, body)."""
    return lab.create_job(workflow, target or f"/{workflow}-{vol_uuid}",
                          dict(params, volume_uuid=vol_uuid))


def run_volume_job(workflow, vol_uuid, timeout=60, **params):
    """A volume job accepted and finished: the job."""
    status, job = volume_job(workflow, vol_uuid, **params)
    assert status in (200, 201), (workflow, params, status, job)
    return lab.wait_job(job["uuid"], timeout=timeout)


def ok_volume_job(workflow, vol_uuid, timeout=60, **params):
    job = run_volume_job(workflow, vol_uuid, timeout=timeout, **params)
    assert job["execution"] == "succeeded", (workflow, params, job.get("error"), job)
    return job


def create_params(vol_uuid, name=None, owner=OWNER, **extra):
    p = {"owner_uuid": owner}
    if name is not None:
        p["name"] = name
    p.update({k: v for k, v in extra.items() if v is not None})
    return p


def submit_volume(name=None, owner=OWNER, vol_uuid=None, **extra):
    """POST /jobs volume-create: (volume uuid, status, body). extra: size, networks,
    tags, type, server_uuid (the operator's pin)."""
    vol_uuid = vol_uuid or str(uuidlib.uuid4())
    status, body = volume_job("volume-create", vol_uuid,
                              **create_params(vol_uuid, name, owner, **extra))
    return vol_uuid, status, body


def create_volume(name=None, owner=OWNER, **extra):
    """A volume created and ready, checked whole (check_volume): its record."""
    vol_uuid, status, job = submit_volume(name, owner, **extra)
    assert status in (200, 201), (name, extra, status, job)
    job = lab.wait_job(job["uuid"], timeout=60)
    assert job["execution"] == "succeeded", (name, extra, job.get("error"), job)
    wait_volume(vol_uuid, "ready")
    return check_volume(vol_uuid, owner)


def volume_of(vol_uuid, owner=None):
    """GET /volumes/:uuid: the record, or None on 404 (VolumeNotFound)."""
    q = f"?owner_uuid={owner}" if owner else ""
    status, v = lab.http(f"/volumes/{vol_uuid}{q}")
    if status == 404:
        assert v.get("code") == "VolumeNotFound", v
        return None
    assert status == 200, (status, v)
    return v


def wait_volume(vol_uuid, *states, timeout=60, share=None, fail_fast=True):
    """The volume once in one of `states` (and, given, share_state `share`); with
    fail_fast, a volume that turns failed while failed is not asked for fails the wait
    at once (not for a wait on a recovery)."""
    seen = []

    def there():
        v = volume_of(vol_uuid)
        st = v and v["state"]
        if not seen or seen[-1] != (st, v and v.get("share_state")):
            seen.append((st, v and v.get("share_state")))
        if v is None:
            return "gone" in states and {"state": "gone"}
        if v["state"] == "failed" and "failed" not in states and fail_fast:
            raise AssertionError(f"volume {vol_uuid} failed: {v}")
        if v["state"] in states and (share is None or v.get("share_state") == share):
            return v
        return None
    try:
        return wait_for(f"volume {vol_uuid} {states} {share or ''}", there, timeout=timeout,
                        every=0.05)
    except AssertionError as e:
        raise AssertionError(f"{e}; seen {seen}") from None


def wait_gone(vol_uuid, timeout=60):
    return wait_volume(vol_uuid, "gone", timeout=timeout)


def delete_volume(vol_uuid, owner=OWNER, force=None):
    """volume-delete of a volume accepted and finished: the job."""
    params = {"owner_uuid": owner}
    if force is not None:
        params["force"] = force
    return ok_volume_job("volume-delete", vol_uuid, **params)


def refused_volume_job(workflow, vol_uuid, want_status, want_code, words=(), **params):
    """A volume job refused at POST /jobs with its status and code, its message naming
    each of `words`, and nothing stored or changed (fingerprint)."""
    before = stable(fingerprint())
    status, body = volume_job(workflow, vol_uuid, **params)
    assert (status, body.get("code")) == (want_status, want_code), \
        (workflow, params, status, body)
    for w in words:
        assert str(w) in body["message"], (w, body)
    after = stable(fingerprint())
    assert after == before, (workflow, params, "changed something", diff(before, after))
    return body


def references(vol_uuid):
    status, refs = lab.http(f"/volumes/{vol_uuid}/references")
    assert status == 200, (status, refs)
    return refs


def reservations(**q):
    """GET /reservations with the given filters (volume_uuid, job_uuid)."""
    query = "&".join(f"{k}={v}" for k, v in q.items())
    return lab.list_all("/reservations" + ("?" + query if query else ""))


def schedule_of(workflow):
    """The schedule a workflow's file declares (GET /schedules: the one naming the
    workflow), or None."""
    for s in lab.list_all("/schedules"):
        if str(s.get("workflow", "")).split("@")[0] == workflow:
            return s
    return None


# ---- storage instances and the share process --------------------------------------

def storage_vm(vm_uuid):
    """A storage instance's record (GET /vms/:uuid?system_role=nfsvolumestorage), or None."""
    status, vm = lab.http(f"/vms/{vm_uuid}?system_role={ROLE}")
    return vm if status == 200 else None


def storage_dir(v):
    return lab.vm_dir(v["server_uuid"], v["vm_uuid"])


def export_dir(v):
    return os.path.join(storage_dir(v), "export")


def share_pid(v):
    """The pid of the volume's share process, from its pid file, checked to be a live
    tern-workload of that storage instance; None when there is none."""
    d = storage_dir(v)
    try:
        with open(os.path.join(d, "workload.pid")) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return pid if pid in workload_pids(d) and pid_alive(pid) else None


def kill_share(v, sig=signal.SIGKILL):
    """Sends sig to the volume's share process (checked first: a tern-workload `share`
    whose command line names this storage instance). Its pid."""
    pid = share_pid(v)
    assert pid, ("no share process", v)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert os.path.basename(argv[0]) == "tern-workload" and "share" in argv and \
        any(a.startswith(storage_dir(v)) for a in argv), argv
    os.kill(pid, sig)
    return pid


def ips_taken(network):
    """{ip: row} of the addresses taken on a network."""
    return {r["ip"]: r for r in lab.list_all(f"/networks/{network}/ips")
            if r["state"] == "taken"}


def check_volume(vol_uuid, owner=OWNER):
    """A volume's record, its storage instance's record and the data plane agree: for a
    ready volume, a running storage instance (alias, role, brand, package, quota, one
    NIC per volume network, its addresses taken by it, the allocation held), its
    directory with vm.json and a real export/ directory, a live share process named in
    workload.pid, share_state running, filesystem_path and share_endpoint naming the
    first network's address and the volume. Returns the record."""
    v = volume_of(vol_uuid, owner)
    assert v is not None, vol_uuid
    assert v["uuid"] == vol_uuid and v.get("id") == vol_uuid, v
    assert v["owner_uuid"] == owner and v["type"] == "tritonnfs", v
    assert v["size"] in SIZES, v
    assert isinstance(v["version"], int), v
    assert v["networks"], v
    if v["state"] != "ready":
        return v
    assert v["share_state"] == "running", v
    vm = storage_vm(v["vm_uuid"])
    assert vm is not None, ("no storage instance", v)
    assert vm["state"] == "running", vm
    assert vm["alias"] == f"volume-{v['name']}-{vol_uuid}", (vm["alias"], v)
    assert vm["brand"] == "joyent-minimal" and vm["ram"] == 256, vm
    assert vm["quota"] == v["size"], (vm, v)
    assert vm["package_name"] == f"sdc_volume_nfs_{v['size'] // 1024}", vm
    assert vm["internal_metadata"]["sdc:system_role"] == ROLE, vm
    assert vm["volume_uuid"] == vol_uuid, vm
    assert vm["server_uuid"] == v["server_uuid"], (vm, v)
    a = vm["allocation"]
    assert (a["server_uuid"], a["ram"], a["disk"]) == (v["server_uuid"], 256, v["size"]), vm
    assert [n["network_uuid"] for n in vm["nics"]] == v["networks"], (vm["nics"], v)
    for nic in vm["nics"]:
        assert nic["state"] == "running" and nic["belongs_to_uuid"] == v["vm_uuid"], nic
        assert nic["cn_uuid"] == v["server_uuid"], nic
        row = ips_taken(nic["network_uuid"]).get(nic["ip"])
        assert row and row["belongs_to_uuid"] == v["vm_uuid"], (nic, row)
    ip = vm["nics"][0]["ip"]
    assert v["filesystem_path"] == f"{ip}:/exports/data", v
    assert v["share_endpoint"] == f"nfs://{ip}/{v['name']}", v
    d = storage_dir(v)
    assert os.path.realpath(v["export_path"]) == os.path.realpath(os.path.join(d, "export")), v
    assert os.path.isabs(v["export_path"]), v
    ex = os.path.join(d, "export")
    assert os.path.isdir(ex) and not os.path.islink(ex), ex
    with open(os.path.join(d, "vm.json")) as f:
        conf = json.load(f)
    assert (conf["uuid"], conf["role"], conf["volume_uuid"], conf["workload"], conf["state"]) == \
        (v["vm_uuid"], ROLE, vol_uuid, "share", "running"), conf
    assert conf["alias"] == vm["alias"], conf
    assert conf["internal_metadata"]["sdc:system_role"] == ROLE, conf
    pid = share_pid(v)
    assert pid, ("no live share process", d, os.listdir(d))
    assert workload_pids(d) == [pid], (workload_pids(d), pid)
    # Hidden from the instance views.
    assert v["vm_uuid"] not in {x["uuid"] for x in lab.list_all("/vms")}
    status, _ = lab.http(f"/vms/{v['vm_uuid']}")
    assert status == 404, status
    return v


def check_volume_gone(v):
    """A deleted volume leaves nothing: GET 404, no storage directory, no share
    process, the storage instance destroyed (or never made), its addresses free."""
    assert volume_of(v["uuid"]) is None, v["uuid"]
    if v.get("vm_uuid"):
        for s in lab.roots:
            d = lab.vm_dir(s, v["vm_uuid"])
            assert not os.path.exists(d), d
            assert not workload_pids(d), d
        vm = storage_vm(v["vm_uuid"])
        assert vm is None or (vm["state"] in ("destroyed", "failed") and not vm.get("nics")
                              and vm.get("allocation") is None), vm
    if v.get("filesystem_path"):
        ip = v["filesystem_path"].split(":")[0]
        for net in v["networks"]:
            assert ip not in ips_taken(net), (ip, net)
    names = {x["name"] for x in lab.list_all(f"/volumes?owner_uuid={v['owner_uuid']}")}
    assert v["name"] not in names, (v["name"], names)


# ---- consumers ----------------------------------------------------------------------

def provision_params(vm_uuid, volumes=None, server=CN1, package=ZONE, image=BASE,
                     networks=None, owner=OWNER, disks=None, autoboot=None,
                     workload=None):
    p = {"vm_uuid": vm_uuid, "owner_uuid": owner, "package": package, "image_uuid": image,
         "networks": networks if networks is not None else
         [{"uuid": EXTERNAL, "primary": True}, {"uuid": FABRIC}],
         "server_uuid": server}
    if volumes is not None:
        p["volumes"] = volumes
    if disks is not None:
        p["disks"] = disks
    if autoboot is not None:
        p["autoboot"] = autoboot
    if workload:
        p["customer_metadata"] = {"lab:workload": workload}
    return p


def submit_provision(volumes, vm_uuid=None, **kw):
    """POST /jobs provision with volumes: (vm uuid, status, body)."""
    vm_uuid = vm_uuid or str(uuidlib.uuid4())
    status, body = lab.create_job("provision", "/provision-" + vm_uuid,
                                  provision_params(vm_uuid, volumes, **kw))
    return vm_uuid, status, body


def provision_with_volumes(volumes, timeout=90, **kw):
    """A VM provisioned mounting `volumes`, the job succeeded: (vm uuid, job)."""
    vm_uuid, status, job = submit_provision(volumes, **kw)
    assert status in (200, 201), (volumes, kw, status, job)
    job = lab.wait_job(job["uuid"], timeout=timeout)
    assert job["execution"] == "succeeded", (job.get("error"), job)
    return vm_uuid, job


def vm_dir(vm_uuid):
    vm = lab.vm_of(vm_uuid)
    return lab.vm_dir(vm["server_uuid"], vm_uuid)


def mount_path(vm_uuid, mountpoint, server=None):
    d = lab.vm_dir(server, vm_uuid) if server else vm_dir(vm_uuid)
    return os.path.join(d, "mounts", mountpoint.lstrip("/"))


def check_consumer(vm_uuid, mounts):
    """A consumer's record, vm.json and mounts agree with `mounts` ([(volume record,
    mountpoint, mode)]): vm.volumes, sdc:volumes (record and vm.json, the JSON text RFD
    26 gives), each mount a symlink to its volume's export, the VM among each volume's
    references and holding no reservation. Returns the VM record."""
    vm = lab.vm_of(vm_uuid)
    assert vm is not None and vm["state"] in ("running", "stopped"), vm
    want = [{"mountpoint": mp, "name": v["name"], "nfsvolume": v["filesystem_path"],
             "mode": mode, "type": "tritonnfs"} for v, mp, mode in mounts]
    got = json.loads(vm["internal_metadata"]["sdc:volumes"])
    assert got == want, (got, want)
    assert [(m["name"], m["volume_uuid"], m["mountpoint"], m["mode"], m["type"])
            for m in vm["volumes"]] == \
        [(v["name"], v["uuid"], mp, mode, "tritonnfs") for v, mp, mode in mounts], vm["volumes"]
    d = lab.vm_dir(vm["server_uuid"], vm_uuid)
    with open(os.path.join(d, "vm.json")) as f:
        conf = json.load(f)
    assert json.loads(conf["internal_metadata"]["sdc:volumes"]) == want, conf
    assert [(m["name"], m["volume_uuid"], m["mountpoint"], m["mode"], m["nfsvolume"],
             os.path.realpath(m["export_path"])) for m in conf["volumes"]] == \
        [(v["name"], v["uuid"], mp, mode, v["filesystem_path"],
          os.path.realpath(v["export_path"])) for v, mp, mode in mounts], conf["volumes"]
    for v, mp, _ in mounts:
        m = mount_path(vm_uuid, mp, vm["server_uuid"])
        assert os.path.islink(m), (m, os.listdir(os.path.dirname(m)))
        assert os.path.realpath(m) == os.path.realpath(v["export_path"]), \
            (m, os.readlink(m), v["export_path"])
        assert vm_uuid in references(v["uuid"]), (vm_uuid, references(v["uuid"]))
        assert not [r for r in reservations(volume_uuid=v["uuid"]) if r["vm_uuid"] == vm_uuid]
    return vm


def vm_action(verb, vm_uuid):
    job = lab.run_job(f"vm-{verb}", f"/{verb}-{vm_uuid}", {"vm_uuid": vm_uuid})
    assert job["execution"] == "succeeded", (verb, job.get("error"), job)
    return job


def delete_vm(vm_uuid):
    server = lab.vm_of(vm_uuid)["server_uuid"]
    vm_action("delete", vm_uuid)
    assert not os.path.exists(lab.vm_dir(server, vm_uuid))
    assert lab.vm_of(vm_uuid)["state"] == "destroyed"


# ---- the data plane -----------------------------------------------------------------

def write_file(path, size=64 * 1024, data=None):
    """Writes `data` (or `size` fresh random bytes) to path, synced: its sha256."""
    data = data if data is not None else os.urandom(size)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return hashlib.sha256(data).hexdigest()


def tree(d):
    """{relative path: sha256} of every regular file under d (symlinks not followed)."""
    out = {}
    for root, dirs, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = hashlib.sha256(f.read()).hexdigest()
    return out


def agent_of(hostname):
    """The pid of a server's agent, checked to be that agent before it is signalled."""
    pid = lab.pid("agent-" + hostname)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert os.path.basename(argv[0]) == "ternd" and "agent-" + hostname in argv, argv
    return pid


class Paused:
    """Agents stopped (SIGSTOP) for the length of a with block, continued after."""

    def __init__(self, *hostnames):
        self.pids = [agent_of(h) for h in hostnames]

    def __enter__(self):
        for p in self.pids:
            os.kill(p, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        for p in self.pids:
            os.kill(p, signal.SIGCONT)
        return False


HOST = {CN1: "cn1", CN2: "cn2", CN3: "cn3"}


# ---- the inventory, storage instances included -------------------------------------

def all_vms():
    """Every VM record the views hold, storage instances included, by uuid."""
    out = {}
    for q in ("", "?state=failed", "?state=destroyed", f"?system_role={ROLE}",
              f"?system_role={ROLE}&state=failed", f"?system_role={ROLE}&state=destroyed"):
        for vm in lab.list_all("/vms" + q):
            out[vm["uuid"]] = vm
    return out


def check_inventory():
    """lab_harness's inventory rule (committed RAM and disk are the sums of the
    allocations held, every taken address is a live NIC's, storage instances counted);
    and every live storage instance serves a volume whose record names it, every volume
    not failed names a live storage instance (or none yet while creating)."""
    lab.check_inventory()
    vms = all_vms()
    volumes = lab.list_all("/volumes")
    by_storage = {v["vm_uuid"]: v for v in volumes if v.get("vm_uuid")}
    for vm in vms.values():
        if (vm.get("internal_metadata") or {}).get("sdc:system_role") == ROLE and \
                vm.get("allocation"):
            assert vm["uuid"] in by_storage, ("a live storage instance serves no volume", vm)
    for v in volumes:
        if v["state"] in ("ready", "rolling_back", "deleting"):
            vm = vms.get(v["vm_uuid"])
            assert vm and vm.get("allocation"), ("a volume without its storage instance", v)


def fingerprint():
    """What a refused request must not change: the jobs, the volumes (whole records),
    the reservations, the VMs (storage instances included), the servers' counters, the
    addresses taken, the storage directories on every data root."""
    dirs = sorted(os.path.join(s, d) for s in lab.roots
                  for d in (os.listdir(lab.root(s)) if os.path.isdir(lab.root(s)) else [])
                  if d != "images")
    return {"jobs": user_jobs(),
            "volumes": sorted(json.dumps(v, sort_keys=True) for v in lab.list_all("/volumes")),
            "reservations": sorted(json.dumps(r, sort_keys=True) for r in reservations()),
            "vms": sorted(json.dumps(v, sort_keys=True) for v in all_vms().values()),
            "servers": sorted(json.dumps(s, sort_keys=True) for s in lab.list_all("/servers")),
            "ips": {n["uuid"]: sorted(ips_taken(n["uuid"])) for n in DATACENTER["networks"]},
            "dirs": dirs}


def user_jobs():
    """The uuids of the jobs made for the owners (the lab's schedules make others every
    second: share watch, reconcile; they name no owner)."""
    return sorted(j["uuid"] for o in (OWNER, OTHER)
                  for j in lab.list_all(f"/jobs?owner_uuid={o}"))


def stable(fp):
    """A fingerprint without what the share watch changes every second (the probe's
    times), for comparisons across a refusal."""
    out = dict(fp)
    vols = []
    for text in fp["volumes"]:
        v = json.loads(text)
        for k in ("share_probed_at", "version"):
            v.pop(k, None)
        vols.append(json.dumps(v, sort_keys=True))
    out["volumes"] = sorted(vols)
    return out


def diff(a, b):
    return {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}


def step_result(job, name):
    found = [r for r in job.get("chain_results", []) if r["name"] == name]
    assert found, (name, [r["name"] for r in job.get("chain_results", [])])
    return found[-1]["result"]


def log(msg):
    print("  " + msg, file=sys.stderr, flush=True)

