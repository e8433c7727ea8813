"""The lab of the migration tests (test_migration_*.py) and what they check with: a
datacenter of three servers (cn1 and cn2 with room for several instances, cn3 with
room for none of them), a flexible package whose instances have a boot disk from a
sparse image and a sparse data disk, the writer workload (tern-workload writer on the
data disk, `tern-workload verify` of its records), one NIC each; helpers that run a
migration action and wait on its job and on the migration's state with bounds, read
each disk's size, st_blocks and sha256 on both data roots, and sample the running
migrations.

    import migration_lab as ml
    lab = ml.open_lab(SOURCE, BUILD, "tern-migration-")
    ml.run(lab, [test_a, test_b])          # skips (77) when the build has no migrations
    vm = ml.provision(workload="writer")
    job = ml.run_action("begin", vm)       # the finished job
    m = ml.wait_migration(vm, "paused")
    ml.same_disks(vm, ml.CN1, ml.CN2)      # the target's files are the source's
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid as uuidlib

from lab_harness import MIB, Lab, pid_alive, wait_for, workload_pids

OWNER = "6b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
CN1, CN2, CN3 = ("e1000000-0000-4000-8000-000000000001", "e1000000-0000-4000-8000-000000000002",
                 "e1000000-0000-4000-8000-000000000003")
HOSTNAMES = {CN1: "cn1", CN2: "cn2", CN3: "cn3"}
EXTERNAL = "f1000000-0000-4000-8000-000000000001"
PKG = "f2000000-0000-4000-8000-000000000001"
IMG = "f3000000-0000-4000-8000-000000000001"
BOOT_MIB, DATA_MIB = 64, 256      # sparse: a few MiB of each hold data
IMAGE_DATA_MIB = 4

# cn3's 512 MiB of RAM holds none of the 1024 MiB instances: the server without room.
DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 16384, "disk_mib": 1048576,
         "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 16384, "disk_mib": 1048576,
         "data_root": "servers/cn2"},
        {"uuid": CN3, "hostname": "cn3", "rack": "r2", "ram_mib": 512, "disk_mib": 1048576,
         "data_root": "servers/cn3"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "198.51.100.0/24",
         "gateway": "198.51.100.1", "provision_start_ip": "198.51.100.10",
         "provision_end_ip": "198.51.100.250", "vlan_id": 0, "mtu": 1500},
    ],
    "packages": [
        {"uuid": PKG, "name": "flex-mig", "brand": "bhyve", "ram_mib": 1024, "vcpus": 1,
         "disk_mib": BOOT_MIB + DATA_MIB, "flexible_disk": True},
    ],
    "images": [
        {"uuid": IMG, "name": "lab-mig", "version": "1.0", "size_mib": BOOT_MIB,
         "data_mib": IMAGE_DATA_MIB, "file": "images/lab-mig.img", "brand": "bhyve"},
    ],
    # Small blocks and a low rate keep a pass of a few MiB long enough to act during it.
    "settings": {"migration_block_kib": 64, "migration_window_blocks": 4},
}

lab = None
SKIP = 77  # meson's exit status of a skipped test


def open_lab(source, build, prefix, settings=None):
    """The lab every helper here works on (one per test program); `settings` are
    merged over DATACENTER's."""
    global lab
    dc = json.loads(json.dumps(DATACENTER))
    dc["settings"].update(settings or {})
    lab = Lab(source, build, dc, prefix=prefix)
    return lab


def migrations_loaded():
    """Whether the control stored the migrate-* workflows (it leaves out, with a log
    line, a workflow naming a task the build does not have)."""
    status, _ = lab.http("/workflows/migrate-begin")
    return status == 200


def run(tests, only=()):
    """Brings the lab up, runs the tests (those in `only` when given), takes it down.
    Exits 77 (skipped) when the control could not load the migration workflows: the
    build lacks the agent's migration tasks."""
    ok = False
    t_start = time.monotonic()
    try:
        lab.up()
        if not migrations_loaded():
            print("skipped: the control has no migrate-begin workflow (the build's dc plugin "
                  "lacks a migration task; see the control's log)", flush=True)
            ok = True
            lab.finish(True)
            sys.exit(SKIP)
        for t in tests:
            if only and t.__name__ not in only:
                continue
            t0 = time.monotonic()
            t()
            print(f"ok {t.__name__} ({time.monotonic() - t0:.1f} s)", flush=True)
        ok = True
    finally:
        if lab.url is not None and os.path.exists(lab.dir):
            lab.finish(ok)
        print(f"total {time.monotonic() - t_start:.1f} s", flush=True)


