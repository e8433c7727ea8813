#!/usr/bin/env python3
"""`tools/lab up` and `tools/lab down` on a fresh directory: the lab answers /ping,
GET /runners shows one agent per server serving its server's queue, a job on a
server's queue runs on that server's agent (dc.agent_info answers with its server
and data root), the data roots and the sparse images exist; a second `up` on a
running lab is refused, a stale pid file is cleared, and `down` leaves no process of
the lab alive, an instance workload and an agent killed -9 included. An agent killed
-9 leaves its server's instance running and comes back with `restart-agent`; the
control ternd, restarted running or after a kill -9, comes back with `restart-control`
on the same port and runs jobs. A description
with faults is refused at `up` with each fault's JSON path, before anything starts.

Usage: test_lab.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded and polls what it
waits for; every process the test starts is stopped by its pid.
"""
import fcntl
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
seen_pids = set()  # every pid of a lab process this test saw, killed at the end if alive


def lab(*args, check=True):
    env = dict(os.environ, TERN_BUILD=BUILD)
    env.pop("TERN_API_TOKEN", None)
    p = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=120, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"tools/lab {' '.join(args)}: exit {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def pids_of(run_dir):
    out = {}
    for name in os.listdir(run_dir):
        if name.endswith(".pid"):
            with open(os.path.join(run_dir, name)) as f:
                out[name[:-4]] = int(f.read())
    seen_pids.update(out.values())
    return out


def check_images(dc, lab_dir):
    for m in dc["images"]:
        path = os.path.join(lab_dir, m["file"])
        st = os.stat(path)
        assert st.st_size == m["size_mib"] * MIB, (path, st.st_size)
        data = m.get("data_mib", 1) * MIB
        # Sparse: blocks used far below the apparent size; the data at the start only.
        assert data <= st.st_blocks * 512 < data + MIB, (path, st.st_blocks)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_DATA) == 0
            try:
                os.lseek(fd, data, os.SEEK_DATA)
                raise AssertionError(f"{path}: data after its first {data} bytes")
            except OSError as e:
                assert e.errno == 6, e  # ENXIO: only a hole follows
        finally:
            os.close(fd)


def check_agents(url, dc):
    status, runners = http(url + "/runners")
    assert status == 200, status
    by_id = {r["id"]: r for r in runners}
    for s in dc["servers"]:
        r = by_id.get("agent-" + s["hostname"])
        assert r is not None, f"no agent for {s['hostname']} in {sorted(by_id)}"
        assert r["alive"], r
        assert r["info"]["queues"] == ["server:" + s["uuid"]], r["info"]
    assert by_id["control"]["info"]["queues"] == ["default"]


def check_agent_jobs(url, dc, lab_dir):
    """A job on a server's queue runs on that server's agent, which knows its root."""
    jobs = {}
    for s in dc["servers"]:
        wf = {"name": "agent-info-" + s["hostname"], "version": "1.0.0",
              "queue": "server:" + s["uuid"],
              "chain": [{"name": "info", "task": "dc.agent_info", "args": {}}]}
        status, body = http(url + "/workflows", "POST", wf)
        assert status == 201, (status, body)
        status, body = http(url + "/jobs", "POST", {"workflow": wf["name"], "target": "t"})
        assert status == 201, (status, body)
        jobs[s["uuid"]] = body["uuid"]
    for s in dc["servers"]:
        def finished():
            _, j = http(url + "/jobs/" + jobs[s["uuid"]])
            return j if j["execution"] in ("succeeded", "failed", "canceled") else None
        j = wait_for(f"the agent_info job on {s['hostname']}", finished)
        assert j["execution"] == "succeeded", j
        result = j["chain_results"][0]["result"]
        assert result["server_uuid"] == s["uuid"], result
        assert result["data_root"] == os.path.join(lab_dir, s["data_root"]), result


