#!/usr/bin/env python3
"""The data plane of provisioning on a real lab: jobs on a server's queue run the dc
plugin's agent tasks inside that server's agent (a ternd runner): dc.image_ensure,
dc.instance_create and dc.instance_start make a sparse instance and start its writer
workload, detached; the agent is killed -9 and restarted, finds the instance again
(dc.agent_info lists its live pid), and stops and destroys it through its pid file; a
create run again answers the same instance. `tools/lab down` ends the lab.

Usage: test_dc_agent.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded and polls what
it waits for; every process the test starts is stopped by its pid.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import free_port, wait_for  # noqa: E402
from lab_harness import http_request as http  # noqa: E402
from lab_harness import pid_alive as alive  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
LAB = os.path.join(SOURCE, "tools", "lab")
WORKLOAD = os.path.join(BUILD, "lab", "tern-workload")
MIB = 1024 * 1024
VM = "5b0c2f58-8d7e-4f25-9d0c-0a8f4b3e2a11"
seen_pids = set()  # every pid this test saw, killed at the end if still alive


def lab(*args):
    env = dict(os.environ, TERN_BUILD=BUILD)
    env.pop("TERN_API_TOKEN", None)
    p = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise AssertionError(f"tools/lab {' '.join(args)}: exit {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def workflow(url, name, queue, chain):
    wf = {"name": name, "version": "1.0.0", "queue": queue, "chain": chain}
    status, body = http(url + "/workflows", "POST", wf)
    assert status == 201, (status, body)


def run_job(url, name, params=None, want="succeeded"):
    status, job = http(url + "/jobs", "POST",
                       {"workflow": name, "target": "/" + name, "params": params or {}})
    assert status == 201, (status, job)

    def finished():
        _, j = http(url + "/jobs/" + job["uuid"])
        return j if j["execution"] in ("succeeded", "failed", "canceled") else None
    j = wait_for(f"the job of {name}", finished)
    assert j["execution"] == want, json.dumps(j, indent=1)
    return j


def result(job, step):
    for r in job["chain_results"]:
        if r["name"] == step:
            return r["result"]
    raise AssertionError(f"no result of {step}: {job['chain_results']}")


def records(disk):
    p = subprocess.run([WORKLOAD, "verify", disk], capture_output=True, text=True, timeout=30)
    assert p.returncode in (0, 1), p.stderr  # 1: a batch still landing on a live disk
    return int(p.stdout.split()[0])


def test_agent_data_plane(top):
    with open(os.path.join(SOURCE, "examples", "lab", "datacenter.json")) as f:
        dc = json.load(f)
    cn1 = dc["servers"][0]
    image = dc["images"][0]
    lab_dir = os.path.join(top, "lab")
    port = free_port()
    lab("up", "--dir", lab_dir, "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    with open(os.path.join(lab_dir, "run", "agent-" + cn1["hostname"] + ".pid")) as f:
        agent = int(f.read())
    seen_pids.add(agent)
    root = os.path.join(lab_dir, cn1["data_root"])
    queue = "server:" + cn1["uuid"]
    args = {"vm_uuid": "${params.vm_uuid}", "image_uuid": "${params.image_uuid}",
            "disks": "${params.disks}", "customer_metadata": "${params.customer_metadata}",
            "alias": "${params.alias}"}
    workflow(url, "dc-up", queue, [
        {"name": "image", "task": "dc.image_ensure", "args": {"image_uuid": "${params.image_uuid}"}},
        {"name": "create", "task": "dc.instance_create", "args": args},
        {"name": "start", "task": "dc.instance_start", "args": {"vm_uuid": "${params.vm_uuid}"}},
        {"name": "info", "task": "dc.agent_info", "args": {}}])
    workflow(url, "dc-info", queue, [{"name": "info", "task": "dc.agent_info", "args": {}}])
    workflow(url, "dc-down", queue, [
        {"name": "stop", "task": "dc.instance_stop", "args": {"vm_uuid": "${params.vm_uuid}"}},
        {"name": "destroy", "task": "dc.instance_destroy",
         "args": {"vm_uuid": "${params.vm_uuid}"}}])
    params = {"vm_uuid": VM, "image_uuid": image["uuid"], "alias": "web-1",
              "customer_metadata": {"lab:workload": "writer"},
              "disks": [{"boot": True, "size": image["size_mib"], "image_uuid": image["uuid"]},
                        {"size": 1024}]}

    job = run_job(url, "dc-up", params)
    created = result(job, "create")
    disk0 = os.path.join(root, VM, "disks", "disk0.img")
    disk1 = os.path.join(root, VM, "disks", "disk1.img")
    assert [d["path"] for d in created["disks"]] == [disk0, disk1], created
    assert [d["pci_slot"] for d in created["disks"]] == ["0:4:0", "0:4:1"], created
    st = os.stat(disk0)
    assert st.st_size == image["size_mib"] * MIB and st.st_blocks * 512 <= 2 * MIB, st
    pid = result(job, "start")["pid"]
    seen_pids.add(pid)
    assert alive(pid) and pid != agent
    listed = {i["uuid"]: i for i in result(job, "info")["instances"]}
    assert listed[VM]["pid"] == pid and listed[VM]["alive"], listed
    first = wait_for("the writer's first records", lambda: records(disk1) >= 1)
    wait_for("the writer's records to grow", lambda: records(disk1) > first)

    # The agent dies (kill -9) and comes back: the workload runs on, found again.
    os.kill(agent, signal.SIGKILL)
    wait_for(f"agent pid {agent} to die", lambda: not alive(agent))
    assert alive(pid)
    lab("restart-agent", cn1["hostname"], "--dir", lab_dir)
    with open(os.path.join(lab_dir, "run", "agent-" + cn1["hostname"] + ".pid")) as f:
        seen_pids.add(int(f.read()))
    info = result(run_job(url, "dc-info"), "info")
    listed = {i["uuid"]: i for i in info["instances"]}
    assert listed[VM]["pid"] == pid and listed[VM]["alive"], info
    assert info["instances_at_init"] >= 1, info

    # Run again after the restart: the same instance and workload, nothing made twice.
    ino = os.stat(disk0).st_ino
    job = run_job(url, "dc-up", params)
    assert result(job, "create")["created"] is False
    assert result(job, "start") == {"pid": pid, "started": False, "state": "running"}
    assert os.stat(disk0).st_ino == ino

    # Stopped and destroyed by the restarted agent, through the pid file.
    job = run_job(url, "dc-down", {"vm_uuid": VM})
    assert result(job, "stop")["pid"] == pid
    assert result(job, "destroy")["destroyed"] is True
    assert not alive(pid)
    assert not os.path.exists(os.path.join(root, VM))
    # An unknown workload is refused, naming the allowed ones; nothing is made.
    bad = dict(params, customer_metadata={"lab:workload": "sh -c id"})
    job = run_job(url, "dc-up", bad, want="failed")
    assert "expected one of idle, writer" in json.dumps(job), json.dumps(job)
    assert not os.path.exists(os.path.join(root, VM))
    lab("down", "--dir", lab_dir)


def main():
    with tempfile.TemporaryDirectory(prefix="test_dc_agent.") as top:
        try:
            test_agent_data_plane(top)
        finally:
            for pid in seen_pids:
                if pid != os.getpid() and alive(pid):
                    os.kill(pid, signal.SIGKILL)
    print("ok")


if __name__ == "__main__":
    main()
