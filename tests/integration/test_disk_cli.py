#!/usr/bin/env python3
"""The disk commands of the CLI on a real lab of the test's own, against the workflows
disk-add, disk-resize, disk-delete, vm-snapshot-create, vm-snapshot-delete and
vm-disk-usage:

* `tern vm create --disks JSON` and `--disks @FILE` lay out a flexible instance's disks,
  and `tern vm get` shows flexible, flexible_disk_size, free_space and the disks;
* `tern vm disks` lists them by PCI slot (table, -H -o, -j, --refresh);
* two grows at once that fit alone but not together: exactly one succeeds, the other
  ends InsufficientSpace (refused, or failed and watched to its end);
* an inflexible instance: --disks refused at create, every disk command refused by the
  admission check with its code, nothing changed;
* `tern vm disk resize --watch` grows a disk named by slot, by id and by id prefix, with
  sizes in G, M and plain MiB: the record, the file's apparent size (still sparse) and
  free_space follow; `--dangerous-allow-shrink` shrinks a stopped instance's disk;
* `tern vm disk add --watch` (a size, `remaining`, `--pci-slot`) and `tern vm disk
  delete --watch` on a stopped instance, files and slots checked;
* `tern vm snapshot create|list|delete` with the snapshot's directory on the agent,
  and `tern vm disks --refresh` showing the space a snapshot takes once what it holds
  is overwritten;
* every bad SIZE and DISK, and a shrink without --dangerous-allow-shrink, is refused
  before any request creates a job (the job count is unchanged) with a message naming
  it; a refusal of the admission check (not enough free space, a running instance,
  the boot disk, a snapshot name taken or unknown) is printed with its code and
  message, exit 3, and creates no job either.

Usage: test_disk_cli.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into.
"""
import json
import os
import subprocess
import sys

from lab_harness import MIB, Lab, run_tests

SOURCE, BUILD = sys.argv[1], sys.argv[2]

CN1 = "a0000000-0000-4000-8000-0000000000c1"
EXTERNAL = "b0000000-0000-4000-8000-0000000000c1"
FLEX = "c0000000-0000-4000-8000-0000000000c1"
RIGID = "c0000000-0000-4000-8000-0000000000c2"
OS_IMG = "d0000000-0000-4000-8000-0000000000c1"

# DOMAIN's numbers: a flexible package of 102400 MiB and an image of 10240 MiB with a
# MiB of data; nothing else is written, so every file stays sparse.
DATACENTER = {
    "servers": [{"uuid": CN1, "hostname": "cn1", "rack": "r1", "ram_mib": 65536,
                 "disk_mib": 2097152, "data_root": "servers/cn1"}],
    "networks": [{"uuid": EXTERNAL, "name": "external", "subnet": "203.0.113.0/24",
                  "gateway": "203.0.113.1", "provision_start_ip": "203.0.113.10",
                  "provision_end_ip": "203.0.113.250", "vlan_id": 0, "mtu": 1500}],
    "packages": [{"uuid": FLEX, "name": "flex", "brand": "bhyve", "ram_mib": 1024,
                  "vcpus": 1, "disk_mib": 102400, "flexible_disk": True},
                 {"uuid": RIGID, "name": "rigid", "brand": "bhyve", "ram_mib": 1024,
                  "vcpus": 1, "disk_mib": 20480}],
    "images": [{"uuid": OS_IMG, "name": "lab-os", "version": "1.0", "size_mib": 10240,
                "file": "images/lab-os.img", "brand": "bhyve"}],
    "settings": {},
}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-disk-cli-")


def tern(*args, check=True):
    return lab.tern(*args, check=check)


def job_count():
    return lab.user_job_count()


def vm(alias):
    return json.loads(tern("vm", "get", alias, "-j").stdout)


def disk_at(record, slot):
    return next(d for d in record["disks"] if d["pci_slot"] == slot)


def check_files(record):
    """Each disk's file is where the record says, of its size, and sparse."""
    for d in record["disks"]:
        assert d["path"].endswith("/disks/disk%s.img" % d["pci_slot"].split(":")[2]), d
        st = os.stat(d["path"])
        assert st.st_size == d["size"] * MIB, (d, st.st_size)
        assert st.st_blocks * 512 <= 16 * MIB, (d, st.st_blocks)  # a MiB of image data
    parts = [n for n in os.listdir(os.path.dirname(record["disks"][0]["path"]))
             if n.endswith(".part")]
    assert parts == [], parts


def refused_before_any_job(args, status, *words):
    """`tern ARGS` exits `status` naming each of `words` on stderr, and no job is made."""
    before = job_count()
    p = tern(*args, check=False)
    assert p.returncode == status, (args, p.returncode, p.stdout, p.stderr)
    for w in words:
        assert w in p.stderr, (args, w, p.stderr)
    assert job_count() == before, (args, "a job was created")
    return p


