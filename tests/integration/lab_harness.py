"""What every test on a lab needs, in one place: a lab of the test's own (tools/lab up on
a description the test gives, with its own Redis, control ternd and one agent per
server), the HTTP API and the CLI against it, jobs waited for with a bound, the dc
plugin's raw records, and the inventory checked whole.

    from lab_harness import Lab, wait_for
    lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-disks-")
    lab.up()
    status, job = lab.create_job("disk-resize", "/disk-resize-" + vm, {...})
    job = lab.wait_job(job["uuid"])
    ...
    lab.finish(ok)        # down; the directory removed on success, kept on failure

Every wait is bounded and polls what it waits for; every process is stopped by its pid
(tools/lab down). TERN_TEST_KEEP_LAB=1 leaves a failed run's lab up to look into.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

MIB = 1024 * 1024


def wait_for(what, pred, timeout=30.0, every=0.05):
    """pred()'s first true value, polled every `every` s for at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def free_port():
    """A loopback port free when asked."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid):
    """true while /proc shows pid as a process that has not exited (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"


def http_request(url, method="GET", body=None, headers=False, timeout=30):
    """(status, decoded body[, headers]) of one request; an HTTP error is an answer,
    not a raise."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = (r.status, json.loads(r.read() or b"null"))
            return out + (r.headers,) if headers else out
    except urllib.error.HTTPError as e:
        out = (e.code, json.loads(e.read() or b"null"))
        return out + (e.headers,) if headers else out



# The workflows whose jobs the lab's schedules make on their own (docs/LAB.md): the
# share watch every share_watch_every_s, the reconcile, the reservations' clean-up.
LAB_SCHEDULED = frozenset({"volume-share-watch", "net-reconcile", "volume-reservations-clean"})


def user_jobs(jobs):
    """The jobs of a GET /jobs listing that a test's own requests made: without those
    of the lab's schedules, which may tick between two countings."""
    return [j for j in jobs if j.get("name") not in LAB_SCHEDULED]


def workload_pids(vm_dir):
    """Live tern-workload processes whose command line names this instance's directory."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] in "ZXx":
            continue
        if argv and os.path.basename(argv[0]) == b"tern-workload" and \
                any(a.decode(errors="replace").startswith(vm_dir) for a in argv[1:]):
            out.append(int(d))
    return out


class Lab:
    def __init__(self, source, build, datacenter, prefix="tern-lab-test-"):
        self.source, self.build = source, build
        self.datacenter = datacenter
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.desc = None
        self.url = None
        self.env = dict(os.environ, TERN_BUILD=build)
        self.env.pop("TERN_API_TOKEN", None)
        self.env.pop("TERN_TOKEN", None)
        self.tern_bin = os.path.join(build, "cli", "tern")
        self.roots = {s["uuid"]: s["data_root"] for s in datacenter["servers"]}
        self.mounts = []  # file systems mounted in the lab's directory: unmounted by finish

    # ---- the lab itself ------------------------------------------------------------

    def run(self, *args, check=True, timeout=120):
        """tools/lab ARGS."""
        p = subprocess.run([os.path.join(self.source, "tools", "lab"), *args],
                           capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise AssertionError(f"tools/lab {' '.join(args)}: exit {p.returncode}\n"
                                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def up(self, *extra):
        self.desc = self.dir + ".json"
        with open(self.desc, "w") as f:
            json.dump(self.datacenter, f)
        p = self.run("up", "--datacenter", self.desc, "--dir", self.dir, "--workflows",
                     os.path.join(self.source, "workflows"), *extra)
        last = p.stdout.strip().splitlines()[-1]
        assert last.startswith("TERN_URL="), p.stdout
        self.url = last[len("TERN_URL="):]
        self.env["TERN_URL"] = self.url

    def down(self):
        if self.url is not None:
            self.run("down", "--dir", self.dir, check=False)
        if self.desc and os.path.exists(self.desc):
            os.unlink(self.desc)

    def finish(self, ok):
        """Takes the lab down and unmounts self.mounts (kept up on failure with
        TERN_TEST_KEEP_LAB=1); removes its directory after a success, names it after a
        failure."""
        keep = os.environ.get("TERN_TEST_KEEP_LAB")
        if ok or not keep:
            self.down()
            for root in self.mounts:
                subprocess.run(["umount", root], check=False, timeout=30)
        if ok:
            subprocess.run(["rm", "-rf", self.dir], check=False)
        else:
            print(f"the lab's directory is kept: {self.dir}{' (still up)' if keep else ''}",
                  file=sys.stderr)

    def root(self, server):
        """The absolute data root of server (a uuid)."""
        return os.path.join(self.dir, self.roots[server])

    def vm_dir(self, server, vm_uuid):
        return os.path.join(self.root(server), vm_uuid)

    def pid(self, name):
        """The pid of the lab's process `name` (redis, control, agent-<hostname>)."""
        with open(os.path.join(self.dir, "run", name + ".pid")) as f:
            return int(f.read())

    def redis(self, *args):
        p = subprocess.run(["redis-cli", "-s", os.path.join(self.dir, "redis", "redis.sock"),
                            "--raw", *args], capture_output=True, text=True, timeout=20)
        assert p.returncode == 0, p.stderr
        return p.stdout.splitlines()

    # ---- the API and the CLI -------------------------------------------------------

    def http(self, path, method="GET", body=None, headers=False):
        """(status, decoded body[, headers]); an HTTP error is an answer, not a raise."""
        return http_request(self.url + path, method, body, headers)

    def user_job_count(self):
        """How many jobs the test's own requests made (user_jobs)."""
        return len(user_jobs(self.list_all("/jobs")))

    def list_all(self, path):
        """Every row of a paged list, following x-tern-next-marker."""
        rows, marker = [], None
        for _ in range(1000):
            sep = "&" if "?" in path else "?"
            q = f"{path}{sep}limit=1000"
            if marker:
                q += f"&marker={urllib.request.quote(marker)}"
            status, page, h = self.http(q, headers=True)
            assert status == 200, (path, status, page)
            rows.extend(page)
            marker = h.get("x-tern-next-marker")
            if not marker or not page:
                return rows
        raise AssertionError(f"{path}: more than 1000 pages")

    def tern(self, *args, check=True, timeout=180):
        """The CLI against this lab."""
        p = subprocess.run([self.tern_bin, *args], capture_output=True, text=True,
                           timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise AssertionError(f"tern {' '.join(args)}: exit {p.returncode}\n"
                                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def create_job(self, workflow, target, params):
        return self.http("/jobs", "POST", {"workflow": workflow, "target": target,
                                           "params": params})

    def job_of(self, job_uuid):
        status, job = self.http("/jobs/" + job_uuid)
        assert status == 200, (status, job)
        return job

    def wait_job(self, job_uuid, timeout=120.0):
        """The job once finished (succeeded, failed or canceled), within timeout."""
        def done():
            j = self.job_of(job_uuid)
            return j if j["execution"] in ("succeeded", "failed", "canceled") else None
        try:
            return wait_for(f"job {job_uuid} to finish", done, timeout=timeout, every=0.1)
        except AssertionError as e:
            j = self.job_of(job_uuid)
            seen = {k: j.get(k) for k in ("execution", "cursor", "runner_id", "step_queue",
                                          "state", "blocked_on", "history")}
            seen["results"] = [(r["name"], r.get("runner"), r.get("error"))
                               for r in j.get("chain_results", []) + j.get("onerror_results", [])]
            raise AssertionError(f"{e}: {json.dumps(seen)}") from None

    def run_job(self, workflow, target, params, timeout=120.0):
        """Creates a job and waits for it: the finished job (asserting it was accepted)."""
        status, job = self.create_job(workflow, target, params)
        assert status in (200, 201), (workflow, params, status, job)
        return self.wait_job(job["uuid"], timeout=timeout)

    def vm_of(self, vm_uuid):
        status, vm = self.http("/vms/" + vm_uuid)
        return vm if status == 200 else None

    def raw_records(self, pattern):
        """The dc plugin's Redis records whose key matches (a hash or a JSON string)."""
        out = {}
        for key in self.redis("--scan", "--pattern", "tern:p:dc:" + pattern):
            kind = self.redis("TYPE", key)[0]
            if kind == "hash":
                flat = self.redis("HGETALL", key)
                out[key] = dict(zip(flat[0::2], flat[1::2]))
            elif kind == "string":
                text = "\n".join(self.redis("GET", key))
                try:
                    out[key] = json.loads(text)
                except ValueError:
                    out[key] = text
        return out

    def check_inventory(self):
        """The inventory agrees with itself: each server's committed RAM and disk are the
        sums of the allocations held on it and within its size; every taken address is a
        NIC's of a live instance, and every such NIC's address is taken by it."""
        vms = []
        # Volumes' storage instances are listed only when asked for by their role.
        for role in ("", "system_role=nfsvolumestorage"):
            vms += (self.list_all("/vms?" + role) +
                    self.list_all("/vms?state=failed&" + role) +
                    self.list_all("/vms?state=destroyed&" + role))
        servers = {s["uuid"]: s for s in self.list_all("/servers")}
        ram = {u: 0 for u in servers}
        disk = {u: 0 for u in servers}
        n = {u: 0 for u in servers}
        for vm in vms:
            a = vm.get("allocation")
            if a:
                assert vm["state"] not in ("failed", "destroyed"), vm
                ram[a["server_uuid"]] += a["ram"]
                disk[a["server_uuid"]] += a["disk"]
                n[a["server_uuid"]] += 1
            else:
                assert vm["state"] in ("failed", "destroyed"), vm
                assert not vm.get("nics"), vm
        for u, s in servers.items():
            assert s["ram_committed_mib"] == ram[u], (s, ram[u])
            assert s["disk_committed_mib"] == disk[u], (s, disk[u])
            assert s["instances"] == n[u], (s, n[u])
            assert s["ram_committed_mib"] <= s["ram_mib"], s
            assert s["disk_committed_mib"] <= s["disk_mib"], s
        live = {}
        for vm in vms:
            for nic in vm.get("nics") or []:
                assert nic["ip"] not in live.get(nic["network_uuid"], {}), nic
                live.setdefault(nic["network_uuid"], {})[nic["ip"]] = vm["uuid"]
        for net in (x["uuid"] for x in self.datacenter["networks"]):
            taken = {r["ip"]: r for r in self.list_all(f"/networks/{net}/ips")
                     if r["state"] == "taken"}
            want = live.get(net, {})
            assert set(taken) == set(want), (net, sorted(taken), sorted(want))
            for ip, r in taken.items():
                assert r["belongs_to_uuid"] == want[ip], (r, want[ip])
        nics = self.list_all("/nics")
        assert sorted(x["mac"] for x in nics) == sorted(
            nic["mac"] for vm in vms for nic in vm.get("nics") or []), nics


def run_tests(lab, tests, only=()):
    """Brings the lab up, runs each test (those named in `only` when given) printing its
    time, and takes the lab down (lab.finish), printing the total time."""
    ok = False
    t_start = time.monotonic()
    try:
        lab.up()
        for t in tests:
            if only and t.__name__ not in only:
                continue
            t0 = time.monotonic()
            t()
            print(f"ok {t.__name__} ({time.monotonic() - t0:.1f} s)", flush=True)
        ok = True
    finally:
        lab.finish(ok)
        print(f"total {time.monotonic() - t_start:.1f} s", flush=True)
