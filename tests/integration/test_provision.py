#!/usr/bin/env python3
"""Provisioning on a real lab (tools/lab up on a description of the test's own, with
its own Redis, control ternd and one agent per server), end to end through the
workflows provision, vm-start, vm-stop and vm-delete and the CLI:

* the views answer (servers, networks, packages, images, VMs, NICs, a network's IPs);
* every bad request is refused at create by the admission check with its code, and
  nothing is stored (no job, no VM, no IP taken);
* a provision (the CLI's `tern vm create --watch`) leaves one running instance: its
  record, its allocation on its server, its NICs and IPs (the lowest free address), its
  directory with vm.json and sparse disks, and its workload process; stop, start and
  delete do what they say, and delete gives everything back;
* the same action cannot be queued twice for one instance (the target);
* 20 provisions racing for a server with room for 3: exactly 3 succeed, the others fail
  NoAllocatableServersError having taken nothing, and the committed RAM, sampled all
  along, never exceeds the server's;
* an agent killed -9 while it creates an instance (its directory exists, vm.json does
  not yet): restarted, the provision finishes with one instance, one allocation and one
  set of IPs, in Redis and on the data plane (one directory, no partial file, one
  workload process);
* an image file removed: the provision fails and gives back everything it took
  (records and files); the file restored, `retry` from place succeeds with one
  allocation and one set of IPs, the same server and address as before;
* a fault after the disks exist (the agent killed -9 mid-create, the image files
  removed before it comes back): the re-run create fails and nothing is left, records
  or files;
* a writer instance's workload survives a restart of its agent and its records go on
  without a gap (tern-workload verify after a stop through the restarted agent).

After every scenario the inventory is checked whole: each server's committed RAM and
disk are the sum of the allocations held on it and within its size; each taken address
belongs to a NIC of a live instance and each such NIC holds one.

Usage: test_provision.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into (tools/lab down --dir DIR stops it). Every wait is bounded and polls what it
waits for; every process the test starts is stopped by its pid (tools/lab down).
"""
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import Lab, run_tests, wait_for, workload_pids  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
WORKLOAD = os.path.join(BUILD, "lab", "tern-workload")
MIB = 1024 * 1024
OWNER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"

CN1, CN2, CN3 = ("a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002",
                 "a0000000-0000-4000-8000-000000000003")
EXTERNAL = "b0000000-0000-4000-8000-000000000001"
TINY = "b0000000-0000-4000-8000-000000000002"
SMALL, ZONE = "c0000000-0000-4000-8000-000000000001", "c0000000-0000-4000-8000-000000000002"
OS_IMG, BIG_IMG, FRAIL_IMG, BASE_IMG = ("d0000000-0000-4000-8000-000000000001",
                                        "d0000000-0000-4000-8000-000000000002",
                                        "d0000000-0000-4000-8000-000000000003",
                                        "d0000000-0000-4000-8000-000000000004")

# cn1 has room for exactly 3 instances of lab-small (1024 MiB of RAM each); the tiny
# network has two provision addresses; lab-big's image holds enough data that copying it
# takes a while (the window in which an agent is killed mid-create); lab-frail's file
# is the one removed.
DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 3 * 1024 + 512,
         "disk_mib": 200 * 1024, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 2097152, "data_root": "servers/cn2"},
        {"uuid": CN3, "hostname": "cn3", "rack": "r2", "ram_mib": 65536,
         "disk_mib": 2097152, "data_root": "servers/cn3"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": TINY, "name": "tiny", "subnet": "198.51.100.0/29", "gateway": "198.51.100.1",
         "provision_start_ip": "198.51.100.2", "provision_end_ip": "198.51.100.3",
         "vlan_id": 30, "mtu": 1500},
    ],
    "packages": [
        {"uuid": SMALL, "name": "lab-small", "brand": "bhyve", "ram_mib": 1024, "vcpus": 1,
         "disk_mib": 20480, "flexible_disk": True},
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
    ],
    "images": [
        {"uuid": OS_IMG, "name": "lab-os", "version": "1.0", "size_mib": 10240,
         "file": "images/lab-os.img", "brand": "bhyve"},
        {"uuid": BIG_IMG, "name": "lab-big", "version": "1.0", "size_mib": 10240,
         "data_mib": 768, "file": "images/lab-big.img", "brand": "bhyve"},
        {"uuid": FRAIL_IMG, "name": "lab-frail", "version": "1.0", "size_mib": 10240,
         "file": "images/lab-frail.img", "brand": "bhyve"},
        {"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
    ],
    "settings": {},
}
ROOTS = {CN1: "servers/cn1", CN2: "servers/cn2", CN3: "servers/cn3"}


lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-provision-")
http, list_all, tern, create_job = lab.http, lab.list_all, lab.tern, lab.create_job
job_of, wait_job, vm_of, raw_records = lab.job_of, lab.wait_job, lab.vm_of, lab.raw_records
check_inventory = lab.check_inventory


def provision_params(vm_uuid, server=None, image=OS_IMG, networks=None, workload=None,
                     alias=None, package="lab-small", disks=None):
    p = {"vm_uuid": vm_uuid, "owner_uuid": OWNER, "package": package, "image_uuid": image,
         "networks": networks or [{"uuid": EXTERNAL, "primary": True}]}
    if disks is not None:
        p["disks"] = disks
    if server:
        p["server_uuid"] = server
    if workload:
        p["customer_metadata"] = {"lab:workload": workload}
    if alias:
        p["alias"] = alias
    return p


def provision(vm_uuid, **kw):
    status, job = create_job("provision", "/provision-" + vm_uuid, provision_params(vm_uuid, **kw))
    assert status in (200, 201), (status, job)
    return job["uuid"]


def action(workflow, verb, vm_uuid):
    status, job = create_job(workflow, f"/{verb}-{vm_uuid}", {"vm_uuid": vm_uuid})
    assert status in (200, 201), (status, job)
    return job["uuid"]


def counts():
    return lab.user_job_count(), len(list_all("/vms?state=failed")) + len(list_all("/vms"))


def taken_ips(network):
    return {r["ip"]: r for r in list_all(f"/networks/{network}/ips") if r["state"] == "taken"}


def instance_dirs(vm_uuid):
    return [d for s in ROOTS for d in [os.path.join(lab.root(s), vm_uuid)] if os.path.exists(d)]


def check_running_instance(vm_uuid, server, workload="idle"):
    """Redis and the data plane both show one whole instance of vm_uuid on server."""
    vm = vm_of(vm_uuid)
    assert vm is not None and vm["state"] == "running", vm
    assert vm["server_uuid"] == server, vm
    a = vm["allocation"]
    assert (a["server_uuid"], a["ram"], a["disk"]) == (server, 1024, 20480), vm
    # lab-small is flexible (20480 MiB) and lab-os 10240 MiB: the default layout.
    assert [d["pci_slot"] for d in vm["disks"]] == ["0:4:0", "0:4:1"], vm["disks"]
    assert [d["size"] for d in vm["disks"]] == [10240, 10240], vm["disks"]
    assert vm["disks"][0]["image"] == vm["image_uuid"] and vm["disks"][0]["boot"] is True
    assert all("image_uuid" not in x for x in vm["disks"]), vm["disks"]
    assert len({x["id"] for x in vm["disks"]}) == 2, vm["disks"]
    assert (vm["flexible"], vm["flexible_disk_size"], vm["quota"], vm["free_space"]) == \
        (True, 20480, 0, 0), vm
    assert instance_dirs(vm_uuid) == [os.path.join(lab.root(server), vm_uuid)]
    d = os.path.join(lab.root(server), vm_uuid)
    assert [x["path"] for x in vm["disks"]] == [os.path.join(d, "disks", f"disk{n}.img")
                                                 for n in (0, 1)], vm["disks"]
    assert os.path.isfile(os.path.join(d, "vm.json"))
    assert not glob.glob(os.path.join(d, "**", "*.part"), recursive=True)
    disks = sorted(os.listdir(os.path.join(d, "disks")))
    assert disks == ["disk0.img", "disk1.img"], disks
    boot = os.stat(os.path.join(d, "disks", "disk0.img"))
    assert boot.st_size == 10240 * MIB and boot.st_blocks * 512 < 1024 * MIB, boot
    data = os.stat(os.path.join(d, "disks", "disk1.img"))
    assert data.st_size == 10240 * MIB, data
    pids = workload_pids(d)
    assert len(pids) == 1, (vm_uuid, pids)
    raw = [r for r in raw_records("vm:*").values()
           if isinstance(r, dict) and r.get("uuid") == vm_uuid]
    assert len(raw) == 1 and raw[0]["state"] == "running", raw
    ips = [r for r in raw_records("ip:*").values() if r.get("belongs_to_uuid") == vm_uuid]
    assert len(ips) == len(vm["nics"]), (ips, vm["nics"])
    return vm, pids[0]


