#!/usr/bin/env python3
"""Flexible disks at provision, on a real lab (tools/lab up on disk_lab.DATACENTER, with
its own Redis, control ternd and one agent per server): the layouts (given, the
package's, the default; the table of 10 GiB, 90 GiB and 1 TiB images on a flexible
and an inflexible 102400 MiB package), the refusals (disks on an inflexible package, 9
disks, a boot disk smaller than its image or larger than the package, "remaining"
twice, every malformed size), two provisions racing for room for one, disk operations
refused on an inflexible instance, and the quota and the server's committed disk
through a series of disk operations. test_N_* is acceptance test N of the flexible
disk rules (docs/DISKS.md); test_disk_ops.py has the others.

Every test checks the records AND the data plane (disk_lab.check_vm): each disk's file
is disk<N>.img for PCI slot 0:4:N with an apparent size of exactly size * 2^20, the
boot disk holds the image (content digests), data disks are holes, vm.json's disks are
the record's, no `.part` is left, free_space follows the space rule, and the server's
committed disk is the sum over its VMs (check_inventory). A refused provision stores
nothing: no job, no record, no directory. Sizes are the rules' own (sparse files cost
nothing).

Usage: test_disks.py SOURCE_ROOT BUILD_ROOT [TEST...]; TERN_TEST_KEEP_LAB=1 leaves a
failed run's lab up to look into. Every wait is bounded and polls what it waits for;
the lab's processes are stopped by pid (tools/lab down).
"""
import os
import sys
import threading
import time
import uuid as uuidlib

import disk_lab
from disk_lab import (MAX_DISK, CN2, CN3, P, PQ, FIXED, REMAINING, ONE, I10, I90, I1T,
                      IMAGE_MIB, IMAGE_DATA_MIB, IMAGES, MIB, content_digest, data_from,
                      allocated, vm_dir, instance_dirs, check_vm, fingerprint,
                      provision_params, provision, refused_provision, ok_disk, refused,
                      delete)
from lab_harness import run_tests

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = disk_lab.open_lab(SOURCE, BUILD, "tern-disks-")


# ---- provisioning: tests 1-10 -------------------------------------------------------

def test_1_default_layout():
    """P + the 10 GiB image, no disks anywhere: boot 10240 from the image, data 92160,
    nothing free; the boot disk is the image (its content), the data disk a hole."""
    vm_uuid = provision()
    vm = check_vm(vm_uuid)
    assert vm["flexible"] is True and vm["free_space"] == 0, vm
    assert [(x["pci_slot"], x["size"], bool(x.get("boot")), x.get("image"))
            for x in vm["disks"]] == [("0:4:0", 10240, True, I10), ("0:4:1", 92160, False, None)]
    boot, data = (x["path"] for x in vm["disks"])
    image = os.path.join(lab.dir, IMAGES[I10]["file"])
    assert content_digest(boot, 10240) == content_digest(image, 10240)
    assert allocated(boot) <= (IMAGE_DATA_MIB + 1) * MIB, allocated(boot)
    assert allocated(data) < MIB and not data_from(data, 0), allocated(data)
    lab.check_inventory()
    delete(vm_uuid)


def test_2_given_layout():
    """disks [{}, {20480}, {remaining}]: the rule's 71680 for the third (the boot disk
    counts), not the seed example's 81920."""
    vm_uuid = provision(disks=[{}, {"size": 20480}, {"size": "remaining"}])
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == \
        [("0:4:0", 10240), ("0:4:1", 20480), ("0:4:2", 71680)], vm["disks"]
    assert vm["free_space"] == 0, vm
    for x in vm["disks"][1:]:
        assert allocated(x["path"]) < MIB and not data_from(x["path"], 0), x
    lab.check_inventory()
    delete(vm_uuid)


def test_3_package_remaining():
    """The package's [{remaining}]: one boot disk of 102400, the image at its start and
    a hole after it."""
    vm_uuid = provision(package=REMAINING)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"], x.get("image")) for x in vm["disks"]] == \
        [("0:4:0", 102400, I10)], vm["disks"]
    assert vm["free_space"] == 0, vm
    boot = vm["disks"][0]["path"]
    image = os.path.join(lab.dir, IMAGES[I10]["file"])
    assert content_digest(boot, 10240) == content_digest(image, 10240)
    assert not data_from(boot, 10240 * MIB)
    lab.check_inventory()
    delete(vm_uuid)


def test_4_package_image_disk():
    """The package's [{}]: one boot disk of the image's size, 92160 free."""
    vm_uuid = provision(package=ONE)
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 10240)], vm["disks"]
    assert vm["free_space"] == 92160, vm
    lab.check_inventory()
    delete(vm_uuid)


