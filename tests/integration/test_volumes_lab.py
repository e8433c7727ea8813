#!/usr/bin/env python3
"""Shared volumes through a lab's API, up to what needs the storage instance's files:
the volume views over HTTP (filters, refusals with their status and code, another
owner's volume 404 VolumeNotFound, an unknown parameter refused by the engine);
volume-update and volume-delete refused at POST /jobs with their codes and no job
stored; the real volume-update and volume-delete workflows run to their end, the
delete's destroy step on the storage instance's agent, or, for a storage instance that
never reached a server, on the control plane, whose refusal its fallback accepts; the
inventory consistent after, storage instances counted.

The volumes are made by a workflow of this file running volume-create's control-plane
steps (check, claim, place, nics, ready), as the agent's steps that make the storage
instance's files belong to the share process.

Usage: test_volumes_lab.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded; the lab is
stopped with `tools/lab down`, which stops its processes by pid.
"""
import json
import os
import sys
import urllib.parse
import uuid

from lab_harness import Lab, run_tests

SOURCE, BUILD = sys.argv[1], sys.argv[2]
OWNER = "a0000000-0000-4000-8000-000000000001"
OTHER = "a0000000-0000-4000-8000-000000000002"
CN1, CN2 = "50000000-0000-4000-8000-000000000001", "50000000-0000-4000-8000-000000000002"
EXTERNAL, FABRIC, FABRIC2 = ("7e000000-0000-4000-8000-000000000001",
                            "7e000000-0000-4000-8000-000000000002",
                            "7e000000-0000-4000-8000-000000000003")
ZONE, BASE_IMG = "c0000000-0000-4000-8000-000000000002", "d0000000-0000-4000-8000-000000000004"

DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 8192,
         "disk_mib": 2097152, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r2", "ram_mib": 4096,
         "disk_mib": 2097152, "data_root": "servers/cn2"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500, "fabric": True,
         "owner_uuids": [OWNER]},
        {"uuid": FABRIC2, "name": "fabric-other", "subnet": "192.168.129.0/24",
         "gateway": "192.168.129.1", "provision_start_ip": "192.168.129.200",
         "provision_end_ip": "192.168.129.250", "vlan_id": 129, "mtu": 8500, "fabric": True,
         "owner_uuids": [OTHER]},
    ],
    "packages": [
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
    ],
    "images": [
        {"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
    ],
    "settings": {},
}

# volume-create's control-plane steps; the test plays the agent (nothing on disk).
MAKE = {
    "name": "test-volume-make", "version": "1.0.0",
    "holds": ["volume:${params.volume_uuid}"],
    "admission": [{"name": "check", "task": "dc.volume_check",
                   "args": {"action": "create", "params": "${params}",
                            "target": "/volume-create-${params.volume_uuid}"}}],
    "chain": [
        {"name": "claim", "task": "dc.volume_claim", "args": {
            "volume_uuid": "${params.volume_uuid}", "owner_uuid": "${params.owner_uuid}",
            "name": "${admission.check.result.name}", "size": "${admission.check.result.size}",
            "type": "${admission.check.result.type}",
            "networks": "${admission.check.result.networks}",
            "tags": "${admission.check.result.tags}",
            "storage_vm_uuid": "${admission.check.result.storage_vm_uuid}"}},
        {"name": "place", "task": "dc.place", "args": {
            "vm_uuid": "${steps.claim.result.storage_vm_uuid}",
            "owner_uuid": "${params.owner_uuid}", "role": "nfsvolumestorage",
            "volume_uuid": "${params.volume_uuid}", "alias": "${steps.claim.result.alias}",
            "package_name": "${steps.claim.result.package_name}", "ram": 256,
            "quota": "${steps.claim.result.volume.size}",
            "reservation": "${steps.claim.result.volume.size}", "flexible": False,
            "disks": [], "server_uuid": "${admission.check.result.server_uuid}"}},
        {"name": "nics", "task": "dc.nics_provision", "args": {
            "vm_uuid": "${steps.claim.result.storage_vm_uuid}",
            "owner_uuid": "${params.owner_uuid}", "networks": "${steps.claim.result.networks}"}},
        {"name": "ready", "task": "dc.volume_ready", "args": {
            "volume_uuid": "${params.volume_uuid}",
            "vm_uuid": "${steps.claim.result.storage_vm_uuid}", "state": "running"}},
    ],
}
# Only the claim: a volume whose storage instance never reached a server.
CLAIM_ONLY = dict(MAKE, name="test-volume-claim", chain=MAKE["chain"][:1])

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-volumes-")
http, list_all = lab.http, lab.list_all


