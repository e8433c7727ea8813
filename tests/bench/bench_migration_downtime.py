#!/usr/bin/env python3
"""bench_migration_downtime.py -- the downtime of an automatic migration: how long the
instance does not run between the source's stop and the target's start.

Starts a lab of its own (tools/lab up in a temporary directory: Redis, the control,
two agents) on two servers and a flexible package whose instances have a boot disk
from a sparse image and a data disk of DISK MiB (4096: a 4 GiB apparent size). Each run
provisions a fresh instance on cn1 running the writer workload at RATE MiB/s (the
lab's `writer_records_per_s` setting: 2048 records of 512 B a second is 1 MiB/s),
writes DATA MiB of random data into its data disk at 1 GiB (1024 MiB by default: a
disk a quarter full, the data a pass and the verify must read and hash, with the
writer's records growing from offset 0 and holes around both), lets the writer run,
then runs `migrate-automatic` to cn2 and waits for it.

The downtime is read from the data plane, as the guest sees it: the writer stamps each
record with the time (ms) and its pid, so on the target's disk the last record of the
source's writer and the first of the target's bound the time no writer ran (the gap
in its sequence; `tern-workload verify` checks that no record is missing). It is
cross-checked with the switch's own record: the job's steps from `step_stopping` to
`start` (started_at, finished_at), grouped as the switch's phases -- stop, final
pass, verify, swap, flip (hide the source, show the target), start -- each its steps'
own time and the wait between them (queue latency, moving between the control's and
the two agents' queues). The final pass's size is the record's `last_sync_size`.

The baseline, measured in the same run on the same file: one sha256 of the source
disk's data extents (what each of the final pass, which hashes every block the target
holds, and the verify, which hashes every disk on both sides, costs at least), and
one `cp --sparse=always` of the disk. Reported: medians over RUNS of each figure, and
downtime / sha256 as the ratio.

Usage: tests/bench/bench_migration_downtime.py [-r RUNS] [--data-mib N] [--disk-mib N]
       [--rate-mibps N] [--build DIR]
Prints a table per run, the medians, and one JSON line.
"""
import argparse
import datetime
import hashlib
import json
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from lab_harness import MIB, Lab, pid_alive, wait_for, workload_pids  # noqa: E402

CN1, CN2 = "a0000000-0000-4000-8000-0000000000d1", "a0000000-0000-4000-8000-0000000000d2"
NET = "b0000000-0000-4000-8000-0000000000d1"
PKG = "c0000000-0000-4000-8000-0000000000d1"
IMG = "d0000000-0000-4000-8000-0000000000d1"
OWNER = "6b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
BOOT_MIB = 64
FILL_AT_MIB = 1024       # the random data's offset: far past the writer's records
RECORD = 512             # tern-workload's record size
RECORDS_PER_MIB = MIB // RECORD

# The switch's steps in migrate-automatic, from the source's stop to the target's start,
# grouped as its phases.
PHASES = [
    ("stop", ["step_stopping", "stop"]),
    ("final pass", ["recv_open_final", "send_final", "step_synced"]),
    ("verify", ["verify", "step_verified"]),
    ("swap", ["swap"]),
    ("flip", ["hide_source", "show_target"]),
    ("start", ["step_starting", "start"]),
]


def description(disk_mib, rate_mibps):
    return {
        "servers": [
            {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 16384,
             "disk_mib": 1048576, "data_root": "servers/cn1"},
            {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 16384,
             "disk_mib": 1048576, "data_root": "servers/cn2"},
        ],
        "networks": [
            {"uuid": NET, "name": "external", "subnet": "198.51.100.0/24",
             "gateway": "198.51.100.1", "provision_start_ip": "198.51.100.10",
             "provision_end_ip": "198.51.100.250", "vlan_id": 0, "mtu": 1500},
        ],
        "packages": [
            {"uuid": PKG, "name": "flex-bench", "brand": "bhyve", "ram_mib": 1024,
             "vcpus": 1, "disk_mib": BOOT_MIB + disk_mib, "flexible_disk": True},
        ],
        "images": [
            {"uuid": IMG, "name": "bench-mig", "version": "1.0", "size_mib": BOOT_MIB,
             "data_mib": 4, "file": "images/bench-mig.img", "brand": "bhyve"},
        ],
        # The shipped defaults of every migration setting: the figure is an operator's.
        "settings": {"writer_records_per_s": rate_mibps * RECORDS_PER_MIB},
    }