def test_5_image_sizes_flexible():
    """A 90 GiB image on P: boot 92160 + data 10240. A 1 TiB image does not fit P:
    InsufficientSpace at once, and nothing anywhere."""
    vm_uuid = provision(image=I90)
    vm = check_vm(vm_uuid)
    assert [x["size"] for x in vm["disks"]] == [92160, 10240] and vm["free_space"] == 0, vm
    image = os.path.join(lab.dir, IMAGES[I90]["file"])
    assert content_digest(vm["disks"][0]["path"], 92160) == content_digest(image, 92160)
    delete(vm_uuid)
    servers = fingerprint([])
    refused_provision(409, "InsufficientSpace", ["1048576", "102400"], image=I1T)
    assert fingerprint([]) == servers
    for server in lab.roots:
        assert not os.path.exists(os.path.join(lab.root(server), "images", I1T + ".img"))
    lab.check_inventory()


def test_6_image_sizes_inflexible():
    """The same images on an inflexible 102400 package: boot = the image, data =
    102400, the allocation their sum; the 1 TiB one too."""
    for image in (I10, I90, I1T):
        vm_uuid = provision(package=FIXED, image=image, server=CN2)
        vm = check_vm(vm_uuid)
        size = IMAGE_MIB[image]
        assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == \
            [("0:4:0", size), ("0:4:1", 102400)], vm["disks"]
        assert vm["allocation"]["disk"] == size + 102400, vm
        assert not data_from(vm["disks"][1]["path"], 0)
        lab.check_inventory()
        delete(vm_uuid)
    lab.check_inventory()


def test_7_disks_on_inflexible():
    refused_provision(422, "InvalidArgument", ["disks"], package=FIXED,
                      disks=[{}, {"size": 10240}])


def test_8_disk_count():
    """9 disks refused; 8 take 0:4:0 ... 0:4:7 (disk0.img ... disk7.img)."""
    nine = [{}] + [{"size": 1024}] * 8
    refused_provision(422, "InvalidArgument", ["disks"], disks=nine)
    vm_uuid = provision(disks=[{}] + [{"size": 1024}] * 6 + [{"size": "remaining"}])
    vm = check_vm(vm_uuid)
    assert [x["pci_slot"] for x in vm["disks"]] == [f"0:4:{i}" for i in range(8)]
    assert [x["size"] for x in vm["disks"]] == [10240] + [1024] * 6 + [102400 - 10240 - 6144]
    assert sorted(os.listdir(os.path.join(vm_dir(vm_uuid), "disks"))) == \
        [f"disk{i}.img" for i in range(8)]
    delete(vm_uuid)


def test_9_boot_size():
    """A boot disk smaller than its image: InvalidArgument; larger than the package:
    InsufficientSpace."""
    refused_provision(422, "InvalidArgument", ["disks[0].size", "5120", "10240"],
                      disks=[{"size": 5120}])
    refused_provision(409, "InsufficientSpace", ["204800", "102400"], disks=[{"size": 204800}])


def test_10_remaining_twice():
    refused_provision(422, "InvalidArgument", ["disks[2].size", "remaining"],
                      disks=[{}, {"size": "remaining"}, {"size": "remaining"}])


def test_bad_provision_disks():
    """Each malformed `disks` refused with InvalidArgument naming the item."""
    cases = [
        ([{}, {"size": 1.5}], "disks[1].size"),
        ([{}, {"size": -1024}], "disks[1].size"),
        ([{}, {"size": 0}], "disks[1].size"),
        ([{}, {"size": "20480"}], "disks[1].size"),
        ([{}, {"size": "20G"}], "disks[1].size"),
        ([{}, {"size": True}], "disks[1].size"),
        ([{}, {"size": None}], "disks[1].size"),
        ([{}, {"size": MAX_DISK + 1}], "disks[1].size"),
        ([{}, {}], "disks[1]"),
        ([{}, {"size": 1024, "pci_slot": "0:4:5"}], "disks[1].pci_slot"),
        ([{}, "1024"], "disks[1]"),
        ([], "disks"),
        ({"size": 1024}, "disks"),
    ]
    for disks, path in cases:
        refused_provision(422, "InvalidArgument", [path], disks=disks)
    lab.check_inventory()


# ---- the inventory: tests 23, 25, 26 -----------------------------