def make(workflow="test-volume-make", **params):
    p = dict({"volume_uuid": str(uuid.uuid4()), "owner_uuid": OWNER}, **params)
    j = lab.run_job(workflow, f"/volume-create-{p['volume_uuid']}", p)
    assert j["execution"] == "succeeded", j
    status, v = http("/volumes/" + p["volume_uuid"])
    assert status == 200, (status, v)
    return v


def refused(workflow, target, params, status, code, part):
    before = lab.user_job_count()
    got, body = lab.create_job(workflow, target, params)
    assert got == status and body["code"] == code and part in body["message"], (got, body)
    assert lab.user_job_count() == before, "a refused job was stored"


def test_setup():
    for wf in (MAKE, CLAIM_ONLY):
        status, body = http("/workflows", "POST", wf)
        assert status in (200, 201), (status, body)


def test_views_over_http():
    a = make(name="alpha", server_uuid=CN2, tags={"env": "prod"})
    make(name="alphabet", size=20480)
    theirs = make(owner_uuid=OTHER, name="alpha")
    assert a["state"] == "ready" and a["id"] == a["uuid"], a
    assert a["filesystem_path"] == "192.168.128.200:/exports/data", a
    root = os.path.join(lab.dir, "servers", "cn2")
    assert a["export_path"] == f"{os.path.realpath(root)}/{a['vm_uuid']}/export" or \
        a["export_path"].endswith(f"servers/cn2/{a['vm_uuid']}/export"), a
    names = sorted(v["name"] for v in list_all(f"/volumes?owner_uuid={OWNER}&name=alpha*"))
    assert names == ["alpha", "alphabet"], names
    got = list_all(f"/volumes?owner_uuid={OWNER}&tag=env%3Dprod")
    assert [v["uuid"] for v in got] == [a["uuid"]], got
    pred = urllib.parse.quote(json.dumps({"eq": ["size", 20480]}))
    assert [v["name"] for v in list_all(f"/volumes?predicate={pred}")] == ["alphabet"]
    for path, status, code, part in (
            ("/volumes?foo=1", 409, "InvalidArgument", "foo: view \"/volumes\""),
            (f"/volumes?name=alpha&predicate={urllib.parse.quote(json.dumps({'eq': ['name', 'x']}))}",
             409, "InvalidArgument", "name: given both"),
            ("/volumes?state=deleted", 409, "InvalidArgument", "state: expected"),
            ("/volumesizes?type=other", 409, "InvalidArgument", "type: "),
            ("/volumesizes?foo=1", 409, "InvalidArgument", "foo: "),
            (f"/volumes/{theirs['uuid']}?owner_uuid={OWNER}", 404, "VolumeNotFound", "not found"),
            (f"/volumes/{uuid.uuid4()}", 404, "VolumeNotFound", "not found"),
            (f"/vms?system_role=web", 409, "InvalidArgument", "system_role")):
        got, body = http(path)
        assert got == status and body["code"] == code and part in body["message"], \
            (path, got, body)
    status, sizes = http("/volumesizes")
    assert status == 200 and [s["size"] for s in sizes][:3] == [10240, 20480, 30720] and \
        len(sizes) == 19, sizes
    # The storage instances: not among the VMs, unless asked for.
    assert list_all("/vms") == []
    storage = list_all("/vms?system_role=nfsvolumestorage")
    assert sorted(v["uuid"] for v in storage) == sorted(
        v["vm_uuid"] for v in list_all("/volumes")), storage
    status, _ = http("/vms/" + a["vm_uuid"])
    assert status == 404
    status, vm = http("/vms/" + a["vm_uuid"] + "?system_role=nfsvolumestorage")
    assert status == 200 and vm["server_uuid"] == CN2 and vm["quota"] == 10240, vm
    refused("vm-stop", f"/stop-{a['vm_uuid']}", {"vm_uuid": a["vm_uuid"]}, 404,
            "ResourceNotFound", "does not exist")


def test_update_and_delete_refused_at_post():
    v = make(name="busy")
    u = v["uuid"]
    refused("volume-update", f"/volume-update-{u}", {"volume_uuid": u, "owner_uuid": OWNER,
                                                      "size": 20480},
            422, "InvalidArgument", "size: volumes are not resizable in place")
    refused("volume-update", f"/volume-update-{u}", {"volume_uuid": u, "owner_uuid": OWNER,
                                                      "name": "alpha"},
            409, "VolumeAlreadyExists", "alpha")
    refused("volume-update", f"/volume-update-{u}", {"volume_uuid": u, "owner_uuid": OTHER,
                                                      "name": "x1"},
            404, "VolumeNotFound", "not found")
    refused("volume-delete", f"/volume-delete-{u}", {"volume_uuid": u, "owner_uuid": OWNER,
                                                      "forse": True},
            422, "InvalidArgument", "forse: volume-delete takes no such parameter")
    refused("volume-delete", f"/volume-delete-{uuid.uuid4()}", {"volume_uuid": u,
                                                                 "owner_uuid": OWNER},
            422, "InvalidArgument", "target: ")


