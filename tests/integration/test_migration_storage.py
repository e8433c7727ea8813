#!/usr/bin/env python3
"""An operator migrates an NFS volume's storage instance (DOMAIN 5.2, RFD 26) on a lab
of three servers (migration_lab.py), with the volume mounted by two consumers on two
servers:

* the volume holds a sparse file (data only at its end), a file with a hole in the
  middle, a symlink, a nested directory with a private file, and a snapshot taken by
  volume-snapshot-create (its tree under snapshots/);
* the begin makes a hidden, empty export/ on the target; a sync carries the trees
  while a consumer writes through its mount; the switch stops the share, carries the
  last changes with the export fenced, verifies the trees' digest, swaps the NIC (same
  MAC and IP) and starts the share on the target;
* after it: both trees equal (the digest of each, and file by file: kind, mode, size,
  content, holes, link targets), the share process alive under the target's data root
  and none on the source, the volume record naming the target and its export, share
  `running` with the same endpoint, both consumers' mounts re-pointed to the target's
  export (reading what was written, writing to the target);
* guards: a user's migrate of the storage instance is 403, a delete of the volume and
  a snapshot during the migration are 409 VolumeMigrating;
* an abort after a sync: the source's share runs again, its tree unchanged, the
  consumers read and write as before;
* a switch then a rollback: the volume, the share (its export unfenced) and the
  consumers' mounts back on the server it left, with the data as the switch left it.

Usage: test_migration_storage.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when
the build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import hashlib
import os
import stat
import sys
import time
import uuid as uuidlib

import migration_lab as ml
from migration_lab import CN1, CN2, OWNER
from lab_harness import MIB, pid_alive, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
FABRIC = "f1000000-0000-4000-8000-000000000002"
SLOW = 16  # Mbit/s: 2 MB/s, so the sync of 12 MiB lasts about 6 s, long enough to write in


def lab():
    return ml.lab


def volume(vol):
    status, v = lab().http("/volumes/" + vol)
    assert status == 200, (status, v)
    return v


def storage_vm(vol):
    """The storage instance's record (GET /vms/:uuid?system_role=nfsvolumestorage)."""
    v = volume(vol)
    status, vm = lab().http(f"/vms/{v['vm_uuid']}?system_role=nfsvolumestorage")
    assert status == 200, (status, vm)
    return vm


def consumer(server, vol_name):
    """An idle instance on `server` mounting the volume at /shared: its uuid."""
    vm = str(uuidlib.uuid4())
    params = {"vm_uuid": vm, "owner_uuid": OWNER, "package": ml.PKG, "image_uuid": ml.IMG,
              "networks": [{"uuid": ml.EXTERNAL, "primary": True}, {"uuid": FABRIC}],
              "server_uuid": server, "autoboot": True, "disks": [{}, {"size": ml.DATA_MIB}],
              "customer_metadata": {"lab:workload": "idle"},
              "volumes": [{"name": vol_name, "mountpoint": "/shared"}]}
    job = lab().run_job("provision", "/provision-" + vm, params, timeout=60)
    assert job["execution"] == "succeeded", job
    return vm


def mount(server, vm):
    return os.path.join(ml.vm_dir(server, vm), "mounts", "shared")


def write(path, data, at=0, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, mode)
    try:
        os.pwrite(fd, data, at)
    finally:
        os.close(fd)


def fill_volume(export):
    """The files of the volume: what every check below compares."""
    write(os.path.join(export, "sparse.img"), os.urandom(3000), at=40 * MIB)
    write(os.path.join(export, "holed.bin"), os.urandom(MIB + 5))
    write(os.path.join(export, "holed.bin"), os.urandom(MIB), at=9 * MIB)
    os.symlink("holed.bin", os.path.join(export, "link"))
    os.makedirs(os.path.join(export, "a", "b"))
    os.chmod(os.path.join(export, "a"), 0o750)
    write(os.path.join(export, "a", "b", "private"), b"private\n", mode=0o600)
    os.chmod(os.path.join(export, "a", "b", "private"), 0o600)
    write(os.path.join(export, "big.bin"), os.urandom(12 * MIB))


