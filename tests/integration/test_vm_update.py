#!/usr/bin/env python3
"""vm-update outside migrations, on the migration tests' lab (migration_lab.py): an
instance's alias, tags and customer_metadata change in its record, its alias index and
its vm.json together; bad input is refused 422 naming the field with nothing stored or
changed; an alias is unique among an owner's live instances (DuplicateAlias); a failure
of the server's step puts the record back; `tern vm update` sends the same job.

Usage: test_vm_update.py SOURCE_ROOT BUILD_ROOT [TEST...]; skipped (77) when the build
has no migration tasks (the lab is the migration tests'). TERN_TEST_KEEP_LAB=1 keeps a
failed run's lab up.
"""
import json
import os
import sys

import migration_lab as ml
from migration_lab import CN1, OWNER

SOURCE, BUILD = sys.argv[1], sys.argv[2]
lab = ml.open_lab(SOURCE, BUILD, "tern-vm-update-")


def update(vm, **params):
    """POST /jobs of vm-update: (status, body)."""
    return lab.create_job("vm-update", "/update-" + vm, dict(params, vm_uuid=vm))


def ok_update(vm, **params):
    status, job = update(vm, **params)
    assert status in (200, 201), (params, status, job)
    job = lab.wait_job(job["uuid"], timeout=60)
    assert job["execution"] == "succeeded", job
    return job


def alias_index(alias):
    """The uuids GET /vms?alias= lists, and the raw index, which must agree."""
    listed = sorted(v["uuid"] for v in lab.list_all("/vms?alias=" + alias))
    raw = sorted(u for u in lab.redis("ZRANGE", "tern:p:dc:vms:alias:" + alias, "0", "-1") if u)
    assert listed == raw, (alias, listed, raw)
    return listed


def shown(vm):
    """What an update changes, as the record and the instance's vm.json show it."""
    rec = lab.vm_of(vm)
    doc = ml.vm_json(rec["server_uuid"], vm)
    a = (rec.get("alias"), rec.get("tags") or {}, rec.get("customer_metadata") or {})
    b = (doc.get("alias"), doc.get("tags") or {}, doc.get("customer_metadata") or {})
    return a, b


def test_update_changes_record_index_and_vm_json():
    """alias, add_tags (merge), tags (replace) and customer_metadata reach the record,
    vms:alias and vm.json; the workload keeps running."""
    vm = ml.provision(CN1, "idle")
    pid = ml.workload_alive(CN1, vm)
    ok_update(vm, alias="web-1", add_tags={"role": "web", "tier": 2, "public": True})
    rec, doc = shown(vm)
    assert rec == doc, (rec, doc)
    assert rec[0] == "web-1" and rec[1] == {"role": "web", "tier": 2, "public": True}, rec
    assert rec[2] == {"lab:workload": "idle"}, rec
    assert alias_index("web-1") == [vm]
    ok_update(vm, alias="web-2", add_tags={"tier": 3})
    assert alias_index("web-1") == [] and alias_index("web-2") == [vm]
    rec, doc = shown(vm)
    assert rec == doc and rec[1] == {"role": "web", "tier": 3, "public": True}, rec
    ok_update(vm, tags={"only": "this"}, customer_metadata={"lab:workload": "idle", "k": "v"})
    rec, doc = shown(vm)
    assert rec == doc and rec[1] == {"only": "this"}, rec
    assert rec[2] == {"lab:workload": "idle", "k": "v"}, rec
    assert ml.workload_alive(CN1, vm) == pid
    lab.check_inventory()


def test_bad_input_refused_naming_the_field():
    """Each fault answers 422 naming the field (404 for an unknown VM); no job is
    stored and the record and vm.json are as they were."""
    vm = ml.provision(CN1, "idle")
    ok_update(vm, alias="bad-input-1", add_tags={"a": "b"})
    before = shown(vm)
    jobs = lab.user_job_count()
    cases = [
        ({"alias": "-starts-with-dash"}, 422, "InvalidArgument", "params.alias"),
        ({"alias": "a" * 190}, 422, "InvalidArgument", "params.alias"),
        ({"alias": "sp ace"}, 422, "InvalidArgument", "params.alias"),
        ({"alias": 7}, 422, "InvalidArgument", "params.alias"),
        ({"tags": ["x"]}, 422, "InvalidArgument", "params.tags"),
        ({"tags": {"k": {"nested": 1}}}, 422, "InvalidArgument", "params.tags.k"),
        ({"add_tags": {"k": None}}, 422, "InvalidArgument", "params.add_tags.k"),
        ({"tags": {}, "add_tags": {"a": "c"}}, 422, "InvalidArgument", "params.add_tags"),
        ({"customer_metadata": "text"}, 422, "InvalidArgument", "params.customer_metadata"),
        ({"customer_metadata": {"lab:workload": "miner"}}, 422, "InvalidArgument",
         "lab:workload"),
        ({"bogus": 1}, 422, "InvalidArgument", "params.bogus"),
        ({"ram": 2048}, 422, "InvalidArgument", "params.ram"),
        ({"billing_id": ml.PKG}, 422, "InvalidArgument", "params.billing_id"),
        ({}, 422, "InvalidArgument", "nothing to update"),
    ]
    for params, want_status, want_code, words in cases:
        status, body = update(vm, **params)
        assert (status, body.get("code")) == (want_status, want_code), (params, status, body)
        assert words in body.get("message", ""), (params, body)
    status, body = lab.create_job("vm-update", "/update-" + vm,
                                  {"vm_uuid": "not-a-uuid", "alias": "x"})
    assert (status, body.get("code")) == (422, "InvalidArgument"), (status, body)
    assert "params.vm_uuid" in body["message"], body
    status, body = lab.create_job("vm-update", "/stop-" + vm, {"vm_uuid": vm, "alias": "x"})
    assert (status, body.get("code")) == (422, "InvalidArgument"), (status, body)
    assert "target" in body["message"], body
    ghost = "0dead000-0000-4000-8000-000000000001"
    status, body = update(ghost, alias="ghost")
    assert (status, body.get("code")) == (404, "ResourceNotFound"), (status, body)
    status, body = update(vm, alias="mine", owner_uuid="0ther000-0000-4000-8000-000000000001")
    assert (status, body.get("code")) == (422, "InvalidArgument"), (status, body)
    status, body = update(vm, alias="mine", owner_uuid="00000000-0000-4000-8000-0000000000aa")
    assert (status, body.get("code")) == (404, "ResourceNotFound"), (status, body)
    assert lab.user_job_count() == jobs
    assert shown(vm) == before
    assert alias_index("bad-input-1") == [vm]