def test_update_runs():
    v = make(name="before")
    u = v["uuid"]
    j = lab.run_job("volume-update", f"/volume-update-{u}",
                    {"volume_uuid": u, "owner_uuid": OWNER, "name": "after",
                     "tags": {"team": "web"}})
    assert j["execution"] == "succeeded", j
    status, got = http("/volumes/" + u)
    assert got["name"] == "after" and got["tags"] == {"team": "web"}, got
    assert list_all(f"/volumes?owner_uuid={OWNER}&name=before") == []
    make(name="before")  # the old name is free


def test_delete_runs_on_the_storage_instances_agent():
    before = {s["uuid"]: s for s in list_all("/servers")}
    v = make(name="doomed", server_uuid=CN1)
    j = lab.run_job("volume-delete", f"/volume-delete-{v['uuid']}",
                    {"volume_uuid": v["uuid"], "owner_uuid": OWNER})
    assert j["execution"] == "succeeded", j
    # The agent of cn1 ran it (nothing on disk there: the test plays the share process).
    destroy = [r for r in j["chain_results"] if r["name"] == "destroy"][0]
    assert destroy["result"] == {"destroyed": False, "pid": None}, destroy
    status, body = http("/volumes/" + v["uuid"])
    assert status == 404 and body["code"] == "VolumeNotFound", (status, body)
    after = {s["uuid"]: s for s in list_all("/servers")}
    assert after[CN1]["ram_committed_mib"] == before[CN1]["ram_committed_mib"], after[CN1]
    status, vm = http(f"/vms/{v['vm_uuid']}?system_role=nfsvolumestorage")
    assert vm["state"] == "destroyed" and vm["nics"] == [], vm
    lab.check_inventory()


def test_delete_of_a_volume_never_placed():
    v = make("test-volume-claim", name="stillborn")
    assert v["state"] == "creating" and v["server_uuid"] is None, v
    # Its create failed: volume-create's onerror marks it failed.
    key = "tern:p:dc:volume:" + v["uuid"]
    rec = json.loads("\n".join(lab.redis("GET", key)))
    rec["state"], rec["job_uuid"] = "failed", None
    lab.redis("SET", key, json.dumps(rec))
    lab.redis("ZREM", "tern:p:dc:volumes:state:creating", v["uuid"])
    lab.redis("ZADD", "tern:p:dc:volumes:state:failed", "0", v["uuid"])
    j = lab.run_job("volume-delete", f"/volume-delete-{v['uuid']}",
                    {"volume_uuid": v["uuid"], "owner_uuid": OWNER})
    assert j["execution"] == "succeeded", j
    destroy = [r for r in j["chain_results"] if r["name"] == "destroy"][0]
    # No agent to ask (NotAnAgent on the control plane): the fallback found nothing placed.
    assert destroy["step_error"]["code"] == "NotAnAgent" and destroy["fallback"] == \
        "dc.volume_check" and destroy["result"]["placed"] is False, destroy
    status, _ = http("/volumes/" + v["uuid"])
    assert status == 404
    lab.check_inventory()


def test_delete_in_use_is_refused_then_forced():
    v = make(name="mounted")
    vm = "f0000000-0000-4000-8000-000000000001"
    key = "tern:p:dc:volume:" + v["uuid"]
    rec = json.loads("\n".join(lab.redis("GET", key)))
    rec["refs"] = [vm]
    lab.redis("SET", key, json.dumps(rec))
    refused("volume-delete", f"/volume-delete-{v['uuid']}",
            {"volume_uuid": v["uuid"], "owner_uuid": OWNER}, 409, "VolumeInUse",
            f"Volume with name mounted is used by {vm}")
    status, refs = http(f"/volumes/{v['uuid']}/references")
    assert status == 200 and refs == [vm], refs
    j = lab.run_job("volume-delete", f"/volume-delete-{v['uuid']}",
                    {"volume_uuid": v["uuid"], "owner_uuid": OWNER, "force": True})
    assert j["execution"] == "succeeded", j
    assert http("/volumes/" + v["uuid"])[0] == 404


run_tests(lab, [test_setup, test_views_over_http, test_update_and_delete_refused_at_post,
                test_update_runs, test_delete_runs_on_the_storage_instances_agent,
                test_delete_of_a_volume_never_placed, test_delete_in_use_is_refused_then_forced],
          only=tuple(sys.argv[3:]))
