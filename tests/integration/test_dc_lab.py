#!/usr/bin/env python3
"""The dc plugin's inventory through a lab's API: `tools/lab up` loads the description
(GET /servers, /networks, /packages, /images answer with it); a provision's admission
check refuses each bad input at POST /jobs with its status and code and stores no job;
jobs running dc.place, dc.nics_provision, dc.vm_set_state and dc.release on the control
ternd change the inventory as the views then show, paged with x-tern-next-marker and
filtered; a view refuses a query parameter it does not take; a second load (the
workflow run again) keeps what is live.

Usage: test_dc_lab.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded; the lab is stopped
with `tools/lab down`, which stops its processes by pid.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SOURCE, BUILD = sys.argv[1], sys.argv[2]
LAB = os.path.join(SOURCE, 'tools', 'lab')
OWNER = 'a0000000-0000-4000-8000-000000000001'
NET = '20f777ca-b134-47d8-97c6-e7d216932064'
IMAGE = '3c00c831-904f-482f-a941-dda583127bb6'
SERVERS = sorted(['4d16fdf2-c04f-41fb-b197-1c8335405d01', '82baf5fb-c417-4fbf-8bb3-6fe39f859c8e',
                  '242859c3-388d-4485-9d3c-a95679f1fe08'])


def lab(*args):
    env = dict(os.environ, TERN_BUILD=BUILD)
    env.pop('TERN_API_TOKEN', None)
    p = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, f'tools/lab {args}: {p.returncode}\n{p.stdout}\n{p.stderr}'
    return p


def http(url, method='GET', body=None):
    """(status, JSON body, headers)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b'null'), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'null'), e.headers


def run_job(url, workflow, params, target):
    status, job, _ = http(url + '/jobs', 'POST', {'workflow': workflow, 'target': target,
                                                   'params': params})
    assert status == 201, (status, job)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, j, _ = http(url + '/jobs/' + job['uuid'])
        if j['execution'] in ('succeeded', 'failed', 'canceled'):
            return j
        time.sleep(0.05)
    raise AssertionError(f'job {job["uuid"]} did not end within 30 s')