def ms_of(iso):
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000.0


def writer_log(path):
    """[(number, unix ms, pid)] of the writer's records on a disk, from slot 0 to the
    first slot without one."""
    out = []
    with open(path, "rb") as f:
        while True:
            buf = f.read(MIB)
            for off in range(0, len(buf) - RECORD + 1, RECORD):
                if buf[off:off + 4] != b"TWRK":
                    return out
                number, ms, pid = struct.unpack_from("<QQQ", buf, off + 8)
                out.append((number, ms, pid))
            if len(buf) < MIB:
                return out


def guest_gap(records, source_pid):
    """(last record time of the source's writer, first of the next writer) in ms."""
    last = max(ms for _, ms, pid in records if pid == source_pid)
    after = [ms for _, ms, pid in records if pid != source_pid and ms >= last]
    if not after:
        raise SystemExit("no record of the target's writer after the source's last")
    return last, min(after)


class ProcessWatch:
    """Samples, every 5 ms in a thread, when the source's workload pid is last seen
    alive and when a workload is first seen on the target: the process view of the
    downtime, to set beside the records'. Bounded by stop()."""

    def __init__(self, source_pid, target_dir):
        self.source_pid, self.target_dir = source_pid, target_dir
        self.source_gone_ms = self.target_seen_ms = None
        self.flag = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.flag.is_set():
            now = time.time() * 1000.0
            if self.source_gone_ms is None and not pid_alive(self.source_pid):
                self.source_gone_ms = now
            if self.target_seen_ms is None and os.path.isdir(self.target_dir) and \
                    workload_pids(self.target_dir):
                self.target_seen_ms = now
            if self.source_gone_ms is not None and self.target_seen_ms is not None:
                return
            time.sleep(0.005)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.flag.set()
        self.thread.join(timeout=10)


def data_digest(path):
    """sha256 of the file's data extents only (SEEK_DATA/SEEK_HOLE), as a block walk
    reads them: holes cost nothing, as they cost the transfer nothing."""
    h = hashlib.sha256()
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while off < size:
            try:
                off = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:   # ENXIO: no data past off
                break
            end = min(os.lseek(fd, off, os.SEEK_HOLE), size)
            while off < end:
                chunk = os.pread(fd, min(MIB, end - off), off)
                if not chunk:
                    break
                h.update(chunk)
                off += len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def timed(fn):
    t0 = time.monotonic()
    v = fn()
    return (time.monotonic() - t0) * 1000.0, v


def fill(path, mib):
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(mib):
            os.pwrite(fd, os.urandom(MIB), (FILL_AT_MIB + i) * MIB)
        os.fsync(fd)
    finally:
        os.close(fd)


def run_job(lab, workflow, target, params, timeout):
    status, job = lab.create_job(workflow, target, params)
    if status not in (200, 201):
        raise SystemExit(f"{workflow}: refused: {status} {job}")
    job = lab.wait_job(job["uuid"], timeout=timeout)
    if job["execution"] != "succeeded":
        raise SystemExit(f"{workflow}: {job['execution']}: {json.dumps(job.get('error'))}")
    return job