# ---- the scenarios -----------------------------------------------------------------

def test_views():
    servers = list_all("/servers")
    assert sorted(s["hostname"] for s in servers) == ["cn1", "cn2", "cn3"], servers
    for s in servers:
        assert s["ram_committed_mib"] == 0 and s["disk_committed_mib"] == 0, s
    assert sorted(n["name"] for n in list_all("/networks")) == ["external", "tiny"]
    assert sorted(p["name"] for p in list_all("/packages")) == ["lab-small", "lab-zone"]
    assert len(list_all("/images")) == 4
    assert list_all("/vms") == [] and list_all("/nics") == []
    assert list_all(f"/networks/{EXTERNAL}/ips") == [] or not taken_ips(EXTERNAL)
    status, body = http("/servers/" + CN1)
    assert status == 200 and body["hostname"] == "cn1", body
    status, body = http("/vms/" + str(uuidlib.uuid4()))
    assert status == 404, (status, body)
    out = tern("server", "list").stdout
    assert "cn1" in out and "cn3" in out, out
    out = tern("network", "list").stdout
    assert "203.0.113.0/24" in out, out


def test_bad_requests():
    before = counts()
    taken_before = taken_ips(EXTERNAL)
    bad_uuid = str(uuidlib.uuid4())
    cases = [
        ("unknown package", provision_params(bad_uuid, package="no-such"), None, 404,
         "ResourceNotFound"),
        ("unknown image", provision_params(bad_uuid, image=str(uuidlib.uuid4())), None, 404,
         "ResourceNotFound"),
        ("unknown network", provision_params(bad_uuid, networks=[{"uuid": str(uuidlib.uuid4())}]),
         None, 404, "ResourceNotFound"),
        ("unknown server", provision_params(bad_uuid, server=str(uuidlib.uuid4())), None, 404,
         "ResourceNotFound"),
        ("brand mismatch", provision_params(bad_uuid, package="lab-zone"), None, 422,
         "InvalidArgument"),
        ("vm_uuid not a uuid", provision_params("not-a-uuid"), "/provision-not-a-uuid", 422,
         "InvalidArgument"),
        ("alias Triton refuses", provision_params(bad_uuid, alias="bad alias!"), None, 422,
         "InvalidArgument"),
        ("target of another vm", provision_params(bad_uuid), "/provision-" + str(uuidlib.uuid4()),
         422, "InvalidArgument"),
        ("address outside the range",
         provision_params(bad_uuid, networks=[{"uuid": EXTERNAL, "ip": "203.0.113.251"}]), None,
         409, None),
        ("disks on an inflexible package",
         provision_params(bad_uuid, package="lab-zone", image=BASE_IMG, disks=[{}]), None, 422,
         "InvalidArgument"),
        ("nine disks", provision_params(bad_uuid, disks=[{}] + [{"size": 1}] * 8), None, 422,
         "InvalidArgument"),
        ("remaining twice",
         provision_params(bad_uuid, disks=[{}, {"size": "remaining"}, {"size": "remaining"}]),
         None, 422, "InvalidArgument"),
        ("a boot disk smaller than its image", provision_params(bad_uuid, disks=[{"size": 5120}]),
         None, 422, "InvalidArgument"),
        ("disks beyond the package's space",
         provision_params(bad_uuid, disks=[{}, {"size": 10241}]), None, 409, "InsufficientSpace"),
    ]
    for what, params, target, want_status, want_code in cases:
        status, body = create_job("provision", target or "/provision-" + params["vm_uuid"], params)
        assert status == want_status, (what, status, body)
        if want_code:
            assert body["code"] == want_code, (what, body)
        assert body.get("message"), (what, body)
    # What the CLI says of one: the code and the message, exit status 3.
    p = tern("vm", "create", "--package", "no-such", "--image", OS_IMG, "--network", "external",
             check=False)
    assert p.returncode == 3 and "ResourceNotFound" in p.stderr, (p.returncode, p.stderr)
    assert counts() == before, (counts(), before)
    assert taken_ips(EXTERNAL) == taken_before