def tree(root):
    """{relative path: (kind, mode, size, sha256 or link target, st_blocks)} of a tree."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, 0, os.readlink(p), 0)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), 0, "", 0)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_size, h, st.st_blocks)
    return out


def digest(t):
    """One digest over a tree() listing but st_blocks (holes may be laid out otherwise)."""
    h = hashlib.sha256()
    for k in sorted(t):
        h.update(repr((k,) + t[k][:4]).encode())
    return h.hexdigest()


def assert_same_trees(src, dst):
    a, b = tree(src), tree(dst)
    assert digest(a) == digest(b), (src, dst)
    assert sorted(a) == sorted(b), (sorted(set(a) ^ set(b)))
    for k in a:
        assert a[k][:4] == b[k][:4], (k, a[k], b[k])
        # Holes kept: no more allocated on the target than on the source, give or take
        # a page.
        assert b[k][4] <= a[k][4] + 8, (k, a[k][4], b[k][4])
    return a


def export_of(server, vm):
    return os.path.join(ml.vm_dir(server, vm), "export")


def share_pids(server, vm):
    return ml.workload_alive(server, vm)


def wait_share_running(vol, server, timeout=60.0):
    return wait_for(f"volume {vol} running on {server}",
                    lambda: (lambda v: v if v["share_state"] == "running" and
                             v["server_uuid"] == server else None)(volume(vol)), timeout)


def wait_mounted(server, vm, export, timeout=60.0):
    """The consumer's mount once it resolves to `export` (the share watch re-points it)."""
    m = mount(server, vm)
    want = os.path.realpath(export)
    wait_for(f"{m} -> {want}", lambda: os.path.realpath(m) == want and os.path.isdir(m),
             timeout)


STATE = {}


