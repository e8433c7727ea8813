#!/usr/bin/env python3
"""Migrations through the API as users and the operator, on labs of three servers
(migration_lab.py): who may migrate (DOMAIN 5.6 tests 22, 23), what a user lists (24),
the queued jobs an abort or a switch by hand cancels (a schedule's switch job, a sync
waiting for a migration slot), and a VM mounting an RFD 26 volume migrated (35).

A user's request is one that names its `owner_uuid` (docs/API.md, docs/MIGRATION.md
"Who may migrate"); the operator's names none. Every refusal is checked to have
stored nothing: no job, no migration record, no target directory on any data root.

The first lab keeps the default allow_user_migrations (false); the second sets it true
for the per-VM flag's other side. The per-VM flag, internal_metadata
user_migration_allowed, is an operator's edit of the VM's record: no route writes it, so
the test writes it into the record as an operator's tool would.

Usage: test_migration_api.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import json
import os
import sys
import time
import uuid as uuidlib

import migration_lab as ml
from migration_lab import CN1, CN2, CN3, OWNER
from lab_harness import wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
OTHER = "7c000000-0000-4000-8000-0000000000aa"  # another user
FABRIC = "f1000000-0000-4000-8000-000000000002"
FAST = 800    # Mbit/s: passes not acted on midway
SLOW = 16     # Mbit/s: 2 MB/s, so 12 MiB lasts about 6 s, long enough to sample in
STATES = {"scheduled", "running", "paused", "aborted", "failed", "successful"}


def lab():
    return ml.lab


def provision_for(owner, server=CN1, networks=None, volumes=None):
    """An idle instance of `owner` on `server`: its uuid."""
    vm = str(uuidlib.uuid4())
    params = {"vm_uuid": vm, "owner_uuid": owner, "package": ml.PKG, "image_uuid": ml.IMG,
              "networks": networks or [{"uuid": ml.EXTERNAL, "primary": True}],
              "server_uuid": server, "autoboot": True, "disks": [{}, {"size": ml.DATA_MIB}],
              "customer_metadata": {"lab:workload": "idle"}}
    if volumes:
        params["volumes"] = volumes
    job = lab().run_job("provision", "/provision-" + vm, params, timeout=60)
    assert job["execution"] == "succeeded", job
    return vm


def set_user_migration_allowed(vm, allowed):
    """The operator's per-VM flag: internal_metadata.user_migration_allowed in the VM's
    record (the dc plugin's vm:<uuid>)."""
    key = "tern:p:dc:vm:" + vm
    rec = json.loads("\n".join(lab().redis("GET", key)))
    im = rec.get("internal_metadata")
    if not isinstance(im, dict):
        im = {}
    im["user_migration_allowed"] = allowed
    rec["internal_metadata"] = im
    assert lab().redis("SET", key, json.dumps(rec)) == ["OK"]


def target_dirs(vm):
    """The servers whose data root holds a directory of the VM."""
    return [s for s in (CN1, CN2, CN3) if os.path.exists(ml.vm_dir(s, vm))]


def refused_nothing_stored(name, vm, status, code, words=(), **params):
    """A refusal at POST /jobs that stored nothing: no job, no migration record (none
    new), no directory of the VM on a server but its own."""
    before = ml.migration(vm)
    body = ml.refused(name, vm, status, code, words, **params)
    after = ml.migration(vm)
    assert after == before or (before and after and after["uuid"] == before["uuid"]
                               and after["state"] == before["state"]), (before, after)
    assert target_dirs(vm) == [lab().vm_of(vm)["server_uuid"]], target_dirs(vm)
    return body


# ---- the first lab: allow_user_migrations false, one slot per server ---------------

def test_22_user_needs_leave_the_operator_does_not():
    """Test 22: global false and no per-VM flag, a user's begin (and automatic,
    schedule) is refused 403 with nothing stored; the operator's begin of the same VM is
    allowed. With the per-VM flag true, the user's begin is allowed."""
    vm = provision_for(OWNER)
    for action in ("begin", "automatic"):
        refused_nothing_stored(action, vm, 403, "NotAllowed", ["User migration"],
                               owner_uuid=OWNER, target_server_uuid=CN2)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    refused_nothing_stored("schedule", vm, 403, "NotAllowed", ["User migration"],
                           owner_uuid=OWNER, scheduled_timestamp=at)
    # Another user's begin of the VM: it is not theirs (404), whatever the flag.
    refused_nothing_stored("begin", vm, 404, "ResourceNotFound", [vm], owner_uuid=OTHER)
    assert ml.migration(vm) is None
    # The operator may.
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    m = ml.wait_migration(vm, "paused")
    assert m["account_uuid"] is None, m
    ml.ok_action("abort", vm)
    ml.wait_migration(vm, "aborted")

    # The per-VM flag true: the user may, and the migration is theirs.
    vm2 = provision_for(OWNER)
    set_user_migration_allowed(vm2, True)
    job = ml.ok_action("begin", vm2, owner_uuid=OWNER, target_server_uuid=CN2,
                       send_mbps_limit=FAST)
    m = ml.wait_migration(vm2, "paused")
    assert (m["account_uuid"], m["uuid"]) == (OWNER, job["uuid"]), m
    assert ml.hidden(CN2, vm2)
    ml.ok_action("abort", vm2, owner_uuid=OWNER)
    ml.wait_migration(vm2, "aborted")
    ml.check_on(vm2, CN1, running=True)
    lab().check_inventory()


def test_23_a_user_cannot_abort_the_operators_migration():
    """Test 23: a migration the operator began is refused to its VM's owner (abort,
    sync, switch, pause: 403 naming the operator), to another user (404); nothing
    changes; the operator's own abort works."""
    vm = provision_for(OWNER)
    set_user_migration_allowed(vm, True)
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    m = ml.wait_migration(vm, "paused")
    n_jobs = lab().user_job_count()
    for action in ("abort", "sync", "switch"):
        status, body = ml.action(action, vm, owner_uuid=OWNER)
        assert (status, body.get("code")) == (403, "NotAllowed"), (action, status, body)
        assert "the operator's" in body["message"] and m["uuid"] in body["message"], body
        status, body = ml.action(action, vm, owner_uuid=OTHER)
        assert status == 404, (action, status, body)
    assert lab().user_job_count() == n_jobs
    after = ml.migration(vm)
    assert (after["uuid"], after["state"], after.get("abort_requested")) == \
        (m["uuid"], "paused", m.get("abort_requested")), after
    assert ml.hidden(CN2, vm) and ml.workload_alive(CN1, vm)
    # The operator's abort: and no switch job was ever asked for (never scheduled).
    job = ml.ok_action("abort", vm)
    cancel = [r for r in job["chain_results"] if r["name"] == "cancel_switch"]
    assert cancel and cancel[0]["result"] == {"job_uuid": None, "canceled": False, "others": []}, cancel
    ml.wait_migration(vm, "aborted")
    ml.check_on(vm, CN1, running=True)
    assert target_dirs(vm) == [CN1]


def test_24_a_user_lists_only_their_migrations():
    """Test 24: GET /migrations?owner_uuid= as a user lists the migrations of their
    VMs only (the operator's of their VM included), each in one of the six states;
    GET /migrations/:uuid of another user's migration is 404; the operator lists all."""
    mine = provision_for(OWNER)
    set_user_migration_allowed(mine, True)
    theirs = provision_for(OTHER)
    set_user_migration_allowed(theirs, True)
    ml.ok_action("begin", mine, owner_uuid=OWNER, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.ok_action("begin", theirs, owner_uuid=OTHER, target_server_uuid=CN2,
                 send_mbps_limit=FAST)
    m_mine = ml.wait_migration(mine, "paused")
    m_theirs = ml.wait_migration(theirs, "paused")
    rows = lab().list_all("/migrations?owner_uuid=" + OWNER)
    uuids = {r["uuid"] for r in rows}
    assert m_mine["uuid"] in uuids and m_theirs["uuid"] not in uuids, rows
    for r in rows:
        assert r["state"] in STATES, r
        assert lab().vm_of(r["vm_uuid"])["owner_uuid"] == OWNER, r
        assert "secret" not in r, r
    other_rows = lab().list_all("/migrations?owner_uuid=" + OTHER)
    assert [r["uuid"] for r in other_rows] == [m_theirs["uuid"]], other_rows
    status, body = lab().http(f"/migrations/{m_theirs['uuid']}?owner_uuid={OWNER}")
    assert (status, body.get("code")) == (404, "MigrationNotFound"), (status, body)
    status, body = lab().http(f"/migrations/{m_mine['uuid']}?owner_uuid={OWNER}")
    assert status == 200 and body["uuid"] == m_mine["uuid"], (status, body)
    # The operator's list holds both; each state one of the six.
    every = lab().list_all("/migrations")
    assert {m_mine["uuid"], m_theirs["uuid"]} <= {r["uuid"] for r in every}, every
    assert all(r["state"] in STATES for r in every), every
    ml.ok_action("abort", mine, owner_uuid=OWNER)
    ml.ok_action("abort", theirs, owner_uuid=OTHER)
    for vm in (mine, theirs):
        ml.wait_migration(vm, "aborted")
    lab().check_inventory()


def test_an_aborted_schedule_cancels_its_switch_job():
    """A scheduled migration aborted before its time: the VM is back on cn1 at once and
    the delayed migrate-switch job the schedule asked for is canceled by the abort; past
    the scheduled time it is still canceled, never run nor failed, and the migration
    stays aborted."""
    vm = ml.provision(CN1, "idle")
    at_s = int(time.time()) + 8
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_s))
    job = ml.ok_action("schedule", vm, scheduled_timestamp=at, target_server_uuid=CN2,
                       send_mbps_limit=FAST, timeout=7)
    switch_uuid = job["chain_results"][-1]["result"]["job_uuid"]
    assert lab().job_of(switch_uuid)["execution"] == "queued"
    abort = ml.ok_action("abort", vm)
    m = ml.wait_migration(vm, "aborted")
    assert time.time() < at_s, "the abort took until the scheduled time"
    cancel = [r for r in abort["chain_results"] if r["name"] == "cancel_switch"]
    assert cancel and cancel[0]["result"] == {"job_uuid": switch_uuid, "canceled": True, "others": []}, \
        cancel
    sw = lab().job_of(switch_uuid)
    assert sw["execution"] == "canceled" and not sw["chain_results"], sw
    ml.check_on(vm, CN1, running=True)
    # Past its time the job is still canceled: it never ran.
    wait_for("the scheduled time to pass", lambda: time.time() > at_s + 2,
             timeout=at_s - time.time() + 5, every=0.2)
    sw = lab().job_of(switch_uuid)
    assert sw["execution"] == "canceled" and not sw["chain_results"], sw
    after = ml.migration(vm)
    assert (after["uuid"], after["state"], after["phase"]) == (m["uuid"], "aborted", "abort"), after
    ml.check_on(vm, CN1, running=True)
    assert not os.path.exists(ml.vm_dir(CN2, vm))
    lab().check_inventory()


