#!/usr/bin/env python3
"""Images and target choice of migrations (DOMAIN 5.6 tests 27 and 28) on a lab of four
servers: migration_lab.py's three (cn1 and cn2 in rack r1, cn3 in r2 with no room) and
cn4 in r2, with more free RAM than any other (placement's first rule alone would pick
it) but only 600 MiB of disk: room for the package's 320 MiB, none for an instance
whose data disk was grown.

27: the lab's image file removed (the image store no longer has it): a begin copies
the source server's own copy to the target over the migration's authenticated stream;
the target's file is the source's (sha256), the history holds one warning naming the
image and its source, the switch succeeds; a target that has the image already takes
nothing and warns nothing. 28: the target is in the source's rack when one there has
room, never the source; a server without room for the VM's actual (resized) disks is
never chosen, and a begin pinned to it is refused naming the lack of room.

Usage: test_migration_placement.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when
the build has no migration tasks. TERN_TEST_KEEP_LAB=1 keeps a failed run's lab up.
"""
import json
import os
import sys
import urllib.request

import migration_lab as ml
from migration_lab import CN1, CN2, CN3, DATA_MIB, IMG, OWNER

CN4 = "e1000000-0000-4000-8000-000000000004"
ml.DATACENTER["servers"].append(
    {"uuid": CN4, "hostname": "cn4", "rack": "r2", "ram_mib": 32768, "disk_mib": 600,
     "data_root": "servers/cn4"})
ml.HOSTNAMES[CN4] = "cn4"

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-migration-placement-")
FAST = 800  # Mbit/s


def image_path(server):
    return os.path.join(lab.root(server), "images", IMG + ".img")


def watch_lines(vm_uuid):
    """GET /migrations/:uuid/watch of a migration not running (paused, successful):
    its history, then its end event, as newline-delimited JSON; the stream ends."""
    m = ml.migration(vm_uuid)
    assert m["state"] != "running", m
    with urllib.request.urlopen(f"{lab.url}/migrations/{m['uuid']}/watch", timeout=30) as r:
        assert r.status == 200, r.status
        lines = [json.loads(x) for x in r.read().decode().splitlines() if x.strip()]
    assert lines and lines[-1]["type"] == "end", lines
    return lines


def warnings(vm_uuid):
    return [e for e in watch_lines(vm_uuid) if e.get("level") == "warning"]


def begin_target(vm_uuid, **params):
    """A begin's chosen target: the job's admission result, and the record's."""
    job = ml.ok_action("begin", vm_uuid, send_mbps_limit=FAST, **params)
    m = ml.wait_migration(vm_uuid, "paused")
    chosen = job["admission_results"][0]["result"]["target_server_uuid"] \
        if job.get("admission_results") else m["target_server_uuid"]
    assert chosen == m["target_server_uuid"], (job.get("admission_results"), m)
    return m["target_server_uuid"]


def test_28_same_rack_and_actual_sizes():
    """Test 28: the source's rack first (cn2, not cn4 with more free RAM); never the
    source; rack "other" takes cn4 for a VM of the package's size; a VM whose data disk
    holds more than cn4's room is never placed there and a begin pinned there is
    refused."""
    vm = ml.provision(CN1, "idle")
    assert begin_target(vm) == CN2
    ml.ok_action("abort", vm, timeout=90)
    ml.wait_migration(vm, "aborted")
    # Another rack when asked: cn4 has room for the package's 320 MiB.
    assert begin_target(vm, affinity={"rack": "other"}) == CN4
    ml.ok_action("abort", vm, timeout=90)
    ml.wait_migration(vm, "aborted")
    # The source pinned: refused, naming it.
    ml.refused("begin", vm, 422, "InvalidArgument", ["target_server_uuid", "source server"],
               target_server_uuid=CN1)

    big = ml.provision(CN1, "idle")
    # A flexible VM's disks live inside its package's space (docs/DISKS.md), so no disk
    # operation of this lab grows what it commits: the record is made to hold what an
    # in-place resize of its package would leave (allocation.disk, and the source's
    # committed disk with it), as the placement reads them.
    grown = 832
    key = "tern:p:dc:vm:" + big
    rec = json.loads("\n".join(lab.redis("GET", key)))
    was = rec["allocation"]["disk"]
    assert was <= 600 < grown, rec["allocation"]
    rec["allocation"]["disk"] = grown
    lab.redis("SET", key, json.dumps(rec))
    lab.redis("HINCRBY", "tern:p:dc:server:" + CN1, "disk_committed_mib", str(grown - was))
    disk = lab.vm_of(big)["allocation"]["disk"]
    assert disk == grown, lab.vm_of(big)["allocation"]
    # cn4 lacks room for what the VM has now (cn3 for its RAM): nowhere in rack r2.
    ml.refused("begin", big, 409, "NoAllocatableServersError", [f"{disk} MiB of disk"],
                      affinity={"rack": "other"})
    ml.refused("begin", big, 409, "NoAllocatableServersError",
               [CN4, "no room", f"{disk} MiB of disk"], target_server_uuid=CN4)
    # Without a pin or an affinity: cn2, never cn4 nor the source.
    assert begin_target(big) == CN2
    ml.ok_action("abort", big, timeout=90)
    ml.wait_migration(big, "aborted")


