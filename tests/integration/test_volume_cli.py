#!/usr/bin/env python3
"""The volume commands of the CLI on a real lab of the test's own, against the workflows
volume-create, volume-delete, volume-update, volume-snapshot-create,
volume-snapshot-delete, volume-rollback, volume-attach-network, volume-detach-network
and provision (its volumes), and the views GET /volumes, /volumes/:uuid and
/volumesizes:

* `tern volume sizes` shows the 19 sizes in G; every SIZE of a bad form (10, 10M, 1T,
  10GB, 10GiB, 0G, -10G, 1.5G, "", G) is refused before any request, and one the
  datacenter does not offer (1100G, 21G) with Triton's words, both creating no job;
* `tern volume create` (-n, -s, -N by name, --tag, --owner, $TERN_OWNER_UUID, -w)
  creates the job of volume-create with the target /volume-create-<uuid> and the uuid
  the CLI drew; without -n the volume is named vol-<8 hex>, without -N it is on the
  owner's first fabric network; `list` and `get` show them (-j, -o, -H, --state,
  --name), sizes in G and networks by name;
* a VOL by name, uuid and 8+ character prefix; an unknown VOL, another owner's volume
  and an ambiguous prefix are refused naming the word, with no job;
* the admission check's refusals (a name taken, a network not the owner's fabric, a
  volume in use without --force) are printed with their code, exit 3, and create no
  job;
* rename, snapshot create/list/delete, rollback, attach-network and detach-network
  with -w, each checked on the record (and the snapshot's directory on the agent);
* `tern vm create -v NAME:/MOUNT[:ro]` mounts the owner's volumes; `tern vm get` shows
  volumes and sdc:volumes; the mount links on the server; REFS counts the instance; a
  bad -v value (no mountpoint, relative, mode rx, no name, `-v /bar -v foo:/bar`) is
  refused before any job; a volume the owner does not have is created by the
  provision (Docker semantics) and listed;
* a watched job that fails (a rollback to a snapshot whose copy is gone) exits 1 with
  its error, and the failed volume is still found by its name;
* `tern volume delete` of a volume in use is VolumeInUse naming the instance; once the
  instance is gone the volume is deleted (GET 404), and --force deletes one in use.

Usage: test_volume_cli.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves
a failed run's lab up to look into.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import Lab, run_tests, user_jobs, wait_for  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]

OWNER = "5a4f2f8c-1e0b-4a36-9a55-0c3f7f0e2b11"
OTHER = "6b5a3a9d-2f1c-4b47-8b66-1d4a8a1f3c22"
CN1 = "a0000000-0000-4000-8000-0000000000f1"
CN2 = "a0000000-0000-4000-8000-0000000000f2"
EXTERNAL = "b0000000-0000-4000-8000-0000000000f1"
FABRIC = "b0000000-0000-4000-8000-0000000000f2"
FABRIC2 = "b0000000-0000-4000-8000-0000000000f3"
OTHERS_FABRIC = "b0000000-0000-4000-8000-0000000000f4"
ZONE = "c0000000-0000-4000-8000-0000000000f1"
BASE_IMG = "d0000000-0000-4000-8000-0000000000f1"

DATACENTER = {
    "servers": [
        {"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 4194304, "data_root": "servers/cn1"},
        {"uuid": CN2, "hostname": "cn2", "rack": "r1", "ram_mib": 65536,
         "disk_mib": 4194304, "data_root": "servers/cn2"},
    ],
    "networks": [
        {"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
         "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
         "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500},
        {"uuid": FABRIC, "name": "fabric", "subnet": "192.168.128.0/24",
         "gateway": "192.168.128.1", "provision_start_ip": "192.168.128.200",
         "provision_end_ip": "192.168.128.250", "vlan_id": 128, "mtu": 8500,
         "fabric": True, "owner_uuids": [OWNER]},
        {"uuid": FABRIC2, "name": "fabric2", "subnet": "192.168.129.0/24",
         "gateway": "192.168.129.1", "provision_start_ip": "192.168.129.200",
         "provision_end_ip": "192.168.129.250", "vlan_id": 129, "mtu": 8500,
         "fabric": True, "owner_uuids": [OWNER]},
        {"uuid": OTHERS_FABRIC, "name": "others-fabric", "subnet": "192.168.130.0/24",
         "gateway": "192.168.130.1", "provision_start_ip": "192.168.130.200",
         "provision_end_ip": "192.168.130.250", "vlan_id": 130, "mtu": 8500,
         "fabric": True, "owner_uuids": [OTHER]},
    ],
    "packages": [
        {"uuid": ZONE, "name": "lab-zone", "brand": "joyent", "ram_mib": 512, "vcpus": 1,
         "disk_mib": 10240},
    ],
    "images": [
        {"uuid": BASE_IMG, "name": "lab-base", "version": "1.0", "size_mib": 2048,
         "file": "images/lab-base.img", "brand": "joyent"},
    ],
    "settings": {},
}

SIZES_MIB = [g * 1024 for g in list(range(10, 101, 10)) + list(range(200, 1001, 100))]
NOT_AVAILABLE = "volume size not available, use tern volume sizes command for available sizes"

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-volume-cli-")
lab.env["TERN_OWNER_UUID"] = OWNER


def tern(*args, check=True):
    return lab.tern(*args, check=check)


def jobs():
    """The jobs not made by a schedule, by uuid."""
    return {j["uuid"]: j for j in user_jobs(lab.list_all("/jobs"))}


def refused_before_any_job(args, status, *words):
    """`tern ARGS` exits `status` naming each of `words` on stderr, and no job is made."""
    before = set(jobs())
    p = tern(*args, check=False)
    assert p.returncode == status, (args, p.returncode, p.stdout, p.stderr)
    for w in words:
        assert w in p.stderr, (args, w, p.stderr)
    assert set(jobs()) == before, (args, "a job was created")
    return p


def new_job(before, workflow):
    """The one job of `workflow` made since `before` (a set of uuids)."""
    made = [j for u, j in jobs().items() if u not in before]
    assert len(made) == 1 and made[0]["name"] == workflow, made
    return made[0]


def volumes(owner=OWNER):
    return lab.list_all("/volumes?owner_uuid=" + owner)


def volume_named(name, owner=OWNER):
    live = [v for v in volumes(owner) if v["name"] == name and v["state"] != "failed"]
    assert len(live) == 1, (name, volumes(owner))
    return live[0]


def volume_of(uuid):
    status, v = lab.http("/volumes/" + uuid)
    return v if status == 200 else None


def rows(out):
    return [line.split() for line in out.splitlines()]


# ---- sizes and every bad SIZE ------------------------------------------------------


def test_sizes():
    out = rows(tern("volume", "sizes").stdout)
    assert out[0] == ["SIZE", "MIB", "TYPE"], out
    assert out[1:] == [["%dG" % (m // 1024), str(m), "tritonnfs"] for m in SIZES_MIB], out
    status, api = lab.http("/volumesizes")
    assert status == 200 and json.loads(tern("volume", "sizes", "-j").stdout) == api, api
    assert tern("volume", "sizes", "-H", "-o", "mib").stdout.split() == [str(m) for m in SIZES_MIB]


def test_bad_sizes():
    for size in ("10", "10M", "1T", "10GB", "10GiB", "0G", "1.5G", "", "G", "10 G"):
        refused_before_any_job(["volume", "create", "-n", "bad", "-s", size], 2,
                               'size "%s"' % size)
    # -s takes the word after it whatever it starts with: a negative size is a size.
    refused_before_any_job(["volume", "create", "-s", "-10G"], 2, 'size "-10G": expected')
    refused_before_any_job(["volume", "create", "--size=-10G"], 2, 'size "-10G": expected')
    refused_before_any_job(["volume", "create", "-s", "10", "-n", "bad"], 2,
                           "the unit G is required")
    for size in ("1100G", "21G", "110g"):
        refused_before_any_job(["volume", "create", "-n", "bad", "-s", size], 2,
                               'size "%s": %s' % (size, NOT_AVAILABLE))
    assert volumes() == []


def test_bad_arguments():
    refused_before_any_job(["volume", "create", "-n", "a"], 2, '-n "a"',
                           "at least 2 characters")
    refused_before_any_job(["volume", "create", "-n", "-x"], 2, '-n "-x"',
                           "must start with a letter or a digit")
    refused_before_any_job(["volume", "create", "--name", "x/y"], 2, '-n "x/y"')
    refused_before_any_job(["volume", "create", "--owner", "nobody"], 2,
                           '--owner "nobody": expected a uuid')
    lab.env["TERN_OWNER_UUID"] = "not-a-uuid"
    try:
        refused_before_any_job(["volume", "list"], 2, 'TERN_OWNER_UUID "not-a-uuid"')
    finally:
        lab.env["TERN_OWNER_UUID"] = OWNER
    refused_before_any_job(["volume", "create", "--tag", "novalue"], 2,
                           '--tag "novalue": expected KEY=VALUE')
    refused_before_any_job(["volume", "create", "-N", "nosuchnet"], 3, "ResourceNotFound",
                           "nosuchnet")
    refused_before_any_job(["volume", "create", "extra"], 2, 'unexpected argument "extra"')
    for verb in (["get"], ["delete"], ["rename", "x"], ["snapshot", "list"],
                 ["snapshot", "create"], ["rollback"], ["attach-network"]):
        p = refused_before_any_job(["volume", *verb], 2, "missing")
        assert "VOL" in p.stderr or "NAME" in p.stderr or "NETWORK" in p.stderr, p.stderr
    refused_before_any_job(["volume", "get", "nosuch"], 3, "VolumeNotFound", '"nosuch"', OWNER)
    refused_before_any_job(["volume", "delete", "nosuch", "-w"], 3, "VolumeNotFound")
    refused_before_any_job(["volume", "rename", "nosuch", "okname"], 3, "VolumeNotFound")
    refused_before_any_job(["volume", "snapshot", "create", "nosuch", "s1"], 3, "VolumeNotFound")
    refused_before_any_job(["volume", "bogus"], 2, 'unknown verb "bogus"')


# ---- create, list, get -------------------------------------------------------------


def test_create():
    before = set(jobs())
    p = tern("volume", "create", "-n", "data", "-s", "20G", "-N", "fabric", "--tag", "env=test",
             "-w")
    job = new_job(before, "volume-create")
    v = volume_named("data")
    assert job["target"] == "/volume-create-" + v["uuid"], job
    assert job["params"]["volume_uuid"] == v["uuid"] and job["params"]["owner_uuid"] == OWNER
    assert job["params"]["size"] == 20480 and job["params"]["networks"] == [FABRIC], job
    assert job["execution"] == "succeeded", job
    assert "Creating volume data (%s): job %s" % (v["uuid"], job["uuid"]) in p.stdout, p.stdout
    assert v["state"] == "ready" and v["size"] == 20480 and v["networks"] == [FABRIC], v
    assert v["tags"] == {"env": "test"} and v["type"] == "tritonnfs" and v["refs"] == [], v
    assert v["owner_uuid"] == OWNER and v["filesystem_path"].endswith(":/exports/data"), v

    # No name, no size, no network, and not watched: vol-<8 hex>, 10G, the owner's first
    # fabric network; the job's uuid is printed and the job waited for here.
    before = set(jobs())
    p = tern("volume", "create", "-s", "100g")
    m = re.fullmatch(r"Creating volume ([0-9a-f-]{36}): job ([0-9a-f-]{36})\n", p.stdout)
    assert m, p.stdout
    assert lab.wait_job(m.group(2))["execution"] == "succeeded"
    assert new_job(before, "volume-create")["uuid"] == m.group(2)
    v = volume_of(m.group(1))
    assert re.fullmatch(r"vol-[0-9a-f]{8}", v["name"]) and v["size"] == 102400, v
    assert v["networks"] == [FABRIC] and v["state"] == "ready", v

    # --owner and $TERN_OWNER_UUID: the other owner's volume, on its own fabric network.
    # A network by uuid (the networks have no view of one record: the list is read).
    tern("volume", "create", "-n", "data", "--owner", OTHER, "-N", OTHERS_FABRIC, "-w")
    assert volume_named("data", OTHER)["networks"] == [OTHERS_FABRIC]
    lab.env["TERN_OWNER_UUID"] = OTHER
    try:
        assert [r[0] for r in rows(tern("volume", "list", "-H").stdout)] == ["data"]
    finally:
        lab.env["TERN_OWNER_UUID"] = OWNER


def test_create_refused():
    # The admission check's refusals: with their code, exit 3, no job, nothing stored.
    n = len(volumes())
    refused_before_any_job(["volume", "create", "-n", "data"], 3, "tern: VolumeAlreadyExists:")
    refused_before_any_job(["volume", "create", "-n", "ext", "-N", "external"], 3,
                           "tern: InvalidArgument:", "networks")
    refused_before_any_job(["volume", "create", "-n", "theirs", "-N", "others-fabric"], 3,
                           "tern: InvalidArgument:", "networks")
    assert len(volumes()) == n


def test_list_and_get():
    data = volume_named("data")
    out = tern("volume", "list").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATE", "SIZE", "NETWORKS", "REFS", "CREATED"], out
    row = next(r.split() for r in out[1:] if r.split()[0] == "data")
    assert row == ["data", "ready", "20G", "fabric", "0", data["create_timestamp"]], row
    assert len(out) == 3, out  # data and the vol-<hex> one; the other owner's not shown
    assert json.loads(tern("volume", "list", "-j").stdout) == volumes()
    assert rows(tern("volume", "list", "-H", "-o", "name,size,uuid", "--name", "da*").stdout) == [
        ["data", "20G", data["uuid"]]]
    assert rows(tern("volume", "list", "-H", "-o", "name", "--name", "*ata").stdout) == [["data"]]
    assert tern("volume", "list", "-H", "--state", "failed").stdout == ""
    assert len(rows(tern("volume", "list", "-H", "--state", "ready").stdout)) == 2
    refused_before_any_job(["volume", "list", "--state", "bogus"], 3, "InvalidArgument", "state")

    # VOL: name, uuid, prefix; each shows the same record.
    for ref in ("data", data["uuid"], data["uuid"][:8], data["uuid"][:13]):
        assert json.loads(tern("volume", "get", ref, "-j").stdout) == data, ref
    out = tern("volume", "get", "data").stdout
    fields = {l.split()[0]: l.split(None, 1)[1] for l in out.splitlines() if l.strip()}
    assert fields["size"] == "20G (20480 MiB)" and fields["networks"] == "fabric", fields
    assert fields["state"] == "ready" and fields["uuid"] == data["uuid"], fields
    assert tern("volume", "get", "data", "-H", "-o", "share_state").stdout.strip() in (
        "running", "unknown")
    # Another owner's volume, by uuid or name: not found, as if it did not exist.
    refused_before_any_job(["volume", "get", data["uuid"], "--owner", OTHER], 3,
                           "VolumeNotFound", data["uuid"])
    theirs = volume_named("data", OTHER)
    refused_before_any_job(["volume", "get", theirs["uuid"]], 3, "VolumeNotFound")
    refused_before_any_job(["volume", "delete", theirs["uuid"][:8]], 3, "VolumeNotFound")
    assert json.loads(tern("volume", "get", "data", "--owner", OTHER, "-j").stdout) == theirs
    # A prefix shorter than 8 is not one.
    refused_before_any_job(["volume", "get", data["uuid"][:7]], 3, "VolumeNotFound",
                           "at least 8 characters")


def test_ambiguous_prefix():
    # Two volumes whose uuids share 8 characters (made through the API, whose uuid the
    # test chooses): the prefix names neither, a longer one or the name names one.
    made = []
    for i in (1, 2):
        u = "abcdef01-%d%d%d%d-4000-8000-000000000000" % (i, i, i, i)
        job = lab.run_job("volume-create", "/volume-create-" + u,
                          {"volume_uuid": u, "owner_uuid": OWNER, "name": "twin%d" % i})
        assert job["execution"] == "succeeded", job
        made.append(u)
    p = refused_before_any_job(["volume", "get", "abcdef01"], 3, "tern: AmbiguousName:",
                               '"abcdef01"', made[0], made[1])
    refused_before_any_job(["volume", "delete", "abcdef01-"], 3, "AmbiguousName")
    assert json.loads(tern("volume", "get", "abcdef01-2", "-j").stdout)["uuid"] == made[1]
    assert json.loads(tern("volume", "get", "twin1", "-j").stdout)["uuid"] == made[0]
    for u in made:
        tern("volume", "delete", u, "-w")
        assert volume_of(u) is None
    assert "name one by its uuid" in p.stderr


# ---- rename, snapshots, rollback, networks -----------------------------------------


def test_rename():
    data = volume_named("data")
    before = set(jobs())
    tern("volume", "rename", "data", "data2", "-w")
    job = new_job(before, "volume-update")
    assert job["target"] == "/volume-update-" + data["uuid"], job
    assert job["params"] == {"volume_uuid": data["uuid"], "owner_uuid": OWNER, "name": "data2"}
    assert volume_of(data["uuid"])["name"] == "data2"
    refused_before_any_job(["volume", "get", "data"], 3, "VolumeNotFound")
    refused_before_any_job(["volume", "rename", "data2", "bad name"], 2, 'NEWNAME "bad name"')
    vol_x = next(v for v in volumes() if v["name"].startswith("vol-"))
    refused_before_any_job(["volume", "rename", "data2", vol_x["name"]], 3,
                           "tern: VolumeAlreadyExists:")
    tern("volume", "rename", data["uuid"][:8], "data", "-w")
    assert volume_of(data["uuid"])["name"] == "data"


def storage_dir(v):
    """The storage instance's directory on its server."""
    return os.path.dirname(v["export_path"])


