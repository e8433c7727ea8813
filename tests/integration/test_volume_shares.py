#!/usr/bin/env python3
"""Share states (Longhorn's share manager, applied to RFD 26's storage instances) on a
real lab (tools/lab up on volume_lab.DATACENTER: the share watch every second, a share
process checking its export every 200 ms): a new share starting then running before
its volume is ready, a consumer's mount held back until then, the share process killed
-9 and its export taken away (error, failed, remount requests, a restart with a new
pid, the data intact, the consumers remounted), the always-on policy once the last
consumer is gone, a rollback, the share watch paused and a server's agent down
(unknown, never a spurious error), the endpoint following the address; and the
cross-cutting scenario X7 (storage failure and recovery under a writing consumer).
test_N_* is acceptance test N of the share states (docs/VOLUMES.md "Share states").

Every test checks the records AND the data plane: the share process's pid (alive,
killed, a new one after a restart), the storage instance's export/ and the files in it
by digest, a consumer's mount symlink resolving to the export again after a remount.

Usage: test_volume_shares.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1
leaves a failed run's lab up to look into. Every wait is bounded and polls what it
waits for; the processes signalled are checked to be what they are first.
"""
import os
import sys
import threading
import time
import uuid as uuidlib

import volume_lab
from volume_lab import (OWNER, CN1, CN2, FABRIC, FABRIC2, FLEX, OS_IMG, submit_volume,
                        create_volume, volume_of, wait_volume, delete_volume, ok_volume_job,
                        volume_job, check_volume, check_volume_gone, export_dir, storage_vm,
                        share_pid, kill_share, ips_taken, submit_provision,
                        provision_with_volumes, mount_path, check_consumer, delete_vm,
                        write_file, tree, Paused, HOST, check_inventory, schedule_of, log,
                        wait_for)
from lab_harness import pid_alive

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = volume_lab.open_lab(SOURCE, BUILD, "tern-vol-shares-")


class Watch:
    """Samples a volume's (state, share_state, share_endpoint) as fast as the API
    answers, in a thread, for the length of a with block: the sequence of changes."""

    def __init__(self, vol_uuid):
        self.vol_uuid = vol_uuid
        self.seen = []
        self.stop = threading.Event()

    def _sample(self):
        try:
            v = volume_of(self.vol_uuid)
        except OSError:  # the API down a moment (the control restarted)
            return False
        s = None if v is None else (v["state"], v.get("share_state"), v.get("share_endpoint"))
        if not self.seen or self.seen[-1] != s:
            self.seen.append(s)
        return True

    def _run(self):
        while not self.stop.is_set():
            if not self._sample():
                time.sleep(0.05)
                continue
            time.sleep(0.005)

    def __enter__(self):
        self.t = threading.Thread(target=self._run)
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(30)
        self._sample()  # what the block's last wait saw, whatever the thread's timing
        return False

    def states(self):
        return [s[0] for s in self.seen if s]

    def shares(self):
        return [s[1] for s in self.seen if s]


def in_order(seq, want):
    """Whether want's items occur in seq in that order (not necessarily adjacent)."""
    it = iter(seq)
    return all(any(x == w for x in it) for w in want)


def runs(seq):
    """seq with consecutive repeats dropped."""
    return [x for i, x in enumerate(seq) if i == 0 or seq[i - 1] != x]


def consumer(vol, mountpoint, server=CN1):
    vm_uuid, _ = provision_with_volumes([{"name": vol["name"], "mountpoint": mountpoint}],
                                        server=server)
    check_consumer(vm_uuid, [(vol, mountpoint, "rw")])
    return vm_uuid


def remount_fields(vm_uuid):
    vm = lab.vm_of(vm_uuid)
    return vm.get("remount_requested_at"), vm.get("remounted_at")


# ---- 1, 2: a new share ------------------------------------------------------------------