def test_storage_instance_migrates():
    vol = str(uuidlib.uuid4())
    j = lab().run_job("volume-create", "/volume-create-" + vol,
                      {"volume_uuid": vol, "owner_uuid": OWNER, "name": "mig-nfs"},
                      timeout=60)
    assert j["execution"] == "succeeded", j
    v0 = wait_share_running(vol, volume(vol)["server_uuid"])
    svm = v0["vm_uuid"]
    src = v0["server_uuid"]
    dst = CN2 if src != CN2 else CN1
    src_export = export_of(src, svm)
    assert os.path.realpath(v0["export_path"]) == os.path.realpath(src_export), v0
    fill_volume(src_export)
    c1, c2 = consumer(CN1, "mig-nfs"), consumer(CN2, "mig-nfs")
    for srv, c in ((CN1, c1), (CN2, c2)):
        wait_mounted(srv, c, src_export)
    with open(os.path.join(mount(CN1, c1), "a", "b", "private"), "rb") as f:
        assert f.read() == b"private\n"
    nics_before = ml.nic_addrs(storage_vm(vol))
    assert nics_before, storage_vm(vol)

    # A snapshot of the volume (tasks/dc/volume_snapshot.c): its tree travels too.
    j = lab().run_job("volume-snapshot-create", "/volume-snapshot-create-" + vol,
                      {"volume_uuid": vol, "owner_uuid": OWNER, "name": "before"}, timeout=60)
    assert j["execution"] == "succeeded", j
    snap = os.path.join(ml.vm_dir(src, svm), "snapshots", "before")
    assert os.path.isdir(snap), snap
    snapped = tree(snap)

    # The estimate counts the data of the volume's files, not their sizes: 12 MiB, 2 MiB
    # and a few KiB, twice (the export and its snapshot), the sparse file's 40 MiB hole
    # not counted.
    r = ml.ok_action("estimate", svm)["chain_results"][-1]["result"]
    assert 28 * MIB <= r["size_bytes"] <= 30 * MIB, r  # the export and its snapshot
    assert ml.migration(svm) is None

    # A user may not migrate a storage instance; the operator may.
    ml.refused("begin", svm, 403, "NotAllowed", ["User migration"], owner_uuid=OWNER,
               target_server_uuid=dst)
    ml.ok_action("begin", svm, target_server_uuid=dst, send_mbps_limit=SLOW)
    ml.wait_migration(svm, "paused")
    assert ml.hidden(dst, svm), ml.vm_json(dst, svm)
    assert os.path.isdir(export_of(dst, svm))
    assert not share_pids(dst, svm), "a hidden target serves nothing"

    # Guards while it migrates: no delete, no snapshot.
    status, body = lab().create_job("volume-delete", "/volume-delete-" + vol,
                                    {"volume_uuid": vol, "owner_uuid": OWNER})
    assert (status, body.get("code")) == (409, "VolumeMigrating"), (status, body)
    assert svm in body["message"], body
    status, body = lab().create_job("volume-snapshot-create", "/volume-snapshot-create-" + vol,
                                    {"volume_uuid": vol, "owner_uuid": OWNER, "name": "s1"})
    assert (status, body.get("code")) == (409, "VolumeMigrating"), (status, body)
    assert volume(vol)["state"] == "ready"

    # A sync, and writes through a consumer's mount while it runs.
    status, job = ml.action("sync", svm)
    assert status == 201, (status, job)
    ml.wait_pass_bytes(svm)
    during = os.urandom(300000)
    write(os.path.join(mount(CN1, c1), "during.bin"), during)
    write(os.path.join(mount(CN2, c2), "big.bin"), b"changed by c2", at=5 * MIB)
    os.remove(os.path.join(mount(CN1, c1), "holed.bin"))
    write(os.path.join(mount(CN1, c1), "holed.bin"), os.urandom(4096), at=7 * MIB)
    done = lab().wait_job(job["uuid"], timeout=90)
    assert done["execution"] == "succeeded", done
    ml.wait_migration(svm, "paused")

    # The switch.
    t_switch = time.monotonic()
    ml.run_action("switch", svm, timeout=120)
    t_switched = time.monotonic()
    m = ml.wait_migration(svm, "successful")
    dst_export = export_of(dst, svm)
    # What a consumer notices: from the switch's start until its mount works again (the
    # switch job, then the target's watch seeing the share run and a tick of the
    # consumer's server's watch: at most two ticks).
    for srv, c in ((CN1, c1), (CN2, c2)):
        wait_mounted(srv, c, dst_export)
    print(f"switch job {t_switched - t_switch:.1f} s; both consumers re-pointed "
          f"{time.monotonic() - t_switch:.1f} s after the switch began", flush=True)
    # The source keeps its copy, hidden and fenced (for a rollback), until finalize.
    src_fenced = os.path.join(ml.vm_dir(src, svm), "export.fenced")
    assert os.path.isdir(src_fenced) and not os.path.exists(src_export)
    files = assert_same_trees(src_fenced, dst_export)
    assert {"sparse.img", "holed.bin", "link", "a", "a/b", "a/b/private", "big.bin",
            "during.bin"} <= set(files), sorted(files)
    assert files["link"][3] == "holed.bin" and os.path.islink(os.path.join(dst_export, "link"))
    assert files["a/b/private"][1] == 0o600 and files["a"][1] == 0o750
    assert files["sparse.img"][4] * 512 < MIB, files["sparse.img"]  # still sparse
    with open(os.path.join(dst_export, "during.bin"), "rb") as f:
        assert f.read() == during
    # The snapshot's tree, as it was taken.
    dst_snap = os.path.join(ml.vm_dir(dst, svm), "snapshots", "before")
    assert_same_trees(snap, dst_snap)
    assert digest(tree(dst_snap)) == digest(snapped)

    # The share runs on the target, under its data root, and not on the source.
    pids = wait_for("the share on the target", lambda: share_pids(dst, svm), 30)
    with open(f"/proc/{pids[0]}/cmdline", "rb") as f:
        assert ml.vm_dir(dst, svm).encode() in f.read()
    assert not share_pids(src, svm), share_pids(src, svm)
    v = wait_share_running(vol, dst)
    assert os.path.realpath(v["export_path"]) == os.path.realpath(dst_export), v
    assert v["share_endpoint"] == v0["share_endpoint"] and \
        v["filesystem_path"] == v0["filesystem_path"], (v0, v)
    assert ml.nic_addrs(storage_vm(vol)) == nics_before
    assert storage_vm(vol)["server_uuid"] == dst

    # Both consumers read and write the target's export through their mounts.
    for srv, c in ((CN1, c1), (CN2, c2)):
        wait_mounted(srv, c, dst_export)
        with open(os.path.join(mount(srv, c), "during.bin"), "rb") as f:
            assert f.read() == during
        write(os.path.join(mount(srv, c), f"after-{c}"), c.encode())
        with open(os.path.join(dst_export, f"after-{c}"), "rb") as f:
            assert f.read() == c.encode()
        assert ml.vm_json(srv, c)["volumes"][0]["export_path"] == v["export_path"]
    assert not os.path.exists(os.path.join(src_fenced, f"after-{c1}"))

    ml.ok_action("finalize", svm)
    assert not os.path.exists(ml.vm_dir(src, svm)) or not ml.vm_json(src, svm)
    STATE.update(vol=vol, svm=svm, server=dst, other=src, consumers=((CN1, c1), (CN2, c2)))
    lab().check_inventory()


