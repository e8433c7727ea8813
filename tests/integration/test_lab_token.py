#!/usr/bin/env python3
"""A lab whose API needs a token: the control's dc plugin still reaches its own API.

A provision that mounts a volume the owner does not have yet makes its volume-create
job through the control's own API (docs/VOLUMES.md "Volumes at provision"). ternd takes
$TERN_API_TOKEN out of its environment before plugins load, so `tools/lab up` writes
the token to DIR/control/api_token (mode 0600, the lab's user only) and names it in the
control's dc configuration. Checked: the file's mode and content, that a request
without the token is refused, and that the provision creates, waits for and mounts
its volume (the mount link reaches the export) when only the token opens the API.

Usage: test_lab_token.py SOURCE_ROOT BUILD_ROOT
"""
import json
import os
import stat
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_harness import Lab, http_request, run_tests, wait_for  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
TOKEN = "lab-token-" + uuid.uuid4().hex
OWNER = "00000000-0000-0000-0000-000000000000"

with open(os.path.join(SOURCE, "examples", "lab", "datacenter.json")) as f:
    DATACENTER = json.load(f)
DATACENTER["settings"] = {"share_health_ms": 200, "share_watch_every_s": 1}

lab = Lab(SOURCE, BUILD, DATACENTER, prefix="tern-lab-token-")
lab.env["TERN_API_TOKEN"] = TOKEN
lab.env["TERN_TOKEN"] = TOKEN  # the CLI's


def test_token_file():
    path = os.path.join(lab.dir, "control", "api_token")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    with open(path) as f:
        assert f.read() == TOKEN + "\n"
    with open(os.path.join(lab.dir, "control", "ternd.json")) as f:
        assert json.load(f)["plugins"]["dc"]["api_token_file"] == path
    # The API needs it: without it a request is refused.
    assert http_request(lab.url + "/jobs")[0] == 401


def test_provision_creates_its_volume_through_the_token():
    vm = str(uuid.uuid4())
    lab.tern("vm", "create", "--uuid", vm, "--owner", OWNER, "--package", "lab-small",
             "--image", "lab-os", "--network", "fabric", "-v", "shared:/shared", "--watch")
    out = lab.tern("volume", "get", "shared", "-j", "--owner", OWNER).stdout
    v = json.loads(out)
    assert v["state"] == "ready" and v["refs"] == [vm], v
    server = json.loads(lab.tern("vm", "get", vm, "-j").stdout)["server_uuid"]
    link = os.path.join(lab.vm_dir(server, vm), "mounts", "shared")
    assert os.path.islink(link) and os.path.realpath(link) == os.path.realpath(v["export_path"])
    with open(os.path.join(link, "hello"), "w") as f:
        f.write("through the mount")
    with open(os.path.join(v["export_path"], "hello")) as f:
        assert f.read() == "through the mount"


if __name__ == "__main__":
    run_tests(lab, [test_token_file, test_provision_creates_its_volume_through_the_token],
              only=sys.argv[3:])
