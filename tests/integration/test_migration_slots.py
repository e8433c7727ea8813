#!/usr/bin/env python3
"""Migration slots on a lab of three servers (migration_lab.py) with
max_running_migrations_per_cn = 1 (DOMAIN 5.2, item 8 of the migration work): a
migration off cn1 beyond the limit waits its turn, and its record says so while it
waits ("waiting for a migration slot" naming the server, through GET /migrations/:uuid,
the VM's list, `tern migration get|list|watch`), the others run and never more than
the limit at once; once the slot frees it runs, the note is gone, and it ends
successful with its data on the target. A waiting sync (its record exists, paused) and
a waiting begin (no record yet: the view answers from its wait) are both covered.

Usage: test_migration_slots.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import os
import subprocess
import sys
import time

import migration_lab as ml
from migration_lab import CN1, CN2
from lab_harness import MIB, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-slots-",
                  settings={"max_running_migrations_per_cn": 1})
SLOW = 16   # Mbit/s: 2 MB/s, so the 8 MiB filled take about 4 s: long enough to sample in
FAST = 800  # Mbit/s
WAIT_TEXT = "waiting for a migration slot"


def view(uuid):
    status, m = lab.http("/migrations/" + uuid)
    assert status == 200, (status, m)
    return m


def running_now():
    """The migrations running now: records running, less any that waits for a slot."""
    status, rows = lab.http("/migrations?state=running&limit=1000")
    assert status == 200, (status, rows)
    return [m for m in rows if not m.get("waiting_for_slot")]


def assert_waits(m, job_uuid, action, server=CN1):
    """The record `m` (a view's answer) says that job `job_uuid` waits for a slot."""
    w = m.get("waiting_for_slot")
    assert w, m
    assert (w["job_uuid"], w["action"], w["server_uuid"]) == (job_uuid, action, server), w
    assert w["resource"] == "migration-slot:" + server and w["message"] == WAIT_TEXT, w
    assert w["since"].endswith("Z") and w["ahead"] == 0, w
    p = m["progress"]
    assert (p["message"], p["state"], p["server_uuid"]) == (WAIT_TEXT, "waiting", server), p


def wait_waiting(vm_uuid, job_uuid):
    """The VM's migration once the view says that job waits (bounded)."""
    def waits():
        m = ml.migration(vm_uuid)
        w = m and m.get("waiting_for_slot")
        return m if w and w["job_uuid"] == job_uuid else None
    return wait_for(f"vm {vm_uuid}'s migration to wait for a slot", waits, timeout=15, every=0.05)


def sample_until(done, timeout=120.0, every=0.05):
    """Samples the running migrations until done(); asserts never more than the one slot
    of cn1 runs; answers how many samples saw one running."""
    deadline = time.monotonic() + timeout
    busy = 0
    while not done():
        running = running_now()
        assert len(running) <= 1, [(m["uuid"], m["phase"]) for m in running]
        busy += len(running)
        assert time.monotonic() < deadline, f"not done within {timeout} s"
        time.sleep(every)
    return busy


def cli_waits(ref, server=CN1):
    """`tern migration get REF` says it waits for a slot on that server."""
    out = lab.tern("migration", "get", ref).stdout
    print(f"tern migration get {ref}:\n{out}", flush=True)
    assert f"{WAIT_TEXT} on {server}" in out, out
    return out


def start_watch(ref):
    """`tern migration watch REF`, piped, in the background."""
    return subprocess.Popen([lab.tern_bin, "migration", "watch", ref], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=lab.env)


def end_watch(p, timeout=90):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"the watch did not end within {timeout} s:\n{out}\n{err}")
    assert p.returncode == 0, (p.returncode, out, err)
    print(f"tern migration watch:\n{out}", flush=True)
    return out


def finish(vm_uuid, writer):
    """Switches the paused migration of the VM and checks it ended on cn2 with its data
    (and the writer going on there)."""
    ml.ok_action("switch", vm_uuid, timeout=90)
    m = ml.wait_migration(vm_uuid, "successful")
    assert "waiting_for_slot" not in m, m
    ml.check_on(vm_uuid, CN2, running=True)
    if writer:
        status, n_source = ml.writer_records(CN1, vm_uuid)
        assert status == 0 and n_source > 0, (status, n_source)
        ml.same_disks(vm_uuid, CN1, CN2, writer_records=n_source)
        wait_for("the writer to go on on cn2",
                 lambda: ml.writer_records(CN2, vm_uuid)[1] > n_source + 5, timeout=15)
    else:
        ml.same_disks(vm_uuid, CN1, CN2)
    ml.ok_action("finalize", vm_uuid)
    return m