def test_a_switch_by_hand_cancels_the_scheduled_one():
    """An operator's scheduled migration switched by the operator before its time: that
    switch is admitted (its params are not the delayed job's, which name the scheduled
    time) and cancels the delayed migrate-switch job, which past its time is still
    canceled and never ran; the migration stays successful, the VM on cn2. A switch
    naming another scheduled time is refused, naming both."""
    vm = ml.provision(CN1, "idle")
    at_s = int(time.time()) + 12
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_s))
    job = ml.ok_action("schedule", vm, scheduled_timestamp=at, target_server_uuid=CN2,
                       send_mbps_limit=FAST, timeout=10)
    delayed = job["chain_results"][-1]["result"]["job_uuid"]
    assert lab().job_of(delayed)["params"]["scheduled_timestamp"] == at
    status, body = ml.action("switch", vm, scheduled_timestamp="2030-01-01T00:00:00Z")
    assert (status, body.get("code")) == (409, "InvalidState"), body
    assert f"is scheduled for {at}" in body["message"], body
    switch = ml.ok_action("switch", vm, timeout=60)
    assert time.time() < at_s, "the switch by hand took until the scheduled time"
    cancel = [r for r in switch["chain_results"] if r["name"] == "cancel_switch"]
    assert cancel and cancel[0]["result"] == {"job_uuid": delayed, "canceled": True, "others": []}, cancel
    m = ml.wait_migration(vm, "successful")
    wait_for("the scheduled time to pass", lambda: time.time() > at_s + 2,
             timeout=at_s - time.time() + 5, every=0.2)
    sw = lab().job_of(delayed)
    assert sw["execution"] == "canceled" and not sw["chain_results"], sw
    after = ml.migration(vm)
    assert (after["uuid"], after["state"]) == (m["uuid"], "successful"), after
    ml.check_on(vm, CN2, running=True)
    ml.ok_action("finalize", vm)
    lab().check_inventory()