def test_snapshots():
    data = volume_named("data")
    with open(os.path.join(data["export_path"], "before.txt"), "w") as f:
        f.write("before\n")
    assert tern("volume", "snapshot", "list", "data", "-H").stdout == ""
    before = set(jobs())
    tern("volume", "snapshot", "create", "data", "s1", "-w")
    job = new_job(before, "volume-snapshot-create")
    assert job["target"] == "/volume-snapshot-create-" + data["uuid"], job
    assert job["params"] == {"volume_uuid": data["uuid"], "owner_uuid": OWNER, "name": "s1"}
    out = rows(tern("volume", "snapshot", "list", "data").stdout)
    assert out[0] == ["NAME", "STATE", "CREATED"] and out[1][:2] == ["s1", "created"], out
    snap = os.path.join(storage_dir(data), "snapshots", "s1")
    assert os.path.isfile(os.path.join(snap, "before.txt")), os.listdir(snap)
    assert [s["name"] for s in json.loads(
        tern("volume", "snapshot", "list", data["uuid"], "-j").stdout)] == ["s1"]
    assert "snapshots:" in tern("volume", "get", "data").stdout
    refused_before_any_job(["volume", "snapshot", "create", "data", "s1"], 3,
                           "tern: VolumeSnapshotAlreadyExists:")
    refused_before_any_job(["volume", "snapshot", "delete", "data", "nosuch"], 3,
                           "tern: VolumeSnapshotNotFound:")
    refused_before_any_job(["volume", "rollback", "data", "nosuch"], 3,
                           "tern: VolumeSnapshotNotFound:")

    # A rollback brings back what the snapshot held and drops what came after.
    os.unlink(os.path.join(data["export_path"], "before.txt"))
    with open(os.path.join(data["export_path"], "after.txt"), "w") as f:
        f.write("after\n")
    before = set(jobs())
    tern("volume", "rollback", "data", "s1", "-w")
    assert new_job(before, "volume-rollback")["target"] == "/volume-rollback-" + data["uuid"]
    assert sorted(os.listdir(data["export_path"])) == ["before.txt"]
    assert volume_of(data["uuid"])["state"] == "ready"

    tern("volume", "snapshot", "delete", "data", "s1", "-w")
    assert json.loads(tern("volume", "snapshot", "list", "data", "-j").stdout) == []
    assert not os.path.exists(snap)