# ---- instances ---------------------------------------------------------------------

def provision(server=CN1, workload="writer", autoboot=True, data_mib=DATA_MIB):
    """A new instance on `server` with a boot disk (the image) and a data disk of
    `data_mib` MiB, running `workload` (or stopped with autoboot False): its uuid."""
    vm_uuid = str(uuidlib.uuid4())
    params = {"vm_uuid": vm_uuid, "owner_uuid": OWNER, "package": PKG, "image_uuid": IMG,
              "networks": [{"uuid": EXTERNAL, "primary": True}], "server_uuid": server,
              "autoboot": autoboot, "disks": [{}, {"size": data_mib}]}
    if workload:
        params["customer_metadata"] = {"lab:workload": workload}
    job = lab.run_job("provision", "/provision-" + vm_uuid, params, timeout=60)
    assert job["execution"] == "succeeded", job
    if autoboot:
        wait_for(f"vm {vm_uuid}'s workload", lambda: workload_pids(vm_dir(server, vm_uuid)),
                 timeout=15)
    return vm_uuid


def vm_dir(server, vm_uuid):
    return lab.vm_dir(server, vm_uuid)


def vm_json(server, vm_uuid):
    """The instance's vm.json on that server, or None when it has none."""
    try:
        with open(os.path.join(vm_dir(server, vm_uuid), "vm.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def workload_alive(server, vm_uuid):
    """The live workload pids of the instance on that server."""
    return [p for p in workload_pids(vm_dir(server, vm_uuid)) if pid_alive(p)]


def writer_records(server, vm_uuid):
    """(exit status, valid records) of `tern-workload verify` on the data disk there:
    status 0 means no record is missing or out of place."""
    p = subprocess.run([os.path.join(lab.build, "lab", "tern-workload"), "verify",
                        os.path.join(vm_dir(server, vm_uuid), "disks", "disk1.img")],
                       capture_output=True, text=True, timeout=60)
    n = int(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else -1
    return p.returncode, n


# ---- the data plane ----------------------------------------------------------------

def file_digest(path, start=0, end=None):
    """sha256 of the bytes [start, end) of the file (end: its size) as a reader sees them
    (holes read as zeros), reading only its data extents: a 256 MiB sparse disk costs
    what it holds."""
    h = hashlib.sha256()
    size = os.path.getsize(path) if end is None else min(end, os.path.getsize(path))
    zeros = bytes(MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        off = start
        while off < size:
            try:
                data = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                data = size
            while off < data:                       # the hole, as zeros
                n = min(MIB, data - off)
                h.update(zeros[:n])
                off += n
            if off >= size:
                break
            hole = min(os.lseek(fd, off, os.SEEK_HOLE), size)
            while off < hole:
                chunk = os.pread(fd, min(MIB, hole - off), off)
                h.update(chunk)
                off += len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def disks(server, vm_uuid):
    """{disk file name: {size, blocks (st_blocks, 512 B), sha256}} of the instance's
    disks/ on that server ({} when it has none)."""
    d = os.path.join(vm_dir(server, vm_uuid), "disks")
    out = {}
    if not os.path.isdir(d):
        return out
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        st = os.stat(p)
        out[n] = {"size": st.st_size, "blocks": st.st_blocks, "sha256": file_digest(p)}
    return out


def same_disks(vm_uuid, source, target, writer_records=None):
    """Asserts the target's disks are the source's: the same files, sizes and contents,
    and holes kept (the target allocates at most a little more than the source: whole
    transfer blocks). With a writer that went on on the target after the switch, give
    the number of records the source holds: the data disk is compared over those
    records and over what fill() wrote, not over the records written since. Answers the
    target's."""
    a, b = disks(source, vm_uuid), disks(target, vm_uuid)
    assert sorted(a) == sorted(b) and a, (a, b)
    for n in a:
        if writer_records is not None and n == "disk1.img":
            pa, pb = (os.path.join(vm_dir(s, vm_uuid), "disks", n) for s in (source, target))
            for lo, hi in ((0, writer_records * 512), (FILL_AT_MIB * MIB, None)):
                assert file_digest(pa, lo, hi) == file_digest(pb, lo, hi), (n, lo, hi)
            assert a[n]["size"] == b[n]["size"], (n, a[n], b[n])
        else:
            assert (a[n]["size"], a[n]["sha256"]) == (b[n]["size"], b[n]["sha256"]), \
                (n, a[n], b[n])
        # 64 KiB transfer blocks: a partly written block is sent whole.
        assert b[n]["blocks"] <= a[n]["blocks"] + 2 * MIB // 512 + 128, (n, a[n], b[n])
        assert b[n]["blocks"] * 512 < a[n]["size"] // 2, ("not sparse", n, b[n])
    return b


# ---- migrations --------------------------------------------------------------------

def action(name, vm_uuid, **params):
    """POST /jobs of migrate-<name> for the VM: (status, body)."""
    return lab.create_job("migrate-" + name, f"/migrate-{name}-{vm_uuid}",
                          dict(params, vm_uuid=vm_uuid))


def run_action(name, vm_uuid, timeout=60.0, **params):
    """A migration action run to its end: the finished job (accepted, asserted)."""
    status, job = action(name, vm_uuid, **params)
    assert status in (200, 201), (name, vm_uuid, status, job)
    return lab.wait_job(job["uuid"], timeout=timeout)


def ok_action(name, vm_uuid, timeout=60.0, **params):
    job = run_action(name, vm_uuid, timeout, **params)
    assert job["execution"] == "succeeded", (name, job)
    return job


def refused(name, vm_uuid, want_status, want_code, words=(), **params):
    """A migration action refused at POST /jobs with that status and code, its message
    holding `words`; no job stored."""
    before = lab.user_job_count()
    status, body = action(name, vm_uuid, **params)
    assert (status, body.get("code")) == (want_status, want_code), (name, params, status, body)
    for w in words:
        assert w in body["message"], (w, body)
    assert lab.user_job_count() == before
    return body


def migration(vm_uuid):
    """The VM's newest migration record (GET /migrations?vm_uuid=), or None."""
    status, rows = lab.http("/migrations?vm_uuid=" + vm_uuid)
    assert status == 200, (status, rows)
    return rows[0] if rows else None


def wait_migration(vm_uuid, *states, timeout=60.0):
    """The VM's migration once in one of `states`, within timeout."""
    def now():
        m = migration(vm_uuid)
        return m if m and m["state"] in states else None
    try:
        return wait_for(f"vm {vm_uuid}'s migration to be {'|'.join(states)}", now,
                        timeout=timeout, every=0.1)
    except AssertionError as e:
        m = migration(vm_uuid) or {}
        raise AssertionError(f"{e}: {json.dumps({k: m.get(k) for k in ('state', 'phase', 'error', 'switch_step', 'job_uuid')})}") from None


def wait_pass_bytes(vm_uuid, timeout=30.0):
    """The VM's migration once its running pass has reported bytes moving (progress)."""
    def moving():
        m = migration(vm_uuid)
        p = m and m.get("progress")
        return m if p and p.get("current_progress", 0) > 0 else None
    return wait_for(f"vm {vm_uuid}'s pass to move bytes", moving, timeout=timeout, every=0.05)


def running_migrations():
    """How many migrations are running now (GET /migrations?state=running)."""
    status, rows = lab.http("/migrations?state=running&limit=1000")
    assert status == 200, (status, rows)
    return len(rows)


def sample_running(until, every=0.05, timeout=120.0):
    """The most migrations seen running at once, sampled until until() is true."""
    most = 0
    deadline = time.monotonic() + timeout
    while not until():
        most = max(most, running_migrations())
        assert time.monotonic() < deadline, f"not done within {timeout} s (most {most})"
        time.sleep(every)
    return most


def check_on(vm_uuid, server, running):
    """The record and the files agree that the VM is on `server`: its record's
    server_uuid, vm.json visible there with its NICs, the workload alive (or not)."""
    vm = lab.vm_of(vm_uuid)
    assert vm["server_uuid"] == server, vm
    assert vm.get("migrating") in (None, False), vm
    assert vm["state"] == ("running" if running else "stopped"), vm
    j = vm_json(server, vm_uuid)
    assert j is not None and not j.get("do_not_inventory"), j
    assert [n["mac"] for n in j.get("nics", [])] == [n["mac"] for n in vm["nics"]], (j, vm)
    for d in vm["disks"]:
        assert d["path"].startswith(lab.root(server) + "/"), d
    assert bool(workload_alive(server, vm_uuid)) == running
    return vm


def hidden(server, vm_uuid):
    """Whether the instance on that server is a hidden copy (vm.json do_not_inventory)."""
    j = vm_json(server, vm_uuid)
    return j is not None and j.get("do_not_inventory") is True


FILL_AT_MIB = 128  # where fill() writes: far past the writer's records


def fill(server, vm_uuid, mib, at_mib=FILL_AT_MIB, disk="disk1.img"):
    """Writes `mib` MiB of random data into the instance's disk at `at_mib` MiB (past
    the writer's records, which grow 5 KiB a second from offset 0): data a pass must
    move, with holes around it."""
    path = os.path.join(vm_dir(server, vm_uuid), "disks", disk)
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(mib):
            os.pwrite(fd, os.urandom(MIB), (at_mib + i) * MIB)
        os.fsync(fd)
    finally:
        os.close(fd)


def nic_addrs(vm):
    """[(mac, ip, network)] of a VM record's NICs: what a move must keep (cn_uuid moves)."""
    return sorted((n["mac"], n["ip"], n["network_uuid"]) for n in vm["nics"])


def vm_ips(vm_uuid):
    """{ip} of the VM's NICs as its record has them."""
    return {n["ip"] for n in lab.vm_of(vm_uuid)["nics"]}


class ProvisionLoop:
    """Provisions (and deletes) small instances on the network one after the other in a
    thread until stopped, collecting every IP they were given: a migrating VM's IPs must
    never be among them. Bounded: at most `most` provisions."""

    def __init__(self, server=CN2, most=40):
        import threading
        self.server, self.most = server, most
        self.ips, self.errors, self.count = set(), [], 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop_flag.is_set() and self.count < self.most:
            vm = str(uuidlib.uuid4())
            params = {"vm_uuid": vm, "owner_uuid": OWNER, "package": PKG, "image_uuid": IMG,
                      "networks": [{"uuid": EXTERNAL}], "server_uuid": self.server,
                      "autoboot": False, "disks": [{}, {"size": DATA_MIB}]}
            try:
                job = lab.run_job("provision", "/provision-" + vm, params, timeout=60)
                self.count += 1
                if job["execution"] == "succeeded":
                    self.ips |= {n["ip"] for n in lab.vm_of(vm)["nics"]}
                    lab.run_job("vm-delete", "/delete-" + vm, {"vm_uuid": vm}, timeout=60)
            except AssertionError as e:  # noted; the test fails on it after stop()
                self.errors.append(str(e))
                return

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_flag.set()
        self.thread.join(timeout=120)
        assert not self.thread.is_alive(), "the provision loop did not stop"
        assert not self.errors, self.errors
        return self.ips


def agent_pid(server):
    return lab.pid("agent-" + HOSTNAMES[server])


def wait_step(vm_uuid, at_least, timeout=60.0):
    """The VM's migration once its switch_step is at least `at_least`."""
    return wait_for(f"vm {vm_uuid}'s switch step {at_least}",
                    lambda: (lambda m: m if m and (m.get("switch_step") or 0) >= at_least
                             else None)(migration(vm_uuid)), timeout=timeout, every=0.01)


def lose_target_mid_sync(vm_uuid, mbps):
    """Begins a migration of the VM to cn2, kills cn2's agent -9 during the sync's pass
    (at `mbps`, slow enough to be caught moving bytes) and keeps it down; returns the
    migration once it failed in phase sync with TransferFailed, the VM as it was on
    cn1."""
    ok_action("begin", vm_uuid, target_server_uuid=CN2)
    status, job = action("sync", vm_uuid, send_mbps_limit=mbps)
    assert status in (200, 201), (status, job)
    wait_pass_bytes(vm_uuid)
    agent = agent_pid(CN2)
    os.kill(agent, signal.SIGKILL)
    wait_for("cn2's agent to die", lambda: not pid_alive(agent), timeout=10)
    end = lab.wait_job(job["uuid"], timeout=90)
    assert end["execution"] == "failed", end["execution"]
    m = wait_migration(vm_uuid, "failed", timeout=30)
    assert m["phase"] == "sync" and "TransferFailed" in m["error"], m
    return m