def test_a_sync_waits_for_the_slot():
    """A's sync holds cn1's one slot; B's sync off cn1 waits: B's record stays paused and
    says it waits for a slot on cn1 (API, list, get, watch) while A runs; never more
    than one runs; when A's pass ends, B's runs, the note is gone, and B switches with
    its data and its writer on cn2."""
    a, b = ml.provision(CN1, "idle"), ml.provision(CN1, "writer")
    ml.fill(CN1, a, 8)
    ml.fill(CN1, b, 4)
    for vm in (a, b):
        ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=SLOW)
        ml.wait_migration(vm, "paused")
    status, sync_a = ml.action("sync", a)
    assert status == 201, (status, sync_a)
    ml.wait_pass_bytes(a)
    status, sync_b = ml.action("sync", b)
    assert status == 201, (status, sync_b)

    m = wait_waiting(b, sync_b["uuid"])
    assert m["state"] == "paused" and m["num_sync_phases"] == 0, m
    assert_waits(m, sync_b["uuid"], "sync")
    assert_waits(view(m["uuid"]), sync_b["uuid"], "sync")
    assert_waits(view(b), sync_b["uuid"], "sync")              # by the VM's uuid
    assert "waiting_for_slot" not in view(ml.migration(a)["uuid"])
    assert lab.job_of(sync_b["uuid"])["blocked_on"] == "migration-slot:" + CN1
    out = cli_waits(b)
    assert sync_b["uuid"] in out, out
    rows = lab.tern("migration", "list").stdout
    print(f"tern migration list:\n{rows}", flush=True)
    line = [r for r in rows.splitlines() if r.startswith(m["uuid"][:8])]
    assert line and f"{WAIT_TEXT} on {CN1[:8]}" in line[0], rows
    watch = start_watch(b)

    busy = sample_until(lambda: lab.job_of(sync_b["uuid"])["execution"] != "queued")
    assert busy > 0                      # A was seen running while B waited
    done_a = lab.wait_job(sync_a["uuid"], timeout=60)
    assert done_a["execution"] == "succeeded", done_a
    # B's pass runs once A's ended, and no longer says it waits.
    sample_until(lambda: lab.job_of(sync_b["uuid"])["execution"] in ("succeeded", "failed"))
    done_b = lab.wait_job(sync_b["uuid"], timeout=60)
    assert done_b["execution"] == "succeeded", done_b
    first = done_b["chain_results"][0]
    assert first["started_at"] >= done_a["finished_at"], (done_a["finished_at"], first)
    m = ml.wait_migration(b, "paused")
    assert m["num_sync_phases"] == 1 and "waiting_for_slot" not in m, m
    assert m["last_sync_size"] >= 4 * MIB, m
    assert WAIT_TEXT not in lab.tern("migration", "get", b).stdout

    # The watch drew the wait, then B's pass, and ended with it.
    out = end_watch(watch)
    assert f"☐ {WAIT_TEXT} on {CN1[:8]}" in out, out
    assert out.index(WAIT_TEXT) < out.index("synchronizing filesystems"), out
    assert out.rstrip().endswith("Sync migration phase was successful."), out

    finish(b, writer=True)
    ml.ok_action("abort", a)
    ml.wait_migration(a, "aborted")
    lab.check_inventory()


def test_a_begin_waits_for_the_slot():
    """C's sync holds cn1's one slot; D's begin off cn1 waits before any record exists:
    asked about D's migration (the VM's list, GET /migrations/<its uuid>, `tern
    migration get D`), the answer is the begin, running in phase begin, waiting for a
    slot on cn1, and no claim was made (no record, the VM not marked, nothing
    committed on cn2). When C's pass ends the begin runs: the record is made, the note
    is gone; D then syncs and switches with its data on cn2."""
    c, d = ml.provision(CN1, "idle"), ml.provision(CN1, "writer")
    ml.fill(CN1, c, 8)
    ml.fill(CN1, d, 4)
    ml.ok_action("begin", c, target_server_uuid=CN2, send_mbps_limit=SLOW)
    ml.wait_migration(c, "paused")
    status, sync_c = ml.action("sync", c)
    assert status == 201, (status, sync_c)
    ml.wait_pass_bytes(c)
    committed = {s["uuid"]: s["ram_committed_mib"] for s in lab.list_all("/servers")}
    status, begin_d = ml.action("begin", d, target_server_uuid=CN2, send_mbps_limit=FAST)
    assert status == 201, (status, begin_d)

    m = wait_waiting(d, begin_d["uuid"])
    assert (m["uuid"], m["vm_uuid"], m["state"], m["phase"]) == \
        (begin_d["uuid"], d, "running", "begin"), m
    assert m["source_server_uuid"] == CN1 and m["job_uuid"] is None, m
    assert_waits(m, begin_d["uuid"], "begin")
    assert_waits(view(begin_d["uuid"]), begin_d["uuid"], "begin")
    assert_waits(view(d), begin_d["uuid"], "begin")
    # Nothing is claimed while it waits.
    assert lab.redis("EXISTS", "tern:p:dc:migration:" + begin_d["uuid"]) == ["0"]
    assert lab.vm_of(d).get("migrating") in (None, False)
    assert {s["uuid"]: s["ram_committed_mib"] for s in lab.list_all("/servers")} == committed
    # Not a migration of the lists by state: nothing of it runs.
    assert begin_d["uuid"] not in [r["uuid"] for r in running_now()]
    out = cli_waits(d)
    assert begin_d["uuid"] in out, out
    watch = start_watch(d)

    busy = sample_until(lambda: lab.job_of(begin_d["uuid"])["execution"] != "queued")
    assert busy > 0
    done_c = lab.wait_job(sync_c["uuid"], timeout=60)
    assert done_c["execution"] == "succeeded", done_c
    sample_until(lambda: lab.job_of(begin_d["uuid"])["execution"] in ("succeeded", "failed"))
    done_d = lab.wait_job(begin_d["uuid"], timeout=60)
    assert done_d["execution"] == "succeeded", done_d
    m = ml.wait_migration(d, "paused")
    assert m["uuid"] == begin_d["uuid"] and "waiting_for_slot" not in m, m
    first = done_d["chain_results"][0]
    assert first["started_at"] >= done_c["finished_at"], (done_c["finished_at"], first)
    assert WAIT_TEXT not in lab.tern("migration", "get", d).stdout

    out = end_watch(watch)
    assert f"☐ {WAIT_TEXT} on {CN1[:8]}" in out, out
    assert out.index(WAIT_TEXT) < out.index("making a reservation"), out
    assert out.rstrip().endswith("Begin migration phase was successful."), out

    ml.ok_action("sync", d, timeout=90)
    ml.wait_migration(d, "paused")
    finish(d, writer=True)
    ml.ok_action("abort", c)
    ml.wait_migration(c, "aborted")
    lab.check_inventory()