def test_23_provisions_racing():
    """cn3 has room for one P: two provisions at once, one succeeds, the other takes
    nothing; the committed disk never passes the server's, sampled all along."""
    stop = threading.Event()
    over, samples = [], [0]

    def sample():
        while not stop.is_set():
            status, s = lab.http("/servers/" + CN3)
            if status == 200:
                samples[0] += 1
                if s["disk_committed_mib"] > s["disk_mib"]:
                    over.append(s)
            time.sleep(0.005)

    vms = [str(uuidlib.uuid4()) for _ in range(2)]
    answers = [None, None]

    def submit(i):
        answers[i] = lab.create_job("provision", "/provision-" + vms[i],
                                    provision_params(vms[i], server=CN3))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        threads = [threading.Thread(target=submit, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # The loser is refused at once, or (both admitted) fails at placement; either
        # way for want of room on cn3.
        ends = []
        for status, body in answers:
            if status in (200, 201):
                ends.append(lab.wait_job(body["uuid"], timeout=120))
            else:
                assert status == 409, (status, body)
                ends.append({"execution": "refused", "error": body})
    finally:
        stop.set()
        sampler.join(30)
    won = [vms[i] for i, j in enumerate(ends) if j["execution"] == "succeeded"]
    lost = [(vms[i], j) for i, j in enumerate(ends) if j["execution"] != "succeeded"]
    assert len(won) == 1 and len(lost) == 1, [j["execution"] for j in ends]
    assert lost[0][1]["execution"] in ("failed", "refused"), lost[0][1]
    assert lost[0][1]["error"]["code"] in ("NoAllocatableServersError", "InsufficientSpace"), \
        lost[0][1]["error"]
    print(f"  the loser: {lost[0][1]['execution']} {lost[0][1]['error']['code']}")
    assert not over and samples[0] > 0, (over[:3], samples)
    vm = check_vm(won[0])
    loser = lab.vm_of(lost[0][0])
    assert loser is None or (loser["state"] == "failed" and loser["allocation"] is None), loser
    assert instance_dirs(lost[0][0]) == []
    s = lab.http("/servers/" + CN3)[1]
    assert s["disk_committed_mib"] == 102400 == vm["allocation"]["disk"], s
    lab.check_inventory()
    delete(won[0])


def test_25_inflexible():
    """Disk operations on an instance of an inflexible package are refused."""
    vm_uuid = provision(package=FIXED)
    words = ["not a flexible disk instance", vm_uuid]
    refused("disk-add", vm_uuid, 422, "InvalidArgument", words, size=1024)
    refused("disk-resize", vm_uuid, 422, "InvalidArgument", words, pci_slot="0:4:1",
            size=204800)
    refused("disk-delete", vm_uuid, 422, "InvalidArgument", words, pci_slot="0:4:1")
    check_vm(vm_uuid)
    delete(vm_uuid)


def test_26_quota_and_committed():
    """A package with a zone quota: after each add, resize and delete the VM's quota is
    the package's, its allocation quota + flexible_disk_size, and the server's committed
    disk the sum over its VMs."""
    vm_uuid = provision(package=PQ)
    other = provision(package=P)
    want = 2048 + 102400
    steps = [("disk-delete", {"pci_slot": "0:4:1"}), ("disk-add", {"size": 40960}),
             ("disk-resize", {"pci_slot": "0:4:1", "size": 51200}),
             ("disk-resize", {"pci_slot": "0:4:1", "size": 20480,
                              "dangerous_allow_shrink": True}),
             ("disk-add", {"size": "remaining"}), ("disk-delete", {"pci_slot": "0:4:2"})]
    for workflow, params in [(None, None)] + steps:
        if workflow:
            ok_disk(workflow, vm_uuid, **params)
        vm = check_vm(vm_uuid)
        assert vm["quota"] == 2048 and vm["allocation"]["disk"] == want, (workflow, vm)
        lab.check_inventory()
    vm = check_vm(vm_uuid)
    assert [(x["pci_slot"], x["size"]) for x in vm["disks"]] == [("0:4:0", 10240),
                                                                   ("0:4:1", 20480)]
    assert vm["free_space"] == 102400 - 30720, vm
    delete(vm_uuid)
    delete(other)
    lab.check_inventory()


def main():
    tests = [test_1_default_layout, test_2_given_layout, test_3_package_remaining,
             test_4_package_image_disk, test_5_image_sizes_flexible,
             test_6_image_sizes_inflexible, test_7_disks_on_inflexible, test_8_disk_count,
             test_9_boot_size, test_10_remaining_twice, test_bad_provision_disks,
             test_23_provisions_racing, test_25_inflexible, test_26_quota_and_committed]
    run_tests(lab, tests, only=sys.argv[3:])


if __name__ == "__main__":
    main()
