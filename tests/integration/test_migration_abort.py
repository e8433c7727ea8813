#!/usr/bin/env python3
"""Migrations interrupted on a lab of three servers (migration_lab.py): abort during a
sync pass (DOMAIN 5.6 test 12, X5), of a stopped source (13), after the NIC swap (14,
X5), refused past the point of no return (15); pause during a pass and its resume (10);
kill -9 of the source's and of the target's agent mid-pass, then the migration goes on
(19, X5). Each test checks the data plane (files on both data roots, the workload's
processes, vm.json) and the records.

Usage: test_migration_abort.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import os
import signal
import sys
import time

import migration_lab as ml
from migration_lab import CN1, CN2
from lab_harness import MIB, pid_alive, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-abort-")
SLOW = 40  # Mbit/s: 5 MB/s, so a pass of 24 MiB lasts about 5 s, long enough to act in


def begun(state="running", mib=24, limit=SLOW):
    """A VM on cn1 (the writer running, or stopped) with `mib` MiB to move, its
    migration to cn2 begun: its uuid."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, mib)
    if state == "stopped":
        job = lab.run_job("vm-stop", "/stop-" + vm, {"vm_uuid": vm}, timeout=60)
        assert job["execution"] == "succeeded", job
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=limit)
    ml.wait_migration(vm, "paused")
    return vm


def aborted_back_on_cn1(vm, running, before):
    """After an abort: the migration aborted, the VM cn1's as before (its NICs the
    same), the target and every migration file gone."""
    m = ml.wait_migration(vm, "aborted")
    assert m["phase"] == "abort", m
    vm_after = ml.check_on(vm, CN1, running=running)
    assert ml.nic_addrs(vm_after) == ml.nic_addrs(before), (before["nics"], vm_after["nics"])
    assert not os.path.exists(ml.vm_dir(CN2, vm))
    assert not os.path.exists(os.path.join(ml.vm_dir(CN1, vm), ".migration"))
    lab.check_inventory()
    return m


def test_12_abort_during_sync():
    """Test 12, X5: an abort during a pass stops it at a window boundary (a window of the
    description's 64 KiB blocks takes 0.13 s at 2 MB/s; the whole pass 12 s); the
    source never stopped writing."""
    vm = begun(limit=16)
    before = lab.vm_of(vm)
    pid = ml.workload_alive(CN1, vm)
    status, sync = ml.action("sync", vm)
    assert status == 201, sync
    m = ml.wait_pass_bytes(vm)
    # X9 during the pass: a second migration, a stop and a disk resize are refused.
    ml.refused("begin", vm, 409, "MigrationInProgress", [m["uuid"]])
    ml.refused("sync", vm, 409, "InvalidState", ["Cannot sync in migration state: running"])
    for wf, params in (("vm-stop", {}), ("disk-resize", {"pci_slot": "0:4:1", "size": 512})):
        status, body = lab.create_job(wf, f"/{wf[3:] if wf == 'vm-stop' else wf}-{vm}",
                                      dict(params, vm_uuid=vm))
        assert (status, body.get("code")) == (409, "VmMigrating"), (wf, status, body)
    t0 = time.monotonic()
    ml.ok_action("abort", vm, timeout=60)
    took = time.monotonic() - t0
    job = lab.wait_job(sync["uuid"])
    send = [r for r in job["chain_results"] if r["name"] == "send"]
    print(f"  abort {took:.2f} s; sync {job['execution']}", flush=True)
    assert send and send[0]["result"]["outcome"] == "aborted", send
    # A progress report a second, then one window: far less than the pass's 12 s.
    assert took < 4.0, took
    aborted_back_on_cn1(vm, True, before)
    assert ml.workload_alive(CN1, vm) == pid           # the same process, never stopped
    n0 = ml.writer_records(CN1, vm)[1]
    wait_for("the writer to go on", lambda: ml.writer_records(CN1, vm)[1] > n0, timeout=10)


def test_13_abort_of_a_stopped_source():
    """Test 13: a VM stopped before its migration is stopped after the abort."""
    vm = begun("stopped", mib=2)
    before = lab.vm_of(vm)
    ml.ok_action("sync", vm, timeout=60)
    ml.ok_action("abort", vm)
    aborted_back_on_cn1(vm, False, before)


def test_14_abort_after_the_nic_swap():
    """Test 14, X5: an abort asked once the swap is made (the source's agent held between
    the swap and the source's flip): the switch stops before the target starts, and the
    abort puts the NICs, IPs and allocation back on the running source."""
    vm = begun(mib=48, limit=800)
    before = lab.vm_of(vm)
    src = ml.agent_pid(CN1)
    status, switch = ml.action("switch", vm)
    assert status == 201, switch
    try:
        ml.wait_step(vm, 2)                      # final pass done: verify runs on cn2
        os.kill(src, signal.SIGSTOP)
        m = ml.wait_step(vm, 5)
        assert m["switch_step"] == 5, m          # swapped, the target not started
        assert lab.vm_of(vm)["server_uuid"] == CN2
        status, abort = ml.action("abort", vm)
        assert status == 201, abort
    finally:
        os.kill(src, signal.SIGCONT)
    assert lab.wait_job(switch["uuid"], timeout=60)["execution"] == "failed"
    assert lab.wait_job(abort["uuid"], timeout=60)["execution"] == "succeeded"
    aborted_back_on_cn1(vm, True, before)