def test_duplicate_alias_per_owner():
    """An alias names one live VM of an owner: a second takes it only once the first
    gave it up; a VM may be updated keeping its own alias."""
    a = ml.provision(CN1, "idle")
    b = ml.provision(CN1, "idle")
    ok_update(a, alias="dup-1")
    status, body = update(b, alias="dup-1")
    assert (status, body.get("code")) == (409, "DuplicateAlias"), (status, body)
    assert a in body["message"], body
    ok_update(a, alias="dup-1", add_tags={"same": "alias"})   # its own: fine
    ok_update(a, alias="dup-2")
    ok_update(b, alias="dup-1")
    assert alias_index("dup-1") == [b] and alias_index("dup-2") == [a]
    assert lab.vm_of(a)["owner_uuid"] == lab.vm_of(b)["owner_uuid"] == OWNER


def test_server_step_failure_puts_the_record_back():
    """The server's step fails (the instance's vm.json moved away out of band:
    InstanceNotFound): the job fails naming it, the record and the alias index are as
    before; with the file back the same update succeeds."""
    vm = ml.provision(CN1, "idle")
    ok_update(vm, alias="fail-1", add_tags={"keep": "me"})
    before = shown(vm)
    path = os.path.join(ml.vm_dir(CN1, vm), "vm.json")
    os.rename(path, path + ".aside")
    try:
        status, job = update(vm, alias="fail-2", add_tags={"lost": "yes"})
        assert status == 201, (status, job)
        job = lab.wait_job(job["uuid"], timeout=60)
        assert job["execution"] == "failed", job
        write = [r for r in job["chain_results"] if r["name"] == "write"]
        assert write and "InstanceNotFound" in json.dumps(write[-1].get("error")), job
        revert = [r for r in job.get("onerror_results", []) if r["name"] == "revert"]
        assert revert and revert[-1]["result"]["reverted"] is True, job
    finally:
        os.rename(path + ".aside", path)
    assert shown(vm) == before, (shown(vm), before)
    assert alias_index("fail-2") == [] and alias_index("fail-1") == [vm]
    ok_update(vm, alias="fail-2", add_tags={"lost": "no"})
    rec, doc = shown(vm)
    assert rec == doc and rec[0] == "fail-2" and rec[1] == {"keep": "me", "lost": "no"}, rec


def test_cli_vm_update():
    """`tern vm update VM alias=A tag.K=V` sends the job; a bad assignment is a usage
    error and a refused one exits 3, nothing stored."""
    vm = ml.provision(CN1, "idle")
    p = lab.tern("vm", "update", vm, "alias=cli-1", "tag.env=prod", "tag.n=4", "--watch")
    assert p.returncode == 0, p
    rec, doc = shown(vm)
    assert rec == doc and rec[0] == "cli-1" and rec[1] == {"env": "prod", "n": 4}, rec
    p = lab.tern("vm", "update", "cli-1", 'tags={"only": true}', "--watch")
    assert shown(vm)[0][1] == {"only": True}
    jobs = lab.user_job_count()
    p = lab.tern("vm", "update", vm, "nonsense", check=False)
    assert p.returncode == 2 and "alias=A" in p.stderr, p
    p = lab.tern("vm", "update", vm, "alias=-bad", check=False)
    assert p.returncode == 3 and "params.alias" in p.stderr, p
    assert lab.user_job_count() == jobs


if __name__ == "__main__":
    ml.run([test_update_changes_record_index_and_vm_json, test_bad_input_refused_naming_the_field,
            test_duplicate_alias_per_owner, test_server_step_failure_puts_the_record_back,
            test_cli_vm_update], only=sys.argv[3:])
