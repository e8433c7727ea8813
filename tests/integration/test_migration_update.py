#!/usr/bin/env python3
"""Instance updates during a migration on the lab of three servers (migration_lab.py):
an alias and a tag changed during a sync pass are on the target after the switch, in
its record and in the target's vm.json, while the source's kept copy stays hidden
(DOMAIN 5.6 test 18); a resize is refused VmMigrating, and an update asked while the
switch runs is refused with nothing changed (test 17's "update").

Usage: test_migration_update.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import os
import signal
import sys

import migration_lab as ml
from migration_lab import CN1, CN2

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-update-")
SLOW = 40  # Mbit/s: 5 MB/s, so a pass of 24 MiB lasts about 5 s, long enough to act in


def update(vm, **params):
    """POST /jobs of vm-update: (status, body)."""
    return lab.create_job("vm-update", "/update-" + vm, dict(params, vm_uuid=vm))


def metadata(doc):
    return doc.get("alias"), doc.get("tags") or {}, doc.get("customer_metadata") or {}


def test_18_update_during_sync_reaches_the_target():
    """Test 18: an alias and a tag changed while a pass runs are admitted at once, applied
    once the pass has ended (the update holds the VM as every migration job does), and
    after the switch the VM's record and the target's vm.json show them; the source's
    kept copy is hidden (not inventoried); an update after the switch goes to the
    target's server and to the kept copy, so a rollback brings the VM back with it."""
    vm = ml.provision(CN1, "writer")
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=SLOW)
    ml.wait_migration(vm, "paused")
    ml.fill(CN1, vm, 24)
    status, sync = ml.action("sync", vm)
    assert status == 201, sync
    ml.wait_pass_bytes(vm)
    status, upd = update(vm, alias="moved-1", add_tags={"role": "db", "gen": 2})
    assert status == 201, (status, upd)
    assert ml.migration(vm)["state"] == "running"      # asked while the pass runs
    assert lab.wait_job(sync["uuid"], timeout=60)["execution"] == "succeeded"
    job = lab.wait_job(upd["uuid"], timeout=60)
    assert job["execution"] == "succeeded", job
    m = ml.wait_migration(vm, "paused")
    assert m["num_sync_phases"] == 1, m
    rec = lab.vm_of(vm)
    assert rec["migrating"] is True and rec["server_uuid"] == CN1, rec
    assert metadata(rec)[:2] == ("moved-1", {"role": "db", "gen": 2}), rec
    # The source's vm.json has it now; the target's gets it with the next pass.
    assert metadata(ml.vm_json(CN1, vm)) == metadata(rec)
    assert ml.vm_json(CN2, vm).get("alias") != "moved-1"

    ml.ok_action("switch", vm, send_mbps_limit=800, timeout=90)
    m = ml.wait_migration(vm, "successful")
    rec = ml.check_on(vm, CN2, running=True)
    assert metadata(rec)[:2] == ("moved-1", {"role": "db", "gen": 2}), rec
    target = ml.vm_json(CN2, vm)
    assert metadata(target) == metadata(rec), (target, rec)
    assert target.get("do_not_inventory") is not True, target
    assert ml.hidden(CN1, vm)
    listed = lab.list_all("/vms?alias=moved-1")
    assert [(v["uuid"], v["server_uuid"]) for v in listed] == [(vm, CN2)], listed

    # After the switch the record names cn2: the update writes there, and into the copy
    # kept on cn1 (still hidden), which a rollback makes the VM again.
    kept = ml.vm_json(CN1, vm)
    job = lab.run_job("vm-update", "/update-" + vm, {"vm_uuid": vm, "add_tags": {"after": True}},
                      timeout=60)
    assert job["execution"] == "succeeded", job
    tags = {"role": "db", "gen": 2, "after": True}
    assert ml.vm_json(CN2, vm)["tags"] == tags
    assert ml.vm_json(CN1, vm) == dict(kept, tags=tags) and ml.hidden(CN1, vm)
    lab.check_inventory()
    ml.ok_action("rollback", vm, timeout=90)
    ml.wait_migration(vm, "aborted")
    rec = ml.check_on(vm, CN1, running=True)
    assert metadata(rec)[:2] == ("moved-1", tags), rec
    assert metadata(ml.vm_json(CN1, vm)) == metadata(rec)
    lab.check_inventory()


def test_17_resize_refused_and_update_refused_during_the_switch():
    """Test 17 (update): during a migration ram, billing_id or disks are refused
    VmMigrating naming the migration, metadata is not (paused); once the switch runs
    (the source's agent held before it stops the source) an update is refused too,
    and the record and both vm.json are as they were; the switch then completes."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 4)
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=800)
    m = ml.wait_migration(vm, "paused")
    jobs = lab.user_job_count()
    for params in ({"ram": 2048}, {"billing_id": ml.PKG}, {"disks": [{}]},
                   {"alias": "x", "ram": 2048}):
        status, body = update(vm, **params)
        assert (status, body.get("code")) == (409, "VmMigrating"), (params, status, body)
        assert m["uuid"] in body["message"], body
    assert lab.user_job_count() == jobs
    job = lab.run_job("vm-update", "/update-" + vm,
                      {"vm_uuid": vm, "alias": "held-1", "tags": {"k": "v"}}, timeout=60)
    assert job["execution"] == "succeeded", job
    before = (metadata(lab.vm_of(vm)), ml.vm_json(CN1, vm), ml.vm_json(CN2, vm))

    src = ml.agent_pid(CN1)
    os.kill(src, signal.SIGSTOP)
    try:
        status, switch = ml.action("switch", vm)
        assert status == 201, switch
        m = ml.wait_migration(vm, "running")
        assert m["phase"] == "switch", m
        jobs = lab.user_job_count()
        status, body = update(vm, alias="too-late", add_tags={"late": True})
        assert (status, body.get("code")) == (409, "VmMigrating"), (status, body)
        assert "switch" in body["message"] and m["uuid"] in body["message"], body
        assert lab.user_job_count() == jobs
        assert (metadata(lab.vm_of(vm)), ml.vm_json(CN1, vm), ml.vm_json(CN2, vm)) == before
    finally:
        os.kill(src, signal.SIGCONT)
    assert lab.wait_job(switch["uuid"], timeout=90)["execution"] == "succeeded"
    ml.wait_migration(vm, "successful")
    rec = lab.vm_of(vm)
    assert metadata(rec)[:2] == ("held-1", {"k": "v"}), rec
    assert metadata(ml.vm_json(CN2, vm)) == metadata(rec)
    assert lab.list_all("/vms?alias=too-late") == []
    lab.check_inventory()


if __name__ == "__main__":
    ml.run([test_18_update_during_sync_reaches_the_target,
            test_17_resize_refused_and_update_refused_during_the_switch], only=sys.argv[3:])
