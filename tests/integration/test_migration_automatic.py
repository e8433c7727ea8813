#!/usr/bin/env python3
"""Automatic migrations on a lab of three servers (migration_lab.py): one with the
writer running (DOMAIN 5.6 tests 1, 2 and X4: the writer's records on the target have
no gap and go on after the stop point; disks, holes and NICs the source's), a provision
loop on the same network throughout that never gets the VM's IPs (3, X5), and six
migrations off one server with the limit of five slots never more than five running at
once (21, X8).

Usage: test_migration_automatic.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77)
when the build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import sys
import time

import migration_lab as ml
from migration_lab import CN1, CN2
from lab_harness import MIB, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-automatic-")


def test_x4_automatic_with_the_writer_and_a_provision_loop():
    """Tests 1, 2, 3, X4, X5: an automatic migration of a writing VM while instances are
    provisioned and deleted on its network: successful; the target's disks equal the
    stopped source's, holes kept; the writer's records have no gap on the target and go
    on there; the NICs are the same and no provision ever got one of the VM's IPs."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 16)
    before = lab.vm_of(vm)
    ips = ml.vm_ips(vm)
    loop = ml.ProvisionLoop(server=CN2).start()
    try:
        t0 = time.monotonic()
        ml.ok_action("automatic", vm, send_mbps_limit=200, timeout=120)
        took = time.monotonic() - t0
    finally:
        given = loop.stop()
    assert loop.count >= 1, "the provision loop made nothing during the migration"
    assert not (given & ips), (given & ips, ips)
    m = ml.wait_migration(vm, "successful")
    assert m["automatic"] is True and m["phase"] == "switch", m
    assert m["num_sync_phases"] >= 2, m                  # passes, then the final one
    assert m["switch_reason"] in ("size", "max_passes", "stalled"), m
    vm_after = ml.check_on(vm, CN2, running=True)
    assert ml.nic_addrs(vm_after) == ml.nic_addrs(before), (before["nics"], vm_after["nics"])
    status, n_source = ml.writer_records(CN1, vm)
    assert status == 0 and n_source > 0, (status, n_source)
    ml.same_disks(vm, CN1, CN2, writer_records=n_source)
    wait_for("the writer to go on on cn2",
             lambda: ml.writer_records(CN2, vm)[1] > n_source + 5, timeout=15)
    status, n_target = ml.writer_records(CN2, vm)
    assert status == 0, ("a record missing or out of place on cn2", n_target)
    # The downtime (source stopped to target started) is the final pass, not the whole
    # migration: the writer's records on cn2 start right after cn1's.
    entries = [e for e in m["progress_history"] if e["phase"] == "switch"]
    assert entries and all(e["state"] == "successful" for e in entries), entries
    print(f"  automatic of 16 MiB + writer: {took:.1f} s, {m['num_sync_phases']} passes, "
          f"{n_target - n_source} records on cn2", flush=True)
    lab.check_inventory()


def test_21_x8_six_migrations_limit_five():
    """Tests 21, X8: six on-demand syncs off cn1 to cn2 with five slots per server: never
    more than five running at once (sampled), and all six end paused."""
    vms = [ml.provision(CN1, "idle") for _ in range(6)]
    for vm in vms:
        ml.fill(CN1, vm, 4)
        ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=40)
        ml.wait_migration(vm, "paused")
    jobs = []
    for vm in vms:
        status, job = ml.action("sync", vm)
        assert status == 201, (status, job)
        jobs.append(job["uuid"])

    def all_done():
        return all(lab.job_of(j)["execution"] in ("succeeded", "failed", "canceled")
                   for j in jobs)
    most = ml.sample_running(all_done, timeout=120)
    print(f"  at most {most} of 6 running at once", flush=True)
    assert 2 <= most <= 5, most
    for j in jobs:
        assert lab.job_of(j)["execution"] == "succeeded", lab.job_of(j)
    for vm in vms:
        m = ml.wait_migration(vm, "paused")
        assert m["num_sync_phases"] == 1 and m["last_sync_size"] >= 4 * MIB, m
        ml.ok_action("abort", vm)
    lab.check_inventory()


ml.run([test_x4_automatic_with_the_writer_and_a_provision_loop,
        test_21_x8_six_migrations_limit_five], only=sys.argv[3:])
