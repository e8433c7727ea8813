#!/usr/bin/env python3
"""The passes of a migration on two labs of three servers (migration_lab.py), each
checked on the data plane (the disks' sizes, st_blocks and sha256 on both data roots,
the writer's records, the processes) as well as in the records:

Lab A (convergence at 2 MiB, at most 10 passes, stalled after 2 passes shrinking by
less than 10%):
  6   a pass after 10 MiB written sends about those 10 MiB, not the disk;
  7   a slow workload switches on `size`; a workload faster than the link switches on
      `stalled`, never past the maximum of passes;
  31  a disk grown by disk-resize before the migration arrives grown, holes kept, and
      the servers' committed disk moves by the VM's allocation.
Lab B (migration_send_mbps_limit 80, at most 3 passes, the stall rule out of reach):
  7   a workload faster than the link switches on `max_passes` after exactly 3 passes;
  20  a pass of 100 MiB takes >= 9.5 s and reports <= 10.5 MB/s;
  5   two watchers of GET /migrations/:uuid/watch get the same events and one end
      event; a third that hangs up midway changes nothing; `tern migration watch`
      follows it to "Migration was successful.".

Usage: test_migration_sync.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the
build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

import migration_lab as ml
from migration_lab import CN1, CN2
from lab_harness import MIB, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
FAST = 800  # Mbit/s: passes nothing acts on midway

LAB_A = {"migration_converge_max_mib": 2, "migration_converge_max_passes": 10,
         "migration_converge_stall_passes": 2, "migration_converge_min_reduction_pct": 10}
# stall_passes above max_passes: only the count of passes can end the converging.
LAB_B = {"migration_send_mbps_limit": 80, "migration_converge_max_mib": 2,
         "migration_converge_max_passes": 3, "migration_converge_stall_passes": 1000}


def servers():
    return {s["uuid"]: s for s in ml.lab.list_all("/servers")}


def converge_result(job):
    """The converging send's result in a finished migrate-automatic job: {passes,
    switch_reason, ...}."""
    for r in job.get("chain_results", []):
        res = r.get("result")
        if isinstance(res, dict) and res.get("switch_reason") and "passes" in res:
            return res
    raise AssertionError(("no converging send in the job", job.get("chain_results")))


def check_moved(vm, n_source=None):
    """The VM runs on cn2 with the source's data (holes kept) and the writer's records
    whole on both sides: what every migration here ends with."""
    ml.check_on(vm, CN2, running=True)
    assert not ml.workload_alive(CN1, vm)
    status, n = ml.writer_records(CN1, vm)
    assert status == 0 and n > 0, ("the source's records", status, n)
    ml.same_disks(vm, CN1, CN2, writer_records=n)
    wait_for("the writer to go on on cn2", lambda: ml.writer_records(CN2, vm)[1] > n,
             timeout=15)
    status, n2 = ml.writer_records(CN2, vm)
    assert status == 0, ("a record missing or out of place on cn2", n2)
    return n


class Churn:
    """Rewrites `mib` MiB of the source's data disk at FILL_AT_MIB with fresh random
    bytes, 1 MiB at a time, as fast as it can: a guest dirtying its disk faster than
    any pass can send it. It stops by itself once the converging passes decided
    (the record's switch_reason) or the VM's workload stopped, so nothing writes
    during the final pass of the stopped source; stop() waits for it."""

    def __init__(self, vm, mib=6):
        self.vm, self.mib = vm, mib
        self.path = os.path.join(ml.vm_dir(CN1, vm), "disks", "disk1.img")
        self.flag = threading.Event()
        self.rounds, self.error = 0, None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _decided(self):
        m = ml.migration(self.vm)
        return (m is not None and m.get("switch_reason")) or not ml.workload_alive(CN1, self.vm)

    def _loop(self):
        deadline = time.monotonic() + 120
        fd = os.open(self.path, os.O_WRONLY)
        try:
            while not self.flag.is_set() and time.monotonic() < deadline:
                for i in range(self.mib):
                    if self._decided():
                        return
                    os.pwrite(fd, os.urandom(MIB), (ml.FILL_AT_MIB + i) * MIB)
                self.rounds += 1
        except Exception as e:  # noted; stop() fails the test on it
            self.error = repr(e)
        finally:
            os.close(fd)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.flag.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the churn did not stop"
        assert self.error is None, self.error
        return self.rounds


# ---- lab A ---------------------------------------------------------------------------

def test_6_incremental_pass_sends_what_changed():
    """Test 6: pass 1 sends the disk's data; 10 MiB written between passes (while the
    VM's writer goes on) make pass 2 send about 10 MiB: under 3 x 10 MiB and well
    under the disk's data."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 48)
    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.ok_action("sync", vm)
    m = ml.wait_migration(vm, "paused")
    first = m["last_sync_size"]
    assert m["num_sync_phases"] == 1 and first >= 48 * MIB, m
    ml.fill(CN1, vm, 10, at_mib=ml.FILL_AT_MIB + 64)        # new data in a former hole
    ml.ok_action("sync", vm)
    m = ml.wait_migration(vm, "paused")
    second = m["last_sync_size"]
    assert m["num_sync_phases"] == 2, m
    assert 10 * MIB <= second < 3 * 10 * MIB, (second, m)
    assert second < first // 2, (first, second)
    # What the target holds is what the source held at the pass: the filled ranges.
    for lo in (ml.FILL_AT_MIB, ml.FILL_AT_MIB + 64):
        paths = [os.path.join(ml.vm_dir(s, vm), "disks", "disk1.img") for s in (CN1, CN2)]
        digests = {ml.file_digest(p, lo * MIB, (lo + 10) * MIB) for p in paths}
        assert len(digests) == 1, (lo, digests)
    ml.ok_action("switch", vm, timeout=90)
    m = ml.wait_migration(vm, "successful")
    assert m["num_sync_phases"] == 3, m
    check_moved(vm)
    print(f"  pass 1 {first / MIB:.1f} MiB, pass 2 {second / MIB:.2f} MiB", flush=True)


def test_7_slow_workload_switches_on_size():
    """Test 7: with the writer alone (a few KiB a second), the first pass sends the
    filled data (over the 2 MiB max) and the next is under it: switch_reason size,
    two converging passes."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 8)
    job = ml.ok_action("automatic", vm, target_server_uuid=CN2, send_mbps_limit=FAST,
                       timeout=120)
    m = ml.wait_migration(vm, "successful")
    res = converge_result(job)
    sizes = [p["bytes"] for p in res["passes"]]
    assert m["switch_reason"] == "size" == res["switch_reason"], (m, res)
    assert sizes[0] >= 8 * MIB and sizes[-1] <= 2 * MIB, sizes
    assert all(s > 2 * MIB for s in sizes[:-1]), sizes
    assert len(sizes) == 2 and m["num_sync_phases"] == len(sizes) + 1, (sizes, m)
    check_moved(vm)
    print(f"  passes {[round(s / MIB, 2) for s in sizes]} MiB", flush=True)


def test_7_fast_workload_switches_on_stalled():
    """Test 7: a guest rewriting 6 MiB faster than the link sends ~6 MiB every pass:
    after two passes that did not shrink by 10% the migration switches on `stalled`,
    before the 10 passes allowed; the data still arrives whole."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 6)
    churn = Churn(vm).start()
    try:
        job = ml.ok_action("automatic", vm, target_server_uuid=CN2, send_mbps_limit=160,
                           timeout=120)
    finally:
        rounds = churn.stop()
    m = ml.wait_migration(vm, "successful")
    res = converge_result(job)
    sizes = [p["bytes"] for p in res["passes"]]
    assert m["switch_reason"] == "stalled" == res["switch_reason"], (m, res, sizes)
    assert 3 <= len(sizes) < 10, sizes
    assert m["num_sync_phases"] == len(sizes) + 1, (sizes, m)
    assert all(s > 2 * MIB for s in sizes), sizes
    for before, now in zip(sizes[-3:-1], sizes[-2:]):      # the stall the rule saw
        assert now * 100 > before * 90, sizes
    check_moved(vm)
    print(f"  passes {[round(s / MIB, 2) for s in sizes]} MiB, {rounds} rewrites", flush=True)


def test_31_resized_disk_migrates_grown():
    """Test 31: a data disk grown from 128 to 256 MiB (disk-resize) with data past its
    old end: the target's file is 256 MiB, holes kept, the same contents; cn2's
    committed disk rose by the VM's allocation and cn1's fell by it at the success,
    and stays so after finalize."""
    vm = ml.provision(CN1, "writer", data_mib=128)
    job = ml.lab.run_job("disk-resize", "/disk-resize-" + vm,
                         {"vm_uuid": vm, "pci_slot": "0:4:1", "size": 256}, timeout=60)
    assert job["execution"] == "succeeded", job
    data = os.path.join(ml.vm_dir(CN1, vm), "disks", "disk1.img")
    assert os.stat(data).st_size == 256 * MIB
    ml.fill(CN1, vm, 8, at_mib=200)                           # past the old end
    alloc = ml.lab.vm_of(vm)["allocation"]
    sizes = [d["size"] for d in ml.lab.vm_of(vm)["disks"]]
    total = sum(sizes)
    assert alloc["disk"] >= total >= 64 + 256, (alloc, ml.lab.vm_of(vm)["disks"])
    cap0 = servers()
    ml.ok_action("automatic", vm, target_server_uuid=CN2, send_mbps_limit=FAST, timeout=120)
    m = ml.wait_migration(vm, "successful")
    check_moved(vm)
    b = ml.disks(CN2, vm)["disk1.img"]
    assert b["size"] == 256 * MIB, b
    assert b["blocks"] * 512 < 64 * MIB, ("holes not kept", b)
    assert [d["size"] for d in ml.lab.vm_of(vm)["disks"]] == sizes == [64, 256], sizes
    cap1 = servers()
    for when, cap in (("success", cap1), ("finalize", None)):
        if cap is None:
            ml.ok_action("finalize", vm)
            cap = servers()
            assert ml.vm_json(CN1, vm) is None, "the source's copy is still there"
        assert cap[CN2]["disk_committed_mib"] == \
            cap0[CN2]["disk_committed_mib"] + alloc["disk"], (when, cap[CN2], alloc)
        assert cap[CN1]["disk_committed_mib"] == \
            cap0[CN1]["disk_committed_mib"] - alloc["disk"], (when, cap[CN1], alloc)
    assert ml.lab.vm_of(vm)["allocation"]["disk"] == alloc["disk"]
    assert m["phase"] == "switch", m
    ml.lab.check_inventory()


# ---- lab B ---------------------------------------------------------------------------

def test_7_fast_workload_switches_on_max_passes():
    """Test 7: with the stall rule out of reach, a guest dirtying its disk faster than
    the link switches after exactly the 3 passes allowed (switch_reason max_passes)."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 6)
    churn = Churn(vm).start()
    try:
        job = ml.ok_action("automatic", vm, target_server_uuid=CN2, send_mbps_limit=160,
                           timeout=120)
    finally:
        churn.stop()
    m = ml.wait_migration(vm, "successful")
    res = converge_result(job)
    sizes = [p["bytes"] for p in res["passes"]]
    assert m["switch_reason"] == "max_passes" == res["switch_reason"], (m, res)
    assert len(sizes) == 3 and m["num_sync_phases"] == 4, (sizes, m)
    assert all(s > 2 * MIB for s in sizes), sizes
    check_moved(vm)
    print(f"  passes {[round(s / MIB, 2) for s in sizes]} MiB", flush=True)


def test_20_rate_limit_of_the_settings():
    """Test 20: migration_send_mbps_limit 80 (10^7 bytes/s) and a pass of 100 MiB: it
    takes at least 9.5 s by the wall clock and by its own count, and every rate it
    reports is at most 10.5 MB/s."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 100)
    ml.ok_action("begin", vm, target_server_uuid=CN2)
    m = ml.wait_migration(vm, "paused")
    assert m["send_mbps_limit"] == 80, m
    status, job = ml.action("sync", vm)
    assert status == 201, (status, job)
    t0 = time.monotonic()
    rates = []
    deadline = t0 + 60
    while ml.lab.job_of(job["uuid"])["execution"] not in ("succeeded", "failed", "canceled"):
        assert time.monotonic() < deadline, "the 100 MiB pass did not end within 60 s"
        p = (ml.migration(vm) or {}).get("progress") or {}
        if p.get("transfer_bytes_second"):
            rates.append(p["transfer_bytes_second"])
        time.sleep(0.2)
    took = time.monotonic() - t0
    job = ml.lab.job_of(job["uuid"])
    assert job["execution"] == "succeeded", job
    m = ml.wait_migration(vm, "paused")
    assert m["last_sync_size"] >= 100 * MIB, m
    assert took >= 9.5, took
    passes = [p for r in job["chain_results"] if isinstance(r.get("result"), dict)
              for p in r["result"].get("passes", [])]
    assert len(passes) == 1 and passes[0]["duration_ms"] >= 9500, passes
    assert passes[0]["bytes"] * 1000 / passes[0]["duration_ms"] <= 10.5e6, passes
    assert rates and max(rates) <= 10.5e6, rates
    ml.ok_action("switch", vm, timeout=90)
    ml.wait_migration(vm, "successful")
    check_moved(vm)
    print(f"  100 MiB in {took:.1f} s, rates {min(rates)}..{max(rates)} B/s", flush=True)


def watch_lines(mig_uuid, out, hang_up_after=None, timeout=90):
    """Reads GET /migrations/:uuid/watch into `out` (decoded lines; the keep-alive
    empty lines skipped) until the server ends it, or after `hang_up_after` live byte
    counts (progress lines with a rate) when given; out["error"] notes what went
    wrong."""
    url = urllib.parse.urlparse(ml.lab.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("GET", f"/migrations/{mig_uuid}/watch")
        resp = conn.getresponse()
        out["status"] = resp.status
        progress = 0
        for _ in range(100000):
            raw = resp.readline()
            if not raw:
                break
            if raw.strip() == b"":
                continue
            out["lines"].append(json.loads(raw))
            if "transfer_bytes_second" in out["lines"][-1]:
                progress += 1
            if hang_up_after is not None and progress >= hang_up_after:
                break
    except Exception as e:  # noted; the test fails on it
        out["error"] = repr(e)
    finally:
        conn.close()


def test_5_watchers():
    """Test 5: an automatic migration of 40 MiB at 10 MB/s watched by two clients at
    once, a third that hangs up after the first bytes moved and `tern migration
    watch`: the two see the same valid NDJSON, sync progress in bytes rising towards
    its total at a rate > 0, and exactly one end event, the success; the CLI ends with
    "Migration was successful."; the migration is not disturbed by the hang-up."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 40)
    status, job = ml.action("automatic", vm, target_server_uuid=CN2)
    assert status == 201, (status, job)
    m = wait_for("the migration's record", lambda: ml.migration(vm), timeout=30)
    outs = [{"lines": []} for _ in range(3)]
    threads = [threading.Thread(target=watch_lines, args=(m["uuid"], outs[i]),
                                kwargs={"hang_up_after": 1 if i == 2 else None}, daemon=True)
               for i in range(3)]
    for t in threads:
        t.start()
    cli = subprocess.Popen([ml.lab.tern_bin, "migration", "watch", m["uuid"]],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=ml.lab.env)
    job = ml.lab.wait_job(job["uuid"], timeout=120)
    assert job["execution"] == "succeeded", job
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a watcher did not end after the migration"
    cli_out, cli_err = cli.communicate(timeout=30)
    m = ml.wait_migration(vm, "successful")
    for o in outs:
        assert o.get("error") is None and o["status"] == 200, o
    a, b, gone = outs[0]["lines"], outs[1]["lines"], outs[2]["lines"]
    assert len(gone) >= 1 and not [e for e in gone if e["type"] == "end"], gone
    for lines in (a, b):
        ends = [e for e in lines if e["type"] == "end"]
        assert ends == [{"type": "end", "phase": "switch", "state": "successful"}], ends
        assert lines[-1]["type"] == "end", lines[-1]
        live = [e for e in lines if e["type"] == "progress" and "transfer_bytes_second" in e]
        assert all(e["phase"] == "sync" and e["state"] == "running" for e in live), live
        assert any(e["transfer_bytes_second"] > 0 for e in live), live
        # Pass 1's byte counts rise towards its total, which its end entry reaches.
        done = [e for e in lines if e["phase"] == "sync" and e.get("pass") == 1]
        assert len(done) == 1 and done[0]["state"] == "successful", done
        total = done[0]["total_progress"]
        assert total >= 40 * MIB and done[0]["current_progress"] == total, done
        first = [e for e in live if e["total_progress"] == total]
        assert len(first) >= 2, ("pass 1 reported fewer than two byte counts", live)
        cur = [e["current_progress"] for e in first]
        assert cur == sorted(cur) and len(set(cur)) == len(cur), cur
        assert 0 < cur[0] and cur[-1] <= total, (cur, total)
    # The same events. A watch starts from the record's history and the latest byte
    # count, so the watcher that connected later may lack at most one live count.
    def is_live(e):
        return "transfer_bytes_second" in e
    assert [e for e in a if not is_live(e)] == [e for e in b if not is_live(e)], (a, b)
    la, lb = ([json.dumps(e, sort_keys=True) for e in x if is_live(e)] for x in (a, b))
    short, long_ = sorted((la, lb), key=len)
    assert set(short) <= set(long_) and len(long_) - len(short) <= 1, (la, lb)
    assert cli.returncode == 0, (cli.returncode, cli_out, cli_err)
    assert "Migration was successful." in cli_out, cli_out
    assert m["num_sync_phases"] >= 2, m
    check_moved(vm)
    print(f"  {len(a)} and {len(b)} lines, the third hung up after {len(gone)}", flush=True)


if __name__ == "__main__":
    only = sys.argv[3:]
    for prefix, settings, tests in (
            ("tern-migration-sync-a-", LAB_A,
             [test_6_incremental_pass_sends_what_changed, test_7_slow_workload_switches_on_size,
              test_7_fast_workload_switches_on_stalled, test_31_resized_disk_migrates_grown]),
            ("tern-migration-sync-b-", LAB_B,
             [test_7_fast_workload_switches_on_max_passes, test_20_rate_limit_of_the_settings,
              test_5_watchers])):
        if only and not [t for t in tests if t.__name__ in only]:
            continue  # no lab brought up for none of its tests
        ml.open_lab(SOURCE, BUILD, prefix, settings=settings)
        ml.run(tests, only=only)
