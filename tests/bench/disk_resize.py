#!/usr/bin/env python3
"""disk_resize.py -- what growing a disk costs, and that it does not grow with the disk.

Starts a lab of its own (tools/lab up in a temporary directory: its Redis, the control
ternd, one agent) on a description of one server and a flexible disk package with room
for a boot disk, a 10 GiB data disk, a 1 TiB data disk and what the runs add, provisions
one instance (idle workload) with `disks: [{}, {"size": 10240}, {"size": 1048576}]`,
then grows each data disk by 1 GiB ROUNDS times, alternating the two disks so that a
slow stretch of the machine hurts both alike: a job of the shipped disk-resize
workflow each time (POST /jobs, then the job read until it has finished).

Per job, from the job's own record: the total (created_at to finished_at, which counts
the admission check, the queues and every step), the agent's apply step (its
started_at to finished_at: the ftruncate, fsync and vm.json on the server), the
engine's share (the total less the apply step) and, of that share, the agent's
measure step (the disks and snapshots measured before the reserve). Reported: the median of each for each
disk, and the ratio 1 TiB / 10 GiB of each median, measured in the same run (a sparse
grow adds a hole, so the ratio should be about 1). The files are checked after every
grow: apparent size = the recorded size, and no block allocated for the hole.

Usage: tests/bench/disk_resize.py [--rounds R] [--build DIR]
Prints a table and one JSON line.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
SERVER = 'a0000000-0000-4000-8000-0000000000b1'
NET = 'b0000000-0000-4000-8000-0000000000b1'
PKG = 'c0000000-0000-4000-8000-0000000000b1'
IMG = 'd0000000-0000-4000-8000-0000000000b1'
VM = 'e0000000-0000-4000-8000-0000000000b1'
SMALL, LARGE = 10240, 1 << 20  # MiB: 10 GiB and 1 TiB
STEP = 1024                    # MiB added by each grow

DESCRIPTION = {
    'servers': [{'uuid': SERVER, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 4 << 20, 'data_root': 'servers/cn1'}],
    'networks': [{'uuid': NET, 'name': 'external', 'subnet': '203.0.113.0/24',
                  'gateway': '203.0.113.1', 'provision_start_ip': '203.0.113.10',
                  'provision_end_ip': '203.0.113.250', 'vlan_id': 0, 'mtu': 1500}],
    # 2 TiB shared by the disks: 10 GiB boot + 10 GiB + 1 TiB, the rest free for the grows.
    'packages': [{'uuid': PKG, 'name': 'bench-flex', 'brand': 'bhyve', 'ram_mib': 1024,
                  'vcpus': 1, 'disk_mib': 2 << 20, 'flexible_disk': True}],
    'images': [{'uuid': IMG, 'name': 'bench-os', 'version': '1.0', 'size_mib': 10240,
                'file': 'images/bench-os.img', 'brand': 'bhyve'}],
    'settings': {},
}


class Api:
    def __init__(self, url):
        self.url = url

    def call(self, path, method='GET', body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header('Content-Type', 'application/json')
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b'null')
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b'null')

    def run_job(self, workflow, target, params, timeout=300.0):
        status, job = self.call('/jobs', 'POST', {'workflow': workflow, 'target': target,
                                                  'params': params})
        if status not in (200, 201):
            raise SystemExit(f'{workflow}: refused: {status} {job}')
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, j = self.call('/jobs/' + job['uuid'])
            if j.get('execution') in ('succeeded', 'failed', 'canceled'):
                if j['execution'] != 'succeeded':
                    raise SystemExit(f'{workflow}: {j["execution"]}: {j.get("error")}')
                return j
            time.sleep(0.02)
        raise SystemExit(f'{workflow}: not finished after {timeout} s')


def ms_of(iso):
    return datetime.datetime.fromisoformat(iso.replace('Z', '+00:00')).timestamp() * 1000.0


def step_ms(job, name):
    """The step's own time in ms (its started_at to finished_at)."""
    r = [x for x in job['chain_results'] if x['name'] == name]
    if len(r) != 1:
        raise SystemExit(f'job {job["uuid"]}: expected one {name} step, got {r}')
    return ms_of(r[0]['finished_at']) - ms_of(r[0]['started_at'])


