#!/usr/bin/env python3
"""Shared volumes (RFD 26) on a real lab (tools/lab up on volume_lab.DATACENTER, with its
own Redis, control ternd and one agent per server; cn3's data root a 16 MiB tmpfs):
a volume made (creating, then ready, its storage instance hidden and its export served
by a share process), 20 creates of one name racing, the share process killed and
brought back, the storage instance destroyed while the volume is created or deleted,
snapshots and a rollback, a snapshot on a full server, networks attached and detached,
and the bad input of every volume workflow. test_N_* is acceptance test N of RFD 26
(docs/VOLUMES.md); test_volume_provision.py and test_volume_shares.py have others.

Every test checks the records AND the data plane (volume_lab.check_volume): the
storage instance's directory with vm.json and a real export/ directory, a live share
process named by workload.pid, the addresses taken by its NICs; a deleted volume leaves
no record, directory, process or address; files written into an export are read back
by digest; a refused request stores and changes nothing (volume_lab.fingerprint).

Usage: test_volumes.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into. Every wait is bounded and polls what it waits for;
the processes signalled (share processes, agents, the control ternd) are checked to be
what they are first.
"""
import json
import os
import shutil
import signal
import sys
import threading
import uuid as uuidlib

import volume_lab
from volume_lab import (OWNER, OTHER, CN1, CN2, CN3, EXTERNAL, FABRIC, FABRIC2,
                        FABRIC_OTHER, SIZES, MIB, submit_volume, create_volume, volume_of,
                        wait_volume, delete_volume, volume_job, ok_volume_job,
                        run_volume_job, refused_volume_job, check_volume, check_volume_gone,
                        storage_dir, export_dir, share_pid, kill_share, ips_taken, storage_vm,
                        write_file, tree, Paused, check_inventory, fingerprint, stable, diff,
                        log, wait_for, ISO_MS)
from lab_harness import pid_alive, workload_pids

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = volume_lab.open_lab(SOURCE, BUILD, "tern-vol-accept-", tmpfs_cn3_mib=16)


def storage_dirs_named(prefix):
    """The storage instance directories, on every data root, whose vm.json alias starts
    with prefix."""
    out = []
    for s in lab.roots:
        root = lab.root(s)
        for d in os.listdir(root):
            try:
                with open(os.path.join(root, d, "vm.json")) as f:
                    conf = json.load(f)
            except (OSError, ValueError):
                continue
            if str(conf.get("alias", "")).startswith(prefix):
                out.append(os.path.join(root, d))
    return out


# ---- create: tests 1 and 7 -----------------------------------------------------------