def test_create_with_disks():
    tern("vm", "create", "--alias", "d0", "--package", "flex", "--image", "lab-os",
         "--network", "external", "--disks", '[{}, {"size": 20480}]', "--watch")
    layout = os.path.join(lab.dir, "layout.json")
    with open(layout, "w") as f:
        json.dump([{}, {"size": 20480}, {"size": "remaining"}], f)
    tern("vm", "create", "--alias", "d1", "--package", "flex", "--image", "lab-os",
         "--network", "external", "--disks", "@" + layout, "--watch")

    r = vm("d0")
    assert r["flexible"] is True and r["flexible_disk_size"] == 102400, r
    assert r["free_space"] == 102400 - 10240 - 20480, r
    assert [(d["pci_slot"], d["size"], d["boot"]) for d in r["disks"]] == [
        ("0:4:0", 10240, True), ("0:4:1", 20480, False)], r["disks"]
    check_files(r)
    assert [d["size"] for d in vm("d1")["disks"]] == [10240, 20480, 71680]
    assert vm("d1")["free_space"] == 0

    # The human view shows the fields and the disks' table.
    out = tern("vm", "get", "d0").stdout
    for line in ("flexible            true", "flexible_disk_size  102400",
                 "free_space          71680"):
        key, value = line.split()
        assert any(l.split()[:2] == [key, value] for l in out.splitlines()), (line, out)
    assert "ID" in out and "SNAPSHOT_SIZE" in out and r["disks"][1]["id"] in out, out

    # A --disks that is not a JSON array is refused before anything is sent.
    refused_before_any_job(["vm", "create", "--package", "flex", "--image", "lab-os",
                            "--network", "external", "--disks", '{"size": 1}'], 2,
                           "expected a JSON array")
    refused_before_any_job(["vm", "create", "--package", "flex", "--image", "lab-os",
                            "--network", "external", "--disks", "[{"], 2, "--disks: line 1")


def test_disks_listing():
    r = vm("d1")
    out = tern("vm", "disks", "d1").stdout.splitlines()
    assert out[0].split() == ["ID", "PCI_SLOT", "SIZE", "BOOT", "SNAPSHOT_SIZE"], out
    rows = [l.split() for l in out[1:]]
    assert [x[1:] for x in rows] == [["0:4:0", "10240", "true", "0"],
                                     ["0:4:1", "20480", "false", "0"],
                                     ["0:4:2", "71680", "false", "0"]], out
    assert [x[0] for x in rows] == [d["id"] for d in r["disks"]]
    assert tern("vm", "disks", "d1", "-H", "-o", "pci_slot,size").stdout.split() == [
        "0:4:0", "10240", "0:4:1", "20480", "0:4:2", "71680"]
    assert json.loads(tern("vm", "disks", r["uuid"], "-j").stdout) == r["disks"]
    # --refresh measures on the agent (a job of vm-disk-usage) and shows the same.
    before = job_count()
    assert tern("vm", "disks", "d1", "--refresh").stdout.splitlines() == out
    assert job_count() == before + 1


def test_bad_sizes_and_disks():
    d0 = vm("d0")
    data = disk_at(d0, "0:4:1")
    for size in ("0", "0G", "-5", "-1G", "10GB", "10MiB", "1T", "1.5G", "g", "",
                 "99999999999999999999", "9007199254740992", "8796093022208G"):
        # A leading '-' reads as an option: refused as one, naming it.
        named = "unknown option " + size[:2] if size.startswith("-") else 'size "%s"' % size
        refused_before_any_job(["vm", "disk", "resize", "d0", "0:4:1", size], 2, named)
        refused_before_any_job(["vm", "disk", "add", "d0", size], 2, named)
        refused_before_any_job(["vm", "disk", "add", "d0", "--", size], 2, 'size "%s"' % size)
    refused_before_any_job(["vm", "disk", "resize", "d0", "0:4:1", "remaining"], 2,
                           '"remaining" is only for a new disk')
    refused_before_any_job(["vm", "disk", "add", "d0", "1G", "--pci-slot", "4"], 2,
                           '--pci-slot "4"')
    for disk, status, words in (("0:4:7", 3, ['no disk "0:4:7"', "0:4:0", "0:4:1"]),
                                ("ffffffff", 3, ['no disk "ffffffff"']),
                                (data["id"][:7], 2, ["at least 8 characters"]),
                                ("0:4", 2, ['disk "0:4"'])):
        refused_before_any_job(["vm", "disk", "resize", "d0", disk, "30G"], status, *words)
        refused_before_any_job(["vm", "disk", "delete", "d0", disk], status, *words)
    refused_before_any_job(["vm", "disk", "resize", "nosuchvm", "0:4:1", "30G"], 3,
                           "ResourceNotFound", "nosuchvm")
    # A shrink, or the same size, without --dangerous-allow-shrink.
    for size in ("10G", "20480", "20G"):
        refused_before_any_job(["vm", "disk", "resize", "d0", "0:4:1", size], 2,
                               "SIZE must be greater than the current size",
                               "--dangerous-allow-shrink")
    assert vm("d0")["disks"] == d0["disks"]


