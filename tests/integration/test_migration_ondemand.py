#!/usr/bin/env python3
"""On-demand migrations on a lab of three servers (migration_lab.py): begin -> sync ->
sync -> switch with the writer running (DOMAIN 5.6 tests 1-4, 8, 32), a switch right
after begin (9), finalize and rollback, and the refusals of a VM that migrates (11,
15, 16, 17, X9). Each test checks the data plane (the disks' sizes, sha256 and holes on
both data roots, the workload's processes, vm.json) and the records (the migration, the
VM, the servers' committed capacity).

Usage: test_migration_ondemand.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when
the build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import json
import os
import sys
import time

import migration_lab as ml
from migration_lab import CN1, CN2, CN3, DATA_MIB
from lab_harness import MIB, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-ondemand-")
FAST = 800  # Mbit/s: the passes here are not acted on midway


def servers():
    return {s["uuid"]: s for s in lab.list_all("/servers")}


def test_8_on_demand_begin_sync_sync_switch():
    """Tests 1-4, 8, 32: begin pauses, each sync pass pauses and counts, the switch moves
    the VM with its data, holes, NICs and workload; no migration state is left and the
    capacity moved from cn1 to cn2."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 8)
    before = lab.vm_of(vm)
    cap0 = servers()
    jobs = [ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)]
    m = ml.wait_migration(vm, "paused")
    assert (m["phase"], m["source_server_uuid"], m["target_server_uuid"]) == ("begin", CN1, CN2), m
    assert m["num_sync_phases"] == 0 and m["last_sync_size"] is None, m
    assert "secret" not in m, m
    # The target is made, hidden and empty; the VM still runs on cn1, marked migrating.
    assert ml.hidden(CN2, vm) and ml.vm_json(CN2, vm)["nics"] == [], ml.vm_json(CN2, vm)
    assert ml.workload_alive(CN1, vm) and not ml.workload_alive(CN2, vm)
    assert lab.vm_of(vm)["migrating"] is True
    cap1 = servers()
    assert cap1[CN2]["ram_committed_mib"] == cap0[CN2]["ram_committed_mib"] + 1024, cap1[CN2]
    assert cap1[CN1]["ram_committed_mib"] == cap0[CN1]["ram_committed_mib"], cap1[CN1]

    jobs.append(ml.ok_action("sync", vm))
    m = ml.wait_migration(vm, "paused")
    assert (m["phase"], m["num_sync_phases"]) == ("sync", 1), m
    first = m["last_sync_size"]
    assert first >= 8 * MIB, m                         # the filled data moved
    assert first < 8 * MIB + 16 * MIB, m               # holes did not
    assert ml.workload_alive(CN1, vm)                  # the source never stopped
    ml.ok_action("sync", vm)
    m = ml.wait_migration(vm, "paused")
    assert m["num_sync_phases"] == 2, m
    assert m["last_sync_size"] < first // 2, m         # only what changed since

    jobs.append(ml.ok_action("switch", vm, timeout=90))
    m = ml.wait_migration(vm, "successful")
    assert m["phase"] == "switch" and m["switch_step"] == 7, m
    # The migration's secret is in its record only: GET /jobs/:uuid (any submit token
    # reads it) shows no step's args or result carrying it.
    secret = json.loads("\n".join(lab.redis("GET", "tern:p:dc:migration:" + m["uuid"])))["secret"]
    assert len(secret) == 64, secret
    for j in jobs:
        status, body = lab.http("/jobs/" + j["uuid"])
        assert status == 200 and body["chain_results"], (status, body)
        assert secret not in json.dumps(body), (j["uuid"], "shows the secret")
    # Test 4: the record's fields and times.
    for k in ("uuid", "vm_uuid", "source_server_uuid", "target_server_uuid", "automatic",
              "state", "phase", "created_timestamp", "started_timestamp",
              "finished_timestamp", "num_sync_phases", "last_sync_size", "progress_history"):
        assert k in m, (k, m)
    assert m["automatic"] is False and isinstance(m["num_sync_phases"], int), m
    assert m["created_timestamp"] <= m["started_timestamp"] <= m["finished_timestamp"], m
    phases = [e["phase"] for e in m["progress_history"]]
    assert phases[0] == "begin" and "sync" in phases and phases[-1] == "switch", phases
    assert not [e for e in m["progress_history"] if e["state"] in ("running", "failed")], m
    # Tests 1-3: the VM runs on cn2, its disks are the source's final state, holes kept,
    # the same NICs; the source stays hidden and stopped until finalize.
    vm_after = ml.check_on(vm, CN2, running=True)
    assert vm_after["uuid"] == vm and ml.nic_addrs(vm_after) == ml.nic_addrs(before), (before, vm_after)
    assert ml.hidden(CN1, vm) and not ml.workload_alive(CN1, vm)
    status, n_source = ml.writer_records(CN1, vm)
    assert status == 0 and n_source > 0, (status, n_source)
    ml.same_disks(vm, CN1, CN2, writer_records=n_source)
    # The writer goes on on cn2 after the last record the source wrote: no gap.
    wait_for("the writer to go on on cn2",
             lambda: ml.writer_records(CN2, vm)[1] > n_source + 5, timeout=15)
    assert ml.writer_records(CN2, vm)[0] == 0
    # Test 32: no migration state on either side; capacity moved.
    for s in (CN1, CN2):
        assert not os.path.exists(os.path.join(ml.vm_dir(s, vm), ".migration")), s
    cap2 = servers()
    assert cap2[CN1]["ram_committed_mib"] == cap0[CN1]["ram_committed_mib"] - 1024, cap2[CN1]
    assert cap2[CN2]["ram_committed_mib"] == cap0[CN2]["ram_committed_mib"] + 1024, cap2[CN2]
    lab.check_inventory()
    # Finalize removes the hidden source; the VM may migrate again.
    ml.refused("begin", vm, 409, "PreviousMigration", ["migration finalize"])
    ml.ok_action("finalize", vm)
    m = ml.migration(vm)
    assert m["finalized_timestamp"] is not None, m
    assert not os.path.exists(ml.vm_dir(CN1, vm))
    ml.check_on(vm, CN2, running=True)