# A provision's control-plane steps only (no agent): what the inventory does for it.
PLACE = {
    'name': 'test-dc-place', 'version': '1.0.0',
    'admission': [{'name': 'check', 'task': 'dc.provision_check',
                   'args': {'params': '${params}'}}],
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
RELEASE = {
    'name': 'test-dc-release', 'version': '1.0.0',
    'admission': [{'name': 'check', 'task': 'dc.vm_check',
                   'args': {'vm_uuid': '${params.vm_uuid}', 'action': 'delete'}}],
    'chain': [{'name': 'release', 'task': 'dc.release', 'args': {
        'vm_uuid': '${params.vm_uuid}', 'final_state': 'destroyed'}}],
}


def vm(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def provision_params(i, **over):
    p = {'vm_uuid': vm(i), 'owner_uuid': OWNER, 'alias': f'web-{i}', 'package': 'lab-small',
         'image_uuid': IMAGE, 'networks': [{'uuid': NET}]}
    p.update(over)
    return p


def main():
    top = tempfile.mkdtemp(prefix='tern-dc-lab.')
    lab_dir = os.path.join(top, 'lab')
    p = lab('up', '--dir', lab_dir)
    try:
        assert 'inventory loaded' in p.stdout, p.stdout
        url = p.stdout.splitlines()[-1].split('=', 1)[1]
        check(url)
        print('ok')
    finally:
        lab('down', '--dir', lab_dir)
        subprocess.run(['rm', '-rf', top], check=False)


def check(url):
    status, servers, h = http(url + '/servers')
    assert status == 200 and [s['uuid'] for s in servers] == SERVERS, servers
    assert h['x-count'] == '3' and all(s['ram_committed_mib'] == 0 for s in servers), servers
    status, one, _ = http(url + '/servers?limit=2')
    assert len(one) == 2
    status, rest, h = http(url + '/servers?limit=2&marker=' + one[1]['uuid'])
    assert [s['uuid'] for s in rest] == SERVERS[2:], rest
    assert http(url + '/servers/' + SERVERS[0])[1]['uuid'] == SERVERS[0]
    assert http(url + '/servers/00000000-0000-4000-8000-000000000000')[0] == 404
    _, nets, _ = http(url + '/networks')
    assert {n['name'] for n in nets} == {'external', 'internal', 'fabric'}, nets
    fabric = [n for n in nets if n['fabric']]
    assert [n['name'] for n in fabric] == ['fabric'], nets
    assert fabric[0]['owner_uuids'] == ['00000000-0000-0000-0000-000000000000'], fabric
    packages = {p['name']: p for p in http(url + '/packages')[1]}
    assert set(packages) == {'lab-small', 'lab-large', 'lab-disks', 'lab-zone'}, packages
    assert packages['lab-disks']['disks'] == [{}, {'size': 20480}, {'size': 'remaining'}]
    assert packages['lab-disks']['quota_mib'] == 0, packages['lab-disks']
    assert len(http(url + '/images')[1]) == 3
    assert http(url + '/vms')[1] == [] and http(url + '/nics')[1] == []
    status, body, _ = http(url + '/vms?color=red')
    assert status == 409 and 'color' in json.dumps(body), (status, body)

    for wf in (PLACE, RELEASE):
        status, body, _ = http(url + '/workflows', 'POST', wf)
        assert status == 201, (status, body)

    # Admission refusals: the status and code, nothing stored.
    bad = [
        (provision_params(1, package='lab-huge'), 404, 'ResourceNotFound', 'lab-huge'),
        (provision_params(1, alias='bad alias!'), 422, 'InvalidArgument', 'alias'),
        (provision_params(1, vm_uuid='not-a-uuid'), 422, 'InvalidArgument', 'vm_uuid'),
        (provision_params(1, package='lab-zone'), 422, 'InvalidArgument', 'brand'),
        (provision_params(1, networks=[{'uuid': vm(77)}]), 404, 'ResourceNotFound', vm(77)),
    ]
    for params, want_status, code, part in bad:
        status, body, _ = http(url + '/jobs', 'POST', {
            'workflow': PLACE['name'], 'target': f'/provision-{params["vm_uuid"]}',
            'params': params})
        text = json.dumps(body)
        assert status == want_status and code in text and part in text, (params, status, body)
    status, body, _ = http(url + '/jobs', 'POST', {'workflow': PLACE['name'],
                                                   'target': '/provision-other',
                                                   'params': provision_params(1)})
    assert status == 422 and 'target' in json.dumps(body), (status, body)
    _, jobs, _ = http(url + '/jobs?limit=100')
    assert not [j for j in jobs if j.get('target', '').startswith('/provision-')], jobs

    for i in (1, 2, 3):
        j = run_job(url, PLACE['name'], provision_params(i), f'/provision-{vm(i)}')
        assert j['execution'] == 'succeeded', j
        assert j['state']['agent_queue'] == 'server:' + j['state']['server_uuid'], j['state']
    _, vms, h = http(url + '/vms?limit=2')
    assert [v['uuid'] for v in vms] == [vm(1), vm(2)] and h['x-tern-next-marker'] == vm(2)
    assert h['x-count'] == '3'
    _, vms, _ = http(url + '/vms?limit=2&marker=' + vm(2))
    assert [v['uuid'] for v in vms] == [vm(3)]
    _, one, _ = http(url + '/vms/' + vm(1))
    assert one['state'] == 'running' and one['nics'][0]['ip'] == '203.0.113.10', one
    assert one['nics'][0]['state'] == 'running' and one['allocation']['ram'] == 1024
    # Spread: three 1 GiB VMs go first to cn3 (the most free RAM), and so on.
    on = [http(url + '/vms/' + vm(i))[1]['server_uuid'] for i in (1, 2, 3)]
    assert on[0] == '242859c3-388d-4485-9d3c-a95679f1fe08', on
    _, alias, _ = http(url + '/vms?alias=web-2')
    assert [v['uuid'] for v in alias] == [vm(2)]
    _, nics, _ = http(url + '/nics?belongs_to_uuid=' + vm(3))
    assert [n['ip'] for n in nics] == ['203.0.113.12'], nics
    status, body, _ = http(url + '/jobs', 'POST', {'workflow': PLACE['name'],
                                                   'target': f'/provision-{vm(1)}',
                                                   'params': provision_params(1)})
    assert status == 409 and 'VmAlreadyExists' in json.dumps(body), (status, body)

    # The load again: what is live stays.
    j = run_job(url, 'dc-inventory-load', {}, '/dc-inventory-load')
    assert j['execution'] == 'succeeded', j
    _, s, _ = http(url + '/servers/' + on[0])
    assert s['ram_committed_mib'] >= 1024 and s['instances'] >= 1, s

    j = run_job(url, RELEASE['name'], {'vm_uuid': vm(2)}, f'/delete-{vm(2)}')
    assert j['execution'] == 'succeeded', j
    _, vms, _ = http(url + '/vms')
    assert [v['uuid'] for v in vms] == [vm(1), vm(3)], vms
    _, gone, _ = http(url + '/vms?state=destroyed')
    assert [v['uuid'] for v in gone] == [vm(2)]
    _, ips, _ = http(url + f'/networks/{NET}/ips')
    assert [x['ip'] for x in ips] == ['203.0.113.10', '203.0.113.12'], ips
    status, body, _ = http(url + '/jobs', 'POST', {'workflow': RELEASE['name'],
                                                   'target': f'/delete-{vm(2)}',
                                                   'params': {'vm_uuid': vm(2)}})
    assert status == 404 and 'destroyed' in json.dumps(body), (status, body)


main()