def test_resize_grow():
    r = vm("d0")
    data = disk_at(r, "0:4:1")
    tern("vm", "disk", "resize", "d0", "0:4:1", "30G", "--watch")
    r = vm("d0")
    assert disk_at(r, "0:4:1")["size"] == 30720 and r["free_space"] == 102400 - 10240 - 30720
    check_files(r)
    tern("vm", "disk", "resize", "d0", data["id"][:8], "31744M", "-w")
    tern("vm", "disk", "resize", "d0", data["id"], "32768", "-w")
    r = vm("d0")
    assert disk_at(r, "0:4:1")["size"] == 32768 and r["free_space"] == 102400 - 10240 - 32768
    assert disk_at(r, "0:4:1")["id"] == data["id"]
    check_files(r)
    # Growing past free_space: the admission check's refusal, with its code; no job.
    p = refused_before_any_job(["vm", "disk", "resize", "d0", "0:4:1", "100G", "-w"], 3,
                               "tern: InsufficientSpace:", "0:4:1")
    assert "free_space" in p.stderr, p.stderr
    assert disk_at(vm("d0"), "0:4:1")["size"] == 32768
    # What a running instance refuses, and the boot disk's delete: the admission check's.
    refused_before_any_job(["vm", "disk", "add", "d0", "1G", "-w"], 3, "tern: InvalidState:",
                           "running")
    refused_before_any_job(["vm", "disk", "delete", "d0", "0:4:1", "-w"], 3,
                           "tern: InvalidState:", "running")
    refused_before_any_job(["vm", "disk", "delete", "d0", "0:4:0"], 3,
                           "tern: InvalidArgument:", "boot disk")
    assert vm("d0")["disks"] == r["disks"]


def test_add_delete_shrink_stopped():
    tern("vm", "stop", "d0", "--watch")
    tern("vm", "disk", "add", "d0", "512M", "--watch")
    tern("vm", "disk", "add", "d0", "1G", "--pci-slot", "0:4:5", "-w")
    r = vm("d0")
    assert [(d["pci_slot"], d["size"]) for d in r["disks"]] == [
        ("0:4:0", 10240), ("0:4:1", 32768), ("0:4:2", 512), ("0:4:5", 1024)], r["disks"]
    check_files(r)
    tern("vm", "disk", "add", "d0", "remaining", "-w")
    r = vm("d0")
    assert disk_at(r, "0:4:3")["size"] == 102400 - 10240 - 32768 - 512 - 1024
    assert r["free_space"] == 0
    check_files(r)
    p = refused_before_any_job(["vm", "disk", "add", "d0", "1M"], 3, "tern: InsufficientSpace:")

    gone = [disk_at(r, s) for s in ("0:4:2", "0:4:3", "0:4:5")]
    tern("vm", "disk", "delete", "d0", "0:4:3", "--watch")
    tern("vm", "disk", "delete", "d0", gone[0]["id"][:8], "-w")
    tern("vm", "disk", "delete", "d0", gone[2]["id"], "-w")
    r = vm("d0")
    assert [d["pci_slot"] for d in r["disks"]] == ["0:4:0", "0:4:1"], r["disks"]
    assert r["free_space"] == 102400 - 10240 - 32768
    for d in gone:
        assert not os.path.exists(d["path"]), d
    # A shrink with the flag keeps the first MiB of the disk and cuts the rest.
    tern("vm", "disk", "resize", "d0", "0:4:1", "20G", "--dangerous-allow-shrink", "-w")
    r = vm("d0")
    assert disk_at(r, "0:4:1")["size"] == 20480 and r["free_space"] == 71680
    assert "dangerous_allow_shrink" not in json.dumps(r)
    check_files(r)
    tern("vm", "start", "d0", "--watch")


def slot_sizes(alias, *extra):
    """{pci_slot: snapshot_size} as `tern vm disks` prints it."""
    out = tern("vm", "disks", alias, "-H", "-o", "pci_slot,snapshot_size", *extra).stdout
    return {slot: int(size) for slot, size in (l.split() for l in out.splitlines())}


