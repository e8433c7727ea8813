#!/usr/bin/env python3
"""Volumes at provision (RFD 26) on a real lab (tools/lab up on volume_lab.DATACENTER):
an instance mounting a volume (sdc:volumes, its mount reaching the export, a file
written by one consumer read by another), the reservation a provision holds while it
runs and the reference it leaves, a delete refused while either is held, a failed
provision giving its reservations back, a stale reservation cleaned up by the lab's
schedule, the delete rules across stop, destroy and an instance removed by hand, the
refusals of bad `volumes`, and the cross-cutting scenarios X1 (two disks and a volume
made on demand) and X2 (a failure mid-provision gives everything back; the retry
succeeds). test_N_* is acceptance test N of RFD 26 (docs/VOLUMES.md).

Every test checks the records AND the data plane: the consumer's vm.json and its mount
symlinks, files written through a mount found in the export by digest, the storage
instance's directory and share process (volume_lab.check_volume), a deleted volume's
directory and addresses gone, and the inventory whole with storage instances counted.

Usage: test_volume_provision.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1
leaves a failed run's lab up to look into. Every wait is bounded and polls what it
waits for; the processes signalled are checked to be what they are first.
"""
import json
import os
import shutil
import signal
import sys
import time
import uuid as uuidlib

import volume_lab
from volume_lab import (OWNER, CN1, CN2, EXTERNAL, FABRIC, FABRIC2, FLEX, KVM, KVM_IMG, OS_IMG,
                        FRAIL, MIB, create_volume, volume_of, wait_volume,
                        delete_volume, volume_job, check_volume, check_volume_gone, export_dir,
                        references, reservations, schedule_of, submit_provision,
                        provision_with_volumes, mount_path, check_consumer,
                        vm_action, delete_vm, write_file, tree, Paused, check_inventory,
                        fingerprint, stable, diff, agent_of, log, wait_for)
from lab_harness import pid_alive, workload_pids

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = volume_lab.open_lab(SOURCE, BUILD, "tern-vol-provision-")


def refused_delete(vol_uuid, words=()):
    """A delete without force refused VolumeInUse naming `words`; the volume unchanged."""
    before = volume_of(vol_uuid)
    status, body = volume_job("volume-delete", vol_uuid, owner_uuid=OWNER)
    assert (status, body.get("code")) == (409, "VolumeInUse"), (status, body)
    for w in words:
        assert w in body["message"], (w, body)
    after = volume_of(vol_uuid)
    assert after["state"] == before["state"] == "ready", (before, after)
    return body


def refused_provision(want_status, want_code, words, volumes, **kw):
    """A provision refused at POST /jobs, naming `words`; nothing stored anywhere (no
    job, VM, volume, reservation, address or directory)."""
    before = stable(fingerprint())
    vm_uuid, status, body = submit_provision(volumes, **kw)
    assert (status, body.get("code")) == (want_status, want_code), (volumes, status, body)
    for w in words:
        assert w in body["message"], (w, body)
    assert lab.vm_of(vm_uuid) is None
    after = stable(fingerprint())
    assert after == before, diff(before, after)
    return body


# ---- tests 11-17 -----------------------------------------------------------------------

def test_11_mount():
    """Two VMs mount wp-uploads at /uploads: sdc:volumes as RFD 26 writes it, both
    referencing the volume, no reservation left; a file written through one VM's mount
    is read through the other's and found in the export."""
    v = create_volume("wp-uploads", server_uuid=CN2)
    vm1, job1 = provision_with_volumes([{"name": "wp-uploads", "mountpoint": "/uploads"}],
                                       server=CN1)
    vm2, _ = provision_with_volumes([{"name": "wp-uploads", "mountpoint": "/uploads",
                                      "mode": "rw"}], server=CN2)
    rec = lab.vm_of(vm1)
    assert json.loads(rec["internal_metadata"]["sdc:volumes"]) == [
        {"mountpoint": "/uploads", "name": "wp-uploads", "nfsvolume": v["filesystem_path"],
         "mode": "rw", "type": "tritonnfs"}], rec["internal_metadata"]
    assert v["filesystem_path"].endswith(":/exports/data")
    for vm in (vm1, vm2):
        check_consumer(vm, [(v, "/uploads", "rw")])
    assert sorted(references(v["uuid"])) == sorted([vm1, vm2])
    assert reservations(volume_uuid=v["uuid"]) == []
    assert reservations(job_uuid=job1["uuid"]) == []
    digest = write_file(os.path.join(mount_path(vm1, "/uploads"), "photos", "cat.jpg"))
    assert tree(mount_path(vm2, "/uploads")) == {"photos/cat.jpg": digest}
    assert tree(export_dir(v)) == {"photos/cat.jpg": digest}
    # Through vm.json's own record of the export too.
    check_volume(v["uuid"])
    check_inventory()
    for vm in (vm1, vm2):
        delete_vm(vm)
    assert references(v["uuid"]) == []
    delete_volume(v["uuid"])
    check_volume_gone(v)