def test_1_2_new_share():
    """A new volume's share: unknown or starting while its storage instance is made
    (cn2's agent paused), then running with its endpoint, and only then is the volume
    ready; at no moment ready with the share not running or without an endpoint. A
    consumer provisioned meanwhile waits in volumes_wait (no instance, no mount) and
    mounts once the volume is ready."""
    vol_uuid = str(uuidlib.uuid4())
    with Watch(vol_uuid) as w:
        with Paused("cn2"):
            _, status, job = submit_volume("fresh", vol_uuid=vol_uuid, server_uuid=CN2)
            assert status in (200, 201), (status, job)
            wait_for("the record", lambda: volume_of(vol_uuid), timeout=20)
            vm_uuid, status, pj = submit_provision([{"name": "fresh", "mountpoint": "/fresh"}],
                                                   server=CN1)
            assert status in (200, 201), (status, pj)
            wait_for("the provision at volumes_wait", lambda: "volumes" in
                     [r["name"] for r in lab.job_of(pj["uuid"]).get("chain_results", [])],
                     timeout=20)
            v = volume_of(vol_uuid)
            assert v["state"] == "creating" and v["share_state"] in ("unknown", "starting"), v
            assert v["share_endpoint"] is None, v
            names = [r["name"] for r in lab.job_of(pj["uuid"]).get("chain_results", [])]
            assert "volumes_wait" not in names and "create" not in names, names
            assert not os.path.exists(lab.vm_dir(CN1, vm_uuid))
            cm = lab.vm_of(vm_uuid)
            assert cm["state"] == "provisioning", cm
        # cn2 resumed: the share starts, then the volume is ready, then the consumer
        # mounts.
        wait_volume(vol_uuid, "ready", timeout=60)
    assert lab.wait_job(job["uuid"], timeout=30)["execution"] == "succeeded"
    seen = w.seen[1:] if w.seen and w.seen[0] is None else w.seen  # before the claim
    for s in seen:
        assert s is not None, w.seen
        state, share, endpoint = s
        if state == "ready":
            assert share == "running" and endpoint, w.seen
        if share != "running":
            assert state != "ready", w.seen
        if state == "creating":
            assert share in ("unknown", "starting"), w.seen
    log(f"seen: {[(s[0], s[1]) for s in seen]}")
    v = check_volume(vol_uuid)
    assert v["share_endpoint"] == f"nfs://{v['filesystem_path'].split(':')[0]}/fresh", v
    end = lab.wait_job(pj["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    check_consumer(vm_uuid, [(v, "/fresh", "rw")])
    delete_vm(vm_uuid)
    delete_volume(vol_uuid)
    check_volume_gone(v)
    # The share launched but not yet serving reads starting (seed 003's state machine).
    assert in_order([s[1] for s in seen], ["starting", "running"]), seen


# ---- 3, 4, 5: the share fails and comes back -----------------------------------------

def test_3_4_killed():
    """kill -9 of the share process: within a tick the share is error and the volume
    failed, its consumer asked to remount; the lab restarts it: a new pid, running and
    ready, the consumer remounted (remounted_at after the request, its mount reaching
    the export), the data written before the kill intact."""
    v = create_volume("crashy", server_uuid=CN2)
    vm_uuid = consumer(v, "/data")
    m = mount_path(vm_uuid, "/data")
    digests = {f"before-{i}": write_file(os.path.join(m, f"before-{i}")) for i in range(5)}
    assert remount_fields(vm_uuid) == (None, None), remount_fields(vm_uuid)
    with Watch(v["uuid"]) as w:
        pid = kill_share(v)
        t0 = time.monotonic()
        failed = wait_volume(v["uuid"], "failed", timeout=10)
        log(f"failed {time.monotonic() - t0:.2f} s after the kill")
        assert failed["share_state"] in ("error", "starting") and failed["error_since"], failed
        req = wait_for("a remount request", lambda: remount_fields(vm_uuid)[0], timeout=10)
        wait_volume(v["uuid"], "ready", timeout=20, share="running", fail_fast=False)
    assert in_order(w.states(), ["ready", "failed", "ready"]), w.seen
    assert in_order(w.shares(), ["running", "error", "running"]), w.seen
    v2 = check_volume(v["uuid"])
    new = share_pid(v2)
    assert new and new != pid and not pid_alive(pid), (pid, new)
    got = wait_for("the consumer remounted", lambda: (lambda f: f[1] and f[1] >= f[0] and f)(
        remount_fields(vm_uuid)), timeout=10)
    assert got[0] >= req, (got, req)
    check_consumer(vm_uuid, [(v2, "/data", "rw")])
    assert tree(m) == digests and tree(export_dir(v2)) == digests
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v2)


def test_5_probe_fails():
    """The export taken away under a running share (renamed: root ignores modes): the
    share process's own check fails and it exits (not left running); the share is
    error, the volume failed, restarts fail meanwhile (each tick's restart shows as
    starting) and the consumer's remount request is renewed at each tick. The export back: running,
    ready, a new pid, the data intact, the consumer remounted."""
    v = create_volume("frail", server_uuid=CN2)
    vm_uuid = consumer(v, "/frail")
    digests = {"kept": write_file(os.path.join(export_dir(v), "kept"))}
    ex = export_dir(v)
    pid = share_pid(v)
    with Watch(v["uuid"]) as w:
        os.rename(ex, ex + ".away")
        try:
            t0 = time.monotonic()
            wait_for("the share process to exit", lambda: not pid_alive(pid), timeout=5,
                     every=0.01)
            log(f"the share exited {time.monotonic() - t0:.2f} s after its export went")
            wait_volume(v["uuid"], "failed", timeout=10)
            requests = set()
            wait_for("remount requests renewed", lambda: requests.add(
                remount_fields(vm_uuid)[0]) or len(requests - {None}) >= 3, timeout=15,
                every=0.1)
            assert not share_pid(v) and not os.path.exists(ex)
        finally:
            os.rename(ex + ".away", ex)
        wait_volume(v["uuid"], "ready", timeout=20, share="running", fail_fast=False)
    # Each tick restarts it again (starting) and finds it dead (error): a failed start
    # shows as starting until the next tick; the volume stays failed throughout.
    assert in_order(w.shares(), ["running", "error", "starting", "running"]), w.seen
    assert runs(w.states()) == ["ready", "failed", "ready"], w.seen
    v2 = check_volume(v["uuid"])
    assert share_pid(v2) != pid
    assert tree(ex) == digests
    wait_for("the consumer remounted", lambda: (lambda f: f[1] and f[1] >= f[0])(
        remount_fields(vm_uuid)), timeout=10)
    check_consumer(vm_uuid, [(v2, "/frail", "rw")])
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v2)