def test_networks():
    data = volume_named("data")
    before = set(jobs())
    tern("volume", "attach-network", "data", "fabric2", "-w")
    job = new_job(before, "volume-attach-network")
    assert job["target"] == "/volume-attach-network-" + data["uuid"], job
    assert job["params"] == {"volume_uuid": data["uuid"], "owner_uuid": OWNER,
                             "network_uuid": FABRIC2}
    assert volume_of(data["uuid"])["networks"] == [FABRIC, FABRIC2]
    row = next(r for r in rows(tern("volume", "list", "-H").stdout) if r[0] == "data")
    assert row[3] == "fabric,fabric2", row
    refused_before_any_job(["volume", "attach-network", "data", "nosuchnet"], 3,
                           "ResourceNotFound", "nosuchnet")
    refused_before_any_job(["volume", "attach-network", "data", "external"], 3,
                           "tern: InvalidArgument:")
    tern("volume", "detach-network", "data", FABRIC2, "-w")
    assert volume_of(data["uuid"])["networks"] == [FABRIC]


# ---- volumes at provision ----------------------------------------------------------


def test_vm_create_bad_volumes():
    base = ["vm", "create", "--package", "lab-zone", "--image", "lab-base", "--network",
            "fabric"]
    for spec, words in (("data", ['--volume "data"', "no mountpoint"]),
                        ("data:mnt", ['--volume "data:mnt"', "not absolute"]),
                        ("data:/mnt:rx", ['--volume "data:/mnt:rx"', 'mode "rx"']),
                        (":/mnt", ['--volume ":/mnt"', "no volume name"]),
                        ("data:/a/../b", ['".." segment']),
                        ("x:/mnt", ['volume name "x"'])):
        refused_before_any_job(base + ["-v", spec], 2, *words)
        refused_before_any_job(base + ["--volume", spec], 2, *words)
    refused_before_any_job(base + ["-v", "/bar", "-v", "data:/bar"], 2,
                           '--volume "data:/bar": mountpoint /bar is also that of --volume "/bar"')
    refused_before_any_job(base + ["-v", "data:/x", "-v", "logs:/x/"], 2,
                           "mountpoint /x/ is also that of")