def test_up_down(top):
    with open(os.path.join(SOURCE, "examples", "lab", "datacenter.json")) as f:
        dc = json.load(f)
    lab_dir = os.path.join(top, "lab")
    port = free_port()
    p = lab("up", "--dir", lab_dir, "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    assert p.stdout.splitlines()[-1] == f"TERN_URL={url}", p.stdout
    pids = pids_of(os.path.join(lab_dir, "run"))
    assert sorted(pids) == sorted(["redis", "control"] +
                                  ["agent-" + s["hostname"] for s in dc["servers"]]), pids
    for name, pid in pids.items():
        assert alive(pid), f"{name} (pid {pid}) is not running"
    # Detached: none is a child of this test (nor of tools/lab, which has exited).
    for pid in pids.values():
        try:
            os.waitpid(pid, os.WNOHANG)
            raise AssertionError(f"pid {pid} is a child of the test")
        except ChildProcessError:
            pass

    status, _ = http(url + "/ping")
    assert status == 200
    check_agents(url, dc)
    for s in dc["servers"]:
        assert os.path.isdir(os.path.join(lab_dir, s["data_root"])), s["data_root"]
    check_images(dc, lab_dir)
    check_agent_jobs(url, dc, lab_dir)
    status, body = http(url + "/workflows", "POST", {
        "name": "control-log", "version": "1.0.0",
        "chain": [{"name": "log", "task": "core.log", "args": {"msg": "on the control"}}]})
    assert status == 201, (status, body)

    # A second `up` on a running lab is refused, and changes nothing.
    p = lab("up", "--dir", lab_dir, check=False)
    assert p.returncode == 1 and "a lab is running in" in p.stderr, p.stderr
    assert pids_of(os.path.join(lab_dir, "run")) == pids

    # An instance: a workload started as an agent will start one, under a data root.
    vm = os.path.join(lab_dir, dc["servers"][0]["data_root"], "11111111-1111-4111-8111-111111111111")
    os.makedirs(vm)
    subprocess.run([WORKLOAD, "idle", "--dir", vm, "--daemonize", "--pidfile",
                    os.path.join(vm, "workload.pid")], check=True, timeout=30)
    with open(os.path.join(vm, "workload.pid")) as f:
        instance = int(f.read())
    seen_pids.add(instance)
    assert alive(instance)

    # The agent of the instance's server dies (kill -9): the instance was never its
    # child, and runs on. restart-agent brings the agent back on its queue.
    cn1 = dc["servers"][0]
    dead = pids["agent-" + cn1["hostname"]]
    os.kill(dead, signal.SIGKILL)
    wait_for(f"pid {dead} to die", lambda: not alive(dead))
    assert alive(instance)
    p = lab("restart-agent", cn1["hostname"], "--dir", lab_dir)
    assert f"agent-{cn1['hostname']}: not running (stale pid file" in p.stdout, p.stdout
    pids = pids_of(os.path.join(lab_dir, "run"))
    assert pids["agent-" + cn1["hostname"]] != dead and alive(pids["agent-" + cn1["hostname"]])
    assert alive(instance)
    check_agents(url, dc)
    status, job = http(url + "/jobs", "POST", {"workflow": "agent-info-" + cn1["hostname"],
                                                "target": "after-restart"})
    assert status == 201, job
    wait_for("the job on the restarted agent", lambda: http(url + "/jobs/" + job["uuid"])[1]
             ["execution"] == "succeeded")
    # A running agent is restarted too: stopped by pid, then started.
    p = lab("restart-agent", cn1["uuid"], "--dir", lab_dir)
    assert f"agent-{cn1['hostname']}: stopped (pid {pids['agent-' + cn1['hostname']]})" \
        in p.stdout, p.stdout
    pids = pids_of(os.path.join(lab_dir, "run"))
    p = lab("restart-agent", "cn9", "--dir", lab_dir, check=False)
    assert p.returncode == 1 and 'no server "cn9"' in p.stderr, p.stderr

    # The control ternd restarted while it runs, then after a kill -9: each time a new
    # process on the same port (lab.env stays true), serving the API and the queue
    # "default" again; the agents are left as they were.
    with open(os.path.join(lab_dir, "lab.env")) as f:
        env = f.read()
    for how in ("running", "killed"):
        old = pids["control"]
        if how == "killed":
            os.kill(old, signal.SIGKILL)
            wait_for(f"pid {old} to die", lambda: not alive(old))
        p = lab("restart-control", "--dir", lab_dir)
        said = "control: not running (stale pid file" if how == "killed" else \
            f"control: stopped (pid {old})"
        assert said in p.stdout, p.stdout
        assert f"control serves the API on 127.0.0.1:{port} and queue default again" \
            in p.stdout, p.stdout
        now = pids_of(os.path.join(lab_dir, "run"))
        assert now["control"] != old and alive(now["control"]) and not alive(old), (old, now)
        assert {k: v for k, v in now.items() if k != "control"} == \
            {k: v for k, v in pids.items() if k != "control"}, (pids, now)
        pids = now
        with open(os.path.join(lab_dir, "lab.env")) as f:
            assert f.read() == env
        check_agents(url, dc)
        status, job = http(url + "/jobs", "POST", {
            "workflow": "control-log", "target": "after-control-" + how})
        assert status == 201, job
        wait_for("a job on the restarted control", lambda: http(url + "/jobs/" + job["uuid"])[1]
                 ["execution"] == "succeeded")
    p = lab("restart-control", "--dir", os.path.join(top, "nowhere"), check=False)
    assert p.returncode == 1 and "no lab in" in p.stderr, p.stderr

    # Another agent dies for good: down finds its pid file stale and stops the rest.
    dead = pids["agent-" + dc["servers"][1]["hostname"]]
    os.kill(dead, signal.SIGKILL)
    wait_for(f"pid {dead} to die", lambda: not alive(dead))

    p = lab("down", "--dir", lab_dir)
    for pid in list(pids.values()) + [instance]:
        assert not alive(pid), f"pid {pid} still runs after down:\n{p.stdout}"
    assert f"agent-{dc['servers'][1]['hostname']}: not running (stale pid file" in p.stdout
    assert "instance 11111111-1111-4111-8111-111111111111 on cn1 (workload.pid): stopped" \
        in p.stdout, p.stdout
    assert "redis: stopped" in p.stdout and "control: stopped" in p.stdout, p.stdout
    assert not [n for n in os.listdir(os.path.join(lab_dir, "run")) if n.endswith(".pid")]
    return lab_dir, dc


def test_stale_pid_file(lab_dir, dc):
    """A pid file naming a process that is not the lab's (here, this test) is stale."""
    with open(os.path.join(lab_dir, "run", "control.pid"), "w") as f:
        f.write(f"{os.getpid()}\n")
    port = free_port()
    p = lab("up", "--dir", lab_dir, "--port", str(port))
    assert "removed stale pid file" in p.stdout, p.stdout
    pids = pids_of(os.path.join(lab_dir, "run"))
    assert pids["control"] != os.getpid()
    check_agents(f"http://127.0.0.1:{port}", dc)
    check_images(dc, lab_dir)  # found, not made again
    assert "image lab-os 1.0: found" in p.stdout, p.stdout
    # While another tern-lab works on the lab (it holds DIR/lab.lock), none starts.
    with open(os.path.join(lab_dir, "lab.lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = lab("down", "--dir", lab_dir, check=False)
        assert p.returncode == 1 and "another tern-lab is at work" in p.stderr, p.stderr
        assert all(alive(pid) for pid in pids.values())
    lab("down", "--dir", lab_dir)
    for pid in pids.values():
        assert not alive(pid), pid


def test_bad_description(top):
    with open(os.path.join(SOURCE, "examples", "lab", "datacenter.json")) as f:
        dc = json.load(f)
    dc["servers"][1]["uuid"] = dc["servers"][0]["uuid"]
    dc["servers"][2]["data_root"] = "../../elsewhere"
    dc["servers"][0]["data_root"] = "redis/cn1"  # inside the lab, but the lab's own
    dc["networks"][1]["subnet"] = "203.0.113.0/24"
    dc["networks"][1]["gateway"] = "203.0.113.1"
    dc["networks"][1]["provision_start_ip"] = "203.0.113.100"
    dc["networks"][1]["provision_end_ip"] = "203.0.113.120"
    bad = os.path.join(top, "bad.json")
    with open(bad, "w") as f:
        json.dump(dc, f)
    lab_dir = os.path.join(top, "badlab")
    p = lab("up", "--datacenter", bad, "--dir", lab_dir, "--port", str(free_port()), check=False)
    assert p.returncode == 1, p
    assert "is refused (4 faults)" in p.stderr, p.stderr
    for path in ("servers[1].uuid: ", "servers[2].data_root: ", "servers[0].data_root: ",
                 "networks[1].provision_start_ip: the provision range"):
        assert "  " + path in p.stderr, (path, p.stderr)
    assert not os.path.exists(os.path.join(lab_dir, "run")), "something was started"
    # check says the same without a lab.
    p = lab("check", "--datacenter", bad, "--dir", lab_dir, check=False)
    assert p.returncode == 1 and "servers[1].uuid: " in p.stderr, p.stderr


def main():
    with tempfile.TemporaryDirectory(prefix="test_lab.") as top:
        try:
            lab_dir, dc = test_up_down(top)
            test_stale_pid_file(lab_dir, dc)
            test_bad_description(top)
        finally:
            for pid in seen_pids:
                if pid != os.getpid() and alive(pid):
                    os.kill(pid, signal.SIGKILL)
    print("ok")


if __name__ == "__main__":
    main()