# ---- 6: the last consumer gone -------------------------------------------------------

def test_6_always_on():
    """The last consumer destroyed: the share stays running (always-on policy), the
    same process; a new consumer mounts and reads what the first wrote."""
    v = create_volume("always", server_uuid=CN2)
    vm_uuid = consumer(v, "/a")
    digest = write_file(os.path.join(mount_path(vm_uuid, "/a"), "left"))
    pid = share_pid(v)
    delete_vm(vm_uuid)
    v2 = check_volume(v["uuid"])
    assert v2["refs"] == [] and share_pid(v2) == pid, v2
    probed = v2.get("share_probed_at")
    v3 = wait_for("a later probe", lambda: (lambda x: x.get("share_probed_at") != probed and x)(
        volume_of(v["uuid"])), timeout=10)
    assert (v3["state"], v3["share_state"]) == ("ready", "running"), v3
    assert share_pid(v3) == pid
    again = consumer(v, "/b", server=CN2)
    assert tree(mount_path(again, "/b")) == {"left": digest}
    delete_vm(again)
    delete_volume(v["uuid"])
    check_volume_gone(v3)


# ---- 7: a rollback --------------------------------------------------------------------

def test_7_rollback():
    """A rollback: the volume rolling_back (held while cn2's agent is paused), its share
    stopped then starting then running, the volume ready again with the snapshot's
    content and a new share process."""
    v = create_volume("rolled", server_uuid=CN2)
    write_file(os.path.join(export_dir(v), "one"))
    snap = tree(export_dir(v))
    ok_volume_job("volume-snapshot-create", v["uuid"], owner_uuid=OWNER, name="base")
    write_file(os.path.join(export_dir(v), "two"))
    pid = share_pid(v)
    with Watch(v["uuid"]) as w:
        with Paused("cn2"):
            status, job = volume_job("volume-rollback", v["uuid"], owner_uuid=OWNER, name="base")
            assert status in (200, 201), (status, job)
            wait_volume(v["uuid"], "rolling_back", timeout=20)
        assert lab.wait_job(job["uuid"], timeout=60)["execution"] == "succeeded"
        wait_volume(v["uuid"], "ready", timeout=20, share="running", fail_fast=False)
    log(f"seen: {[(s[0], s[1]) for s in w.seen if s]}")
    assert in_order(w.states(), ["ready", "rolling_back", "ready"]), w.seen
    assert in_order(w.shares(), ["running", "stopped", "running"]), w.seen
    assert "error" not in w.shares() and "failed" not in w.states(), w.seen
    v2 = check_volume(v["uuid"])
    assert share_pid(v2) != pid
    assert tree(export_dir(v2)) == snap
    delete_volume(v["uuid"])
    check_volume_gone(v2)