def test_vm_with_volumes():
    data = volume_named("data")
    tern("volume", "create", "-n", "logs", "-w")
    logs = volume_named("logs")
    assert logs["state"] == "ready" and logs["size"] == 10240, logs
    before = set(jobs())
    tern("vm", "create", "--alias", "web0", "--package", "lab-zone", "--image", "lab-base",
         "--network", "fabric", "-v", "data:/data", "--volume", "logs:/var/log/app:ro", "-w")
    prov = new_job(before, "provision")
    assert prov["params"]["volumes"] == [
        {"name": "data", "mountpoint": "/data", "mode": "rw"},
        {"name": "logs", "mountpoint": "/var/log/app", "mode": "ro"}], prov["params"]
    assert prov["execution"] == "succeeded", prov

    vm = json.loads(tern("vm", "get", "web0", "-j").stdout)
    assert [(m["name"], m["mountpoint"], m["mode"], m["volume_uuid"]) for m in vm["volumes"]] == [
        ("data", "/data", "rw", data["uuid"]), ("logs", "/var/log/app", "ro", logs["uuid"])]
    sdc = json.loads(vm["internal_metadata"]["sdc:volumes"])
    assert sdc == [
        {"mountpoint": "/data", "name": "data", "nfsvolume": data["filesystem_path"],
         "mode": "rw", "type": "tritonnfs"},
        {"mountpoint": "/var/log/app", "name": "logs", "nfsvolume": logs["filesystem_path"],
         "mode": "ro", "type": "tritonnfs"}], sdc
    out = tern("vm", "get", "web0").stdout
    sections = out.split("\n\n")
    vols = next(s for s in sections if s.startswith("volumes:")).splitlines()
    assert vols[1].split() == ["NAME", "MOUNTPOINT", "MODE", "TYPE", "VOLUME"], vols
    assert vols[2].split() == ["data", "/data", "rw", "tritonnfs", data["uuid"]], vols
    assert vols[3].split() == ["logs", "/var/log/app", "ro", "tritonnfs", logs["uuid"]], vols
    sdcs = next(s for s in sections if s.startswith("sdc:volumes:")).splitlines()
    assert sdcs[1].split() == ["MOUNTPOINT", "NAME", "NFSVOLUME", "MODE", "TYPE"], sdcs
    assert sdcs[2].split() == ["/data", "data", data["filesystem_path"], "rw", "tritonnfs"]

    # The instance's mounts on its server: a symlink to each volume's export.
    vm_dir = lab.vm_dir(vm["server_uuid"], vm["uuid"])
    assert os.path.realpath(os.path.join(vm_dir, "mounts", "data")) == os.path.realpath(
        data["export_path"])
    assert os.path.realpath(os.path.join(vm_dir, "mounts", "var", "log", "app")) == \
        os.path.realpath(logs["export_path"])
    row = next(r for r in rows(tern("volume", "list", "-H").stdout) if r[0] == "data")
    assert row[4] == "1", row
    assert volume_of(data["uuid"])["refs"] == [vm["uuid"]]