def test_provision_and_lifecycle():
    # Through the CLI, as an operator would.
    vm_uuid = str(uuidlib.uuid4())
    p = tern("vm", "create", "--uuid", vm_uuid, "--alias", "web0", "--owner", OWNER, "--package",
             "lab-small", "--image", "lab-os", "--network", "external", "--server", "cn2",
             "--watch")
    assert "succeeded" in p.stdout, p.stdout
    vm, pid = check_running_instance(vm_uuid, CN2)
    assert vm["alias"] == "web0" and vm["owner_uuid"] == OWNER and vm["billing_id"] == SMALL, vm
    assert vm["nics"][0]["ip"] == "203.0.113.10" and vm["nics"][0]["primary"] is True, vm["nics"]
    nic = vm["nics"][0]
    assert nic["state"] == "running" and nic["belongs_to_uuid"] == vm_uuid, nic
    assert nic["cn_uuid"] == CN2, nic
    out = tern("vm", "list").stdout
    assert "web0" in out and "running" in out and "203.0.113.10" in out, out
    out = tern("nic", "list", "--vm", "web0").stdout
    assert nic["mac"] in out, out
    out = tern("network", "ips", "external").stdout
    assert "203.0.113.10" in out and vm_uuid in out, out
    check_inventory()

    # A second one takes the next address; the same vm_uuid again is refused.
    status, body = create_job("provision", "/provision-" + vm_uuid, provision_params(vm_uuid))
    assert status == 409 and body["code"] == "VmAlreadyExists", (status, body)

    # The same action cannot be queued twice for one instance: with cn2's agent paused,
    # a stop waits in its queue and a second stop is refused by its target.
    agent = lab.pid("agent-cn2")
    os.kill(agent, signal.SIGSTOP)
    try:
        stop1 = action("vm-stop", "stop", vm_uuid)
        status, body = create_job("vm-stop", "/stop-" + vm_uuid, {"vm_uuid": vm_uuid})
        assert status == 409, (status, body)
    finally:
        os.kill(agent, signal.SIGCONT)
    job = wait_job(stop1)
    assert job["execution"] == "succeeded", job
    vm = vm_of(vm_uuid)
    assert vm["state"] == "stopped" and vm["nics"][0]["state"] == "stopped", vm
    wait_for("the workload to stop", lambda: not workload_pids(os.path.join(lab.root(CN2), vm_uuid)))
    # Stopping a stopped instance makes no sense: refused at create.
    status, body = create_job("vm-stop", "/stop-" + vm_uuid, {"vm_uuid": vm_uuid})
    assert status == 409 and body["code"] == "InvalidState", (status, body)

    p = tern("vm", "start", "web0", "--watch")
    assert p.returncode == 0, p
    vm, pid2 = check_running_instance(vm_uuid, CN2)
    assert pid2 != pid

    p = tern("vm", "delete", "web0", "--watch")
    assert p.returncode == 0, p
    assert vm_of(vm_uuid)["state"] == "destroyed"
    assert all(v["uuid"] != vm_uuid for v in list_all("/vms"))
    assert any(v["uuid"] == vm_uuid for v in list_all("/vms?state=destroyed"))
    assert instance_dirs(vm_uuid) == []
    assert not workload_pids(os.path.join(lab.root(CN2), vm_uuid))
    assert "203.0.113.10" not in taken_ips(EXTERNAL)
    check_inventory()
    status, body = create_job("vm-delete", "/delete-" + vm_uuid, {"vm_uuid": vm_uuid})
    assert status == 404, (status, body)