def test_27_image_missing_from_store():
    """Test 27: the lab's image file removed: the begin copies cn1's copy to cn2 (which
    never had it), the copy's sha256 is the source's, one warning names the image and
    the source, the migration succeeds; a second VM to cn2, which has the image now,
    gets no copy and no warning."""
    vm = ml.provision(CN1, "writer")
    ml.fill(CN1, vm, 2)
    second = ml.provision(CN1, "idle")
    src = image_path(CN1)
    assert os.path.exists(src) and not os.path.exists(image_path(CN2))
    store = os.path.join(lab.dir, "images", "lab-mig.img")
    assert os.path.exists(store), store
    os.rename(store, store + ".away")
    try:
        image_missing_from_store(vm, second, src)
    finally:
        os.rename(store + ".away", store)


def image_missing_from_store(vm, second, src):

    ml.ok_action("begin", vm, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.wait_migration(vm, "paused")
    assert os.path.exists(image_path(CN2))
    assert ml.file_digest(image_path(CN2)) == ml.file_digest(src)
    assert os.path.getsize(image_path(CN2)) == os.path.getsize(src)
    assert not os.path.exists(image_path(CN2) + ".part")
    # Sparse: the copy holds the image's data, not its holes.
    assert os.stat(image_path(CN2)).st_blocks * 512 < os.path.getsize(src) // 2
    warn = warnings(vm)
    assert len(warn) == 1, watch_lines(vm)
    w = warn[0]
    assert (w["type"], w["phase"], w["image_uuid"], w["image_source"],
            w["source_server_uuid"]) == ("progress", "begin", IMG, "source", CN1), w
    assert IMG in w["message"] and "copied from the source server" in w["message"], w
    ml.ok_action("switch", vm, timeout=90)
    m = ml.wait_migration(vm, "successful")
    ml.check_on(vm, CN2, running=True)
    assert len([e for e in m["progress_history"] if e.get("level") == "warning"]) == 1, m
    assert len(warnings(vm)) == 1, watch_lines(vm)

    # cn2 has the image now: the store's lack changes nothing for it.
    st = os.stat(image_path(CN2))
    ml.ok_action("begin", second, target_server_uuid=CN2, send_mbps_limit=FAST)
    ml.wait_migration(second, "paused")
    assert warnings(second) == [], watch_lines(second)
    st2 = os.stat(image_path(CN2))
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), (st, st2)
    ml.ok_action("switch", second, timeout=90)
    ml.wait_migration(second, "successful")
    ml.check_on(second, CN2, running=True)
    lab.check_inventory()


def test_27_image_nowhere():
    """The store lacks the image and the source server has no copy either: the begin
    fails naming the source's missing file (nothing to copy from, nothing invented),
    the VM runs on its source as before, and an abort gives the target back."""
    vm = ml.provision(CN1, "idle")
    store = os.path.join(lab.dir, "images", "lab-mig.img")
    target = CN4 if not os.path.exists(image_path(CN4)) else None
    assert target, "cn4 was expected not to hold the image yet"
    os.rename(store, store + ".away")
    os.rename(image_path(CN1), image_path(CN1) + ".away")
    try:
        job = ml.run_action("begin", vm, target_server_uuid=CN4, send_mbps_limit=FAST)
        m = ml.wait_migration(vm, "failed")
    finally:
        os.rename(image_path(CN1) + ".away", image_path(CN1))
        os.rename(store + ".away", store)
    assert job["execution"] == "failed", job
    assert "ImageFileMissing" in m["error"] and image_path(CN1) in m["error"], m
    assert not os.path.exists(image_path(CN4))
    assert ml.workload_alive(CN1, vm) and lab.vm_of(vm)["server_uuid"] == CN1
    ml.ok_action("abort", vm, timeout=90)
    ml.wait_migration(vm, "aborted")
    assert not os.path.exists(ml.vm_dir(CN4, vm))
    ml.check_on(vm, CN1, running=True)


if __name__ == "__main__":
    ml.run([test_27_image_missing_from_store, test_27_image_nowhere,
            test_28_same_rack_and_actual_sizes],
           only=sys.argv[3:])