def test_1_create():
    """wp-uploads on the fabric network, no size: creating (its storage instance being
    made while cn2's agent is paused: no share yet, not ready), then ready with 10240
    MiB, its export served, the storage instance hidden and named as RFD 26 says."""
    with Paused("cn2"):
        vol_uuid, status, job = submit_volume("wp-uploads", networks=[FABRIC], server_uuid=CN2)
        assert status in (200, 201), (status, job)
        v = wait_for("the volume's record", lambda: volume_of(vol_uuid), timeout=20)
        assert v["state"] == "creating", v
        assert v["share_state"] in ("unknown", "starting"), v
        assert v["filesystem_path"] is None and v["share_endpoint"] is None, v
        assert v["size"] == 10240 and v["networks"] == [FABRIC] and v["refs"] == [], v
        assert v["name"] == "wp-uploads" and v["created_by_job"] is None, v
        creating = [x["uuid"] for x in lab.list_all("/volumes?state=creating")]
        assert vol_uuid in creating, creating
        if v.get("vm_uuid"):
            assert not workload_pids(lab.vm_dir(CN2, v["vm_uuid"]))
    end = lab.wait_job(job["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    v = check_volume(vol_uuid)
    assert v["state"] == "ready" and v["size"] == 10240 and v["server_uuid"] == CN2, v
    vm = storage_vm(v["vm_uuid"])
    assert vm["alias"] == f"volume-wp-uploads-{vol_uuid}", vm
    assert vm["internal_metadata"]["sdc:system_role"] == "nfsvolumestorage", vm
    assert os.path.isdir(export_dir(v)) and os.listdir(export_dir(v)) == [], \
        os.listdir(export_dir(v))
    check_inventory()
    delete_volume(vol_uuid)
    check_volume_gone(v)
    check_inventory()
    # Times are ISO 8601 UTC with milliseconds (RFD 26's and the records' rule).
    assert ISO_MS.match(v["create_timestamp"]), v["create_timestamp"]


def test_7_racing_creates():
    """20 creates of `race` at once: exactly one volume, 19 VolumeAlreadyExists (at
    admission or at the claim), one storage instance, one directory."""
    answers = [None] * 20

    def submit(i):
        answers[i] = submit_volume("race")

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ends = []
    for vol_uuid, status, body in answers:
        if status in (200, 201):
            ends.append((vol_uuid, lab.wait_job(body["uuid"], timeout=90)))
        else:
            assert (status, body.get("code")) == (409, "VolumeAlreadyExists"), (status, body)
            ends.append((vol_uuid, {"execution": "refused", "error": body}))
    won = [u for u, j in ends if j["execution"] == "succeeded"]
    lost = [j for _, j in ends if j["execution"] != "succeeded"]
    assert len(won) == 1, [j["execution"] for _, j in ends]
    for j in lost:
        assert j["error"]["code"] == "VolumeAlreadyExists", j["error"]
    log(f"{sum(1 for j in lost if j['execution'] == 'refused')} refused at admission, "
        f"{sum(1 for j in lost if j['execution'] == 'failed')} failed at the claim")
    named = lab.list_all(f"/volumes?owner_uuid={OWNER}&name=race")
    assert [x["uuid"] for x in named] == won, named
    for u, _ in ends:
        if u != won[0]:
            assert volume_of(u) is None, u
    v = check_volume(won[0])
    assert storage_dirs_named("volume-race-") == [storage_dir(v)]
    storage = [x for x in volume_lab.all_vms().values()
               if str(x.get("alias", "")).startswith("volume-race-")]
    assert [x["uuid"] for x in storage] == [v["vm_uuid"]], storage
    check_inventory()
    delete_volume(won[0])
    check_volume_gone(v)


# ---- the share process: test 26 ---------------------------------------------------------

def test_26_share_killed():
    """The share process killed -9 while ready: the volume failed, its share error;
    the lab restarts it (a new pid) and it is ready again, the data written before
    intact."""
    v = create_volume("killed", server_uuid=CN1)
    digests = {f"f{i}": write_file(os.path.join(export_dir(v), f"f{i}")) for i in range(4)}
    pid = kill_share(v)
    failed = wait_volume(v["uuid"], "failed", timeout=15)
    assert failed["share_state"] == "error" and failed["error_since"], failed
    v2 = wait_volume(v["uuid"], "ready", timeout=20, share="running", fail_fast=False)
    assert v2["error_since"] is None, v2
    v2 = check_volume(v["uuid"])
    new = share_pid(v2)
    assert new and new != pid and not pid_alive(pid), (pid, new)
    assert tree(export_dir(v2)) == digests
    delete_volume(v["uuid"])
    check_volume_gone(v2)


# ---- the storage instance destroyed: test 27 -----------------------------------------------

def control_pid():
    pid = lab.pid("control")
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert os.path.basename(argv[0]) == "ternd" and "control" in argv, argv
    return pid


def destroy_out_of_band(d):
    """What a destroyed storage instance leaves: its share process gone (killed, after
    checking it is this instance's), its directory removed."""
    for pid in workload_pids(d):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # it exited meanwhile
            continue
        wait_for(f"share process {pid} to exit", lambda: not pid_alive(pid), timeout=10)
    shutil.rmtree(d, ignore_errors=True)
    assert not os.path.exists(d), d


def test_27_storage_destroyed():
    """The storage instance destroyed while the volume is creating (once the share
    process has started, before the control plane marks the volume ready): the volume
    ends failed, its record kept, its storage instance's resources given back, its name
    free again. Destroyed while deleting: the delete ends with the record removed."""
    # While creating: cn2's agent holds the job before `create`; then the control is
    # paused while the agent makes the instance and starts its share.
    control = control_pid()
    with Paused("cn2"):
        vol_uuid, status, job = submit_volume("doomed", server_uuid=CN2)
        assert status in (200, 201), (status, job)
        v = wait_for("the storage instance placed",
                     lambda: (volume_of(vol_uuid) or {}).get("vm_uuid") and volume_of(vol_uuid),
                     timeout=20)
        wait_for("the job to wait for cn2's agent",
                 lambda: lab.job_of(job["uuid"]).get("step_queue") == "server:" + CN2,
                 timeout=20)
        os.kill(control, signal.SIGSTOP)
    d = lab.vm_dir(CN2, v["vm_uuid"])
    try:
        wait_for("the share process to start", lambda: workload_pids(d), timeout=20, every=0.01)
        destroy_out_of_band(d)
    finally:
        os.kill(control, signal.SIGCONT)
    end = lab.wait_job(job["uuid"], timeout=60)
    log(f"the create ended {end['execution']} "
        f"({(end.get('error') or {}).get('code')})")
    v = wait_volume(vol_uuid, "failed", timeout=30)
    assert v["share_state"] == "error", v
    assert not os.path.exists(d) and not workload_pids(d)
    vm = storage_vm(v["vm_uuid"])
    wait_for("the storage instance released",
             lambda: (storage_vm(v["vm_uuid"]) or {}).get("allocation") is None, timeout=20)
    vm = storage_vm(v["vm_uuid"])
    assert vm is None or (vm["state"] in ("failed", "destroyed") and not vm.get("nics")), vm
    check_inventory()
    # The failed record stays; its name is free again.
    again = create_volume("doomed", server_uuid=CN1)
    assert again["uuid"] != vol_uuid
    assert volume_of(vol_uuid)["state"] == "failed"
    delete_volume(vol_uuid)
    assert volume_of(vol_uuid) is None

    # While deleting: the delete waits for cn1's agent; the storage instance is
    # destroyed meanwhile; the delete ends with nothing left.
    with Paused("cn1"):
        status, dj = volume_job("volume-delete", again["uuid"], owner_uuid=OWNER)
        assert status in (200, 201), (status, dj)
        wait_volume(again["uuid"], "deleting", timeout=20)
        destroy_out_of_band(storage_dir(again))
    end = lab.wait_job(dj["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    check_volume_gone(again)
    check_inventory()


# ---- snapshots: tests 28 and 29 ------------------------------------------------------------

def snapshots_on_disk(v):
    d = os.path.join(storage_dir(v), "snapshots")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_28_snapshots_and_rollback():
    """s1 created (a copy of the export), s1 again refused; X written, s2, Y written,
    rollback to s1: rolling_back (held while cn1's agent is paused), then ready with
    the export as s1 had it (neither X nor Y), s2 gone from the record and the disk,
    the share restarted. Then s1 deleted; a rollback to it refused."""
    v = create_volume("snappy", server_uuid=CN1)
    ex = export_dir(v)
    write_file(os.path.join(ex, "a"))
    write_file(os.path.join(ex, "sub", "b"))
    at_s1 = tree(ex)
    ok_volume_job("volume-snapshot-create", v["uuid"], owner_uuid=OWNER, name="s1")
    v1 = check_volume(v["uuid"])
    assert [(s["name"], s["state"]) for s in v1["snapshots"]] == [("s1", "created")], v1
    assert v1["snapshots"][0]["create_timestamp"], v1
    assert snapshots_on_disk(v) == ["s1"]
    assert tree(os.path.join(storage_dir(v), "snapshots", "s1")) == at_s1
    refused_volume_job("volume-snapshot-create", v["uuid"], 409, "VolumeSnapshotAlreadyExists",
                       ["s1"], owner_uuid=OWNER, name="s1")

    write_file(os.path.join(ex, "X"))
    at_s2 = tree(ex)
    ok_volume_job("volume-snapshot-create", v["uuid"], owner_uuid=OWNER, name="s2")
    write_file(os.path.join(ex, "Y"))
    assert snapshots_on_disk(v) == ["s1", "s2"]
    assert tree(os.path.join(storage_dir(v), "snapshots", "s2")) == at_s2
    pid = share_pid(v)
    with Paused("cn1"):
        status, job = volume_job("volume-rollback", v["uuid"], owner_uuid=OWNER, name="s1")
        assert status in (200, 201), (status, job)
        rb = wait_volume(v["uuid"], "rolling_back", timeout=20)
        # Nothing else may happen to a volume rolling back.
        status, body = volume_job("volume-delete", v["uuid"], owner_uuid=OWNER)
        assert (status, body.get("code")) == (409, "VolumeNotReady"), (status, body)
        assert "rolling_back" in body["message"], body
    end = lab.wait_job(job["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    v2 = wait_volume(v["uuid"], "ready", timeout=20, share="running", fail_fast=False)
    v2 = check_volume(v["uuid"])
    assert rb["state"] == "rolling_back"
    assert tree(ex) == at_s1, (sorted(tree(ex)), sorted(at_s1))
    assert [s["name"] for s in v2["snapshots"]] == ["s1"], v2["snapshots"]
    assert snapshots_on_disk(v) == ["s1"]
    new = share_pid(v2)
    assert new and new != pid, (pid, new)
    ok_volume_job("volume-snapshot-delete", v["uuid"], owner_uuid=OWNER, name="s1")
    v3 = check_volume(v["uuid"])
    assert v3["snapshots"] == [] and snapshots_on_disk(v) == [], v3
    assert tree(ex) == at_s1
    refused_volume_job("volume-rollback", v["uuid"], 404, "VolumeSnapshotNotFound", ["s1"],
                       owner_uuid=OWNER, name="s1")
    refused_volume_job("volume-snapshot-delete", v["uuid"], 404, "VolumeSnapshotNotFound",
                       ["s1"], owner_uuid=OWNER, name="s1")
    delete_volume(v["uuid"])
    check_volume_gone(v3)


def test_29_snapshot_without_space():
    """cn3's data root is a 16 MiB tmpfs: a volume there holding 10 MiB cannot be
    copied; the snapshot is failed, the volume stays ready, its export unchanged, and
    no copy (nor a partial one) is left."""
    v = create_volume("cramped", server_uuid=CN3)
    ex = export_dir(v)
    write_file(os.path.join(ex, "big"), size=10 * MIB)
    before = tree(ex)
    st = os.statvfs(ex)
    assert st.f_bavail * st.f_frsize < 10 * MIB, st
    job = run_volume_job("volume-snapshot-create", v["uuid"], owner_uuid=OWNER, name="full")
    log(f"the snapshot job ended {job['execution']} ({(job.get('error') or {}).get('code')})")
    v2 = check_volume(v["uuid"])
    assert v2["state"] == "ready", v2
    assert [(s["name"], s["state"]) for s in v2["snapshots"]] == [("full", "failed")], \
        v2["snapshots"]
    assert tree(ex) == before
    sdir = os.path.join(storage_dir(v), "snapshots")
    left = os.listdir(sdir) if os.path.isdir(sdir) else []
    assert left == [], left
    delete_volume(v["uuid"])
    check_volume_gone(v2)


# ---- networks: test 31 --------------------------------------------------------------------

def test_31_networks():
    """Attach a second fabric network: two networks, two NICs on the storage instance,
    an address taken on each; detach it: one, its address free. A non-fabric network
    and another owner's fabric network are refused with nothing changed. (A network
    change restarts the share: a watch tick that falls in between may fail the volume
    for a moment; it must come back ready.)"""
    v = create_volume("netted", server_uuid=CN1)
    ok_volume_job("volume-attach-network", v["uuid"], owner_uuid=OWNER, network_uuid=FABRIC2)
    v2 = wait_volume(v["uuid"], "ready", share="running", fail_fast=False)
    v2 = check_volume(v["uuid"])
    assert v2["networks"] == [FABRIC, FABRIC2], v2
    vm = storage_vm(v2["vm_uuid"])
    assert len(vm["nics"]) == 2, vm["nics"]
    ip2 = [n["ip"] for n in vm["nics"] if n["network_uuid"] == FABRIC2][0]
    assert ips_taken(FABRIC2)[ip2]["belongs_to_uuid"] == v2["vm_uuid"]
    with open(os.path.join(storage_dir(v2), "vm.json")) as f:
        assert len(json.load(f)["nics"]) == 2
    ok_volume_job("volume-detach-network", v["uuid"], owner_uuid=OWNER, network_uuid=FABRIC2)
    wait_volume(v["uuid"], "ready", share="running", fail_fast=False)
    v3 = check_volume(v["uuid"])
    assert v3["networks"] == [FABRIC], v3
    assert len(storage_vm(v3["vm_uuid"])["nics"]) == 1
    assert ip2 not in ips_taken(FABRIC2)
    refused_volume_job("volume-attach-network", v["uuid"], 422, "InvalidArgument",
                       ["network"], owner_uuid=OWNER, network_uuid=EXTERNAL)
    refused_volume_job("volume-attach-network", v["uuid"], 422, "InvalidArgument",
                       ["network"], owner_uuid=OWNER, network_uuid=FABRIC_OTHER)
    refused_volume_job("volume-attach-network", v["uuid"], 404, "ResourceNotFound",
                       [], owner_uuid=OWNER, network_uuid=str(uuidlib.uuid4()))
    check_inventory()
    delete_volume(v["uuid"])
    check_volume_gone(v3)


# ---- bad input -----------------------------------------------------------------------------

def refused_create(want_status, want_code, words, **params):
    """A volume-create refused at POST /jobs, naming `words`; nothing stored."""
    vol_uuid = str(uuidlib.uuid4())
    body = refused_volume_job("volume-create", vol_uuid, want_status, want_code, words,
                              **dict({"owner_uuid": OWNER}, **params))
    assert volume_of(vol_uuid) is None
    return body


def test_bad_input():
    """Names too short, too long or of other characters; sizes not in the list or not
    positive integers; a type other than tritonnfs; an unknown network, a non-fabric
    one, another owner's; an unknown parameter; a resize or a change of networks
    through an update; a volume of another owner (never revealed); a rollback to a
    snapshot that does not exist: each refused with RFD 26's
    code, else InvalidArgument naming the field, and nothing stored or changed. The
    CLI refuses sizes without G before any request."""
    for name in ("a", "_ab", "-ab", ".ab", "a b", "a/b", "\u00e91", "x" * 257, ""):
        refused_create(422, "InvalidArgument", ["name"], name=name)
    body = refused_create(409, "VolumeSizeNotAvailable", ["10240", "1024000"], name="sized",
                          size=21504)
    if "availableSizes" in body:
        assert body["availableSizes"] == SIZES, body
    for size in (0, -10240, 1.5, "10240", 10240.5, True):
        refused_create(422, "InvalidArgument", ["size"], name="sized", size=size)
    refused_create(422, "InvalidArgument", ["type"], name="typed", type="tritonebs")
    refused_create(404, "ResourceNotFound", ["network"], name="netless",
                   networks=[str(uuidlib.uuid4())])
    refused_create(422, "InvalidArgument", ["network"], name="netless", networks=[EXTERNAL])
    refused_create(422, "InvalidArgument", ["network"], name="netless",
                   networks=[FABRIC_OTHER])
    refused_create(422, "InvalidArgument", ["colour"], name="odd", colour="blue")
    # A name of 256 characters and one of two are fine.
    long_name = "v" * 256
    lv = create_volume(long_name, server_uuid=CN1)
    sv = create_volume("ab", server_uuid=CN1)
    refused_create(409, "VolumeAlreadyExists", ["ab"], name="ab")

    # Another owner's volume: not found, whatever is asked.
    assert volume_of(sv["uuid"], owner=OTHER) is None
    for workflow, extra in (("volume-delete", {}), ("volume-update", {"name": "theirs"}),
                            ("volume-snapshot-create", {"name": "snap"}),
                            ("volume-rollback", {"name": "snap"})):
        refused_volume_job(workflow, sv["uuid"], 404, "VolumeNotFound", [], owner_uuid=OTHER,
                           **extra)
    refused_volume_job("volume-delete", str(uuidlib.uuid4()), 404, "VolumeNotFound", [],
                       owner_uuid=OWNER)
    refused_volume_job("volume-rollback", sv["uuid"], 404, "VolumeSnapshotNotFound", ["nope"],
                       owner_uuid=OWNER, name="nope")
    # Volumes are not resizable in place; networks change through attach and detach.
    refused_volume_job("volume-update", sv["uuid"], 422, "InvalidArgument",
                       ["not resizable in place"], owner_uuid=OWNER, size=20480)
    refused_volume_job("volume-update", sv["uuid"], 422, "InvalidArgument", ["networks"],
                       owner_uuid=OWNER, networks=[FABRIC2])
    refused_volume_job("volume-update", sv["uuid"], 422, "InvalidArgument", ["name"],
                       owner_uuid=OWNER, name="a")
    # The same name under another owner is another volume.
    theirs = create_volume("ab", owner=OTHER, networks=[FABRIC_OTHER], server_uuid=CN2)
    assert theirs["uuid"] != sv["uuid"]

    # The CLI: sizes take G (or g) and nothing else, checked before any request.
    before = stable(fingerprint())
    for size in ("0G", "10", "10GB", "10M", "1T", "-10G", "1.5G"):
        p = lab.tern("volume", "create", "-n", "cli-sized", "-s", size, check=False)
        assert p.returncode != 0, (size, p.stdout, p.stderr)
    p = lab.tern("volume", "create", "-n", "cli-sized", "-s", "21G", check=False)
    assert p.returncode != 0 and "volume size not available" in p.stderr, (p.stdout, p.stderr)
    after = stable(fingerprint())
    assert after == before, diff(before, after)
    for x in (lv, sv):
        delete_volume(x["uuid"])
        check_volume_gone(x)
    delete_volume(theirs["uuid"], owner=OTHER)
    check_volume_gone(theirs)
    check_inventory()


def main():
    tests = [test_1_create, test_7_racing_creates, test_26_share_killed,
             test_27_storage_destroyed, test_28_snapshots_and_rollback,
             test_29_snapshot_without_space, test_31_networks, test_bad_input]
    volume_lab.run(tests, sys.argv[3:])


if __name__ == "__main__":
    main()
