#!/usr/bin/env python3
"""Share states end to end on a lab of the test's own (needs volume-create and
volume-delete, and the lab's share-watch schedule): a volume made by volume-create is
ready with its share running; the schedule probes it every share_watch_every_s; the
share killed -9 makes it failed/error within a few periods, then the watch restarts it
and it is ready/running again, the data written before intact; export/ renamed away
(the share terminates on its own health checks) and back: the same; the agent of its
server killed: GET /volumes/:uuid shows share_state unknown once the last probe is
older than 3 periods, and running again once a restarted agent answers; delete: the
storage instance and its export gone, and the watch leaves the record gone.
(DOMAIN 4.4 tests 1, 3, 4, 5, 8 and 9.) The `unknown` needs the volume views to show
share_state_shown(v, tonumber(redis.call('TIME')[1])) (volume_rules.lua), as
docs/VOLUMES.md "What a view shows" says.

Usage: test_share_states_lab.py SOURCE_ROOT BUILD_ROOT [TEST...]. Every wait is
bounded and polls what it waits for; every process is stopped by its pid (tools/lab
down, or the agent's pid the lab wrote).
"""
import json
import os
import signal
import sys

from lab_harness import Lab, pid_alive, run_tests, wait_for

SOURCE, BUILD = sys.argv[1], sys.argv[2]
CN1 = "a0000000-0000-4000-8000-000000000001"
FABRIC = "b0000000-0000-4000-8000-000000000001"
OWNER = "00000000-0000-0000-0000-000000000000"
VOL = "a1000000-0000-4000-8000-00000000000a"
EVERY_S = 1

DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 4194304, "data_root": "servers/cn1"}],
    "networks": [{"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
                  "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
                  "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500,
                  "fabric": True, "owner_uuids": [OWNER]}],
    "packages": [], "images": [],
    "settings": {"share_health_ms": 100, "share_watch_every_s": EVERY_S,
                 "net_reconcile_every_s": 3600, "net_reconcile_start_delay_s": [3000, 3600]},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-share-states-")
seen = {}


def volume():
    status, v = lab.http("/volumes/" + VOL)
    return v if status == 200 else None


def states():
    v = volume()
    return (v["state"], v["share_state"]) if v else None


def wait_states(want, timeout=15.0):
    return wait_for(f"volume {VOL} to be {want} (now {states()})",
                    lambda: states() == want, timeout=timeout, every=0.1)


def share_pid():
    try:
        with open(os.path.join(seen["dir"], "workload.pid")) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def test_create_ready_running():
    job = lab.run_job("volume-create", "/volume-create-" + VOL,
                      {"volume_uuid": VOL, "owner_uuid": OWNER, "name": "data"})
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    v = volume()
    assert (v["state"], v["share_state"]) == ("ready", "running"), v
    ip = v["filesystem_path"].split(":")[0]
    assert v["share_endpoint"] == f"nfs://{ip}/data", v
    seen["dir"] = lab.vm_dir(CN1, v["vm_uuid"])
    assert v["export_path"] == os.path.join(seen["dir"], "export")
    assert os.path.isdir(v["export_path"]) and pid_alive(share_pid())
    with open(os.path.join(v["export_path"], "before.txt"), "w") as f:
        f.write("written before the crash\n")
    # The lab's schedule probes it: share_probed_at moves on.
    status, schedules = lab.http("/schedules")
    assert any(s["name"] == "share-watch@cn1" for s in schedules), schedules
    first = v["share_probed_at"]
    wait_for("a probe by the schedule", lambda: volume()["share_probed_at"] != first,
             timeout=10)
    assert states() == ("ready", "running")


def test_kill_9_then_restarted():
    pid = share_pid()
    os.kill(pid, signal.SIGKILL)
    wait_states(("failed", "error"))
    v = volume()
    assert v["error_since"] is not None
    wait_states(("ready", "running"))
    pid2 = share_pid()
    assert pid2 != pid and pid_alive(pid2)
    assert volume()["error_since"] is None
    with open(os.path.join(volume()["export_path"], "before.txt")) as f:
        assert f.read() == "written before the crash\n"


def test_export_gone_then_back():
    export = volume()["export_path"]
    pid = share_pid()
    os.rename(export, export + ".away")
    # The share's own health checks end it; the watch then sees it dead.
    wait_for(f"share {pid} to terminate", lambda: not pid_alive(pid), timeout=10)
    wait_states(("failed", "error"))
    # Restarts are refused while export/ is gone: failed, not ready.
    wait_for("a refused restart", lambda: "refusing to start" in open(
        os.path.join(seen["dir"], "workload.log")).read(), timeout=15)
    assert volume()["state"] == "failed"
    os.rename(export + ".away", export)
    wait_states(("ready", "running"))
    with open(os.path.join(export, "before.txt")) as f:
        assert f.read() == "written before the crash\n"


def test_agent_down_shows_unknown():
    agent = lab.pid("agent-cn1")
    os.kill(agent, signal.SIGKILL)
    wait_for("the agent to die", lambda: not pid_alive(agent))
    # No probe answers: once the last is older than 3 periods, unknown; never error.
    wait_for("share_state unknown", lambda: volume()["share_state"] == "unknown",
             timeout=3 * EVERY_S + 30)
    assert volume()["state"] == "ready"
    lab.run("restart-agent", "cn1", "--dir", lab.dir)
    wait_states(("ready", "running"), timeout=60)
    assert pid_alive(share_pid())


def test_delete():
    job = lab.run_job("volume-delete", "/volume-delete-" + VOL,
                      {"volume_uuid": VOL, "owner_uuid": OWNER})
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    assert volume() is None
    assert not os.path.exists(seen["dir"])
    # Ticks go on and bring nothing back.
    first = lab.redis("HGET", "tern:p:dc:share_watch:" + CN1, "probed_at")
    wait_for("another tick", lambda: lab.redis("HGET", "tern:p:dc:share_watch:" + CN1,
                                               "probed_at") != first, timeout=10)
    assert volume() is None


def main():
    # The volume workflows and the lab's schedules come with the volumes' own work; a
    # tree without them skips (77) rather than fails.
    for need in ("volume-create.json", "volume-delete.json"):
        if not os.path.exists(os.path.join(SOURCE, "workflows", need)):
            print(f"skipped: workflows/{need} is not in this tree")
            sys.exit(77)
    tests = [test_create_ready_running, test_kill_9_then_restarted, test_export_gone_then_back,
             test_agent_down_shows_unknown, test_delete]
    run_tests(lab, tests, only=sys.argv[3:])


main()