def test_a_wait_that_ends_without_its_slot():
    """A wait that ends otherwise than by a grant leaves no note behind: F's sync waits
    while E's pass holds cn1's slot, and F's abort cancels it (the record is aborted and
    no longer says it waits); G's begin waits and is canceled through the job API (no
    migration of G is shown any more: 404 by its uuid, none in G's list)."""
    e, f, g = (ml.provision(CN1, "idle") for _ in range(3))
    ml.fill(CN1, e, 8)
    for vm in (e, f):
        ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=SLOW)
        ml.wait_migration(vm, "paused")
    status, sync_e = ml.action("sync", e)
    assert status == 201, (status, sync_e)
    ml.wait_pass_bytes(e)
    status, sync_f = ml.action("sync", f)
    assert status == 201, (status, sync_f)
    status, begin_g = ml.action("begin", g, target_server_uuid=CN2)
    assert status == 201, (status, begin_g)
    wait_waiting(f, sync_f["uuid"])
    m = wait_waiting(g, begin_g["uuid"])
    assert m["waiting_for_slot"]["ahead"] == 1, m     # behind F's sync in cn1's line

    ml.ok_action("abort", f)
    m = m_f = ml.wait_migration(f, "aborted")
    assert "waiting_for_slot" not in m and (m.get("progress") or {}).get("state") != "waiting", m
    assert lab.job_of(sync_f["uuid"])["execution"] == "canceled"
    assert WAIT_TEXT not in lab.tern("migration", "get", f).stdout

    status, body = lab.http(f"/jobs/{begin_g['uuid']}/cancel", "POST", {})
    assert status == 200, (status, body)
    assert lab.wait_job(begin_g["uuid"], timeout=30)["execution"] == "canceled"
    status, body = lab.http("/migrations/" + begin_g["uuid"])
    assert (status, body.get("code")) == (404, "MigrationNotFound"), (status, body)
    assert ml.migration(g) is None
    assert lab.tern("migration", "get", g, check=False).returncode != 0

    # F begun again while E still holds the slot: paged one by one, F's list gives the
    # waiting begin and then the aborted record (the limit counts records, so the page
    # of the waiting begin still has a marker to go on from).
    status, again_f = ml.action("begin", f, target_server_uuid=CN2)
    assert status == 201, (status, again_f)
    wait_waiting(f, again_f["uuid"])
    rows, marker = [], None
    for _ in range(10):
        q = f"/migrations?vm_uuid={f}&limit=1" + (f"&marker={marker}" if marker else "")
        status, page, h = lab.http(q, headers=True)
        assert status == 200, (status, page)
        rows.extend(page)
        marker = h.get("x-tern-next-marker")
        if not marker:
            break
    assert [(r["uuid"], r["state"]) for r in rows] == \
        [(again_f["uuid"], "running"), (m_f["uuid"], "aborted")], rows
    assert "waiting_for_slot" in rows[0], rows[0]
    status, body = lab.http(f"/jobs/{again_f['uuid']}/cancel", "POST", {})
    assert status == 200, (status, body)
    assert lab.wait_job(again_f["uuid"], timeout=30)["execution"] == "canceled"

    assert lab.wait_job(sync_e["uuid"], timeout=60)["execution"] == "succeeded"
    ml.ok_action("abort", e)
    ml.wait_migration(e, "aborted")
    lab.check_inventory()


ml.run([test_a_sync_waits_for_the_slot, test_a_begin_waits_for_the_slot,
        test_a_wait_that_ends_without_its_slot], only=sys.argv[3:])