def test_an_abort_cancels_a_sync_waiting_for_a_slot():
    """One slot per server: A's sync runs (slowly), B's sync off the same server waits
    for the slot (queued, parked on migration-slot:cn1). Aborting B cancels that sync
    job: it never starts once A's pass frees the slot, so it never fails; A's sync ends
    paused as asked."""
    a, b = ml.provision(CN1, "idle"), ml.provision(CN1, "idle")
    ml.fill(CN1, a, 8)
    for vm in (a, b):
        ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=SLOW)
        ml.wait_migration(vm, "paused")
    status, sync_a = ml.action("sync", a)
    assert status == 201, (status, sync_a)
    ml.wait_pass_bytes(a)
    status, sync_b = ml.action("sync", b)
    assert status == 201, (status, sync_b)
    wait_for("b's sync to wait for a slot",
             lambda: lab().job_of(sync_b["uuid"]).get("blocked_on") == "migration-slot:" + CN1,
             timeout=10)
    abort = ml.ok_action("abort", b)
    cancel = [r for r in abort["chain_results"] if r["name"] == "cancel_switch"]
    assert cancel and cancel[0]["result"] == {"job_uuid": None, "canceled": False,
                                              "others": [sync_b["uuid"]]}, cancel
    ml.wait_migration(b, "aborted")
    assert ml.migration(a)["state"] == "running", ml.migration(a)
    done = lab().wait_job(sync_a["uuid"], timeout=60)
    assert done["execution"] == "succeeded", done
    ml.wait_migration(a, "paused")
    sb = lab().job_of(sync_b["uuid"])
    assert sb["execution"] == "canceled" and not sb["chain_results"], sb
    m = ml.migration(b)
    assert m["state"] == "aborted" and m["num_sync_phases"] == 0, m
    ml.check_on(b, CN1, running=True)
    ml.ok_action("abort", a)
    ml.wait_migration(a, "aborted")
    lab().check_inventory()


