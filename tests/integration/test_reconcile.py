#!/usr/bin/env python3
"""The NIC reconcile (RFD 58, docs/RECONCILE.md) on a lab of its own, whose schedules
run every 2 s and whose agents' first reconcile comes 1 to 2 s after their start:
DOMAIN 3.6's acceptance tests 1-8 and 10-15 (9, "old NAPI", has no local form: the
reconcile reads only the server's own index; test 8 shows another server's NICs, in
the unfiltered index, untouched). Each checks the records and the files: a VM
directory removed by hand loses its 2 NICs and their IPs while the NICs of the other
VMs stay; leaked NICs reaped; NICs without cn_uuid backfilled; stuck states fixed;
server and other NICs never reaped; a migrating VM and its target directory untouched
on both servers; a data root that cannot be read reaps nothing; a delete frees its
NICs without the reconcile; a second run changes nothing; the schedules listed; the
start reconcile due within the configured window, at up and at restart-agent; up
again keeps the schedules, or remakes them when their interval changed; share-watch
schedules made once their workflow is stored.

Usage: test_reconcile.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded and polls what
it waits for; every process is stopped by its pid.
"""
import json
import os
import re
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import Lab, run_tests, wait_for, workload_pids  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
OWNER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"
CN1, CN2 = "a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002"
EXTERNAL, INTERNAL = ("b0000000-0000-4000-8000-000000000001",
                      "b0000000-0000-4000-8000-000000000002")
ZONE = "c0000000-0000-4000-8000-000000000002"
BASE_IMG = "d0000000-0000-4000-8000-000000000004"
EVERY_S, DELAY = 2, (1, 2)
VMS = [f"e0000000-0000-4000-8000-00000000000{i}" for i in range(1, 7)]
GHOST = "e0000000-0000-4000-8000-0000000000ff"
NS = "tern:p:dc:"

DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 2097152, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 2097152, "data_root": "servers/cn2"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": INTERNAL, "name": "internal", "subnet": "10.9.0.0/24", "gateway": "10.9.0.1",
         "provision_start_ip": "10.9.0.10", "provision_end_ip": "10.9.0.250",
         "vlan_id": 9, "mtu": 1500},
    ],
    "packages": [
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
    ],
    "images": [
        {"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
    ],
    "settings": {"net_reconcile_every_s": EVERY_S, "net_reconcile_start_delay_s": list(DELAY)},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-reconcile-")
up_started = None  # when the test ran tools/lab up (epoch s)

# Edits of the records by hand, each one script so that a reconcile running meanwhile
# sees all of it or none. They follow the plugin's prelude.lua (its enc keeps empty lists
# lists; P is KEYS[1], the namespace NS that redis_eval hands them).
with open(os.path.join(SOURCE, "tasks", "dc", "lua", "prelude.lua"), encoding="utf-8") as f:
    PRELUDE = f.read()
# A NIC made old (no cn_uuid, out of its server's index), in a given state.
STRIP = PRELUDE + r"""
local mac, state = ARGV[1], ARGV[2]
local nic = cjson.decode(redis.call('GET', P .. 'nic:' .. mac))
redis.call('ZREM', P .. 'nics:cn:' .. nic.cn_uuid, mac)
nic.cn_uuid = nil
nic.state = state
redis.call('SET', P .. 'nic:' .. mac, enc(nic))
local vk = P .. 'vm:' .. nic.belongs_to_uuid
local vm = cjson.decode(redis.call('GET', vk))
for _, c in ipairs(vm.nics) do
  if c.mac == mac then c.cn_uuid = nil c.state = state end
end
redis.call('SET', vk, enc(vm))
"""
# A NIC record of no VM's (a leak) or of a server/other, with an address taken.
PLANT = PRELUDE + r"""
local mac, ip, net, owner, kind, cn, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local nic = {mac = mac, ip = ip, network_uuid = net, belongs_to_uuid = owner,
  belongs_to_type = kind, cn_uuid = cn, state = state, primary = false}
redis.call('SET', P .. 'nic:' .. mac, enc(nic))
redis.call('ZADD', P .. 'nics', 0, mac)
redis.call('ZADD', P .. 'nics:cn:' .. cn, 0, mac)
local a, b, c, d = string.match(ip, '^(%d+)%.(%d+)%.(%d+)%.(%d+)$')
local n = ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d)
redis.call('HSET', P .. 'ip:' .. net .. ':' .. ip, 'ip', ip, 'network_uuid', net, 'state',
  'taken', 'belongs_to_uuid', owner, 'belongs_to_type', kind, 'owner_uuid', '')
redis.call('ZREM', P .. 'network:' .. net .. ':free', n)
redis.call('ZADD', P .. 'network:' .. net .. ':ips', n, ip)
redis.call('HINCRBY', P .. 'network:' .. net, 'taken', 1)
"""
MIGRATING = PRELUDE + r"""
local vk = P .. 'vm:' .. ARGV[1]
local vm = cjson.decode(redis.call('GET', vk))
vm.migrating = ARGV[2] == 'true'
redis.call('SET', vk, enc(vm))
"""


def redis_eval(script, *args):
    lab.redis("EVAL", script, "1", NS, *args)


def record(key):
    text = "\n".join(lab.redis("GET", NS + key))
    return json.loads(text) if text else None


def nics_of(vm_uuid):
    return {n["mac"]: n for n in lab.list_all(f"/nics?belongs_to_uuid={vm_uuid}")}


def taken(network):
    return {r["ip"]: r for r in lab.list_all(f"/networks/{network}/ips") if r["state"] == "taken"}


def in_index(server, mac):
    out = lab.redis("ZSCORE", NS + "nics:cn:" + server, mac)
    return bool(out and out[0])


def provision(vm_uuid, server):
    job = lab.run_job("provision", "/provision-" + vm_uuid, {
        "vm_uuid": vm_uuid, "owner_uuid": OWNER, "package": "lab-zone",
        "image_uuid": BASE_IMG, "server_uuid": server,
        "networks": [{"uuid": EXTERNAL, "primary": True}, {"uuid": INTERNAL}]})
    assert job["execution"] == "succeeded", json.dumps(job, indent=1)
    vm = lab.vm_of(vm_uuid)
    assert vm["state"] == "running" and len(vm["nics"]) == 2, vm
    return vm


def stop_workload(server, vm_uuid):
    """Kills the instance's workload (by the pids /proc shows for its directory), as
    the zone's processes end with its dataset."""
    d = lab.vm_dir(server, vm_uuid)
    for pid in workload_pids(d):
        os.kill(pid, signal.SIGKILL)
    wait_for("the workload to end", lambda: not workload_pids(d), timeout=10)


def iso_s(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc).timestamp()


@contextmanager
def paused(host, server):
    """The schedule net-reconcile@host paused, once no reconcile of server is left
    unfinished; resumed after."""
    sched = [s for s in lab.http("/schedules?limit=1000")[1]
             if s["name"] == "net-reconcile@" + host][0]
    assert lab.http(f"/schedules/{sched['uuid']}/pause", "POST")[0] == 200
    try:
        wait_for(f"{host}'s reconciles to end", lambda: not [
            j for j in lab.http(f"/jobs?server_uuid={server}&limit=50")[1]
            if j["name"] == "net-reconcile" and
            j["execution"] not in ("succeeded", "failed", "canceled")], timeout=20)
        yield
    finally:
        assert lab.http(f"/schedules/{sched['uuid']}/resume", "POST")[0] == 200


def reconciles(server, since=None):
    """The finished net-reconcile jobs of server (newest first) created after `since`
    (epoch s)."""
    out = []
    for j in lab.http(f"/jobs?server_uuid={server}&limit=200")[1]:
        if j["name"] != "net-reconcile" or j["execution"] not in ("succeeded", "failed"):
            continue
        if since is None or iso_s(j["created_at"]) > since:
            out.append(j)
    return out


def reconcile_result(job):
    for r in job["chain_results"]:
        if r["name"] == "reconcile":
            return r["result"]
    return None


def fresh_runs(server, n=2, timeout=30):
    """Waits for n reconciles of server made from now on, succeeded; their results."""
    t0 = time.time()

    def done():
        js = [j for j in reconciles(server, t0) if j["execution"] == "succeeded"]
        return js if len(js) >= n else None
    return [reconcile_result(j) for j in wait_for(f"{n} reconciles of {server}", done,
                                                  timeout=timeout, every=0.2)]


def changes_of(server, since):
    """Every change the reconciles of server made since `since`, merged."""
    out = {"backfilled": set(), "reaped": set(), "state_fixed": set(), "vanished": set()}
    for j in reconciles(server, since):
        r = reconcile_result(j) or {}
        for k in out:
            out[k].update(r.get(k, []))
    return out


EMPTY = {"backfilled": [], "reaped": [], "state_fixed": [], "vanished": []}


# ---- the tests, in order: each leaves the lab as the next expects ------------------

def test_schedules_listed_and_start_reconciles_due_in_the_window():
    # 10 and the lab's schedules: one of each per server, by name, through the API
    # and the CLI.
    status, scheds = lab.http("/schedules?limit=1000")
    assert status == 200, scheds
    mine = {s["name"]: s for s in scheds if s["name"].startswith("net-reconcile@")}
    assert set(mine) == {"net-reconcile@cn1", "net-reconcile@cn2"}, scheds
    for host, server in (("cn1", CN1), ("cn2", CN2)):
        s = mine["net-reconcile@" + host]
        assert (s["workflow"], s["every"], s["params"], s["target"], s["overlap"]) == (
            "net-reconcile", f"{EVERY_S}s", {"server_uuid": server},
            "/net-reconcile-" + server, "skip"), s
    listed = lab.tern("schedule", "list").stdout
    assert "net-reconcile@cn1" in listed and "net-reconcile@cn2" in listed, listed
    # The start reconciles: made by up (no schedule_uuid), due 1 to 2 s after.
    for server in (CN1, CN2):
        starts = [j for j in lab.list_all(f"/jobs?server_uuid={server}")
                  if j["name"] == "net-reconcile" and "schedule_uuid" not in j["params"]]
        assert len(starts) == 1, starts
        j = starts[0]
        assert j["params"] == {"server_uuid": server, "reason": "agent-start"}, j
        delay = iso_s(j["exec_after"]) - iso_s(j["created_at"])
        assert DELAY[0] - 0.2 <= delay <= DELAY[1], (delay, j)
        assert iso_s(j["created_at"]) >= up_started - 1, j
        done = lab.wait_job(j["uuid"], timeout=30)
        assert done["execution"] == "succeeded", done
        assert reconcile_result(done) == EMPTY, done


def test_provisions_beside_reconciles_and_vanished_vm_reaped():
    # 1, 11: provisions while reconciles run every 2 s keep their VMs; then vm1's
    # directory removed by hand: the schedule (no event) reaps its 2 NICs and frees
    # both IPs, marks it destroyed; vm2 on cn1 and vm3 on cn2 keep theirs.
    vms = {u: provision(u, s) for u, s in ((VMS[0], CN1), (VMS[1], CN1), (VMS[2], CN2))}
    runs = fresh_runs(CN1) + fresh_runs(CN2)
    assert all(r == EMPTY for r in runs), runs
    for u, vm in vms.items():
        assert lab.vm_of(u)["state"] == "running", lab.vm_of(u)
    others = {u: nics_of(u) for u in (VMS[1], VMS[2])}
    gone = vms[VMS[0]]
    stop_workload(CN1, VMS[0])
    since = time.time()
    shutil.rmtree(lab.vm_dir(CN1, VMS[0]))
    wait_for("vm1 marked destroyed", lambda: lab.vm_of(VMS[0])["state"] == "destroyed",
             timeout=20, every=0.2)
    assert nics_of(VMS[0]) == {}
    for nic in gone["nics"]:
        assert nic["ip"] not in taken(nic["network_uuid"]), nic
        assert record("nic:" + nic["mac"]) is None
        assert not in_index(CN1, nic["mac"])
    ch = changes_of(CN1, since)
    assert ch["reaped"] == {n["mac"] for n in gone["nics"]} and ch["vanished"] == {VMS[0]}, ch
    vm = lab.vm_of(VMS[0])
    assert vm["allocation"] is None and vm["nics"] == [], vm
    for u in (VMS[1], VMS[2]):
        assert nics_of(u) == others[u], (u, nics_of(u), others[u])
    # The files: the other instances' directories are whole, vm1's stays gone.
    assert not os.path.exists(lab.vm_dir(CN1, VMS[0]))
    assert os.path.exists(os.path.join(lab.vm_dir(CN1, VMS[1]), "vm.json"))
    assert os.path.exists(os.path.join(lab.vm_dir(CN2, VMS[2]), "vm.json"))
    lab.check_inventory()
    # 12: the runs after change nothing.
    runs = fresh_runs(CN1)
    assert all(r == EMPTY for r in runs), runs
    assert {u: nics_of(u) for u in (VMS[1], VMS[2])} == others


def test_leaks_reaped_server_and_other_nics_fixed_never_reaped():
    # 2, 6, 7: a NIC of a VM that never existed (with its address taken), a server NIC
    # and an other NIC in provisioning.
    since = time.time()
    redis_eval(PLANT, "90:b8:d0:ee:00:01", "10.9.0.240", INTERNAL, GHOST, "zone", CN1,
               "running")
    redis_eval(PLANT, "90:b8:d0:ee:00:02", "10.9.0.241", INTERNAL, CN1, "server", CN1,
               "provisioning")
    redis_eval(PLANT, "90:b8:d0:ee:00:03", "10.9.0.242", INTERNAL, GHOST, "other", CN1,
               "provisioning")
    wait_for("the leak reaped", lambda: record("nic:90:b8:d0:ee:00:01") is None, timeout=20,
             every=0.2)
    assert "10.9.0.240" not in taken(INTERNAL)
    wait_for("server and other NICs running", lambda: all(
        record("nic:" + m)["state"] == "running" for m in ("90:b8:d0:ee:00:02",
                                                            "90:b8:d0:ee:00:03")), timeout=20)
    runs = fresh_runs(CN1)
    assert all(r == EMPTY for r in runs), runs
    for m in ("90:b8:d0:ee:00:02", "90:b8:d0:ee:00:03"):
        assert record("nic:" + m) is not None and in_index(CN1, m)
    ch = changes_of(CN1, since)
    assert ch["reaped"] == {"90:b8:d0:ee:00:01"}, ch
    assert ch["state_fixed"] == {"90:b8:d0:ee:00:02", "90:b8:d0:ee:00:03"}, ch
    # Taken out again by hand (they are no VM's): the inventory check counts VM NICs.
    for m, ip in (("90:b8:d0:ee:00:02", "10.9.0.241"), ("90:b8:d0:ee:00:03", "10.9.0.242")):
        lab.redis("DEL", NS + "nic:" + m, NS + f"ip:{INTERNAL}:{ip}")
        lab.redis("ZREM", NS + "nics", m)
        lab.redis("ZREM", NS + "nics:cn:" + CN1, m)
        lab.redis("ZREM", NS + f"network:{INTERNAL}:ips", ip)
        lab.redis("HINCRBY", NS + f"network:{INTERNAL}", "taken", "-1")
        n = sum(int(p) << (8 * (3 - i)) for i, p in enumerate(ip.split(".")))
        lab.redis("ZADD", NS + f"network:{INTERNAL}:free", str(n), str(n))
    lab.check_inventory()


def test_old_nics_backfilled_and_stuck_state_fixed():
    # 3, 5: vm2's NICs lose cn_uuid and leave cn1's index; one is stuck in provisioning.
    vm2 = lab.vm_of(VMS[1])
    macs = sorted(n["mac"] for n in vm2["nics"])
    since = time.time()
    redis_eval(STRIP, macs[0], "provisioning")
    redis_eval(STRIP, macs[1], "running")
    wait_for("vm2's NICs backfilled and running", lambda: all(
        n.get("cn_uuid") == CN1 and n["state"] == "running" and in_index(CN1, n["mac"])
        for n in nics_of(VMS[1]).values()), timeout=20, every=0.2)
    ch = changes_of(CN1, since)
    assert ch["backfilled"] == set(macs) and macs[0] in ch["state_fixed"], ch
    assert not ch["reaped"] and not ch["vanished"], ch
    vm = lab.vm_of(VMS[1])
    assert vm["state"] == "running" and all(
        c["cn_uuid"] == CN1 and c["state"] == "running" for c in vm["nics"]), vm
    assert os.path.exists(os.path.join(lab.vm_dir(CN1, VMS[1]), "vm.json"))


def test_old_nic_of_a_gone_vm_backfilled_then_reaped():
    # 4: vm4's NIC without cn_uuid, and its directory removed: one run does both.
    vm4 = provision(VMS[3], CN1)
    mac = vm4["nics"][0]["mac"]
    since = time.time()
    # Both changes between two runs.
    with paused("cn1", CN1):
        stop_workload(CN1, VMS[3])
        shutil.rmtree(lab.vm_dir(CN1, VMS[3]))
        redis_eval(STRIP, mac, "running")
    wait_for("vm4 destroyed", lambda: lab.vm_of(VMS[3])["state"] == "destroyed", timeout=20,
             every=0.2)
    assert nics_of(VMS[3]) == {}
    for nic in vm4["nics"]:
        assert nic["ip"] not in taken(nic["network_uuid"]), nic
    both = [reconcile_result(j) for j in reconciles(CN1, since)
            if mac in (reconcile_result(j) or {}).get("backfilled", [])]
    assert len(both) == 1 and mac in both[0]["reaped"], both
    lab.check_inventory()


def test_another_servers_nics_untouched():
    # 8 (and the rule that stands for 9): vm3 lives on cn2; its NICs are in the
    # unfiltered index too. cn1's reconciles leave them whole, even with cn2's agent
    # stopped (so cn2 reconciles nothing meanwhile).
    before = nics_of(VMS[2])
    assert all(n["cn_uuid"] == CN2 for n in before.values()), before
    assert set(before) <= set(lab.redis("ZRANGE", NS + "nics", "0", "-1"))
    agent = lab.pid("agent-cn2")
    os.kill(agent, signal.SIGSTOP)
    try:
        runs = fresh_runs(CN1)
    finally:
        os.kill(agent, signal.SIGCONT)
    assert all(r == EMPTY for r in runs), runs
    assert nics_of(VMS[2]) == before
    assert lab.vm_of(VMS[2])["state"] == "running"


def test_migrating_vm_untouched_on_both_servers():
    # 13: vm2 migrating from cn1 to cn2, its target directory on cn2 with
    # do_not_inventory and vm2's MACs. Reconciles of either server change nothing, of
    # the records or of the target's files; then the source directory goes too (the
    # switch's moment) and still nothing changes while the flag is set.
    vm2 = lab.vm_of(VMS[1])
    nics_before = nics_of(VMS[1])
    redis_eval(MIGRATING, VMS[1], "true")
    target = lab.vm_dir(CN2, VMS[1])
    os.makedirs(target)
    doc = {"uuid": VMS[1], "state": "stopped", "do_not_inventory": True,
           "nics": [{"mac": n["mac"], "ip": n["ip"]} for n in vm2["nics"]]}
    with open(os.path.join(target, "vm.json"), "w") as f:
        json.dump(doc, f)
    runs = fresh_runs(CN1) + fresh_runs(CN2)
    assert all(r == EMPTY for r in runs), runs
    # cn2's agent lists the target as it is, flag and MACs.
    scan = [r["result"] for r in reconciles(CN2)[0]["chain_results"] if r["name"] == "scan"][0]
    listed = {i["uuid"]: i for i in scan["instances"]}
    assert scan["server_uuid"] == CN2 and set(listed) == {VMS[1], VMS[2]}, scan
    assert listed[VMS[1]] == {"uuid": VMS[1], "state": "stopped", "role": None,
                              "do_not_inventory": True,
                              "nics": [n["mac"] for n in vm2["nics"]]}, scan
    assert listed[VMS[2]]["state"] == "running" and not listed[VMS[2]]["do_not_inventory"]
    stop_workload(CN1, VMS[1])
    source_saved = lab.vm_dir(CN1, VMS[1]) + ".away"
    os.rename(lab.vm_dir(CN1, VMS[1]), source_saved)
    try:
        runs = fresh_runs(CN1) + fresh_runs(CN2)
        assert all(r == EMPTY for r in runs), runs
        assert nics_of(VMS[1]) == nics_before
        vm = lab.vm_of(VMS[1])
        assert vm["state"] == "running" and vm["server_uuid"] == CN1, vm
        assert sorted(os.listdir(target)) == ["vm.json"]
        with open(os.path.join(target, "vm.json")) as f:
            assert json.load(f) == doc
    finally:
        os.rename(source_saved, lab.vm_dir(CN1, VMS[1]))
    shutil.rmtree(target)
    redis_eval(MIGRATING, VMS[1], "false")
    runs = fresh_runs(CN1)
    assert all(r == EMPTY for r in runs), runs
    assert nics_of(VMS[1]) == nics_before


def test_unreadable_data_root_reaps_nothing():
    # 14: cn2's data root gone from under its agent: the scan fails, the job fails,
    # nothing is reaped; back in place, the runs succeed with nothing to do.
    root = lab.root(CN2)
    before = nics_of(VMS[2])
    os.rename(root, root + ".away")
    try:
        since = time.time()
        failed = wait_for("a failed reconcile of cn2", lambda: [
            j for j in reconciles(CN2, since) if j["execution"] == "failed"], timeout=20,
            every=0.2)[0]
        err = failed["chain_results"][0]["error"]
        assert failed["chain_results"][0]["name"] == "scan" and \
            err["code"] == "DataRootUnreadable", failed["chain_results"]
        assert len(failed["chain_results"]) == 1, failed["chain_results"]
        assert nics_of(VMS[2]) == before
        assert lab.vm_of(VMS[2])["state"] == "running"
    finally:
        os.rename(root + ".away", root)
    runs = fresh_runs(CN2)
    assert all(r == EMPTY for r in runs), runs
    assert nics_of(VMS[2]) == before
    # An instance whose vm.json cannot be read: the scan cannot tell what is there.
    bad = lab.vm_dir(CN2, GHOST)
    os.makedirs(bad)
    with open(os.path.join(bad, "vm.json"), "w") as f:
        f.write('{"uuid": ')
    try:
        since = time.time()
        failed = wait_for("a reconcile of cn2 failing on the bad vm.json", lambda: [
            j for j in reconciles(CN2, since) if j["execution"] == "failed"], timeout=20,
            every=0.2)[0]
        err = failed["chain_results"][0]["error"]
        assert err["code"] == "InstanceUnreadable" and GHOST in err["message"], err
        assert nics_of(VMS[2]) == before
    finally:
        shutil.rmtree(bad)
    runs = fresh_runs(CN2)
    assert all(r == EMPTY for r in runs), runs
    # A create at work (a directory, no vm.json yet) and a symlink named like an
    # instance are no instances: not listed, nothing changed.
    os.makedirs(bad)
    os.symlink(lab.vm_dir(CN2, VMS[2]), lab.vm_dir(CN2, VMS[5]))
    try:
        since = time.time()
        fresh_runs(CN2)
        for j in reconciles(CN2, since):
            scan = j["chain_results"][0]["result"]
            assert [i["uuid"] for i in scan["instances"]] == [VMS[2]], scan
            assert reconcile_result(j) == EMPTY, j
        assert nics_of(VMS[2]) == before
    finally:
        os.rmdir(bad)
        os.unlink(lab.vm_dir(CN2, VMS[5]))


def test_delete_frees_nics_without_the_reconcile():
    # 15: cn1's schedule paused; vm-delete of vm2 frees its NICs and IPs itself.
    with paused("cn1", CN1):
        vm2 = lab.vm_of(VMS[1])
        since = time.time()
        job = lab.run_job("vm-delete", "/delete-" + VMS[1], {"vm_uuid": VMS[1]})
        assert job["execution"] == "succeeded", job
        assert nics_of(VMS[1]) == {}
        for nic in vm2["nics"]:
            assert nic["ip"] not in taken(nic["network_uuid"]), nic
        assert not os.path.exists(lab.vm_dir(CN1, VMS[1]))
        assert reconciles(CN1, since) == []
    runs = fresh_runs(CN1)
    assert all(r == EMPTY for r in runs), runs
    lab.check_inventory()


def test_restart_agent_makes_its_start_reconcile():
    # 10 at an agent's restart: one job, due 1 to 2 s after.
    p = lab.run("restart-agent", "cn2", "--dir", lab.dir)
    m = re.search(r"net-reconcile of cn2 in [0-9.]+ s \(job ([0-9a-f-]{36})\)", p.stdout)
    assert m, p.stdout
    j = lab.job_of(m.group(1))
    assert j["params"] == {"server_uuid": CN2, "reason": "agent-start"} and j["target"] == "/net-reconcile-" + CN2, j
    delay = iso_s(j["exec_after"]) - iso_s(j["created_at"])
    assert DELAY[0] - 0.2 <= delay <= DELAY[1], (delay, j)
    done = lab.wait_job(j["uuid"], timeout=30)
    assert done["execution"] == "succeeded" and reconcile_result(done) == EMPTY, done


def test_up_again_keeps_or_remakes_the_schedules():
    # The lab's schedules by name: up again on the same directory keeps them (same
    # uuids, no second of a name); an interval changed in the description remakes them.
    def mine():
        return {s["name"]: s for s in lab.http("/schedules?limit=1000")[1]
                if s["name"].startswith("net-reconcile@")}
    before = mine()
    # share-watch@<hostname> is made once its workflow is stored (a stand-in here when
    # the control has none).
    if lab.http("/workflows/volume-share-watch")[0] == 404:
        status, body = lab.http("/workflows", "POST", {
            "name": "volume-share-watch", "version": "0.0.1",
            "chain": [{"name": "log", "task": "core.log", "args": {"msg": "share watch"}}]})
        assert status == 201, body
    lab.down()
    lab.up()
    again = mine()
    watch = {s["name"]: s for s in lab.http("/schedules?limit=1000")[1]
             if s["name"].startswith("share-watch@")}
    assert set(watch) == {"share-watch@cn1", "share-watch@cn2"}, watch
    for host, server in (("cn1", CN1), ("cn2", CN2)):
        w = watch["share-watch@" + host]
        assert (w["workflow"], w["every"], w["params"], w["target"], w["overlap"]) == (
            "volume-share-watch", "5s", {"server_uuid": server},
            "/volume-share-watch-" + server, "skip"), w
    assert {n: s["uuid"] for n, s in again.items()} == \
        {n: s["uuid"] for n, s in before.items()}, (before, again)
    lab.datacenter["settings"]["net_reconcile_every_s"] = EVERY_S + 1
    lab.down()
    lab.up()
    changed = mine()
    assert set(changed) == set(before), changed
    for n, s in changed.items():
        assert s["every"] == f"{EVERY_S + 1}s" and s["uuid"] != before[n]["uuid"], s
        assert lab.http("/schedules/" + before[n]["uuid"])[0] == 404
    runs = fresh_runs(CN1, timeout=40)
    assert all(r == EMPTY for r in runs), runs


TESTS = [test_schedules_listed_and_start_reconciles_due_in_the_window,
         test_provisions_beside_reconciles_and_vanished_vm_reaped,
         test_leaks_reaped_server_and_other_nics_fixed_never_reaped,
         test_old_nics_backfilled_and_stuck_state_fixed,
         test_old_nic_of_a_gone_vm_backfilled_then_reaped,
         test_another_servers_nics_untouched,
         test_migrating_vm_untouched_on_both_servers,
         test_unreadable_data_root_reaps_nothing,
         test_delete_frees_nics_without_the_reconcile,
         test_restart_agent_makes_its_start_reconcile,
         test_up_again_keeps_or_remakes_the_schedules]


if __name__ == "__main__":
    up_started = time.time()
    run_tests(lab, TESTS, only=sys.argv[3:])