def test_watched_failure():
    # A job that fails once admitted: -w follows it to its end and exits 1 with its
    # error; the volume, failed, is still named by its name and listed by its state.
    tern("volume", "create", "-n", "frail", "-w")
    v = volume_named("frail")
    tern("volume", "snapshot", "create", "frail", "s1", "-w")
    snap = os.path.join(storage_dir(v), "snapshots", "s1")
    for name in os.listdir(snap):
        os.unlink(os.path.join(snap, name))
    os.rmdir(snap)
    before = set(jobs())
    p = tern("volume", "rollback", "frail", "s1", "-w", check=False)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    job = new_job(before, "volume-rollback")
    assert job["execution"] == "failed", job
    assert "Rolling back to snapshot s1 of volume frail (%s): job %s" % (
        v["uuid"], job["uuid"]) in p.stdout, p.stdout
    assert "VolumeSnapshotNotFound" in p.stdout + p.stderr, (p.stdout, p.stderr)
    assert json.loads(tern("volume", "get", "frail", "-j").stdout)["state"] == "failed"
    assert ["frail"] in rows(tern("volume", "list", "-H", "-o", "name", "--state",
                                  "failed").stdout)


def test_delete():
    data, logs = volume_named("data"), volume_named("logs")
    vm = json.loads(tern("vm", "get", "web0", "-j").stdout)
    # In use: refused naming the instance; renaming it likewise.
    refused_before_any_job(["volume", "delete", "data"], 3, "tern: VolumeInUse:", vm["uuid"])
    refused_before_any_job(["volume", "rename", "data", "data3"], 3, "tern: VolumeInUse:")
    # --force deletes one in use.
    before = set(jobs())
    tern("volume", "delete", "logs", "--force", "-w")
    job = new_job(before, "volume-delete")
    assert job["target"] == "/volume-delete-" + logs["uuid"], job
    assert job["params"] == {"volume_uuid": logs["uuid"], "owner_uuid": OWNER, "force": True}
    assert volume_of(logs["uuid"]) is None
    # The instance gone, the volume is free to delete.
    tern("vm", "delete", "web0", "-w")
    wait_for("data's refs to drop", lambda: volume_of(data["uuid"])["refs"] == [], timeout=30)
    before = set(jobs())
    p = tern("volume", "delete", "data", "-w")
    assert "Deleting volume data (%s)" % data["uuid"] in p.stdout, p.stdout
    assert new_job(before, "volume-delete")["params"] == {"volume_uuid": data["uuid"],
                                                           "owner_uuid": OWNER}
    assert volume_of(data["uuid"]) is None
    assert not os.path.exists(storage_dir(data))
    refused_before_any_job(["volume", "get", data["uuid"]], 3, "VolumeNotFound")
    # What is left: the vol-<hex> one and the other owner's.
    for v in volumes() + volumes(OTHER):
        tern("volume", "delete", v["uuid"], "--owner", v["owner_uuid"], "-w")
    assert volumes() == [] and volumes(OTHER) == []
    assert tern("volume", "list", "-H").stdout == ""
    lab.check_inventory()