def test_15_abort_refused_past_the_point_of_no_return():
    """Test 15: once the target runs (switch step 6), abort is refused and the migration
    completes. The source's agent is held from step 6 to keep the switch at its clean-up
    while the abort is asked; the switch's last steps are quick, so a step 6 seen after
    the source's clean-up is tried again on another VM (at most 3)."""
    for attempt in range(3):
        vm = begun(mib=2, limit=800)
        src = ml.agent_pid(CN1)
        status, switch = ml.action("switch", vm)
        assert status == 201, switch
        try:
            ml.wait_step(vm, 6)
            os.kill(src, signal.SIGSTOP)
            # Held only if the source's clean-up has not already finished: after it
            # only control steps remain and the migration can end while we ask.
            done = [r.get("name") for r in lab.job_of(switch["uuid"])["chain_results"]]
            held = "clean_source" not in done
            if held:
                ml.refused("abort", vm, 409, "InvalidState", ["point of no return"])
        finally:
            os.kill(src, signal.SIGCONT)
        assert lab.wait_job(switch["uuid"], timeout=60)["execution"] == "succeeded"
        ml.wait_migration(vm, "successful")
        ml.check_on(vm, CN2, running=True)
        ml.refused("abort", vm, 409, "InvalidState", ["Abort cannot work on a successful"])
        ml.ok_action("finalize", vm)
        if held:
            return
    raise AssertionError("the switch ended before step 6 was seen, 3 times")


def test_10_pause_and_resume():
    """Test 10: a pause during a pass ends it paused within a bound; the next sync goes
    on from there: the bytes of both passes are about the data, not twice it."""
    vm = begun()
    status, sync = ml.action("sync", vm)
    assert status == 201, sync
    ml.wait_pass_bytes(vm)
    ml.ok_action("pause", vm, timeout=30)
    m = ml.wait_migration(vm, "paused", timeout=5)
    assert m["phase"] == "sync", m
    first = m["progress"]["current_progress"]
    assert first < 24 * MIB, m                          # it did stop midway
    assert lab.wait_job(sync["uuid"])["execution"] == "succeeded"
    ml.ok_action("sync", vm, send_mbps_limit=800, timeout=60)
    m = ml.wait_migration(vm, "paused")
    second = m["last_sync_size"]
    assert first + second <= 24 * MIB + 8 * MIB, (first, second)
    ml.ok_action("switch", vm, timeout=90)
    ml.wait_migration(vm, "successful")
    ml.same_disks(vm, CN1, CN2, writer_records=ml.writer_records(CN1, vm)[1])
    ml.ok_action("finalize", vm)


def kill_agent_mid_pass(server):
    """kill -9 of `server`'s agent while a pass moves bytes, then tools/lab
    restart-agent: the sync job goes on (its send retried) and the migration switches
    with the data whole."""
    vm = begun()
    status, sync = ml.action("sync", vm)
    assert status == 201, sync
    m = wait_for("8 MiB sent", lambda: (lambda m: m if ((m or {}).get("progress") or {})
                                       .get("current_progress", 0) >= 8 * MIB else None)(
                                           ml.migration(vm)), timeout=30, every=0.05)
    sent = m["progress"]["current_progress"]
    pid = ml.agent_pid(server)
    os.kill(pid, signal.SIGKILL)
    wait_for("the agent to die", lambda: not pid_alive(pid), timeout=10)
    lab.run("restart-agent", ml.HOSTNAMES[server], "--dir", lab.dir)
    job = lab.wait_job(sync["uuid"], timeout=90)
    assert job["execution"] == "succeeded", job
    m = ml.wait_migration(vm, "paused")
    # Resumed, not started over: the target's manifest kept what was durable (all but
    # the window in flight), so both attempts together sent about the data once.
    # The data: what fill() wrote, the image's data on the boot disk, the writer's records.
    data = (24 + ml.IMAGE_DATA_MIB + 1) * MIB
    assert sent + m["last_sync_size"] <= 1.1 * data, (sent, m["last_sync_size"], data)
    ml.ok_action("switch", vm, timeout=90)
    ml.wait_migration(vm, "successful")
    ml.check_on(vm, CN2, running=True)
    ml.same_disks(vm, CN1, CN2, writer_records=ml.writer_records(CN1, vm)[1])
    ml.ok_action("finalize", vm)


def test_19_kill_the_source_agent_mid_pass():
    kill_agent_mid_pass(CN1)


def test_19_kill_the_target_agent_mid_pass():
    kill_agent_mid_pass(CN2)


ml.run([test_12_abort_during_sync, test_13_abort_of_a_stopped_source,
        test_14_abort_after_the_nic_swap, test_15_abort_refused_past_the_point_of_no_return,
        test_10_pause_and_resume, test_19_kill_the_source_agent_mid_pass,
        test_19_kill_the_target_agent_mid_pass], only=sys.argv[3:])