def test_snapshots():
    r = vm("d0")
    data = disk_at(r, "0:4:1")["path"]
    with open(data, "r+b") as f:  # 2 MiB the snapshot will hold
        f.write(os.urandom(2 * MIB))
    assert tern("vm", "snapshot", "list", "d0", "-H").stdout == ""
    tern("vm", "snapshot", "create", "d0", "before-upgrade", "--watch")
    out = tern("vm", "snapshot", "list", "d0").stdout.splitlines()
    assert out[0].split() == ["NAME", "CREATED"] and out[1].split()[0] == "before-upgrade", out
    snaps = json.loads(tern("vm", "snapshot", "list", "d0", "-j").stdout)
    assert [s["name"] for s in snaps] == ["before-upgrade"], snaps
    vm_dir = os.path.dirname(os.path.dirname(r["disks"][0]["path"]))
    snap_dir = os.path.join(vm_dir, "snapshots", "before-upgrade")
    assert sorted(os.listdir(snap_dir)) == ["disk0.img", "disk1.img"], os.listdir(snap_dir)
    assert "before-upgrade" in tern("vm", "get", "d0").stdout
    # Overwriting what the snapshot holds costs space: shown once measured (--refresh).
    assert slot_sizes("d0") == {"0:4:0": 0, "0:4:1": 0}
    with open(data, "r+b") as f:
        f.write(os.urandom(2 * MIB))
    assert slot_sizes("d0") == {"0:4:0": 0, "0:4:1": 0}
    assert slot_sizes("d0", "--refresh") == {"0:4:0": 0, "0:4:1": 2}
    assert vm("d0")["free_space"] == r["free_space"] - 2
    # A name taken: the admission check's refusal, no job.
    refused_before_any_job(["vm", "snapshot", "create", "d0", "before-upgrade"], 3,
                           "tern: InvalidArgument:", "already has a snapshot named before-upgrade")
    refused_before_any_job(["vm", "snapshot", "delete", "d0", "no-such"], 3,
                           "tern: ResourceNotFound:", "no-such")
    tern("vm", "snapshot", "delete", "d0", "before-upgrade", "-w")
    assert not os.path.exists(snap_dir)
    assert json.loads(tern("vm", "snapshot", "list", "d0", "-j").stdout) == []
    assert vm("d0")["free_space"] == r["free_space"]


def test_concurrent_grows():
    # Two grows of one instance's disks, each 60 % of its free_space, at once: one
    # succeeds; the other is refused at create (exit 3) or fails at its reserve (exit 1,
    # its watch showing the failure), and the record holds the one that succeeded.
    tern("vm", "create", "--alias", "d2", "--package", "flex", "--image", "lab-os",
         "--network", "external", "--disks", '[{}, {"size": 10240}, {"size": 10240}]', "-w")
    assert vm("d2")["free_space"] == 71680
    procs = [subprocess.Popen([lab.tern_bin, "vm", "disk", "resize", "d2", slot,
                               str(10240 + 43008), "--watch"], env=lab.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for slot in ("0:4:1", "0:4:2")]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0 and codes[1] in (1, 3), (codes, outs)
    loser = outs[[p.returncode for p in procs].index(codes[1])]
    assert "InsufficientSpace" in loser[0] + loser[1], loser
    r = vm("d2")
    assert sorted(d["size"] for d in r["disks"][1:]) == [10240, 10240 + 43008], r["disks"]
    assert r["free_space"] == 71680 - 43008 and not r.get("disk_change"), r
    check_files(r)


def test_inflexible():
    # --disks needs a flexible package: the provision's refusal, no job.
    refused_before_any_job(["vm", "create", "--alias", "r1", "--package", "rigid", "--image",
                            "lab-os", "--network", "external", "--disks", "[{}]"], 3,
                           "tern: InvalidArgument:")
    tern("vm", "create", "--alias", "r0", "--package", "rigid", "--image", "lab-os",
         "--network", "external", "--no-autoboot", "--watch")
    r = vm("r0")
    assert r.get("flexible") is False and r.get("free_space") is None, r
    assert [(d["pci_slot"], d["size"]) for d in r["disks"]] == [("0:4:0", 10240),
                                                                ("0:4:1", 20480)]
    assert ["flexible", "false"] in [l.split() for l in tern("vm", "get", "r0").stdout.splitlines()]
    assert tern("vm", "disks", "r0", "-H", "-o", "pci_slot").stdout.split() == ["0:4:0",
                                                                               "0:4:1"]
    for args in (["disk", "resize", "r0", "0:4:1", "30G"], ["disk", "add", "r0", "1G"],
                 ["disk", "delete", "r0", "0:4:1"], ["snapshot", "create", "r0", "s1"]):
        refused_before_any_job(["vm", *args], 3, "tern: InvalidArgument:",
                               "is not a flexible disk instance")
    assert vm("r0")["disks"] == r["disks"]


def main():
    run_tests(lab, [test_create_with_disks, test_disks_listing, test_bad_sizes_and_disks,
                    test_resize_grow, test_add_delete_shrink_stopped, test_snapshots,
                    test_concurrent_grows, test_inflexible],
              only=sys.argv[3:])


if __name__ == "__main__":
    main()