def test_vm_creates_volume():
    # A volume the owner does not have is created by the provision (Docker semantics),
    # 10G on the instance's fabric network, and mounted; `tern volume list` shows it.
    before = set(jobs())
    tern("vm", "create", "--alias", "web1", "--package", "lab-zone", "--image", "lab-base",
         "--network", "fabric", "-v", "fresh:/srv/fresh", "-w")
    prov = next(j for u, j in jobs().items() if u not in before and j["name"] == "provision")
    assert prov["execution"] == "succeeded", prov
    fresh = volume_named("fresh")
    assert fresh["state"] == "ready" and fresh["size"] == 10240, fresh
    assert fresh["networks"] == [FABRIC] and fresh["created_by_job"] == prov["uuid"], fresh
    vm = json.loads(tern("vm", "get", "web1", "-j").stdout)
    assert [m["volume_uuid"] for m in vm["volumes"]] == [fresh["uuid"]], vm["volumes"]
    assert rows(tern("volume", "list", "-H", "-o", "name,state,size,refs").stdout) == [
        ["fresh", "ready", "10G", "1"]]
    tern("vm", "delete", "web1", "-w")
    wait_for("fresh's refs to drop", lambda: volume_of(fresh["uuid"])["refs"] == [], timeout=30)
    tern("volume", "delete", "fresh", "-w")
    assert volumes() == []
    lab.check_inventory()