def test_12_delete_while_provisioning():
    """With the consumer's agent paused the provision holds its reservation (volumes
    ready, the VM not active): a delete is refused VolumeInUse naming the VM, and the
    volume stays ready. Resumed, the reservation becomes a reference."""
    v = create_volume("busy", server_uuid=CN1)
    with Paused("cn2"):
        vm_uuid, status, job = submit_provision([{"name": "busy", "mountpoint": "/busy"}],
                                                server=CN2)
        assert status in (200, 201), (status, job)
        held = wait_for("the provision's reservation",
                        lambda: reservations(volume_uuid=v["uuid"]), timeout=20)
        assert [(r["vm_uuid"], r["job_uuid"], r["owner_uuid"], r["volume_name"])
                for r in held] == [(vm_uuid, job["uuid"], OWNER, "busy")], held
        wait_for("the job to wait for cn2's agent",
                 lambda: lab.job_of(job["uuid"]).get("step_queue") == "server:" + CN2,
                 timeout=20)
        refused_delete(v["uuid"], [vm_uuid])
        assert references(v["uuid"]) == []
    end = lab.wait_job(job["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    check_consumer(vm_uuid, [(v, "/busy", "rw")])
    assert references(v["uuid"]) == [vm_uuid]
    assert reservations(volume_uuid=v["uuid"]) == []
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v)


def test_13_failed_provision():
    """A provision that fails after its reservation (the image's file removed: the
    agent's image step fails) gives its reservation back; the volume existed before,
    so it stays ready and unreferenced, and a delete then succeeds."""
    v = create_volume("survivor", server_uuid=CN2)
    lab_file = os.path.join(lab.dir, "images", "lab-frail.img")
    os.rename(lab_file, lab_file + ".aside")
    try:
        vm_uuid, status, job = submit_provision([{"name": "survivor", "mountpoint": "/s"}],
                                                server=CN1, package=FLEX, image=FRAIL)
        assert status in (200, 201), (status, job)
        end = lab.wait_job(job["uuid"], timeout=60)
    finally:
        os.rename(lab_file + ".aside", lab_file)
    assert end["execution"] == "failed" and end["error"]["code"] == "ImageFileMissing", end
    assert "volumes_wait" in [r["name"] for r in end["chain_results"]], end["chain_results"]
    vm = lab.vm_of(vm_uuid)
    assert vm["state"] == "failed" and vm["allocation"] is None and not vm["nics"], vm
    assert not os.path.exists(lab.vm_dir(CN1, vm_uuid))
    assert reservations(job_uuid=end["uuid"]) == []
    assert reservations(volume_uuid=v["uuid"]) == []
    assert references(v["uuid"]) == []
    v2 = check_volume(v["uuid"])
    assert v2["state"] == "ready", v2
    check_inventory()
    delete_volume(v["uuid"])
    check_volume_gone(v2)


def put_reservation(vol, vm_uuid, job_uuid, created):
    """A reservation record written as a provision's volumes step writes it (the
    records of docs/VOLUMES.md), for a job and VM the lab never had."""
    r = {"uuid": str(uuidlib.uuid4()), "vm_uuid": vm_uuid, "job_uuid": job_uuid,
         "owner_uuid": OWNER, "volume_name": vol["name"], "volume_uuid": vol["uuid"],
         "create_timestamp": created}
    p = "tern:p:dc:"
    lab.redis("SET", p + "reservation:" + r["uuid"], json.dumps(r))
    lab.redis("ZADD", p + "reservations", "0", r["uuid"])
    lab.redis("ZADD", p + "volume_reservations:" + vol["uuid"], "0", r["uuid"])
    lab.redis("ZADD", p + "job_reservations:" + job_uuid, "0", r["uuid"])
    return r


def test_14_stale_reservation():
    """A reservation left by a job and VM that are gone, older than the provision
    timeout, is removed by the lab's clean-up (volume-reservations-clean, scheduled
    every 60 s by its own file) within one period; the delete then succeeds. (Whether
    such a reservation blocks a delete before is not asked: RFD 26 counts only
    unexpired ones.)"""
    s = schedule_of("volume-reservations-clean")
    assert s is not None, [(x.get("name"), x.get("workflow")) for x in lab.list_all("/schedules")]
    assert s["every"] in ("60s", "1m"), s
    v = create_volume("stale", server_uuid=CN1)
    r = put_reservation(v, str(uuidlib.uuid4()), str(uuidlib.uuid4()),
                        "2020-01-01T00:00:00.000Z")
    assert [x["uuid"] for x in reservations(volume_uuid=v["uuid"])] == [r["uuid"]]
    t0 = time.monotonic()
    wait_for("the clean-up to remove the reservation",
             lambda: reservations(volume_uuid=v["uuid"]) == [], timeout=75, every=0.5)
    log(f"the clean-up removed it {time.monotonic() - t0:.1f} s later")
    s = schedule_of("volume-reservations-clean")
    end = lab.wait_job(s["last_job_uuid"], timeout=30)
    assert end["execution"] == "succeeded", end
    assert r["uuid"] in end["chain_results"][-1]["result"]["removed"], end
    assert lab.redis("EXISTS", "tern:p:dc:reservation:" + r["uuid"]) == ["0"], r
    delete_volume(v["uuid"])
    check_volume_gone(v)


def test_15_forced_delete():
    """A referenced volume: the delete refused VolumeInUse naming the volume and the
    VM; forced, the volume goes deleting then is gone, its storage directory, share
    process and address with it; the consumer's mount then dangles."""
    v = create_volume("forced", server_uuid=CN2)
    vm_uuid, _ = provision_with_volumes([{"name": "forced", "mountpoint": "/f"}], server=CN1)
    body = refused_delete(v["uuid"], ["forced", vm_uuid])
    assert body["message"].startswith("Volume with name forced is used"), body
    with Paused("cn2"):
        status, job = volume_job("volume-delete", v["uuid"], owner_uuid=OWNER, force=True)
        assert status in (200, 201), (status, job)
        wait_volume(v["uuid"], "deleting", timeout=20)
    end = lab.wait_job(job["uuid"], timeout=60)
    assert end["execution"] == "succeeded", end
    check_volume_gone(v)
    m = mount_path(vm_uuid, "/f")
    assert os.path.islink(m) and not os.path.exists(m), m
    check_inventory()
    delete_vm(vm_uuid)


def test_16_stop_then_destroy():
    """A stopped VM still references its volume (stopped is active): the delete is
    refused; destroyed, it no longer does, and the delete succeeds."""
    v = create_volume("kept", server_uuid=CN2)
    vm_uuid, _ = provision_with_volumes([{"name": "kept", "mountpoint": "/k"}], server=CN1)
    vm_action("stop", vm_uuid)
    assert lab.vm_of(vm_uuid)["state"] == "stopped"
    refused_delete(v["uuid"], [vm_uuid])
    assert references(v["uuid"]) == [vm_uuid]
    delete_vm(vm_uuid)
    assert references(v["uuid"]) == []
    delete_volume(v["uuid"])
    check_volume_gone(v)


def test_17_removed_by_hand():
    """A VM's directory removed by hand (its workload killed, its directory deleted):
    the reconcile (every 2 s here) marks it destroyed, frees its addresses and drops its
    reference; the delete then succeeds."""
    v = create_volume("orphaned", server_uuid=CN2)
    vm_uuid, _ = provision_with_volumes([{"name": "orphaned", "mountpoint": "/o"}],
                                        server=CN1)
    rec = lab.vm_of(vm_uuid)
    d = lab.vm_dir(CN1, vm_uuid)
    for pid in workload_pids(d):
        os.kill(pid, signal.SIGKILL)
        wait_for("the workload to exit", lambda: not pid_alive(pid), timeout=10)
    shutil.rmtree(d)
    wait_for("the reference dropped", lambda: references(v["uuid"]) == [], timeout=20)
    vm = lab.vm_of(vm_uuid)
    assert vm["state"] == "destroyed" and not vm["nics"] and vm["allocation"] is None, vm
    for nic in rec["nics"]:
        assert nic["ip"] not in volume_lab.ips_taken(nic["network_uuid"]), nic
    check_volume(v["uuid"])
    check_inventory()
    delete_volume(v["uuid"])
    check_volume_gone(v)


# ---- tests 18-20: refusals --------------------------------------------------------------

def test_18_mode():
    """mode ro: recorded in sdc:volumes and vm.json (the lab's mounts are symlinks:
    recorded, not enforced; docs/VOLUMES.md). mode rx and type nfs refused."""
    v = create_volume("ro-vol", server_uuid=CN2)
    vm_uuid, _ = provision_with_volumes([{"name": "ro-vol", "mountpoint": "/ro",
                                          "mode": "ro"}], server=CN1)
    check_consumer(vm_uuid, [(v, "/ro", "ro")])
    refused_provision(422, "InvalidArgument", ["mode"],
                      [{"name": "ro-vol", "mountpoint": "/x", "mode": "rx"}])
    refused_provision(422, "InvalidArgument", ["type"],
                      [{"name": "ro-vol", "mountpoint": "/x", "type": "nfs"}])
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])


