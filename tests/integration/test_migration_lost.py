#!/usr/bin/env python3
"""A migration's target server lost for good (DOMAIN 5.4: "The target server is lost ->
failed, and the source is restored to its prior state"), on a lab of three servers
(migration_lab.py; docs/MIGRATION.md "A lost target"):

* the target's agent killed -9 mid-sync and kept down: the migration fails; an abort
  with target_lost ends `aborted` within seconds while that agent stays down, the VM
  running on its source as before (its workload alive, the writer's records complete,
  the NICs and IPs unchanged, vm.json visible) and free (a stop and a start of it run);
  the hidden copy stays on the lost server, its allocation still committed there, with
  the migration's `target_cleanup` "pending". Once the agent is back, the clean-up job
  removes the copy, the record says "done" and the server's committed capacity is what
  it was before the begin; a new migration to that server then succeeds with the same
  data on both sides;
* a new begin to the lost server while the copy is still there (asked while the server
  is down): the begin removes the stale copy and makes its own target, the clean-up
  job leaves that new target alone, and the new migration switches through;
* the abort's refusals: target_lost not a boolean, and target_lost on a migration with
  no target to leave behind (nothing changes).

Usage: test_migration_lost.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import os
import re
import signal
import subprocess
import sys
import time

import migration_lab as ml
from migration_lab import CN1, CN2
from lab_harness import pid_alive, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
# The agents' start reconcile runs soon after a restart here, so that it runs while
# the copy is still on the lost server or just after its removal: it must leave the
# copy, and the VM living on its source, alone either way.
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-lost-",
                  settings={"net_reconcile_start_delay_s": [1, 2]})
FAST = 800   # Mbit/s: passes not acted on midway
SLOW = 16    # Mbit/s (2 MB/s): a pass of 24 MiB lasts long enough to lose its target
ABORT_BOUND_S = 60   # the abort of a lost target, against the 900 s it could wait before


def committed(server):
    """(ram_committed_mib, disk_committed_mib) of a server, as GET /servers shows it."""
    s = {x["uuid"]: x for x in lab.list_all("/servers")}[server]
    return s["ram_committed_mib"], s["disk_committed_mib"]


def lose_target_mid_sync(vm):
    return ml.lose_target_mid_sync(vm, SLOW)


def abort_target_lost(vm, waiting=None):
    """The abort with target_lost, cn2 down: it ends within ABORT_BOUND_S (taking over
    `waiting`, an abort waiting on cn2's queue, when given). The migration record."""
    t0 = time.monotonic()
    status, abort = ml.action("abort", vm, target_lost=True)
    assert status in (200, 201), (status, abort)
    end = lab.wait_job(abort["uuid"], timeout=ABORT_BOUND_S)
    took = time.monotonic() - t0
    assert end["execution"] == "succeeded", end
    print(f"abort with cn2 lost ended in {took:.1f} s", flush=True)
    remove = [r for r in end["chain_results"] if r["name"] == "remove_target"]
    assert remove and remove[-1]["result"].get("left") is True, end["chain_results"]
    m = ml.migration(vm)
    assert (m["state"], m["phase"]) == ("aborted", "abort"), m
    assert m["target_cleanup"] == "pending", m
    if waiting is not None:
        # The abort waiting on cn2 still waits there: the server is down.
        old = lab.job_of(waiting)
        assert old["execution"] == "queued" and old["step_queue"] == "server:" + CN2, old
    warn = [h for h in m["progress_history"] if h.get("level") == "warning"]
    assert len(warn) == 1 and CN2 in warn[0]["message"], m["progress_history"]
    assert warn[0]["target_cleanup_job"] == m["target_cleanup_job"], (warn, m)
    return m


def test_lost_target_abort_ends_and_cleans_later():
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 24)
    before = lab.vm_of(vm)
    cn2_before = committed(CN2)
    lose_target_mid_sync(vm)
    # The operator's first abort waits on cn2's queue (bounded by 900 s, as before);
    # one with target_lost takes over and ends at once.
    status, waiting = ml.action("abort", vm)
    assert status in (200, 201), (status, waiting)
    wait_for("the abort to wait on cn2's queue",
             lambda: lab.job_of(waiting["uuid"]).get("step_queue") == "server:" + CN2,
             timeout=30, every=0.1)
    m = abort_target_lost(vm, waiting["uuid"])
    # The VM as it was, on cn1, free: not migrating, visible, running, same NICs.
    ml.check_on(vm, CN1, running=True)
    now = lab.vm_of(vm)
    assert ml.nic_addrs(now) == ml.nic_addrs(before), (before["nics"], now["nics"])
    assert all(n["cn_uuid"] == CN1 for n in now["nics"]), now["nics"]
    status, n = ml.writer_records(CN1, vm)
    assert status == 0 and n > 0, (status, n)
    wait_for("the writer to go on on cn1", lambda: ml.writer_records(CN1, vm)[1] > n + 5,
             timeout=20)
    assert not os.path.exists(os.path.join(ml.vm_dir(CN1, vm), ".migration"))
    # The copy stays on the lost server, hidden, its capacity still held there.
    assert ml.hidden(CN2, vm), "the copy on cn2 went away while its server was down"
    alloc = m["target_allocation"]
    assert alloc["server_uuid"] == CN2 and not alloc.get("released"), alloc
    assert committed(CN2) == (cn2_before[0] + alloc["ram"], cn2_before[1] + alloc["disk"])
    clean = lab.job_of(m["target_cleanup_job"])
    assert clean["name"] == "migrate-target-clean", clean
    assert clean["execution"] == "queued" and clean["step_queue"] == "server:" + CN2, clean
    # The VM is free: stopped and started again while cn2 is still down.
    job = lab.run_job("vm-stop", "/stop-" + vm, {"vm_uuid": vm}, timeout=60)
    assert job["execution"] == "succeeded", job
    ml.check_on(vm, CN1, running=False)
    job = lab.run_job("vm-start", "/start-" + vm, {"vm_uuid": vm}, timeout=60)
    assert job["execution"] == "succeeded", job
    ml.check_on(vm, CN1, running=True)
    assert ml.hidden(CN2, vm)
    # cn2 back: its agent serves its queue again and the clean-up job removes the copy.
    p = lab.run("restart-agent", "cn2", "--dir", lab.dir)
    start_reconcile = re.search(r"net-reconcile of cn2 in [0-9.]+ s \(job ([0-9a-f-]{36})\)",
                                p.stdout)
    assert start_reconcile, p.stdout
    end = lab.wait_job(m["target_cleanup_job"], timeout=60)
    assert end["execution"] == "succeeded", end
    # The waiting abort ran its remove_target there too (each holds the VM in turn):
    # whichever came first removed the copy, and the other found it gone.
    old = lab.wait_job(waiting["uuid"], timeout=60)
    assert old["execution"] == "succeeded", old
    removed = [end["chain_results"][0]["result"]["removed"],
               [r for r in old["chain_results"] if r["name"] == "remove_target"][-1]
               ["result"]["removed"]]
    assert sorted(removed) == [False, True], removed
    assert not os.path.exists(ml.vm_dir(CN2, vm)), "the copy is left on cn2"
    m = ml.migration(vm)
    assert (m["state"], m["phase"]) == ("aborted", "abort"), m
    assert m["target_cleanup"] == "done" and m["target_cleanup_timestamp"], m
    assert m["target_allocation"]["released"] is True, m
    last = m["progress_history"][-1]["message"]
    assert ("is removed" if removed[0] else "already gone") in last, m["progress_history"][-1]
    assert committed(CN2) == cn2_before, (committed(CN2), cn2_before)
    # The VM never moved, and the start reconcile of cn2 (run before or after the
    # removal) took nothing from it: no NIC reaped, nothing vanished.
    rec = lab.wait_job(start_reconcile.group(1), timeout=60)
    assert rec["execution"] == "succeeded", rec
    result = [r["result"] for r in rec["chain_results"] if r["name"] == "reconcile"][-1]
    assert result["reaped"] == [] and result["vanished"] == [], result
    ml.check_on(vm, CN1, running=True)
    assert ml.nic_addrs(lab.vm_of(vm)) == ml.nic_addrs(before)
    lab.check_inventory()
    # A second clean-up of the same migration has nothing to do: refused, nothing stored.
    status, body = lab.create_job("migrate-target-clean", "/migrate-target-clean-" + m["uuid"],
                                  {"migration_uuid": m["uuid"]})
    assert (status, body.get("code")) in ((409, "InvalidState"), (409, "Conflict")), (status, body)
    # A new migration to the same server goes through, the data equal on both sides.
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.wait_migration(vm, "paused")
    ml.ok_action("switch", vm, timeout=90)
    ml.wait_migration(vm, "successful")
    ml.check_on(vm, CN2, running=True)
    status, n_source = ml.writer_records(CN1, vm)
    assert status == 0 and n_source > 0, (status, n_source)
    ml.same_disks(vm, CN1, CN2, writer_records=n_source)
    assert ml.nic_addrs(lab.vm_of(vm)) == ml.nic_addrs(before)
    ml.ok_action("finalize", vm)
    lab.check_inventory()


