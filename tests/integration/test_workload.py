#!/usr/bin/env python3
"""tern-workload as an instance runs it: a daemonized writer that is nobody's child,
killed -9 and started again, goes on after its last whole record (a torn one at the
tail written over), and `verify` proves that no record went missing or came twice.
Also: one writer per disk, a clean stop on SIGTERM, a full disk, the idle workload,
and verify's refusals of a gap and of a repeated record.

Usage: test_workload.py PATH_TO_TERN_WORKLOAD. Every wait is bounded and polls the
event it waits for; every process started is stopped by its pid.
"""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import wait_for  # noqa: E402

RECORD = 512
WORKLOAD = sys.argv[1]
started = []  # pids this test started, stopped at the end whatever happens


def run(*args, check=True):
    p = subprocess.run([WORKLOAD, *args], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise AssertionError(f"tern-workload {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p


def alive(pid):
    """A live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def read_pid(pidfile):
    with open(pidfile) as f:
        text = f.read()
    assert text.endswith("\n") and text[:-1].isdigit(), f"pid file holds {text!r}"
    return int(text)


def count(disk):
    """The records on the disk. While a writer writes, verify may read a batch half
    landed (a gap at the tail), so only the count is taken here; the tests check
    verify's verdict on disks no writer writes."""
    p = run("verify", disk, check=False)
    assert p.returncode in (0, 1), p.stderr
    return int(p.stdout.strip())


def start(mode, vm, *extra):
    pidfile = os.path.join(vm, f"{mode}.pid")
    run(mode, "--dir", vm, "--daemonize", "--pidfile", pidfile, *extra)
    # The pid file exists once the starting command returns: it is written before.
    pid = read_pid(pidfile)
    started.append(pid)
    assert alive(pid), f"pid {pid} of {pidfile} is not running"
    # Not this test's child (double fork): waitpid on it fails, and its parent is
    # someone else.
    try:
        os.waitpid(pid, os.WNOHANG)
        raise AssertionError(f"pid {pid} is a child of the test")
    except ChildProcessError:
        pass
    assert parent_of(pid) != os.getpid()
    return pid, pidfile


def make_disk(vm, size):
    os.makedirs(os.path.join(vm, "disks"), exist_ok=True)
    disk = os.path.join(vm, "disks", "data.img")
    with open(disk, "wb") as f:
        f.truncate(size)
    return disk


def test_writer_survives_kill(top):
    vm = os.path.join(top, "vm1")
    disk = make_disk(vm, 4 * 1024 * 1024)
    pid, pidfile = start("writer", vm, "--rate", "200/s")
    wait_for("20 records", lambda: count(disk) >= 20)

    # A second writer on the same disk is refused while the first runs.
    p = run("writer", "--dir", vm, "--daemonize", "--pidfile", os.path.join(vm, "w2.pid"),
            check=False)
    assert p.returncode == 1 and "another writer holds it" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(vm, "w2.pid"))

    os.kill(pid, signal.SIGKILL)
    wait_for(f"pid {pid} to die", lambda: not alive(pid))
    before = count(disk)
    assert run("verify", disk).returncode == 0

    # A torn record at the tail, as a crash in the middle of a write leaves it.
    with open(disk, "r+b") as f:
        f.seek(before * RECORD)
        f.write(b"TWRK" + b"\x01" * 200)
    assert count(disk) == before

    # The pid file still names the dead writer; a new one starts anyway.
    pid2, _ = start("writer", vm, "--rate", "200")
    assert pid2 != pid
    wait_for("20 more records", lambda: count(disk) >= before + 20)
    p = run("verify", disk)
    assert p.returncode == 0, p.stderr

    # SIGTERM: a clean stop, the pid file removed, every record whole.
    os.kill(pid2, signal.SIGTERM)
    wait_for(f"pid {pid2} to stop", lambda: not alive(pid2))
    assert not os.path.exists(pidfile)
    final = count(disk)
    assert final >= before + 20
    with open(os.path.join(vm, "workload.log")) as f:
        log = f.read()
    assert f"continuing at record {before} of 8192" in log, log
    # The disk's size never changed.
    assert os.stat(disk).st_size == 4 * 1024 * 1024
    return disk, final


def test_verify_refusals(top, disk, n):
    assert n >= 10
    with open(disk, "rb") as f:
        data = f.read(n * RECORD)
    gap = os.path.join(top, "gap.img")
    with open(gap, "wb") as f:
        f.write(data[:5 * RECORD] + b"\0" * RECORD + data[6 * RECORD:])
    p = run("verify", gap, check=False)
    assert p.returncode == 1 and p.stdout.strip() == str(n - 1), (p.stdout, p.stderr)
    assert "records 5 to 5 are missing" in p.stderr, p.stderr

    rep = os.path.join(top, "repeat.img")
    with open(rep, "wb") as f:
        f.write(data[:6 * RECORD] + data[5 * RECORD:6 * RECORD] + data[7 * RECORD:])
    p = run("verify", rep, check=False)
    assert p.returncode == 1 and "slot 6 holds record 5 (repeated)" in p.stderr, p.stderr


def test_full_disk(top):
    vm = os.path.join(top, "vm2")
    disk = make_disk(vm, 8 * RECORD)
    pid, _ = start("writer", vm, "--rate", "1000")
    wait_for("a full disk", lambda: count(disk) == 8)
    wait_for("the log to say so", lambda: "is full after 8 records" in
             open(os.path.join(vm, "workload.log")).read())
    assert alive(pid)  # full is not a crash: it idles
    assert os.stat(disk).st_size == 8 * RECORD
    os.kill(pid, signal.SIGTERM)
    wait_for(f"pid {pid} to stop", lambda: not alive(pid))


def test_fast_writer_stops(top):
    """A writer that cannot keep up with its rate still stops on SIGTERM at once."""
    vm = os.path.join(top, "vm5")
    disk = make_disk(vm, 1024 * 1024 * 1024)
    pid, pidfile = start("writer", vm, "--rate", "100000")
    wait_for("10000 records", lambda: count(disk) >= 10000)
    os.kill(pid, signal.SIGTERM)
    wait_for(f"pid {pid} to stop", lambda: not alive(pid), timeout=5.0)
    assert not os.path.exists(pidfile)
    p = run("verify", disk)
    assert int(p.stdout) >= 10000


def test_idle(top):
    vm = os.path.join(top, "vm3")
    os.makedirs(vm)
    pid, pidfile = start("idle", vm)
    # A second idle workload on the same pid file is refused while the first runs.
    p = run("idle", "--dir", vm, "--daemonize", "--pidfile", pidfile, check=False)
    assert p.returncode == 1 and f"names pid {pid}" in p.stderr, p.stderr
    os.kill(pid, signal.SIGTERM)
    wait_for(f"pid {pid} to stop", lambda: not alive(pid))
    assert not os.path.exists(pidfile)


def test_bad_arguments(top):
    vm = os.path.join(top, "vm4")
    os.makedirs(vm)
    p = run("writer", "--dir", vm, "--rate", "0", check=False)
    assert p.returncode == 2 and "--rate: expected 1 to 100000" in p.stderr, p.stderr
    p = run("writer", "--dir", vm, "--daemonize", check=False)
    assert p.returncode == 1 and "data.img" in p.stderr, p.stderr  # no disk: refused
    p = run("dance", "--dir", vm, check=False)
    assert p.returncode == 2 and "unknown workload" in p.stderr, p.stderr


def main():
    with tempfile.TemporaryDirectory(prefix="test_workload.") as top:
        try:
            disk, n = test_writer_survives_kill(top)
            test_verify_refusals(top, disk, n)
            test_full_disk(top)
            test_fast_writer_stops(top)
            test_idle(top)
            test_bad_arguments(top)
        finally:
            for pid in started:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    print("ok")


if __name__ == "__main__":
    main()
