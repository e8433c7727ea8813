#!/usr/bin/env python3
"""tern-workload share, a storage instance's share process: it refuses to start
without <dir>/export (or with one that is a symlink), writes its pid file only once
its health check passed (the pid file is its readiness), exits 1 after three health
checks failed in a row (export/ renamed away), goes on after a single failed check,
and exits 0 on SIGTERM, its pid file removed; bad --health-ms refused.

Usage: test_share_process.py PATH_TO_TERN_WORKLOAD. Every wait is bounded and polls
the event it waits for; every process started is stopped by its pid.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import pid_alive, wait_for  # noqa: E402

WORKLOAD = sys.argv[1]
started = []  # pids this test started, stopped at the end whatever happens


def run(*args):
    return subprocess.run([WORKLOAD, *args], capture_output=True, text=True, timeout=30)


def read_pid(pidfile):
    with open(pidfile) as f:
        text = f.read()
    assert text.endswith("\n") and text[:-1].isdigit(), f"pid file holds {text!r}"
    return int(text)


def log_of(d):
    try:
        with open(os.path.join(d, "workload.log")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def storage(top, name, export=True):
    d = os.path.join(top, name)
    os.makedirs(d)
    if export:
        os.mkdir(os.path.join(d, "export"))
    return d


def start(d, health_ms):
    pidfile = os.path.join(d, "workload.pid")
    p = run("share", "--dir", d, "--health-ms", str(health_ms), "--daemonize", "--pidfile",
            pidfile)
    assert p.returncode == 0, p.stderr
    # Readiness: the pid file is there once the starter returned, and the check that
    # comes before it has run (its log line says it serves).
    pid = read_pid(pidfile)
    started.append(pid)
    assert pid_alive(pid)
    assert "share: serving" in log_of(d), log_of(d)
    return pid, pidfile


def test_refusals(top):
    # No export/: exit 1 naming it, no pid file, nothing left running.
    d = storage(top, "noexport", export=False)
    pidfile = os.path.join(d, "workload.pid")
    p = run("share", "--dir", d, "--daemonize", "--pidfile", pidfile)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "refusing to start" in p.stderr and "/export" in p.stderr, p.stderr
    assert not os.path.exists(pidfile)
    # Daemonized, the reason is in its log too (an agent's spawn keeps only a tail).
    assert "share: refusing to start: export" in log_of(d), log_of(d)
    # Not daemonized: the same refusal on its own stderr.
    p = run("share", "--dir", d, "--pidfile", pidfile)
    assert p.returncode == 1 and "refusing to start" in p.stderr, p.stderr
    assert not os.path.exists(pidfile)
    # export/ a symlink to a directory: refused, not followed.
    os.mkdir(os.path.join(d, "elsewhere"))
    os.symlink(os.path.join(d, "elsewhere"), os.path.join(d, "export"))
    p = run("share", "--dir", d, "--daemonize", "--pidfile", pidfile)
    assert p.returncode == 1 and "not a directory of its own" in p.stderr, p.stderr
    assert not os.path.exists(pidfile)
    assert os.listdir(os.path.join(d, "elsewhere")) == []
    # export a file: refused.
    os.unlink(os.path.join(d, "export"))
    open(os.path.join(d, "export"), "w").close()
    p = run("share", "--dir", d, "--pidfile", pidfile)
    assert p.returncode == 1 and "not a directory of its own" in p.stderr, p.stderr
    # Bad periods, and --health-ms on another workload.
    for bad in ("0", "9", "abc", "-5", "3600001", "10ms", ""):
        p = run("share", "--dir", d, "--health-ms", bad)
        assert p.returncode == 2 and "--health-ms: expected 10 to 3600000" in p.stderr, \
            (bad, p.stderr)
    p = run("idle", "--dir", d, "--health-ms", "100")
    assert p.returncode == 2 and "--health-ms is the share's" in p.stderr, p.stderr


def test_exits_after_three_failures(top):
    d = storage(top, "s1")
    pid, pidfile = start(d, 100)
    # Data in the export stays; the probe file never does.
    with open(os.path.join(d, "export", "data.txt"), "w") as f:
        f.write("kept\n")

    # One failed check, then the export back: it goes on.
    os.rename(os.path.join(d, "export"), os.path.join(d, "moved"))
    wait_for("a failed check", lambda: "health check 1 of 3 failed" in log_of(d), timeout=5)
    os.rename(os.path.join(d, "moved"), os.path.join(d, "export"))
    wait_for("the check to pass again", lambda: "passes again" in log_of(d), timeout=5)
    assert pid_alive(pid) and read_pid(pidfile) == pid
    assert sorted(os.listdir(os.path.join(d, "export"))) == ["data.txt"]

    # Renamed away for good: three failures in a row, then it exits, pid file removed.
    renamed = time.monotonic()
    os.rename(os.path.join(d, "export"), os.path.join(d, "moved"))
    wait_for(f"pid {pid} to exit", lambda: not pid_alive(pid), timeout=10)
    elapsed = time.monotonic() - renamed
    log = log_of(d)
    assert "3 health checks failed in a row: exiting" in log, log
    assert "health check 3 of 3 failed" in log and "No such file or directory" in log, log
    # Not before its third check: two whole periods at least after the rename.
    assert elapsed >= 0.2, elapsed
    assert not os.path.exists(pidfile)
    with open(os.path.join(d, "moved", "data.txt")) as f:
        assert f.read() == "kept\n"

    # Its exit status, as a child of this test (not daemonized): 1.
    d2 = storage(top, "s2")
    pidfile2 = os.path.join(d2, "workload.pid")
    child = subprocess.Popen([WORKLOAD, "share", "--dir", d2, "--health-ms", "50", "--pidfile",
                              pidfile2], stderr=subprocess.DEVNULL)
    started.append(child.pid)
    wait_for("the pid file", lambda: os.path.exists(pidfile2), timeout=10)
    os.rename(os.path.join(d2, "export"), os.path.join(d2, "gone"))
    assert child.wait(timeout=10) == 1
    assert not os.path.exists(pidfile2)


def test_sigterm(top):
    d = storage(top, "s3")
    pid, pidfile = start(d, 5000)
    os.kill(pid, signal.SIGTERM)
    # Well before its next check (5 s): the signal is not held until then.
    wait_for(f"pid {pid} to stop", lambda: not pid_alive(pid), timeout=3)
    assert not os.path.exists(pidfile)
    assert "share: stopping" in log_of(d), log_of(d)

    # Exit status 0, as a child.
    d2 = storage(top, "s4")
    pidfile2 = os.path.join(d2, "workload.pid")
    child = subprocess.Popen([WORKLOAD, "share", "--dir", d2, "--pidfile", pidfile2],
                             stderr=subprocess.DEVNULL)
    started.append(child.pid)
    wait_for("the pid file", lambda: os.path.exists(pidfile2), timeout=10)
    assert read_pid(pidfile2) == child.pid
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=5) == 0
    assert not os.path.exists(pidfile2)


def main():
    with tempfile.TemporaryDirectory(prefix="test_share_process.") as top:
        try:
            test_refusals(top)
            test_exits_after_three_failures(top)
            test_sigterm(top)
        finally:
            for pid in started:
                if not pid_alive(pid):
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    print("share process: ok")


main()