def test_new_begin_over_the_leftover():
    """A begin to the lost server asked while its copy is still pending: its job holds
    the VM, so the clean-up waits for it; its target_create removes the stale copy and
    makes its own, which the clean-up then leaves alone."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 24)
    cn2_before = committed(CN2)
    old = lose_target_mid_sync(vm)
    m = abort_target_lost(vm)
    alloc = m["target_allocation"]
    status, begin = ml.action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    assert status in (200, 201), (status, begin)
    wait_for("the begin to wait on cn2's queue",
             lambda: lab.job_of(begin["uuid"]).get("step_queue") == "server:" + CN2,
             timeout=30, every=0.1)
    lab.run("restart-agent", "cn2", "--dir", lab.dir)
    new = ml.wait_migration(vm, "paused", timeout=90)
    assert new["uuid"] != old["uuid"] and new["target_server_uuid"] == CN2, new
    end = lab.wait_job(m["target_cleanup_job"], timeout=60)
    assert end["execution"] == "succeeded", end
    assert end["chain_results"][0]["result"] == {
        "migration_dir_removed": False, "removed": False, "other_migration": new["uuid"]}, end
    j = ml.vm_json(CN2, vm)
    assert j["do_not_inventory"] is True and j["migration_target"] == new["uuid"], j
    status, old = lab.http("/migrations/" + old["uuid"])
    assert status == 200, (status, old)
    assert old["target_cleanup"] == "done", old
    assert new["uuid"] in old["progress_history"][-1]["message"], old["progress_history"][-1]
    # One allocation on cn2: the new migration's; the old one's was given back.
    assert committed(CN2) == (cn2_before[0] + alloc["ram"], cn2_before[1] + alloc["disk"])
    ml.ok_action("switch", vm, timeout=90)
    ml.wait_migration(vm, "successful")
    ml.check_on(vm, CN2, running=True)
    status, n_source = ml.writer_records(CN1, vm)
    assert status == 0 and n_source > 0, (status, n_source)
    ml.same_disks(vm, CN1, CN2, writer_records=n_source)
    ml.ok_action("finalize", vm)
    lab.check_inventory()


def test_target_lost_refusals():
    """target_lost is an abort's boolean only, refused with its name elsewhere and
    with nothing changed; with the target reachable it still ends the abort at once,
    and the clean-up job removes the copy right after."""
    vm = ml.provision(CN1, "idle")
    ml.refused("abort", vm, 404, "MigrationNotFound", [vm], target_lost=True)
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.wait_migration(vm, "paused")
    before = ml.migration(vm)
    ml.refused("abort", vm, 422, "InvalidArgument", ["params.target_lost"], target_lost="yes")
    ml.refused("sync", vm, 422, "InvalidArgument", ["params.target_lost"], target_lost=True)
    assert ml.migration(vm) == before
    # The clean-up job is only for a migration whose copy is left: bad input named,
    # a migration with nothing left refused; no job stored.
    jobs = lab.user_job_count()
    mig = before["uuid"]
    for params, target, want, words in (
            ({"migration_uuid": mig, "bogus": 1}, mig, 422, "params.bogus"),
            ({"migration_uuid": "nope"}, "nope", 422, "params.migration_uuid"),
            ({"migration_uuid": mig}, vm, 422, "target"),
            ({"migration_uuid": vm}, vm, 404, vm),
            ({"migration_uuid": mig}, mig, 409, "no target copy left")):
        status, body = lab.create_job("migrate-target-clean", "/migrate-target-clean-" + target,
                                      params)
        assert status == want and words in body.get("message", ""), (params, status, body)
    assert lab.user_job_count() == jobs and ml.migration(vm) == before
    # The CLI refuses the option elsewhere, before any request.
    p = subprocess.run([lab.tern_bin, "migration", "sync", vm, "--target-lost"],
                       capture_output=True, text=True, timeout=30, env=lab.env)
    assert p.returncode == 2 and "--target-lost is an option of abort only" in p.stderr, p
    # cn2 is up: `tern migration abort --target-lost -w` still ends at once (exit 0:
    # aborted as asked), and the clean-up job then removes the copy on its own.
    p = subprocess.run([lab.tern_bin, "migration", "abort", vm, "--target-lost", "-w"],
                       capture_output=True, text=True, timeout=ABORT_BOUND_S, env=lab.env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    m = ml.migration(vm)
    assert (m["state"], m["phase"]) == ("aborted", "abort"), m
    end = lab.wait_job(m["target_cleanup_job"], timeout=60)
    assert end["execution"] == "succeeded", end
    assert not os.path.exists(ml.vm_dir(CN2, vm))
    assert ml.migration(vm)["target_cleanup"] == "done"
    ml.check_on(vm, CN1, running=True)
    lab.check_inventory()


ml.run([test_target_lost_refusals, test_lost_target_abort_ends_and_cleans_later,
        test_new_begin_over_the_leftover], only=sys.argv[3:])