def references(volume_uuid):
    status, rows = lab().http(f"/volumes/{volume_uuid}/references")
    assert status == 200, (status, rows)
    return rows


def test_35_a_vm_mounting_a_volume_migrates():
    """Test 35: a VM mounting an RFD 26 volume migrates (slowly enough to sample): the
    volume's references name the VM during the passes, the switch and after; a delete
    of the volume during the migration is refused VolumeInUse naming the VM, the volume
    stays ready; after the switch the mount on cn2 reads the file the VM wrote through
    it on cn1."""
    vol = str(uuidlib.uuid4())
    j = lab().run_job("volume-create", "/volume-create-" + vol,
                      {"volume_uuid": vol, "owner_uuid": OWNER, "name": "mig-shared"},
                      timeout=60)
    assert j["execution"] == "succeeded", j
    vm = provision_for(OWNER, CN1, networks=[{"uuid": ml.EXTERNAL, "primary": True},
                                              {"uuid": FABRIC}],
                       volumes=[{"name": "mig-shared", "mountpoint": "/shared"}])
    assert references(vol) == [vm]
    mount = os.path.join(ml.vm_dir(CN1, vm), "mounts", "shared")
    with open(os.path.join(mount, "hello.txt"), "w") as f:
        f.write("written on cn1 " + vm + "\n")
    ml.fill(CN1, vm, 12)
    status, job = ml.action("automatic", vm, target_server_uuid=CN2, send_mbps_limit=SLOW)
    assert status == 201, (status, job)
    ml.wait_pass_bytes(vm)
    # A delete while it migrates: refused, naming the VM; the volume unchanged.
    status, body = lab().create_job("volume-delete", "/volume-delete-" + vol,
                                    {"volume_uuid": vol, "owner_uuid": OWNER})
    assert (status, body.get("code")) == (409, "VolumeInUse"), (status, body)
    assert vm in body["message"], body
    # The references sampled through the passes and the switch.
    phases = set()
    deadline = time.monotonic() + 120
    while True:
        m = ml.migration(vm)
        assert references(vol) == [vm], (m["phase"], m.get("switch_step"), references(vol))
        if m["state"] == "successful":
            break
        assert m["state"] == "running", m
        phases.add((m["phase"], m.get("switch_step") or 0))
        assert time.monotonic() < deadline, ("not successful in 120 s", m)
        time.sleep(0.05)
    assert ("sync", 0) in phases and any(p == "switch" for p, _ in phases), phases
    done = lab().wait_job(job["uuid"], timeout=30)
    assert done["execution"] == "succeeded", done
    ml.check_on(vm, CN2, running=True)
    assert references(vol) == [vm]
    status, v = lab().http("/volumes/" + vol)
    assert status == 200 and v["state"] == "ready", (status, v)
    moved = ml.vm_json(CN2, vm)
    assert [x["name"] for x in moved.get("volumes", [])] == ["mig-shared"], moved
    with open(os.path.join(ml.vm_dir(CN2, vm), "mounts", "shared", "hello.txt")) as f:
        assert f.read() == "written on cn1 " + vm + "\n"
    assert lab().vm_of(vm)["internal_metadata"]["sdc:volumes"], lab().vm_of(vm)
    # Finalized, the volume is still the VM's; a delete is still refused.
    ml.ok_action("finalize", vm)
    assert references(vol) == [vm]
    status, body = lab().create_job("volume-delete", "/volume-delete-" + vol,
                                    {"volume_uuid": vol, "owner_uuid": OWNER})
    assert (status, body.get("code")) == (409, "VolumeInUse") and vm in body["message"], body
    lab().check_inventory()