def test_19_bad_volumes():
    """Two volumes on one mountpoint, a relative or `..` mountpoint, a bad name, 17
    entries, a volume on none of the VM's networks: refused, nothing stored."""
    cases = [
        ([{"name": "v1", "mountpoint": "/bar"}, {"name": "v2", "mountpoint": "/bar"}],
         ["mountpoint", "/bar"], 422, "InvalidArgument"),
        ([{"name": "v1", "mountpoint": "bar"}], ["mountpoint"], 422, "InvalidArgument"),
        ([{"name": "v1", "mountpoint": "/a/../etc"}], ["mountpoint"], 422, "InvalidArgument"),
        ([{"name": "v1", "mountpoint": "/" + "m" * 1024}], ["mountpoint"], 422,
         "InvalidArgument"),
        ([{"name": "a", "mountpoint": "/a"}], ["name"], 422, "InvalidArgument"),
        ([{"name": f"v{i}", "mountpoint": f"/m{i}"} for i in range(17)], ["volumes"], 422,
         "InvalidArgument"),
        ([{"name": "v1"}], ["mountpoint"], 422, "InvalidArgument"),
    ]
    for volumes, words, status, code in cases:
        refused_provision(status, code, words, volumes)
    # A VM on no fabric network of the owner cannot reach a volume made for it.
    refused_provision(409, "VolumeNotReachable", [], [{"name": "v1", "mountpoint": "/a"}],
                      networks=[{"uuid": EXTERNAL, "primary": True}])
    # An existing volume on a network the VM is not on.
    v = create_volume("elsewhere", networks=[FABRIC2], server_uuid=CN2)
    refused_provision(409, "VolumeNotReachable", ["elsewhere"],
                      [{"name": "elsewhere", "mountpoint": "/e"}])
    delete_volume(v["uuid"])