# ---- 8, 9: nobody probing --------------------------------------------------------------

def test_8_watch_paused_and_control_restarted():
    """The share watch of the volume's server paused: the share reads unknown once its
    last probe is 3 ticks old (the volume still ready, never error); resumed, running.
    The control plane restarted: the share stays served by the same process and never
    reads error."""
    v = create_volume("watched", server_uuid=CN1)
    pid = share_pid(v)
    s = schedule_of("volume-share-watch")
    watches = [x for x in lab.list_all("/schedules")
               if str(x.get("workflow", "")).split("@")[0] == "volume-share-watch" and
               x.get("params", {}).get("server_uuid") == CN1]
    assert s is not None and len(watches) == 1, watches
    with Watch(v["uuid"]) as w:
        status, body = lab.http(f"/schedules/{watches[0]['uuid']}/pause", "POST")
        assert status == 200, (status, body)
        try:
            t0 = time.monotonic()
            wait_for("share unknown", lambda: volume_of(v["uuid"])["share_state"] == "unknown",
                     timeout=15)
            log(f"unknown {time.monotonic() - t0:.1f} s after the watch paused")
            assert volume_of(v["uuid"])["state"] == "ready"
        finally:
            status, body = lab.http(f"/schedules/{watches[0]['uuid']}/resume", "POST")
            assert status == 200, (status, body)
        wait_volume(v["uuid"], "ready", share="running", timeout=15)
        lab.run("restart-control", "--dir", lab.dir)
        probed = volume_of(v["uuid"])["share_probed_at"]
        wait_for("a probe after the restart", lambda: volume_of(v["uuid"])["share_probed_at"] !=
                 probed, timeout=15)
        wait_volume(v["uuid"], "ready", share="running", timeout=15)
    assert "error" not in w.shares() and set(w.states()) == {"ready"}, w.seen
    assert share_pid(v) == pid
    check_volume(v["uuid"])
    delete_volume(v["uuid"])


def test_9_server_down():
    """The storage server's agent stopped (the server down): its shares read unknown,
    no probe claiming anything of them; back, running and ready, the same process."""
    v = create_volume("downed", server_uuid=CN2)
    pid = share_pid(v)
    with Watch(v["uuid"]) as w:
        with Paused("cn2"):
            wait_for("share unknown", lambda: volume_of(v["uuid"])["share_state"] == "unknown",
                     timeout=15)
            assert pid_alive(pid)
        wait_volume(v["uuid"], "ready", share="running", timeout=20)
    assert "error" not in w.shares(), w.seen
    assert share_pid(v) == pid
    check_volume(v["uuid"])
    delete_volume(v["uuid"])


# ---- 10: the endpoint -------------------------------------------------------------------

def test_10_endpoint():
    """The endpoint names the volume and its storage address; when the address changes
    (a second network attached, the first detached), so does the endpoint, and the
    filesystem path with it. (A network change restarts the share: a watch tick that
    falls in between may fail the volume for a moment; it must come back.)"""
    v = create_volume("pointed", server_uuid=CN1)
    ip1 = v["filesystem_path"].split(":")[0]
    assert v["share_endpoint"] == f"nfs://{ip1}/pointed" and ip1 in ips_taken(FABRIC), v
    ok_volume_job("volume-attach-network", v["uuid"], owner_uuid=OWNER, network_uuid=FABRIC2)
    wait_volume(v["uuid"], "ready", share="running", fail_fast=False)
    ok_volume_job("volume-detach-network", v["uuid"], owner_uuid=OWNER, network_uuid=FABRIC)
    wait_volume(v["uuid"], "ready", share="running", fail_fast=False)
    v2 = check_volume(v["uuid"])
    ip2 = [n["ip"] for n in storage_vm(v2["vm_uuid"])["nics"]][0]
    assert v2["networks"] == [FABRIC2] and ip2.startswith("192.168.129."), v2
    assert v2["share_endpoint"] == f"nfs://{ip2}/pointed", v2
    assert v2["filesystem_path"] == f"{ip2}:/exports/data", v2
    assert ip1 not in ips_taken(FABRIC)
    delete_volume(v["uuid"])
    check_volume_gone(v2)


