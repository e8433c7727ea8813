#!/usr/bin/env python3
"""dc_provision_rate.py -- provisions per second through a lab's API, the inventory's
part only: jobs of a workflow with dc.provision_check as admission check and
dc.place, dc.nics_provision, dc.vm_set_state as steps on the control ternd (no agent
step, so what is measured is the engine and the inventory, not the instances' files).

Starts `tools/lab up` in a temporary directory with a description of SERVERS big
servers and a /16, creates N jobs from CLIENTS threads, waits until every one has
succeeded, prints jobs per second from the first create to the last end and Redis's
CPU per job (INFO cpu, through redis-cli on the lab's socket), then `tools/lab down`.

Usage: tests/bench/dc_provision_rate.py [BUILD] [-n N] [--clients C] [--servers S]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OWNER = 'a0000000-0000-4000-8000-000000000001'
NET = '7e000000-0000-4000-8000-000000000001'
IMG = 'c0000000-0000-4000-8000-000000000001'

WORKFLOW = {
    'name': 'bench-dc-provision', 'version': '1.0.0',
    'admission': [{'name': 'check', 'task': 'dc.provision_check', 'args': {'params': '${params}'}}],
    'chain': [
        {'name': 'place', 'task': 'dc.place', 'args': {
            'vm_uuid': '${params.vm_uuid}', 'owner_uuid': '${params.owner_uuid}',
            'alias': '${params.alias}', 'brand': '${admission.check.result.brand}',
            'billing_id': '${admission.check.result.package.uuid}',
            'image_uuid': '${params.image_uuid}', 'ram': '${admission.check.result.ram}',
            'quota': '${admission.check.result.quota}',
            'reservation': '${admission.check.result.reservation}',
            'flexible': '${admission.check.result.flexible}',
            'flexible_disk_size': '${admission.check.result.flexible_disk_size}',
            'server_uuid': '${admission.check.result.server_uuid}',
            'disks': '${admission.check.result.disks}'}},
        {'name': 'nics', 'task': 'dc.nics_provision', 'args': {
            'vm_uuid': '${params.vm_uuid}', 'owner_uuid': '${params.owner_uuid}',
            'networks': '${admission.check.result.networks}'}},
        {'name': 'mark', 'task': 'dc.vm_set_state', 'args': {
            'vm_uuid': '${params.vm_uuid}', 'state': 'running'}},
    ],
}


def description(servers):
    return {
        'servers': [{'uuid': f'50000000-0000-4000-8000-{i:012d}', 'hostname': f'cn{i}',
                     'rack': f'r{i % 4}', 'ram_mib': 1 << 30, 'disk_mib': 1 << 40,
                     'data_root': f'servers/cn{i}'} for i in range(servers)],
        'networks': [{'uuid': NET, 'name': 'big', 'subnet': '10.0.0.0/16', 'gateway': '10.0.0.1',
                      'provision_start_ip': '10.0.0.10', 'provision_end_ip': '10.0.255.250',
                      'vlan_id': 0, 'mtu': 1500}],
        'packages': [{'uuid': 'b0000000-0000-4000-8000-000000000001', 'name': 'small',
                      'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1, 'disk_mib': 2048}],
        'images': [{'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 1024,
                    'file': 'images/os.img', 'brand': 'bhyve'}],
    }


def http(url, method='GET', body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b'null')
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'null')


def redis_cpu(sock):
    out = subprocess.run(['redis-cli', '-s', sock, 'INFO', 'cpu'], capture_output=True,
                         text=True, check=True).stdout
    f = dict(line.split(':', 1) for line in out.splitlines() if ':' in line)
    return float(f['used_cpu_sys']) + float(f['used_cpu_user'])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build', nargs='?', default=os.path.join(ROOT, 'build'))
    ap.add_argument('-n', type=int, default=1000)
    ap.add_argument('--clients', type=int, default=8)
    ap.add_argument('--servers', type=int, default=10)
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix='tern-dc-rate.')
    lab_dir = os.path.join(top, 'lab')
    dc_file = os.path.join(top, 'dc.json')
    with open(dc_file, 'w') as f:
        json.dump(description(a.servers), f)
    env = dict(os.environ, TERN_BUILD=a.build)
    env.pop('TERN_API_TOKEN', None)
    lab = os.path.join(ROOT, 'tools', 'lab')
    up = subprocess.run([lab, 'up', '--dir', lab_dir, '--datacenter', dc_file],
                        capture_output=True, text=True, env=env, timeout=120)
    if up.returncode != 0:
        sys.exit(f'lab up failed:\n{up.stdout}\n{up.stderr}')
    try:
        url = up.stdout.splitlines()[-1].split('=', 1)[1]
        status, body = http(url + '/workflows', 'POST', WORKFLOW)
        assert status in (200, 201), (status, body)
        sock = os.path.join(lab_dir, 'redis', 'redis.sock')
        uuids, lock, errors = [], threading.Lock(), []
        todo = iter(range(a.n))

        def client():
            for i in todo:
                vm = f'f0000000-0000-4000-8000-{i:012d}'
                status, body = http(url + '/jobs', 'POST', {
                    'workflow': WORKFLOW['name'], 'target': f'/provision-{vm}',
                    'params': {'vm_uuid': vm, 'owner_uuid': OWNER, 'alias': f'b{i}',
                               'package': 'small', 'image_uuid': IMG,
                               'networks': [{'uuid': NET}]}})
                with lock:
                    (uuids if status == 201 else errors).append(body.get('uuid') or body)

        cpu0, t0 = redis_cpu(sock), time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            _, running = http(url + '/vms?state=provisioning&limit=1')
            _, done = http(url + '/servers?limit=1000')
            placed = sum(s['instances'] for s in done)
            if placed == a.n and running == []:
                break
            time.sleep(0.05)
        t1, cpu1 = time.monotonic(), redis_cpu(sock)
        with urllib.request.urlopen(url + '/jobs?execution=succeeded&limit=1', timeout=30) as r:
            succeeded = int(r.headers['x-count'])
        assert succeeded == a.n + 1, f'{succeeded} jobs succeeded (the load and {a.n} asked)'
        _, vms = http(url + '/vms?state=running&limit=1')
        print(json.dumps({'n': a.n, 'clients': a.clients, 'servers': a.servers,
                          'seconds': round(t1 - t0, 2),
                          'provisions_per_s': round(a.n / (t1 - t0), 1),
                          'redis_cpu_usec_per_provision': round((cpu1 - cpu0) * 1e6 / a.n),
                          'one_running': bool(vms)}))
    finally:
        subprocess.run([lab, 'down', '--dir', lab_dir], capture_output=True, env=env,
                       timeout=120)
        subprocess.run(['rm', '-rf', top], check=False)


main()