def breakdown(job):
    """{phase: (own ms, wait ms)} of the switch's steps, and the switch's span (the stop
    step's start to the start step's end) in ms."""
    steps = {r["name"]: r for r in job["chain_results"]}
    order = [n for _, names in PHASES for n in names]
    for n in order:
        if n not in steps or not steps[n].get("started_at") or not steps[n].get("finished_at"):
            raise SystemExit(f"job {job['uuid']}: no timed step {n}")
    out, prev_end = {}, None
    for phase, names in PHASES:
        own = wait = 0.0
        for n in names:
            s, e = ms_of(steps[n]["started_at"]), ms_of(steps[n]["finished_at"])
            own += e - s
            if prev_end is not None:
                wait += s - prev_end
            prev_end = e
        out[phase] = (own, wait)
    span = ms_of(steps["start"]["finished_at"]) - ms_of(steps["stop"]["started_at"])
    return out, span, steps


def one_run(lab, args, n):
    vm = str(uuidlib.uuid4())
    params = {"vm_uuid": vm, "owner_uuid": OWNER, "package": PKG, "image_uuid": IMG,
              "networks": [{"uuid": NET, "primary": True}], "server_uuid": CN1,
              "autoboot": True, "disks": [{}, {"size": args.disk_mib}],
              "customer_metadata": {"lab:workload": "writer"}}
    run_job(lab, "provision", "/provision-" + vm, params, timeout=120)
    src_dir, dst_dir = lab.vm_dir(CN1, vm), lab.vm_dir(CN2, vm)
    src_pid = wait_for("the source's writer", lambda: workload_pids(src_dir), timeout=15)[0]
    disk = os.path.join(src_dir, "disks", "disk1.img")
    assert os.path.getsize(disk) == args.disk_mib * MIB, os.path.getsize(disk)
    fill(disk, args.data_mib)

    # The baseline, on the same file while the writer runs, as the migration will.
    sha_ms, _ = timed(lambda: data_digest(disk))
    copy = os.path.join(lab.dir, "baseline-copy.img")
    cp_ms, _ = timed(lambda: subprocess.run(["cp", "--sparse=always", disk, copy], check=True))
    os.unlink(copy)

    watch = ProcessWatch(src_pid, dst_dir).start()
    t0 = time.monotonic()
    job = run_job(lab, "migrate-automatic", "/migrate-automatic-" + vm,
                  {"vm_uuid": vm, "target_server_uuid": CN2}, timeout=args.timeout)
    total_s = time.monotonic() - t0
    watch.stop()
    status, m = lab.http("/migrations?vm_uuid=" + vm)
    assert status == 200 and m and m[0]["state"] == "successful", (status, m)
    m = m[0]

    dst_disk = os.path.join(dst_dir, "disks", "disk1.img")
    # The target's writer goes on: wait until it has written past its first second.
    dst_pid = wait_for("the target's writer", lambda: workload_pids(dst_dir), timeout=15)[0]
    p = subprocess.run([os.path.join(lab.build, "lab", "tern-workload"), "verify", dst_disk],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"run {n}: the target's records have a gap or a broken record: "
                         f"{p.stdout.strip()[-200:]}")
    records = writer_log(dst_disk)
    last_src, first_dst = guest_gap(records, src_pid)
    guest_ms = first_dst - last_src
    # The load the guest put on the disk: the source's writer's records over its life.
    mine = [ms for _, ms, pid in records if pid == src_pid]
    write_mibps = (len(mine) - 1) * RECORD / MIB / ((max(mine) - min(mine)) / 1000.0)
    phases, span, steps = breakdown(job)
    proc_ms = (watch.target_seen_ms - watch.source_gone_ms
               if watch.target_seen_ms and watch.source_gone_ms else None)
    r = {
        "run": n, "vm": vm, "downtime_ms": guest_ms, "switch_span_ms": span,
        "process_ms": proc_ms,
        # How far the records' bounds sit inside the steps': the stop step starts before
        # the source's last record, the start step ends after the target's first.
        "stop_to_last_record_ms": last_src - ms_of(steps["stop"]["started_at"]),
        "first_record_to_start_end_ms": first_dst - ms_of(steps["start"]["finished_at"]),
        "phases": {k: {"own_ms": v[0], "wait_ms": v[1]} for k, v in phases.items()},
        "final_pass_bytes": m.get("last_sync_size"), "passes": m.get("num_sync_phases"),
        "switch_reason": m.get("switch_reason"), "migration_s": total_s,
        "sha256_ms": sha_ms, "cp_ms": cp_ms, "ratio": guest_ms / sha_ms,
        "target_pid": dst_pid, "write_mibps": write_mibps,
    }
    # Leave nothing behind for the next run: the source's copy, then the instance.
    run_job(lab, "migrate-finalize", "/migrate-finalize-" + vm, {"vm_uuid": vm}, timeout=120)
    run_job(lab, "vm-delete", "/delete-" + vm, {"vm_uuid": vm}, timeout=120)
    return r


