#!/usr/bin/env python3
"""Provisions that mount shared volumes, on a lab of the test's own (RFD 26 acceptance
11, 12, 13, 14, 18, 20; cross-cutting X1 and X2): records through the API, files and
links on the servers.

* A volume made first, then a VM mounting it: its sdc:volumes is RFD 26's exact text,
  the volume's references name it, no reservation is left, the mount in the VM's
  directory reaches the volume's export (a file written through it is there), and a
  read-only mount is recorded as ro.
* A VM mounting a volume that does not exist (Docker semantics): the volume is made,
  ready with its share running, its storage instance hidden from GET /vms; a delete of
  it is then refused VolumeInUse.
* A provision held between its volumes step and the instance (the server's agent
  stopped): its reservation is listed and makes a delete VolumeInUse; the volume stays
  ready; once the agent runs again the reservation becomes a reference.
* A provision failing after its reservation (the image file gone): the job fails,
  the VM holds nothing, the reservation is gone, the volume the job made is deleted
  and the one that existed is kept, unreferenced; a retry once the file is back
  provisions the VM and makes the volume anew.
* A stale reservation is removed by the scheduled clean-up within one period, and the
  delete then succeeds.
* Refusals at POST /jobs with nothing stored: ro/rx mode, type nfs, one mountpoint
  twice, a relative one, kvm with volumes.

Usage: test_provision_volumes.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded; the
lab is stopped with `tools/lab down`, which stops its processes by pid.
"""
import json
import os
import signal
import sys
import uuid

from lab_harness import Lab, run_tests, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
OWNER = "00000000-0000-0000-0000-000000000000"
CN1 = "50000000-0000-4000-8000-000000000001"
EXTERNAL, FABRIC = "7e000000-0000-4000-8000-000000000001", "7e000000-0000-4000-8000-000000000002"
ZONE, KVM = "c0000000-0000-4000-8000-000000000002", "c0000000-0000-4000-8000-000000000003"
BASE_IMG, OTHER_IMG, KVM_IMG = ("d0000000-0000-4000-8000-000000000004",
                                "d0000000-0000-4000-8000-000000000005",
                                "d0000000-0000-4000-8000-000000000006")

DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 16384,
                 "disk_mib": 2097152, "data_root": "servers/cn1"}],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500, "fabric": True,
         "owner_uuids": [OWNER]},
    ],
    "packages": [
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
        {"uuid": KVM, "name": "lab-kvm", "brand": "kvm", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
    ],
    "images": [
        {"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
        {"uuid": OTHER_IMG, "name": "lab-other", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-other.img", "brand": "joyent"},
        {"uuid": KVM_IMG, "name": "lab-kvm", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-kvm.img", "brand": "kvm"},
    ],
    "settings": {"share_watch_every_s": 1, "share_health_ms": 500,
                 "net_reconcile_start_delay_s": [600, 600]},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-provision-volumes-")
http, list_all = lab.http, lab.list_all


def make_volume(name):
    vol = str(uuid.uuid4())
    j = lab.run_job("volume-create", "/volume-create-" + vol,
                    {"volume_uuid": vol, "owner_uuid": OWNER, "name": name})
    assert j["execution"] == "succeeded", json.dumps(j, indent=1)
    status, v = http("/volumes/" + vol)
    assert status == 200 and v["state"] == "ready", (status, v)
    return v


def provision_params(vm, volumes, image=BASE_IMG, package="lab-zone"):
    return {"vm_uuid": vm, "owner_uuid": OWNER, "package": package, "image_uuid": image,
            "networks": [{"uuid": EXTERNAL, "primary": True}, {"uuid": FABRIC}],
            "volumes": volumes}


def provision(vm, volumes, **kw):
    status, job = lab.create_job("provision", "/provision-" + vm,
                                 provision_params(vm, volumes, **kw))
    assert status == 201, (status, job)
    return job


def volume_by_name(name):
    rows = [v for v in list_all("/volumes?owner_uuid=" + OWNER) if v["name"] == name]
    return rows[0] if rows else None


def reservations(volume_uuid):
    status, rows = http("/reservations?volume_uuid=" + volume_uuid)
    assert status == 200, (status, rows)
    return rows


def references(volume_uuid):
    status, rows = http(f"/volumes/{volume_uuid}/references")
    assert status == 200, (status, rows)
    return rows


def delete_refused_in_use(v, vm):
    status, body = lab.create_job("volume-delete", "/volume-delete-" + v["uuid"],
                                  {"volume_uuid": v["uuid"], "owner_uuid": OWNER})
    assert status == 409 and body["code"] == "VolumeInUse", (status, body)
    assert vm in body["message"], body
    status, now = http("/volumes/" + v["uuid"])
    assert now["state"] == "ready", now


def sdc_volumes_text(mounts):
    return json.dumps([{"mountpoint": m, "name": v["name"], "nfsvolume": v["filesystem_path"],
                        "mode": mode, "type": "tritonnfs"} for m, v, mode in mounts],
                      separators=(",", ":"))


def test_mount_an_existing_volume():
    # 11, 18: rw and ro mounts of a volume made first.
    v = make_volume("wp-uploads")
    vm = str(uuid.uuid4())
    job = lab.wait_job(provision(vm, [{"name": "wp-uploads", "mountpoint": "/uploads"},
                                      {"name": "wp-uploads", "mountpoint": "/srv/ro",
                                       "mode": "ro"}])["uuid"])
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    want = sdc_volumes_text([("/uploads", v, "rw"), ("/srv/ro", v, "ro")])
    record = lab.vm_of(vm)
    assert record["internal_metadata"]["sdc:volumes"] == want, record["internal_metadata"]
    assert [m["mode"] for m in record["volumes"]] == ["rw", "ro"], record["volumes"]
    assert references(v["uuid"]) == [vm]
    assert reservations(v["uuid"]) == []
    with open(os.path.join(lab.vm_dir(CN1, vm), "vm.json")) as f:
        on_disk = json.load(f)
    assert on_disk["internal_metadata"]["sdc:volumes"] == want, on_disk
    # The mount reaches the export: a file written through it is the volume's.
    link = os.path.join(lab.vm_dir(CN1, vm), "mounts", "uploads")
    assert os.path.islink(link) and os.readlink(link) == v["export_path"], link
    with open(os.path.join(link, "written-by-vm"), "w") as f:
        f.write("hello")
    with open(os.path.join(v["export_path"], "written-by-vm")) as f:
        assert f.read() == "hello"
    assert os.path.realpath(os.path.join(lab.vm_dir(CN1, vm), "mounts", "srv", "ro")) == \
        os.path.realpath(v["export_path"])


def test_a_missing_volume_is_made():
    # X1: Docker semantics.
    vm = str(uuid.uuid4())
    job = lab.wait_job(provision(vm, [{"name": "shared", "mountpoint": "/shared"}])["uuid"],
                       timeout=180)
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    v = volume_by_name("shared")
    assert v is not None and v["state"] == "ready" and v["share_state"] == "running", v
    assert v["created_by_job"] == job["uuid"] and v["size"] == 10240, v
    assert v["networks"] == [FABRIC], v
    assert references(v["uuid"]) == [vm] and reservations(v["uuid"]) == []
    assert v["vm_uuid"] not in [x["uuid"] for x in list_all("/vms")]
    assert lab.vm_of(vm)["internal_metadata"]["sdc:volumes"] == \
        sdc_volumes_text([("/shared", v, "rw")])
    with open(os.path.join(lab.vm_dir(CN1, vm), "mounts", "shared", "f"), "w") as f:
        f.write("x")
    assert os.path.exists(os.path.join(v["export_path"], "f"))
    delete_refused_in_use(v, vm)


def test_a_reservation_holds_while_the_provision_runs():
    # 12: the agent stopped, the provision waits at its image step, past its volumes.
    v = make_volume("held")
    agent = lab.pid("agent-cn1")
    vm = str(uuid.uuid4())
    os.kill(agent, signal.SIGSTOP)
    try:
        job = provision(vm, [{"name": "held", "mountpoint": "/held"}])
        wait_for("the provision at its image step",
                 lambda: (lab.job_of(job["uuid"]).get("cursor") or {}).get("step") == "image",
                 timeout=60)
        rows = reservations(v["uuid"])
        assert len(rows) == 1 and rows[0]["vm_uuid"] == vm and \
            rows[0]["job_uuid"] == job["uuid"], rows
        delete_refused_in_use(v, vm)
    finally:
        os.kill(agent, signal.SIGCONT)
    end = lab.wait_job(job["uuid"])
    assert end["execution"] == "succeeded", json.dumps(end, indent=1)
    assert references(v["uuid"]) == [vm] and reservations(v["uuid"]) == []


def test_a_failed_provision_gives_its_volumes_back():
    # 13, X2: the image file gone, the provision fails at its image step, after its
    # volumes were reserved and the new one made.
    kept = make_volume("kept")
    lab_file = os.path.join(lab.dir, "images", "lab-other.img")
    server_copy = os.path.join(lab.root(CN1), "images", OTHER_IMG + ".img")
    os.rename(lab_file, lab_file + ".aside")
    if os.path.exists(server_copy):
        os.unlink(server_copy)
    vm = str(uuid.uuid4())
    try:
        job = lab.wait_job(provision(vm, [{"name": "kept", "mountpoint": "/k"},
                                          {"name": "made", "mountpoint": "/m"}],
                                     image=OTHER_IMG)["uuid"], timeout=180)
    finally:
        os.rename(lab_file + ".aside", lab_file)
    assert job["execution"] == "failed" and job["error"]["code"] == "ImageFileMissing", job
    record = lab.vm_of(vm)
    assert record["state"] == "failed" and not record["nics"] and \
        record["allocation"] is None, record
    assert reservations(kept["uuid"]) == [] and references(kept["uuid"]) == []
    status, now = http("/volumes/" + kept["uuid"])
    assert status == 200 and now["state"] == "ready", now
    made = [r for r in job["onerror_results"] if r["name"] == "unreserve"][0]["result"]
    assert len(made["delete"]) == 1, made
    made_uuid = made["delete"][0]["volume_uuid"]
    wait_for("the volume the provision made to be deleted",
             lambda: http("/volumes/" + made_uuid)[0] == 404, timeout=120)
    assert volume_by_name("made") is None
    lab.check_inventory()
    # A retry, the file back: the VM is provisioned and the volume made anew.
    status, _ = http(f"/jobs/{job['uuid']}/retry", "POST", {})
    assert status == 200, status
    end = lab.wait_job(job["uuid"], timeout=180)
    assert end["execution"] == "succeeded", json.dumps(end, indent=1)
    again = volume_by_name("made")
    assert again is not None and again["uuid"] != made_uuid and again["state"] == "ready"
    assert references(again["uuid"]) == [vm] and references(kept["uuid"]) == [vm]


def test_stale_reservations_are_cleaned():
    # 14: a reservation whose VM failed long ago, left behind: the schedule removes it.
    status, scheds = http("/schedules")
    assert status == 200 and [s for s in scheds
                              if s["workflow"] == "volume-reservations-clean"], scheds
    v = make_volume("stale")
    r = {"uuid": str(uuid.uuid4()), "vm_uuid": str(uuid.uuid4()), "job_uuid": str(uuid.uuid4()),
         "owner_uuid": OWNER, "volume_name": "stale", "volume_uuid": v["uuid"],
         "create_timestamp": "2026-01-01T00:00:00.000Z"}
    ns = "tern:p:dc:"
    lab.redis("SET", ns + "reservation:" + r["uuid"], json.dumps(r))
    for idx in ("reservations", "volume_reservations:" + v["uuid"],
                "job_reservations:" + r["job_uuid"]):
        lab.redis("ZADD", ns + idx, "0", r["uuid"])
    status, body = lab.create_job("volume-delete", "/volume-delete-" + v["uuid"],
                                  {"volume_uuid": v["uuid"], "owner_uuid": OWNER})
    assert status == 409 and body["code"] == "VolumeInUse", (status, body)
    wait_for("the clean-up to remove the stale reservation",
             lambda: reservations(v["uuid"]) == [], timeout=75, every=1)
    j = lab.run_job("volume-delete", "/volume-delete-" + v["uuid"],
                    {"volume_uuid": v["uuid"], "owner_uuid": OWNER})
    assert j["execution"] == "succeeded", json.dumps(j, indent=1)


def test_refusals_store_nothing():
    # 18, 19, 20.
    make_volume("r1")
    before = lab.user_job_count()
    vols = len(list_all("/volumes"))
    for volumes, code, part in (
            ([{"name": "r1", "mountpoint": "/a", "mode": "rx"}], "InvalidArgument",
             "volumes[0].mode"),
            ([{"name": "r1", "mountpoint": "/a", "type": "nfs"}], "InvalidArgument",
             "volumes[0].type"),
            ([{"name": "r1", "mountpoint": "/bar"}, {"name": "r2", "mountpoint": "/bar"}],
             "InvalidArgument", "volumes[1].mountpoint"),
            ([{"name": "r1", "mountpoint": "bar"}], "InvalidArgument", "volumes[0].mountpoint")):
        vm = str(uuid.uuid4())
        status, body = lab.create_job("provision", "/provision-" + vm,
                                      provision_params(vm, volumes))
        assert status == 422 and body["code"] == code and part in body["message"], (status, body)
    vm = str(uuid.uuid4())
    status, body = lab.create_job("provision", "/provision-" + vm, provision_params(
        vm, [{"name": "r1", "mountpoint": "/a"}], image=KVM_IMG, package="lab-kvm"))
    assert status == 422 and "kvm instances cannot mount volumes" in body["message"], body
    assert lab.user_job_count() == before and len(list_all("/volumes")) == vols


run_tests(lab, [test_refusals_store_nothing, test_mount_an_existing_volume,
                test_a_missing_volume_is_made, test_a_reservation_holds_while_the_provision_runs,
                test_a_failed_provision_gives_its_volumes_back, test_stale_reservations_are_cleaned],
          only=sys.argv[3:])