def test_9_switch_right_after_begin():
    """Test 9: a switch without a sync is an offline full copy: successful, the data and
    holes on the target; a stopped source stays stopped on the target (13's other side)."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 4)
    lab.run_job("vm-stop", "/stop-" + vm, {"vm_uuid": vm}, timeout=60)
    wait_for("vm stopped", lambda: not ml.workload_alive(CN1, vm), timeout=15)
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.ok_action("switch", vm, timeout=90)
    m = ml.wait_migration(vm, "successful")
    assert m["num_sync_phases"] >= 1 and m["vm_state_before"] == "stopped", m
    ml.check_on(vm, CN2, running=False)
    ml.same_disks(vm, CN1, CN2)
    lab.check_inventory()
    # Rollback: the VM is cn1's again, stopped as it was; the target is removed.
    ml.ok_action("rollback", vm, timeout=90)
    m = ml.wait_migration(vm, "aborted")
    assert m["phase"] == "rollback", m
    ml.check_on(vm, CN1, running=False)
    assert not os.path.exists(ml.vm_dir(CN2, vm))
    lab.check_inventory()


def test_16_17_refusals_while_migrating():
    """Tests 11, 16, 17, X9: while a migration is paused, a second begin, start, stop,
    delete, a disk resize and a pause are refused with the migration named, and nothing
    changes; bad params are refused naming them; a server without room is refused."""
    vm = ml.provision(CN1, "idle")
    ml.refused("begin", vm, 422, "InvalidArgument", ["bogus"], bogus=1)
    ml.refused("begin", vm, 422, "InvalidArgument", ["send_mbps_limit"], send_mbps_limit=-1)
    ml.refused("begin", vm, 409, "NoAllocatableServersError", [CN3], target_server_uuid=CN3)
    ml.refused("sync", vm, 404, "MigrationNotFound", [vm])
    ml.ok_action("begin", vm, target_server_uuid=CN2)
    m = ml.wait_migration(vm, "paused")
    ml.refused("begin", vm, 409, "MigrationInProgress", [m["uuid"]])
    for wf in ("vm-stop", "vm-start", "vm-delete"):
        status, body = lab.create_job(wf, f"/{wf[3:]}-{vm}", {"vm_uuid": vm})
        assert (status, body.get("code")) == (409, "VmMigrating"), (wf, status, body)
        assert m["uuid"] in body["message"], body
    status, body = lab.create_job("disk-resize", "/disk-resize-" + vm,
                                  {"vm_uuid": vm, "pci_slot": "0:4:1", "size": DATA_MIB + 64})
    assert (status, body.get("code")) == (409, "VmMigrating"), (status, body)
    ml.refused("pause", vm, 409, "InvalidState", ["Pause requires a running migration sync"])
    ml.refused("finalize", vm, 409, "InvalidState", ["Finalize only works"])
    ml.refused("rollback", vm, 409, "InvalidState", ["Rollback only works"])
    assert ml.migration(vm)["state"] == "paused" and ml.workload_alive(CN1, vm)
    # Abort puts it back; then the VM's operations work again (X9).
    ml.ok_action("abort", vm)
    ml.wait_migration(vm, "aborted")
    ml.check_on(vm, CN1, running=True)
    assert not os.path.exists(ml.vm_dir(CN2, vm))
    job = lab.run_job("vm-stop", "/stop-" + vm, {"vm_uuid": vm}, timeout=60)
    assert job["execution"] == "succeeded", job
    lab.check_inventory()


def iso_epoch(text):
    """Seconds since the epoch of an ISO 8601 UTC time (2026-11-26T12:00:00[.123]Z)."""
    base, _, frac = text.rstrip("Z").partition(".")
    t = time.mktime(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return t + (int(frac) / 10 ** len(frac) if frac else 0)


def test_25_schedule_begins_and_syncs_now_then_switches_at_its_time():
    """Test 25: a schedule for now + 10 s begins and makes its first pass at once: before
    the 10 s the migration is `scheduled` and the target holds the data; its switch is a
    migrate-switch job the schedule asked for with exec_after = scheduled_timestamp,
    which starts no earlier than that and makes the migration successful. Run again,
    the schedule's last step finds the job it made. A past scheduled_timestamp is
    refused by the check."""
    vm = ml.provision(CN1, "idle")
    ml.fill(CN1, vm, 4)
    ml.refused("schedule", vm, 422, "InvalidArgument", ["scheduled_timestamp"],
               scheduled_timestamp="2001-01-01T00:00:00Z")
    at_s = int(time.time()) + 11                       # at least 10 s from now
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_s))
    job = ml.ok_action("schedule", vm, scheduled_timestamp=at, target_server_uuid=CN2,
                       send_mbps_limit=FAST, timeout=8)
    m = ml.migration(vm)
    assert time.time() < at_s, "the schedule's begin and first pass took until its time"
    assert m["state"] == "scheduled", m
    assert (m["phase"], m["num_sync_phases"], m["scheduled_timestamp"]) == ("sync", 1, at), m
    assert m["last_sync_size"] >= 4 * MIB, m
    assert ml.workload_alive(CN1, vm) and ml.hidden(CN2, vm)
    ml.same_disks(vm, CN1, CN2)                        # the idle source wrote nothing since
    asked = job["chain_results"][-1]["result"]
    assert asked["exec_after"] == at, asked
    switch = lab.job_of(asked["job_uuid"])
    assert switch.get("name") == "migrate-switch", switch
    assert switch["target"] == "/migrate-switch-" + vm, switch
    assert iso_epoch(switch["exec_after"]) == at_s, switch
    assert switch["execution"] == "queued", switch
    # The step run again (a retried attempt) asks for the same job: no second one.
    status, _ = lab.http("/workflows", "POST", {
        "name": "t-schedule-switch", "version": "1.0.0",
        "chain": [{"name": "ask", "task": "dc.migration_schedule_switch",
                   "args": {"migration_uuid": "${params.migration_uuid}"}}]})
    assert status == 201, status
    n_jobs = lab.user_job_count()
    again = lab.run_job("t-schedule-switch", "/t-schedule-switch-" + vm,
                        {"migration_uuid": m["uuid"]}, timeout=20)
    assert again["execution"] == "succeeded", again
    assert again["chain_results"][-1]["result"]["job_uuid"] == asked["job_uuid"], again
    assert lab.user_job_count() == n_jobs + 1          # the t-schedule-switch job only
    assert ml.migration(vm)["state"] == "scheduled" and time.time() < at_s
    # At its time the switch runs: successful, the VM on cn2 with the source's data.
    m = ml.wait_migration(vm, "successful", timeout=max(at_s - time.time(), 0) + 60)
    started = [e for e in m["progress_history"] if e["phase"] == "switch"]
    assert started and iso_epoch(started[0]["started_timestamp"]) >= at_s, (at, started)
    done = lab.wait_job(asked["job_uuid"], timeout=30)
    assert done["execution"] == "succeeded", done
    first = done["chain_results"][0]
    assert iso_epoch(first["started_at"]) >= at_s, (at, first)
    ml.check_on(vm, CN2, running=True)
    ml.same_disks(vm, CN1, CN2)
    ml.ok_action("finalize", vm)
    lab.check_inventory()


def test_33_estimate():
    """Test 33: the estimate counts the data of the disks, not their sizes."""
    vm = ml.provision(CN1, "idle")
    ml.fill(CN1, vm, 6)
    job = ml.ok_action("estimate", vm, send_mbps_limit=80)
    r = job["chain_results"][-1]["result"]
    assert 6 * MIB <= r["size_bytes"] <= 6 * MIB + 8 * MIB, r
    assert r["total_seconds"] >= r["size_bytes"] / 10_000_000, r
    assert ml.migration(vm) is None                     # nothing began


ml.run([test_8_on_demand_begin_sync_sync_switch, test_9_switch_right_after_begin,
        test_16_17_refusals_while_migrating,
        test_25_schedule_begins_and_syncs_now_then_switches_at_its_time,
        test_33_estimate], only=sys.argv[3:])