def test_20_kvm():
    """A kvm instance with volumes: refused before anything is allocated."""
    refused_provision(422, "InvalidArgument", ["kvm"], [{"name": "kvm-vol", "mountpoint": "/k"}],
                      package=KVM, image=KVM_IMG)
    assert not [x for x in lab.list_all("/volumes") if x["name"] == "kvm-vol"]


# ---- X1, X2 ------------------------------------------------------------------------------

def test_x1_two_disks_and_a_volume():
    """A flexible 100 GiB package, disks [{}, {remaining}], mounting `shared` which does
    not exist: the provision makes it (creating, then ready, share running, its storage
    instance hidden), holds a reservation while it runs (seen with every agent paused)
    and leaves a reference; the VM has its two sparse disks, sdc:volumes, running NICs
    on its server; a file it writes to /shared is in the export; a delete of shared is
    refused."""
    with Paused("cn1", "cn2", "cn3"):
        vm_uuid, status, job = submit_provision([{"name": "shared", "mountpoint": "/shared"}],
                                                server=CN1, package=FLEX, image=OS_IMG,
                                                disks=[{}, {"size": "remaining"}])
        assert status in (200, 201), (status, job)
        held = wait_for("the provision's reservation",
                        lambda: reservations(job_uuid=job["uuid"]), timeout=20)
        assert [(r["vm_uuid"], r["volume_name"]) for r in held] == [(vm_uuid, "shared")], held
        v = [x for x in lab.list_all(f"/volumes?owner_uuid={OWNER}&name=shared")]
        assert len(v) == 1 and v[0]["state"] == "creating", v
        assert v[0]["created_by_job"] == job["uuid"] and v[0]["size"] == 10240, v
        assert v[0]["networks"] == [FABRIC], v
        # Nothing mounted early: the instance is not even made.
        assert not os.path.exists(lab.vm_dir(CN1, vm_uuid))
    end = lab.wait_job(job["uuid"], timeout=90)
    assert end["execution"] == "succeeded", end
    v = check_volume(v[0]["uuid"])
    assert v["state"] == "ready" and v["share_state"] == "running", v
    assert v["vm_uuid"] not in [x["uuid"] for x in lab.list_all("/vms")]
    assert reservations(job_uuid=job["uuid"]) == []
    assert references(v["uuid"]) == [vm_uuid]
    vm = check_consumer(vm_uuid, [(v, "/shared", "rw")])
    assert [(d["pci_slot"], d["size"]) for d in vm["disks"]] == [("0:4:0", 10240),
                                                                  ("0:4:1", 92160)], vm["disks"]
    for d in vm["disks"]:
        st = os.stat(d["path"])
        assert st.st_size == d["size"] * MIB and st.st_blocks * 512 < 64 * MIB, (d, st)
    for nic in vm["nics"]:
        assert nic["state"] == "running" and nic["cn_uuid"] == CN1, nic
    digest = write_file(os.path.join(mount_path(vm_uuid, "/shared"), "from-vm"))
    assert tree(export_dir(v)) == {"from-vm": digest}
    refused_delete(v["uuid"], [vm_uuid])
    check_inventory()
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v)