def test_subnet_full():
    """The tiny network's two addresses taken, a third provision on it is refused."""
    vms = [str(uuidlib.uuid4()) for _ in range(2)]
    jobs = [provision(v, server=CN3, networks=[{"uuid": TINY, "primary": True}]) for v in vms]
    for j in jobs:
        assert wait_job(j)["execution"] == "succeeded", job_of(j)
    assert sorted(vm_of(v)["nics"][0]["ip"] for v in vms) == ["198.51.100.2", "198.51.100.3"]
    before = counts()
    extra = str(uuidlib.uuid4())
    status, body = create_job("provision", "/provision-" + extra,
                              provision_params(extra, networks=[{"uuid": TINY}]))
    assert status == 409 and body["code"] == "SubnetFull", (status, body)
    assert "tiny" in body["message"] or TINY in body["message"], body
    assert counts() == before
    for v in vms:
        assert wait_job(action("vm-delete", "delete", v))["execution"] == "succeeded"
    check_inventory()


def test_race_for_three():
    """20 provisions pinned to cn1, which has room for 3."""
    stop = threading.Event()
    over = []
    samples = [0]

    def sample():
        while not stop.is_set():
            status, s = http("/servers/" + CN1)
            if status == 200:
                samples[0] += 1
                if s["ram_committed_mib"] > s["ram_mib"] or s["disk_committed_mib"] > s["disk_mib"]:
                    over.append(s)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    vms = [str(uuidlib.uuid4()) for _ in range(20)]
    jobs = [None] * 20
    try:
        def submit(i):
            jobs[i] = provision(vms[i], server=CN1)
        threads = [threading.Thread(target=submit, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(jobs), jobs
        ends = [wait_job(j, timeout=180) for j in jobs]
    finally:
        stop.set()
        sampler.join(30)
    won = [vms[i] for i, j in enumerate(ends) if j["execution"] == "succeeded"]
    lost = [j for j in ends if j["execution"] != "succeeded"]
    assert len(won) == 3, [j["execution"] for j in ends]
    for j in lost:
        assert j["execution"] == "failed" and j["error"]["code"] == "NoAllocatableServersError", j
    assert not over, over[:3]
    assert samples[0] > 0
    s = http("/servers/" + CN1)[1]
    assert s["ram_committed_mib"] == 3 * 1024 and s["instances"] == 3, s
    for v in vms:
        vm = vm_of(v)
        if v in won:
            check_running_instance(v, CN1)
        else:
            # Placement refused it: it took nothing (no record, or a failed one holding
            # nothing).
            assert vm is None or (vm["state"] == "failed" and vm["allocation"] is None and
                                  not vm["nics"]), vm
            assert instance_dirs(v) == []
    check_inventory()
    for v in won:
        assert wait_job(action("vm-delete", "delete", v))["execution"] == "succeeded"
    check_inventory()


def test_agent_killed_mid_create():
    vm_uuid = str(uuidlib.uuid4())
    vm_dir = os.path.join(lab.root(CN2), vm_uuid)
    job = provision(vm_uuid, server=CN2, image=BIG_IMG)
    # The directory appears when the agent begins to create the instance; vm.json is
    # written last, so its absence says the creation is under way.
    wait_for("the instance's directory", lambda: os.path.isdir(vm_dir), timeout=120, every=0.002)
    agent = lab.pid("agent-cn2")
    os.kill(agent, signal.SIGKILL)
    mid_create = not os.path.exists(os.path.join(vm_dir, "vm.json"))
    wait_for("the agent to die", lambda: not os.path.exists(f"/proc/{agent}/cmdline") or
             open(f"/proc/{agent}/stat").read().split(") ")[1][0] in "ZX")
    lab.run("restart-agent", "cn2", "--dir", lab.dir)
    end = wait_job(job, timeout=180)
    assert end["execution"] == "succeeded", end
    vm = vm_of(vm_uuid)
    assert vm["state"] == "running" and vm["server_uuid"] == CN2, vm
    a = vm["allocation"]
    assert (a["server_uuid"], a["ram"], a["disk"]) == (CN2, 1024, 20480), vm
    assert instance_dirs(vm_uuid) == [vm_dir]
    assert not glob.glob(os.path.join(vm_dir, "**", "*.part"), recursive=True)
    assert sorted(os.listdir(os.path.join(vm_dir, "disks"))) == ["disk0.img", "disk1.img"]
    assert len(workload_pids(vm_dir)) == 1
    ips = [r for r in raw_records("ip:*").values() if r.get("belongs_to_uuid") == vm_uuid]
    assert len(ips) == 1, ips
    nics = [r for r in raw_records("nic:*").values()
            if isinstance(r, dict) and r.get("belongs_to_uuid") == vm_uuid]
    assert len(nics) == 1, nics
    check_inventory()
    print(f"agent killed {'during' if mid_create else 'after'} the creation of the instance")
    assert wait_job(action("vm-delete", "delete", vm_uuid))["execution"] == "succeeded"


def test_image_removed_then_retry():
    lab_file = os.path.join(lab.dir, "images", "lab-frail.img")
    aside = lab_file + ".aside"
    os.rename(lab_file, aside)
    vm_uuid = str(uuidlib.uuid4())
    try:
        job = provision(vm_uuid, server=CN3, image=FRAIL_IMG)
        end = wait_job(job)
    finally:
        os.rename(aside, lab_file)
    assert end["execution"] == "failed", end
    assert end["error"]["code"] == "ImageFileMissing", end["error"]
    assert "lab-frail" in end["error"]["message"], end["error"]
    vm = vm_of(vm_uuid)
    assert vm["state"] == "failed" and vm["allocation"] is None and not vm["nics"], vm
    assert instance_dirs(vm_uuid) == []
    assert not glob.glob(os.path.join(lab.root(CN3), "images", "*.part"))
    assert not [r for r in raw_records("ip:*").values() if r.get("belongs_to_uuid") == vm_uuid]
    check_inventory()
    # The file restored, a retry (which restarts at the workflow's retry_from, place)
    # provisions it: one allocation, one address, through the CLI as an operator would.
    assert job_of(job)["retry_from"] == "place"
    p = tern("job", "retry", job)
    assert p.returncode == 0, p
    end = wait_job(job)
    assert end["execution"] == "succeeded", end
    check_running_instance(vm_uuid, CN3)
    check_inventory()
    assert wait_job(action("vm-delete", "delete", vm_uuid))["execution"] == "succeeded"


def test_fault_after_disks():
    """The agent killed -9 once the instance's disks exist, the image files removed
    meanwhile (the lab's and the server's copy): the re-run create fails, and the
    provision gives everything back, the partial instance's files included. Then the
    restarted agent takes new work, and once the file is back a retry provisions the
    instance with one allocation and one set of IPs."""
    vm_uuid = str(uuidlib.uuid4())
    vm_dir = os.path.join(lab.root(CN3), vm_uuid)
    disks_dir = os.path.join(vm_dir, "disks")
    job = provision(vm_uuid, server=CN3, image=BIG_IMG)
    wait_for("the instance's first disk file", lambda: os.path.isdir(disks_dir) and
             os.listdir(disks_dir), timeout=120, every=0.002)
    agent = lab.pid("agent-cn3")
    os.kill(agent, signal.SIGKILL)
    had = sorted(os.listdir(disks_dir))
    assert had and not os.path.exists(os.path.join(vm_dir, "vm.json")), had
    lab_file = os.path.join(lab.dir, "images", "lab-big.img")
    server_copy = os.path.join(lab.root(CN3), "images", BIG_IMG + ".img")
    os.rename(lab_file, lab_file + ".aside")
    try:
        if os.path.exists(server_copy):
            os.unlink(server_copy)
        lab.run("restart-agent", "cn3", "--dir", lab.dir)
        end = wait_job(job, timeout=180)
    finally:
        os.rename(lab_file + ".aside", lab_file)
    assert end["execution"] == "failed", end
    assert end["error"]["code"] == "ImageFileMissing", end["error"]
    vm = vm_of(vm_uuid)
    assert vm["state"] == "failed" and vm["allocation"] is None and not vm["nics"], vm
    assert instance_dirs(vm_uuid) == [], os.listdir(lab.root(CN3))
    assert not workload_pids(vm_dir)
    assert not [r for r in raw_records("ip:*").values() if r.get("belongs_to_uuid") == vm_uuid]
    assert not [r for r in raw_records("nic:*").values()
                if isinstance(r, dict) and r.get("belongs_to_uuid") == vm_uuid]
    check_inventory()
    print(f"the agent was killed with {had} in the instance's disks")
    # A provision right after, on the same server: the restarted agent claims it (one
    # created while it adopted what it had left was once left unclaimed in its list;
    # the runner's sweep adopts such a job within RESYNC_SWEEP_MS).
    other = str(uuidlib.uuid4())
    assert wait_job(provision(other, server=CN3), timeout=60)["execution"] == "succeeded"
    check_running_instance(other, CN3)
    p = tern("job", "retry", job)
    assert p.returncode == 0, p
    end = wait_job(job, timeout=180)
    assert end["execution"] == "succeeded", end
    check_running_instance(vm_uuid, CN3)
    check_inventory()
    for v in (vm_uuid, other):
        assert wait_job(action("vm-delete", "delete", v))["execution"] == "succeeded"
    check_inventory()


def test_no_autoboot():
    """autoboot false: the instance is made, its disks exist, nothing runs, and the
    record and vm.json both say stopped; vm-start then starts it."""
    vm_uuid = str(uuidlib.uuid4())
    params = provision_params(vm_uuid, server=CN2)
    params["autoboot"] = False
    status, job = create_job("provision", "/provision-" + vm_uuid, params)
    assert status in (200, 201), (status, job)
    end = wait_job(job["uuid"])
    assert end["execution"] == "succeeded", end
    vm = vm_of(vm_uuid)
    assert vm["state"] == "stopped", vm
    vm_dir = os.path.join(lab.root(CN2), vm_uuid)
    with open(os.path.join(vm_dir, "vm.json")) as f:
        assert json.load(f)["state"] == "stopped"
    assert os.path.exists(os.path.join(vm_dir, "disks", "disk0.img"))
    assert not workload_pids(vm_dir)
    assert wait_job(action("vm-start", "start", vm_uuid))["execution"] == "succeeded"
    check_running_instance(vm_uuid, CN2)
    check_inventory()


def test_provision_with_disks():
    """disks asked at provision: three files of the layout's sizes, sparse, at the
    slots in order, and the record saying the same; the server commits the package's
    space (test_dc_inventory.py checks every rule of the layout on the records). An
    inflexible package's instance gets the traditional layout."""
    vm_uuid = str(uuidlib.uuid4())
    job = provision(vm_uuid, server=CN2,
                    disks=[{}, {"size": 4096}, {"size": "remaining"}])
    end = wait_job(job)
    assert end["execution"] == "succeeded", end
    vm = vm_of(vm_uuid)
    assert [x["size"] for x in vm["disks"]] == [10240, 4096, 6144], vm["disks"]
    assert [x["pci_slot"] for x in vm["disks"]] == ["0:4:0", "0:4:1", "0:4:2"]
    assert vm["free_space"] == 0 and vm["allocation"]["disk"] == 20480, vm
    vm_dir = os.path.join(lab.root(CN2), vm_uuid)
    with open(os.path.join(vm_dir, "vm.json")) as f:
        on_disk = json.load(f)["disks"]
    for rec, n in zip(vm["disks"], range(3)):
        path = os.path.join(vm_dir, "disks", f"disk{n}.img")
        st = os.stat(path)
        assert rec["path"] == path and st.st_size == rec["size"] * MIB, (rec, st.st_size)
        assert st.st_blocks * 512 < 64 * MIB, (path, st.st_blocks)  # sparse
        assert on_disk[n]["path"] == path and on_disk[n]["size"] == rec["size"], on_disk
    assert not glob.glob(os.path.join(vm_dir, "**", "*.part"), recursive=True)
    # An inflexible package: the traditional layout, boot at the image's 2048 MiB and
    # a data disk of the package's 10240, both committed.
    zone = str(uuidlib.uuid4())
    end = wait_job(provision(zone, server=CN2, package="lab-zone", image=BASE_IMG))
    assert end["execution"] == "succeeded", end
    zvm = vm_of(zone)
    assert [x["size"] for x in zvm["disks"]] == [2048, 10240], zvm["disks"]
    assert zvm["flexible"] is False and zvm["quota"] == 10240, zvm
    assert zvm["allocation"]["disk"] == 12288 and "free_space" not in zvm, zvm
    for x in zvm["disks"]:
        assert os.stat(x["path"]).st_size == x["size"] * MIB, x
    check_inventory()
    for v in (vm_uuid, zone):
        assert wait_job(action("vm-delete", "delete", v))["execution"] == "succeeded"
    check_inventory()


def test_workload_survives_agent_restart():
    vm_uuid = str(uuidlib.uuid4())
    job = provision(vm_uuid, server=CN3, workload="writer")
    assert wait_job(job)["execution"] == "succeeded", job_of(job)
    vm, pid = check_running_instance(vm_uuid, CN3)
    data = [d["path"] for d in vm["disks"] if not d.get("boot")][0]

    def records():
        p = subprocess.run([WORKLOAD, "verify", data], capture_output=True, text=True, timeout=30)
        words = p.stdout.split()
        return int(words[0]) if words and words[0].isdigit() else 0

    first = wait_for("the writer's first records", lambda: records() >= 5 and records())
    lab.run("restart-agent", "cn3", "--dir", lab.dir)
    assert workload_pids(os.path.join(lab.root(CN3), vm_uuid)) == [pid]
    wait_for("records written after the restart", lambda: records() > first + 5)
    # The restarted agent stops it through its pid file; then no record is missing.
    assert wait_job(action("vm-stop", "stop", vm_uuid))["execution"] == "succeeded"
    assert not workload_pids(os.path.join(lab.root(CN3), vm_uuid))
    p = subprocess.run([WORKLOAD, "verify", data], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert wait_job(action("vm-delete", "delete", vm_uuid))["execution"] == "succeeded"
    check_inventory()


TESTS = [test_views, test_bad_requests, test_provision_and_lifecycle, test_subnet_full,
         test_race_for_three, test_agent_killed_mid_create, test_image_removed_then_retry,
         test_no_autoboot, test_workload_survives_agent_restart, test_fault_after_disks,
         test_provision_with_disks]

if __name__ == "__main__":
    run_tests(lab, TESTS, sys.argv[3:])