# ---- the second lab: allow_user_migrations true ------------------------------------

def test_22_global_true_per_vm_false():
    """Test 22's other side: with allow_user_migrations true, a user's begin of a VM
    without the flag is allowed, and of a VM whose flag is false refused 403 with nothing
    stored."""
    vm = provision_for(OWNER)
    set_user_migration_allowed(vm, False)
    refused_nothing_stored("begin", vm, 403, "NotAllowed", ["User migration"],
                           owner_uuid=OWNER, target_server_uuid=CN2)
    assert ml.migration(vm) is None
    free = provision_for(OWNER)
    ml.ok_action("begin", free, owner_uuid=OWNER, target_server_uuid=CN2, send_mbps_limit=FAST)
    m = ml.wait_migration(free, "paused")
    assert m["account_uuid"] == OWNER, m
    ml.ok_action("abort", free, owner_uuid=OWNER)
    ml.wait_migration(free, "aborted")
    lab().check_inventory()


FIRST = [test_22_user_needs_leave_the_operator_does_not,
         test_23_a_user_cannot_abort_the_operators_migration,
         test_24_a_user_lists_only_their_migrations,
         test_an_aborted_schedule_cancels_its_switch_job,
         test_a_switch_by_hand_cancels_the_scheduled_one,
         test_an_abort_cancels_a_sync_waiting_for_a_slot,
         test_35_a_vm_mounting_a_volume_migrates]
SECOND = [test_22_global_true_per_vm_false]
only = sys.argv[3:]

if not only or any(t.__name__ in only for t in FIRST):
    ml.open_lab(SOURCE, BUILD, "tern-migration-api-",
                settings={"max_running_migrations_per_cn": 1})
    ml.lab.datacenter["networks"].append(
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500,
         "fabric": True, "owner_uuids": [OWNER]})
    ml.run(FIRST, only=only)
if not only or any(t.__name__ in only for t in SECOND):
    ml.open_lab(SOURCE, BUILD, "tern-migration-api-user-",
                settings={"allow_user_migrations": True})
    ml.run(SECOND, only=only)