def test_x2_failure_mid_provision():
    """As X1, the agent killed -9 once the VM's disks exist and the image files removed
    before it comes back: the job fails; no VM directory, no NIC or address held, no
    reservation, the volume it made deleted, the servers' committed capacity as before.
    The files back, a retry succeeds (making the volume again)."""
    check_inventory()
    servers = {s["uuid"]: (s["ram_committed_mib"], s["disk_committed_mib"])
               for s in lab.list_all("/servers")}
    vm_uuid, status, job = submit_provision([{"name": "x2-shared", "mountpoint": "/shared"}],
                                            server=CN1, package=FLEX, image=FRAIL,
                                            disks=[{}, {"size": "remaining"}])
    assert status in (200, 201), (status, job)
    d = lab.vm_dir(CN1, vm_uuid)
    disks = os.path.join(d, "disks")
    wait_for("the VM's first disk file", lambda: os.path.isdir(disks) and os.listdir(disks),
             timeout=90, every=0.002)
    agent = agent_of("cn1")
    os.kill(agent, signal.SIGKILL)
    had = sorted(os.listdir(disks))
    lab_file = os.path.join(lab.dir, "images", "lab-frail.img")
    server_copy = os.path.join(lab.root(CN1), "images", FRAIL + ".img")
    os.rename(lab_file, lab_file + ".aside")
    try:
        if os.path.exists(server_copy):
            os.unlink(server_copy)
        wait_for("the agent to die", lambda: not pid_alive(agent), timeout=10)
        lab.run("restart-agent", "cn1", "--dir", lab.dir)
        end = lab.wait_job(job["uuid"], timeout=90)
    finally:
        os.rename(lab_file + ".aside", lab_file)
    log(f"the agent was killed with {had} in the VM's disks")
    assert end["execution"] == "failed", end
    assert not os.path.exists(d) and not workload_pids(d)
    vm = lab.vm_of(vm_uuid)
    assert vm["state"] == "failed" and vm["allocation"] is None and not vm["nics"], vm
    assert reservations(job_uuid=job["uuid"]) == []
    made = [x for x in lab.list_all(f"/volumes?owner_uuid={OWNER}&name=x2-shared")]
    wait_for("the volume the provision made deleted",
             lambda: not lab.list_all(f"/volumes?owner_uuid={OWNER}&name=x2-shared"),
             timeout=60)
    for x in made:
        check_volume_gone(x)
    after = {s["uuid"]: (s["ram_committed_mib"], s["disk_committed_mib"])
             for s in lab.list_all("/servers")}
    assert after == servers, (servers, after)
    check_inventory()
    p = lab.tern("job", "retry", job["uuid"])
    assert p.returncode == 0, p
    end = lab.wait_job(job["uuid"], timeout=90)
    assert end["execution"] == "succeeded", end
    v = lab.list_all(f"/volumes?owner_uuid={OWNER}&name=x2-shared")
    assert len(v) == 1, v
    v = check_volume(v[0]["uuid"])
    check_consumer(vm_uuid, [(v, "/shared", "rw")])
    check_inventory()
    delete_vm(vm_uuid)
    delete_volume(v["uuid"])
    check_volume_gone(v)


def main():
    tests = [test_11_mount, test_12_delete_while_provisioning, test_13_failed_provision,
             test_15_forced_delete, test_16_stop_then_destroy, test_17_removed_by_hand,
             test_18_mode, test_19_bad_volumes, test_20_kvm, test_x1_two_disks_and_a_volume,
             test_x2_failure_mid_provision, test_14_stale_reservation]
    volume_lab.run(tests, sys.argv[3:])


if __name__ == "__main__":
    main()