# ---- X7 -------------------------------------------------------------------------------------

def test_x7_storage_failure_and_recovery():
    """X1's VM (two disks, `shared` made on demand, a writer workload) writes files to
    /shared; the share process is killed: error, failed, remount requests; restarted:
    running, ready, the VM remounted, every file written before the kill intact. A
    rollback of shared: rolling_back, then ready, and the VM sees the snapshot's
    content through its mount."""
    vm_uuid, job = provision_with_volumes([{"name": "shared", "mountpoint": "/shared"}],
                                          server=CN1, package=FLEX, image=OS_IMG,
                                          disks=[{}, {"size": "remaining"}], workload="writer")
    vols = lab.list_all(f"/volumes?owner_uuid={OWNER}&name=shared")
    assert len(vols) == 1 and vols[0]["created_by_job"] == job["uuid"], vols
    v = check_volume(vols[0]["uuid"])
    check_consumer(vm_uuid, [(v, "/shared", "rw")])
    m = mount_path(vm_uuid, "/shared")
    written = {}
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set() and i < 2000:
            written[f"w{i:04d}"] = write_file(os.path.join(m, f"w{i:04d}"), size=4096)
            i += 1
            time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for("the VM's first writes", lambda: len(written) >= 20, timeout=10)
        before = dict(written)
        pid = kill_share(v)
        wait_volume(v["uuid"], "failed", timeout=10)
        wait_for("a remount request", lambda: remount_fields(vm_uuid)[0], timeout=10)
        wait_volume(v["uuid"], "ready", share="running", timeout=20, fail_fast=False)
    finally:
        stop.set()
        t.join(30)
    v2 = check_volume(v["uuid"])
    assert share_pid(v2) != pid
    wait_for("the VM remounted", lambda: (lambda f: f[1] and f[1] >= f[0])(
        remount_fields(vm_uuid)), timeout=10)
    check_consumer(vm_uuid, [(v2, "/shared", "rw")])
    now = tree(export_dir(v2))
    for name, digest in before.items():
        assert now.get(name) == digest, (name, digest, now.get(name))
    assert tree(m) == now == written

    ok_volume_job("volume-snapshot-create", v["uuid"], owner_uuid=OWNER, name="good")
    snap = tree(export_dir(v2))
    write_file(os.path.join(m, "after-snapshot"))
    with Watch(v["uuid"]) as w:
        with Paused(HOST[v2["server_uuid"]]):
            status, rj = volume_job("volume-rollback", v["uuid"], owner_uuid=OWNER, name="good")
            assert status in (200, 201), (status, rj)
            wait_volume(v["uuid"], "rolling_back", timeout=20)
        assert lab.wait_job(rj["uuid"], timeout=60)["execution"] == "succeeded"
        wait_volume(v["uuid"], "ready", share="running", timeout=20)
    assert in_order(w.states(), ["ready", "rolling_back", "ready"]), w.seen
    assert tree(m) == snap, (sorted(set(tree(m)) ^ set(snap)))
    vm = lab.vm_of(vm_uuid)
    assert vm["state"] == "running", vm
    check_inventory()
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v2)


def main():
    tests = [test_1_2_new_share, test_3_4_killed, test_5_probe_fails, test_6_always_on,
             test_7_rollback, test_8_watch_paused_and_control_restarted, test_9_server_down,
             test_10_endpoint, test_x7_storage_failure_and_recovery]
    volume_lab.run(tests, sys.argv[3:])


if __name__ == "__main__":
    main()