# The workflows each test needs beyond volume-create and volume-delete ("W:TASK": W
# must use TASK).
TESTS = [(test_sizes, []), (test_bad_sizes, []), (test_bad_arguments, []), (test_create, []),
         (test_create_refused, []), (test_list_and_get, []), (test_ambiguous_prefix, []),
         (test_rename, ["volume-update"]),
         (test_snapshots, ["volume-snapshot-create", "volume-snapshot-delete",
                           "volume-rollback"]),
         (test_networks, ["volume-attach-network", "volume-detach-network"]),
         (test_watched_failure, ["volume-snapshot-create", "volume-rollback"]),
         (test_vm_create_bad_volumes, []), (test_vm_with_volumes, ["provision:dc.volumes_reserve"]),
         (test_delete, ["provision:dc.volumes_reserve"]),
         (test_vm_creates_volume, ["provision:dc.volumes_reserve"])]


def has_workflow(need):
    name, _, task = need.partition(":")
    path = os.path.join(SOURCE, "workflows", name + ".json")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return task in f.read()


def main():
    # A tree without the volume workflows (the CLI built alone) skips what needs them,
    # saying so, and exits 77 (meson's SKIP) rather than passing.
    if not all(has_workflow(w) for w in ("volume-create", "volume-delete")):
        print("skipped: no volume-create or volume-delete workflow in this tree")
        os.rmdir(lab.dir)  # made empty by Lab(), never brought up
        sys.exit(77)
    run, skipped = [], []
    for t, needs in TESTS:
        missing = [w for w in needs if not has_workflow(w)]
        (skipped if missing else run).append(t)
        if missing:
            print(f"skip {t.__name__}: no workflow {', '.join(missing)} in this tree")
    run_tests(lab, run, only=sys.argv[3:])
    if skipped:
        sys.exit(77)


if __name__ == "__main__":
    main()