def test_storage_migration_aborted():
    vol, svm, here, there = STATE["vol"], STATE["svm"], STATE["server"], STATE["other"]
    export = export_of(here, svm)
    ml.ok_action("begin", svm, target_server_uuid=there)
    ml.wait_migration(svm, "paused")
    ml.run_action("sync", svm, timeout=90)
    ml.wait_migration(svm, "paused")
    before = tree(export)
    ml.run_action("abort", svm, timeout=60)
    ml.wait_migration(svm, "aborted")
    assert not os.path.exists(ml.vm_dir(there, svm)), "the target copy is removed"
    assert tree(export) == before
    wait_for("the share on its server", lambda: share_pids(here, svm), 30)
    v = wait_share_running(vol, here)
    assert os.path.realpath(v["export_path"]) == os.path.realpath(export), v
    for srv, c in STATE["consumers"]:
        wait_mounted(srv, c, export)
        with open(os.path.join(mount(srv, c), f"after-{c}"), "rb") as f:
            assert f.read() == c.encode()
    lab().check_inventory()


def test_storage_migration_rolled_back():
    """A switch, then a rollback: the volume, the share and the consumers back on the
    server it left, what the consumers wrote on the target meanwhile included."""
    vol, svm, here, there = STATE["vol"], STATE["svm"], STATE["server"], STATE["other"]
    export = export_of(here, svm)
    ml.ok_action("begin", svm, target_server_uuid=there)
    ml.wait_migration(svm, "paused")
    ml.run_action("switch", svm, timeout=120)
    ml.wait_migration(svm, "successful")
    wait_share_running(vol, there)
    moved = export_of(there, svm)
    for srv, c in STATE["consumers"]:
        wait_mounted(srv, c, moved)
        write(os.path.join(mount(srv, c), f"on-{there}-{c}"), b"x")
    ml.run_action("rollback", svm, timeout=120)
    ml.wait_migration(svm, "aborted")
    assert not os.path.exists(ml.vm_dir(there, svm)), "the target copy is removed"
    assert os.path.isdir(export) and not os.path.exists(
        os.path.join(ml.vm_dir(here, svm), "export.fenced")), "the source unfenced"
    wait_for("the share back on its server", lambda: share_pids(here, svm), 30)
    v = wait_share_running(vol, here)
    assert os.path.realpath(v["export_path"]) == os.path.realpath(export), v
    for srv, c in STATE["consumers"]:
        wait_mounted(srv, c, export)
        with open(os.path.join(mount(srv, c), f"after-{c}"), "rb") as f:
            assert f.read() == c.encode()
        # A rollback returns to the source's copy as the switch left it (as for any
        # instance's disks): what was written on the target since is not carried back.
        assert not os.path.exists(os.path.join(mount(srv, c), f"on-{there}-{c}"))
    lab().check_inventory()


TESTS = [test_storage_instance_migrates, test_storage_migration_aborted,
         test_storage_migration_rolled_back]

ml.open_lab(SOURCE, BUILD, "tern-migration-storage-")
ml.lab.datacenter["networks"].append(
    {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
     "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
     "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500,
     "fabric": True, "owner_uuids": [OWNER]})
ml.run(TESTS, only=sys.argv[3:])