def timings(job):
    """(total, apply, engine, measure) in ms from the job's record."""
    total = ms_of(job['finished_at']) - ms_of(job['created_at'])
    apply = step_ms(job, 'apply')
    return total, apply, total - apply, step_ms(job, 'measure')


def check_file(vm, slot):
    d = next(x for x in vm['disks'] if x['pci_slot'] == slot)
    st = os.stat(d['path'])
    if st.st_size != d['size'] * MIB:
        raise SystemExit(f'{d["path"]}: {st.st_size} bytes, the record says {d["size"]} MiB')
    if st.st_blocks * 512 > 16 * MIB:
        raise SystemExit(f'{d["path"]}: {st.st_blocks * 512} bytes allocated: not sparse')
    return d['size']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    a = ap.parse_args()
    lab = tempfile.mkdtemp(prefix='tern-bench-resize-')
    desc = lab + '.json'
    with open(desc, 'w') as f:
        json.dump(DESCRIPTION, f)
    env = dict(os.environ, TERN_BUILD=a.build)
    tool = os.path.join(ROOT, 'tools', 'lab')
    up = False
    try:
        p = subprocess.run([tool, 'up', '--datacenter', desc, '--dir', lab, '--workflows',
                            os.path.join(ROOT, 'workflows')], capture_output=True, text=True,
                           env=env, timeout=120)
        if p.returncode != 0:
            raise SystemExit(f'tools/lab up: {p.stdout}{p.stderr}')
        up = True
        api = Api(p.stdout.strip().splitlines()[-1].split('=', 1)[1])
        api.run_job('provision', '/provision-' + VM, {
            'vm_uuid': VM, 'owner_uuid': 'f0000000-0000-4000-8000-0000000000b1',
            'package': 'bench-flex', 'image_uuid': IMG, 'alias': 'bench',
            'networks': [{'uuid': NET, 'primary': True}],
            'disks': [{}, {'size': SMALL}, {'size': LARGE}]})
        runs = {'0:4:1': [], '0:4:2': []}
        for _ in range(a.rounds):
            for slot in runs:
                status, vm = api.call('/vms/' + VM)
                size = check_file(vm, slot)
                job = api.run_job('disk-resize', '/disk-resize-' + VM,
                                  {'vm_uuid': VM, 'pci_slot': slot, 'size': size + STEP})
                status, vm = api.call('/vms/' + VM)
                if check_file(vm, slot) != size + STEP:
                    raise SystemExit(f'{slot}: not grown to {size + STEP} MiB')
                runs[slot].append(timings(job))
    finally:
        if up:
            subprocess.run([tool, 'down', '--dir', lab], capture_output=True, env=env,
                           timeout=120)
        subprocess.run(['rm', '-rf', lab, desc])

    cols = ('total', 'apply', 'engine', 'measure')
    med = {slot: [statistics.median(r[i] for r in rs) for i in range(len(cols))]
           for slot, rs in runs.items()}
    small, large = med['0:4:1'], med['0:4:2']
    ratio = [round(l / s, 2) if s > 0 else None for l, s in zip(large, small)]
    print(f'disk-resize, +{STEP} MiB, median of {a.rounds}, ms:  '
          + ''.join(f'{c:>8}' for c in cols))
    print('  10 GiB disk                        ' + ''.join(f'{v:8.1f}' for v in small))
    print('  1 TiB disk                         ' + ''.join(f'{v:8.1f}' for v in large))
    print('  1 TiB / 10 GiB                     '
          + ''.join(f'{v:8.2f}' if v is not None else f'{"-":>8}' for v in ratio))
    print(json.dumps({'bench': 'disk_resize', 'rounds': a.rounds, 'step_mib': STEP,
                      'median_ms': {'10GiB': dict(zip(cols, small)),
                                    '1TiB': dict(zip(cols, large))},
                      'ratio_1TiB_10GiB': dict(zip(cols, ratio)), 'runs_ms': runs}))


if __name__ == '__main__':
    sys.exit(main())