def show(r):
    print(f"run {r['run']}: downtime {r['downtime_ms']:.0f} ms (writer's records), "
          f"processes {r['process_ms'] or float('nan'):.0f} ms, switch steps "
          f"{r['switch_span_ms']:.0f} ms; final pass {r['final_pass_bytes']} B after "
          f"{r['passes']} passes ({r['switch_reason']}); migration {r['migration_s']:.1f} s; "
          f"sha256 {r['sha256_ms']:.0f} ms, cp {r['cp_ms']:.0f} ms; ratio {r['ratio']:.2f}; "
          f"the writer wrote {r['write_mibps']:.2f} MiB/s",
          flush=True)
    for k, v in r["phases"].items():
        print(f"    {k:<11} own {v['own_ms']:7.0f} ms   wait {v['wait_ms']:6.0f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-r", "--runs", type=int, default=3)
    ap.add_argument("--data-mib", type=int, default=1024)
    ap.add_argument("--disk-mib", type=int, default=4096)
    ap.add_argument("--rate-mibps", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="per migration, s")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if not 1 <= args.runs <= 50:
        ap.error("-r: expected 1 to 50 runs")
    if not 1 <= args.rate_mibps <= 48:    # tern-workload's --rate: at most 100000 records/s
        ap.error("--rate-mibps: expected 1 to 48")
    if not 0 <= args.data_mib or FILL_AT_MIB + args.data_mib > args.disk_mib:
        ap.error(f"--data-mib: the data goes at {FILL_AT_MIB} MiB and must fit in the disk")
    lab = Lab(ROOT, os.path.abspath(args.build), description(args.disk_mib, args.rate_mibps),
              prefix="tern-bench-downtime-")
    ok, runs = False, []
    try:
        lab.up()
        for n in range(1, args.runs + 1):
            runs.append(one_run(lab, args, n))
            show(runs[-1])
        ok = True
    finally:
        lab.finish(ok)

    def med(f):
        vals = [f(r) for r in runs if f(r) is not None]
        return statistics.median(vals) if vals else None
    summary = {
        "runs": len(runs), "disk_mib": args.disk_mib, "data_mib": args.data_mib,
        "rate_mibps": args.rate_mibps, "write_mibps": med(lambda r: r["write_mibps"]),
        "downtime_ms": med(lambda r: r["downtime_ms"]),
        "process_ms": med(lambda r: r["process_ms"]),
        "switch_span_ms": med(lambda r: r["switch_span_ms"]),
        "final_pass_bytes": med(lambda r: r["final_pass_bytes"]),
        "sha256_ms": med(lambda r: r["sha256_ms"]), "cp_ms": med(lambda r: r["cp_ms"]),
        "ratio": med(lambda r: r["ratio"]),
        "phases": {k: {"own_ms": med(lambda r: r["phases"][k]["own_ms"]),
                       "wait_ms": med(lambda r: r["phases"][k]["wait_ms"])}
                   for k, _ in PHASES},
    }
    print(f"median of {len(runs)}: downtime {summary['downtime_ms']:.0f} ms "
          f"(target < 2000), sha256 of the data {summary['sha256_ms']:.0f} ms, "
          f"ratio {summary['ratio']:.2f}")
    for k, v in summary["phases"].items():
        print(f"    {k:<11} own {v['own_ms']:7.0f} ms   wait {v['wait_ms']:6.0f} ms")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
