#!/usr/bin/env python3
"""The control-plane scripts of a shared volume's snapshots, rollback and networks
(dc.volume_op_check, dc.volume_snapshot_record, dc.volume_network) against a real
redis-server, called as the plugin calls them (dc_scripts.py), on volume records the
test writes itself (as volume-create leaves them): every refusal with its code, status
and the words that name the problem, the record unchanged after it; the state machine
of a snapshot and of a rollback (acceptance 28, and 29's record side: a failed
snapshot kept, the volume ready); the limit; each step run twice is run once; a volume
busy with another job; attach and detach (31): the volume's networks, the storage
instance's NICs, addresses taken and given back as dc.release gives them back.

Usage: test_dc_volume_snapshot_scripts.py BUILD_ROOT
"""
import json
import sys
import uuid

import dc_scripts

BUILD = sys.argv[1]
OWNER = '00000000-0000-0000-0000-000000000000'
OTHER = 'a0000000-0000-4000-8000-000000000009'
S1 = '50000000-0000-4000-8000-000000000001'
FAB1 = 'c5a2b1e4-6f0d-4e8a-9b3c-7d21f0a4e5b6'
FAB2 = 'c5a2b1e4-6f0d-4e8a-9b3c-7d21f0a4e5b7'
FAB_OTHER = 'c5a2b1e4-6f0d-4e8a-9b3c-7d21f0a4e5b8'
EXT = '20f777ca-b134-47d8-97c6-e7d216932064'
NOWHERE = 'ffffffff-0000-4000-8000-000000000000'
VOL = 'e0000000-0000-4000-8000-000000000001'
STORAGE = 'f0000000-0000-4000-8000-000000000001'
NS = dc_scripts.NS

DOC = {
    'servers': [{'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 10 * 102400, 'data_root': '/lab/cn1'}],
    'networks': [
        {'uuid': EXT, 'name': 'external', 'subnet': '203.0.113.0/24',
         'gateway': '203.0.113.1', 'provision_start_ip': '203.0.113.10',
         'provision_end_ip': '203.0.113.250', 'vlan_id': 0, 'mtu': 1500},
        {'uuid': FAB1, 'name': 'fabric', 'subnet': '192.168.128.0/24',
         'gateway': '192.168.128.1', 'provision_start_ip': '192.168.128.200',
         'provision_end_ip': '192.168.128.250', 'vlan_id': 128, 'mtu': 8500, 'fabric': True,
         'owner_uuids': [OWNER]},
        {'uuid': FAB2, 'name': 'fabric2', 'subnet': '192.168.129.0/24',
         'gateway': '192.168.129.1', 'provision_start_ip': '192.168.129.200',
         'provision_end_ip': '192.168.129.250', 'vlan_id': 129, 'mtu': 8500, 'fabric': True},
        {'uuid': FAB_OTHER, 'name': 'theirs', 'subnet': '192.168.130.0/24',
         'gateway': '192.168.130.1', 'provision_start_ip': '192.168.130.200',
         'provision_end_ip': '192.168.130.250', 'vlan_id': 130, 'mtu': 8500, 'fabric': True,
         'owner_uuids': [OTHER]},
    ],
    'packages': [], 'images': [],
}

WF = {'snapshot_create': 'volume-snapshot-create', 'snapshot_delete': 'volume-snapshot-delete',
      'rollback': 'volume-rollback', 'attach_network': 'volume-attach-network',
      'detach_network': 'volume-detach-network'}

def raw(inv):
    return inv.r.cmd('GET', NS + 'volume:' + VOL)


def vol(inv):
    return json.loads(raw(inv))


def vm(inv):
    return json.loads(inv.r.cmd('GET', NS + 'vm:' + STORAGE))


def put_volume(inv, **over):
    """A volume as volume-create leaves it (ready, its storage instance running on S1
    with one NIC on FAB1), with `over` applied."""
    v = {'uuid': VOL, 'owner_uuid': OWNER, 'name': 'wp-uploads', 'type': 'tritonnfs',
         'create_timestamp': '2026-11-26T11:00:00.000Z', 'state': 'ready', 'networks': [FAB1],
         'snapshots': [], 'tags': {}, 'billing_id': None, 'refs': [],
         'filesystem_path': None, 'vm_uuid': STORAGE, 'size': 10240, 'server_uuid': S1,
         'export_path': f'/lab/cn1/{STORAGE}/export', 'share_state': 'running',
         'share_endpoint': None, 'share_probed_at': None, 'error_since': None,
         'created_by_job': None, 'job_uuid': None, 'version': 1}
    v.update(over)
    if inv.r.cmd('GET', NS + 'vm:' + STORAGE) is None:
        inv.r.cmd('SET', NS + 'vm:' + STORAGE, json.dumps({
            'uuid': STORAGE, 'owner_uuid': OWNER, 'alias': f'volume-wp-uploads-{VOL}',
            'brand': 'joyent-minimal', 'state': 'running', 'server_uuid': S1,
            'allocation': {'server_uuid': S1, 'ram': 256, 'disk': 10240}, 'nics': [],
            'volume_uuid': VOL}))
        nics = inv.ok('nics_provision', {'vm_uuid': STORAGE, 'owner_uuid': OWNER,
                                         'networks': [{'uuid': FAB1}]})['nics']
        ip = nics[0]['ip']
        v['filesystem_path'] = ip + ':/exports/data'
        v['share_endpoint'] = f'nfs://{ip}/wp-uploads'
    for z in inv.r.cmd('KEYS', NS + 'volumes:state:*'):
        inv.r.cmd('ZREM', z, VOL)
    inv.r.cmd('ZADD', NS + 'volumes:state:' + v['state'], 0, VOL)
    inv.r.cmd('SET', NS + 'volume:' + VOL, json.dumps(v))
    return v


def snap(name, state='created'):
    return {'name': name, 'create_timestamp': '2026-11-26T11:30:00Z', 'state': state}


def params(action, **over):
    p = {'volume_uuid': VOL, 'owner_uuid': OWNER}
    p.update({'name': 's1'} if action in ('snapshot_create', 'snapshot_delete', 'rollback')
             else {'network_uuid': FAB2})
    p.update(over)
    return {k: v for k, v in p.items() if v is not ...}


def check(action, p=None, max_snapshots=None, target=None):
    p = p if p is not None else params(action)
    a = {'action': action, 'params': p,
         'target': target or f'/{WF[action]}-{p.get("volume_uuid") if isinstance(p, dict) else VOL}'}
    if max_snapshots is not None:
        a['max_snapshots'] = max_snapshots
    return a


def step(op, action, job, p=None, max_snapshots=None):
    a = {'op': op, 'action': action, 'params': p if p is not None else params(action),
         'job_uuid': job}
    if max_snapshots is not None:
        a['max_snapshots'] = max_snapshots
    return a


def script_of(action):
    return 'volume_network' if action.endswith('_network') else 'volume_snapshot_record'


def refused(inv, action, p, code, part, status, max_snapshots=None):
    """Refused by the admission check and, with the same code, by the begin step; the
    record is unchanged."""
    before = raw(inv)
    inv.error('volume_op_check', check(action, p, max_snapshots), code, part, status)
    inv.error(script_of(action), step('begin', action, str(uuid.uuid4()), p, max_snapshots),
              code, part, status)
    assert raw(inv) == before, 'a refused request changed the record'


def run(inv, action, name=None, fail=False, **over):
    """A whole job as its workflow runs it (the agent's steps played by nothing: the
    records only): check, begin, [starting], commit or fail."""
    p = params(action, **({'name': name} if name else {}), **over)
    inv.ok('volume_op_check', check(action, p))
    job = str(uuid.uuid4())
    script = script_of(action)
    got = inv.ok(script, step('begin', action, job, p))
    if action == 'attach_network':
        inv.ok('nics_provision', {'vm_uuid': STORAGE, 'owner_uuid': OWNER,
                                  'networks': got['networks']})
    if action == 'rollback':
        inv.ok(script, step('starting', action, job, p))
    inv.ok(script, step('fail' if fail else 'commit', action, job, p))
    return job, got


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-volsnap.')


@case
def bad_params_are_refused_naming_the_field(inv):
    put_volume(inv)
    for action in WF:
        refused(inv, action, dict(params(action), colour='red'), 'InvalidArgument',
                f'params.colour: unknown key for {WF[action]}', 422)
        refused(inv, action, params(action, volume_uuid=...), 'InvalidArgument',
                'params.volume_uuid: required', 422)
        refused(inv, action, params(action, owner_uuid='nobody'), 'InvalidArgument',
                'params.owner_uuid: expected a lowercase UUID', 422)
        refused(inv, action, params(action, volume_uuid=VOL.upper()), 'InvalidArgument',
                'params.volume_uuid: expected a lowercase UUID', 422)
    refused(inv, 'rollback', dict(params('rollback'), b=1, a=2), 'InvalidArgument',
            'params.a: unknown keys a, b for volume-rollback', 422)
    refused(inv, 'attach_network', params('attach_network', name='s1'), 'InvalidArgument',
            'params.name: unknown key for volume-attach-network', 422)
    refused(inv, 'attach_network', params('attach_network', network_uuid=5), 'InvalidArgument',
            'params.network_uuid: expected a lowercase UUID, got 5', 422)
    # The name rule: a volume name's, and room for ".part".
    for name, part in (('a', '"a" must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$ (at least 2 characters)'),
                       ('-x', '"-x" must match'), ('a b', '"a b" must match'),
                       ('vol/1', '"vol/1" must match'), ('é1', '"é1" must match'),
                       ('x' * 251, 'at most 250 characters for a snapshot, got 251'),
                       ('x' * 257, 'at most 256 characters'),
                       ('nightly.part', '"nightly.part" ends in ".part"'), (7, 'expected a string'),
                       ([], 'expected a string')):
        for action in ('snapshot_create', 'snapshot_delete', 'rollback'):
            refused(inv, action, params(action, name=name), 'InvalidArgument',
                    'params.name: ' + part, 422)
    refused(inv, 'snapshot_create', params('snapshot_create', name=...), 'InvalidArgument',
            'params.name: required', 422)
    inv.ok('volume_op_check', check('snapshot_create', params('snapshot_create',
                                                               name='x' * 250)))
    inv.error('volume_op_check', check('snapshot_create', target='/volume-snapshot-create-x'),
              'InvalidArgument', f'target: a volume-snapshot-create of volume {VOL} has the '
              f'target /volume-snapshot-create-{VOL}, not "/volume-snapshot-create-x"', 422)
    inv.error('volume_op_check', check('rollback', target=f'/volume-snapshot-create-{VOL}'),
              'InvalidArgument', 'target', 422)
    inv.error('volume_op_check', dict(check('snapshot_create'), action='clone'),
              'InvalidArgument', 'action: expected snapshot_create', 422)
    inv.error('volume_op_check', check('snapshot_create', p=[1]), 'InvalidArgument',
              'params: expected an object', 422)
    inv.error('volume_snapshot_record', dict(step('begin', 'rollback', 'j'), op='undo'),
              'InvalidArgument', 'op: expected begin, starting, commit or fail', 422)
    inv.error('volume_snapshot_record', step('begin', 'attach_network', 'j'),
              'InvalidArgument', 'action: expected snapshot_create, snapshot_delete or '
              'rollback', 422)
    inv.error('volume_network', step('begin', 'rollback', 'j'), 'InvalidArgument',
              'action: expected attach_network or detach_network', 422)
    inv.error('volume_snapshot_record', step('begin', 'rollback', ''), 'InvalidArgument',
              'job_uuid', 422)


@case
def the_volume_must_be_the_owners_and_ready(inv):
    put_volume(inv)
    # Another owner's volume and an unknown one: the same 404, nothing told.
    for p in (params('snapshot_create', owner_uuid=OTHER),
              params('snapshot_create', volume_uuid=NOWHERE)):
        err = inv.error('volume_op_check', check('snapshot_create', p), 'VolumeNotFound',
                        f'volume {p["volume_uuid"]} not found', 404)
        assert 'wp-uploads' not in err['message'], err
    for state in ('creating', 'deleting', 'failed', 'rolling_back'):
        put_volume(inv, state=state)
        for action in WF:
            refused(inv, action, params(action), 'VolumeNotReady',
                    f'volume wp-uploads ({VOL}) is {state}: {WF[action]} needs it ready', 409)


@case
def snapshot_names_are_unique_and_limited(inv):
    put_volume(inv, snapshots=[snap('s1'), snap('s2', 'failed')])
    refused(inv, 'snapshot_create', params('snapshot_create', name='s1'),
            'VolumeSnapshotAlreadyExists', 'volume wp-uploads already has a snapshot named s1',
            409)
    # A failed snapshot keeps its name until it is deleted (only a retried job's begin
    # takes it back: a_failure_leaves_the_snapshot_failed_and_the_volume_ready).
    inv.error('volume_op_check', check('snapshot_create', params('snapshot_create', name='s2')),
              'VolumeSnapshotAlreadyExists', 'named s2', 409)
    # The limit, from max_snapshots_per_volume (a failed snapshot counts).
    refused(inv, 'snapshot_create', params('snapshot_create', name='s3'),
            'SnapshotLimitExceeded', 'volume wp-uploads has 2 snapshots, the most a volume may '
            'have (max_snapshots_per_volume 2)', 409, max_snapshots=2)
    inv.ok('volume_op_check', check('snapshot_create', params('snapshot_create', name='s3'),
                                    max_snapshots=3))
    # Absent: the default, 16.
    put_volume(inv, snapshots=[snap(f's{i}') for i in range(16)])
    refused(inv, 'snapshot_create', params('snapshot_create', name='tt'),
            'SnapshotLimitExceeded', 'max_snapshots_per_volume 16', 409)
    # Delete and rollback of a missing one; rollback to a failed one.
    put_volume(inv, snapshots=[snap('s1'), snap('s2', 'failed')])
    for action in ('snapshot_delete', 'rollback'):
        refused(inv, action, params(action, name='s9'), 'VolumeSnapshotNotFound',
                'volume wp-uploads has no snapshot named s9', 404)
    refused(inv, 'rollback', params('rollback', name='s2'), 'InvalidArgument',
            'params.name: snapshot s2 of volume wp-uploads is failed: only a created snapshot',
            422)
    got = inv.ok('volume_op_check', check('rollback', params('rollback', name='s1')))
    assert got['later'] == ['s2'] and got['server_uuid'] == S1 and \
        got['vm_uuid'] == STORAGE and got['snapshot']['name'] == 's1', got
    got = inv.ok('volume_op_check', check('snapshot_delete', params('snapshot_delete',
                                                                     name='s2')))
    assert got['state'] == 'ready' and got['networks'] == [FAB1], got


@case
def snapshot_create_delete_and_rollback(inv):
    """Acceptance 28 on the records: s1, s1 again refused, s2, rollback to s1."""
    put_volume(inv)
    job = str(uuid.uuid4())
    p = params('snapshot_create', name='s1')
    got = inv.ok('volume_snapshot_record', step('begin', 'snapshot_create', job, p))
    v = vol(inv)
    assert v['snapshots'] == [{'name': 's1', 'create_timestamp': '2026-11-26T12:00:00.000Z',
                               'state': 'creating'}] and v['job_uuid'] == job, v
    assert got['snapshot']['state'] == 'creating' and got['later'] == [], got
    # begin again: the same, nothing written twice.
    before = raw(inv)
    again = inv.ok('volume_snapshot_record', step('begin', 'snapshot_create', job, p))
    assert again == got and raw(inv) == before, (again, got)
    # Another job meanwhile: busy.
    other = str(uuid.uuid4())
    inv.error('volume_snapshot_record',
              step('begin', 'snapshot_create', other, params('snapshot_create', name='s2')),
              'VolumeNotReady', f'busy with job {job}, not job {other}', 409)
    inv.error('volume_snapshot_record', step('commit', 'snapshot_create', other, p),
              'InvalidState', f'has no snapshot_create of job {other} in flight', 409)
    done = inv.ok('volume_snapshot_record', step('commit', 'snapshot_create', job, p))
    v = vol(inv)
    assert v['snapshots'][0]['state'] == 'created' and v['job_uuid'] is None, v
    assert v['version'] == 3 and v['state'] == 'ready', v
    before = raw(inv)
    assert inv.ok('volume_snapshot_record', step('commit', 'snapshot_create', job, p)) == done
    assert raw(inv) == before, 'a second commit wrote'
    refused(inv, 'snapshot_create', p, 'VolumeSnapshotAlreadyExists', 'named s1', 409)

    run(inv, 'snapshot_create', 's2')
    run(inv, 'snapshot_create', 's3')
    assert [s['name'] for s in vol(inv)['snapshots']] == ['s1', 's2', 's3']

    # Rollback to s1: rolling_back with the share stopped, then starting, then ready
    # and running, s2 and s3 gone.
    job = str(uuid.uuid4())
    p = params('rollback', name='s1')
    got = inv.ok('volume_snapshot_record', step('begin', 'rollback', job, p))
    assert got['later'] == ['s2', 's3'] and got['state'] == 'rolling_back' and \
        got['share_state'] == 'stopped', got
    assert inv.r.cmd('ZSCORE', NS + 'volumes:state:rolling_back', VOL) == '0'
    assert inv.r.cmd('ZSCORE', NS + 'volumes:state:ready', VOL) is None
    assert inv.ok('volume_snapshot_record', step('begin', 'rollback', job, p)) == got
    got = inv.ok('volume_snapshot_record', step('starting', 'rollback', job, p))
    assert got['share_state'] == 'starting' and got['state'] == 'rolling_back', got
    got = inv.ok('volume_snapshot_record', step('commit', 'rollback', job, p))
    v = vol(inv)
    assert [s['name'] for s in v['snapshots']] == ['s1'] and v['state'] == 'ready' and \
        v['share_state'] == 'running' and v['job_uuid'] is None, v
    assert inv.r.cmd('ZSCORE', NS + 'volumes:state:ready', VOL) == '0'
    assert inv.r.cmd('ZSCORE', NS + 'volumes:state:rolling_back', VOL) is None
    before = raw(inv)
    assert inv.ok('volume_snapshot_record', step('commit', 'rollback', job, p)) == got
    assert raw(inv) == before

    # Delete: gone from the list; again: the same.
    job, _ = run(inv, 'snapshot_delete', 's1')
    assert vol(inv)['snapshots'] == [], vol(inv)
    before = raw(inv)
    inv.ok('volume_snapshot_record', step('commit', 'snapshot_delete', job,
                                          params('snapshot_delete', name='s1')))
    assert raw(inv) == before
    assert '"snapshots":[]' in raw(inv), raw(inv)


@case
def a_failure_leaves_the_snapshot_failed_and_the_volume_ready(inv):
    """Acceptance 29 on the records: the agent refused the copy (no room)."""
    put_volume(inv, snapshots=[snap('s1')])
    job, _ = run(inv, 'snapshot_create', 's2', fail=True)
    v = vol(inv)
    assert v['snapshots'][1] == {'name': 's2', 'create_timestamp': '2026-11-26T12:00:00.000Z',
                                 'state': 'failed'} and v['state'] == 'ready' and \
        v['job_uuid'] is None and v['share_state'] == 'running', v
    # fail again, or by a job that never began: nothing changes.
    before = raw(inv)
    inv.ok('volume_snapshot_record', step('fail', 'snapshot_create', job,
                                          params('snapshot_create', name='s2')))
    inv.ok('volume_snapshot_record', step('fail', 'rollback', str(uuid.uuid4()),
                                          params('rollback', name='s1')))
    assert raw(inv) == before
    # A new job of that name is refused at admission; the retry of the job whose copy
    # failed (it resumes at begin) takes the failed snapshot back, even at the limit.
    p2 = params('snapshot_create', name='s2')
    inv.error('volume_op_check', check('snapshot_create', p2), 'VolumeSnapshotAlreadyExists',
              'named s2', 409)
    got = inv.ok('volume_snapshot_record', step('begin', 'snapshot_create', job, p2,
                                                max_snapshots=2))
    v = vol(inv)
    assert [(s['name'], s['state']) for s in v['snapshots']] == \
        [('s1', 'created'), ('s2', 'creating')] and v['job_uuid'] == job, v
    assert got['snapshot']['state'] == 'creating', got
    inv.ok('volume_snapshot_record', step('fail', 'snapshot_create', job, p2))
    assert vol(inv)['snapshots'][1]['state'] == 'failed'
    # The failed one is deleted like any other.
    run(inv, 'snapshot_delete', 's2')
    assert [s['name'] for s in vol(inv)['snapshots']] == ['s1']
    # A delete that failed: the snapshot marked failed (its copy may be partly gone).
    run(inv, 'snapshot_create', 's3')
    run(inv, 'snapshot_delete', 's3', fail=True)
    assert vol(inv)['snapshots'][1]['state'] == 'failed', vol(inv)
    # A rollback that failed: the volume failed, its share unknown until probed.
    run(inv, 'rollback', 's1', fail=True)
    v = vol(inv)
    assert v['state'] == 'failed' and v['share_state'] == 'unknown' and \
        v['job_uuid'] is None and [s['name'] for s in v['snapshots']] == ['s1', 's3'], v
    assert inv.r.cmd('ZSCORE', NS + 'volumes:state:failed', VOL) == '0'
    # A volume deleted since: fail has nothing to undo.
    inv.r.cmd('DEL', NS + 'volume:' + VOL)
    inv.ok('volume_snapshot_record', step('fail', 'rollback', job, params('rollback')))


@case
def the_limit_is_checked_again_at_begin(inv):
    put_volume(inv, snapshots=[snap('s1')])
    p = params('snapshot_create', name='s2')
    inv.ok('volume_op_check', check('snapshot_create', p, max_snapshots=2))
    # Another job took the last place between admission and begin.
    run(inv, 'snapshot_create', 's3')
    inv.error('volume_snapshot_record', step('begin', 'snapshot_create', str(uuid.uuid4()), p,
                                             max_snapshots=2),
              'SnapshotLimitExceeded', 'has 2 snapshots', 409)


def ip_taken(inv, net, ip):
    return inv.r.cmd('EXISTS', NS + f'ip:{net}:{ip}') == 1


def ip_free(inv, net, ip):
    n = int.from_bytes(bytes(int(x) for x in ip.split('.')), 'big')
    return inv.r.cmd('ZSCORE', NS + f'network:{net}:free', n) is not None


@case
def network_refusals(inv):
    put_volume(inv)
    refused(inv, 'attach_network', params('attach_network', network_uuid=NOWHERE),
            'ResourceNotFound', f'params.network_uuid: network {NOWHERE} does not exist', 404)
    refused(inv, 'attach_network', params('attach_network', network_uuid=EXT), 'InvalidArgument',
            f'params.network_uuid: network external ({EXT}) is not a fabric network', 422)
    refused(inv, 'attach_network', params('attach_network', network_uuid=FAB_OTHER),
            'InvalidArgument', f'network theirs ({FAB_OTHER}) is not a fabric network of owner '
            f'{OWNER}', 422)
    refused(inv, 'attach_network', params('attach_network', network_uuid=FAB1),
            'InvalidArgument', f'volume wp-uploads is already attached to network {FAB1}', 422)
    refused(inv, 'detach_network', params('detach_network', network_uuid=FAB2),
            'InvalidArgument', f'volume wp-uploads is not attached to network {FAB2}', 422)
    refused(inv, 'detach_network', params('detach_network', network_uuid=FAB1),
            'InvalidArgument', f'network {FAB1} is the last network of volume wp-uploads', 422)


@case
def a_detach_keeps_a_network_for_each_consumer(inv):
    put_volume(inv)
    run(inv, 'attach_network', network_uuid=FAB2)
    consumers = ['c0000000-0000-4000-8000-000000000001', 'c0000000-0000-4000-8000-000000000002']
    for c, nets in zip(consumers, ([FAB1, EXT], [FAB1, FAB2])):
        inv.r.cmd('SET', NS + 'vm:' + c, json.dumps({
            'uuid': c, 'owner_uuid': OWNER, 'state': 'running',
            'nics': [{'mac': f'90:b8:d0:ff:00:0{i}', 'network_uuid': n}
                     for i, n in enumerate(nets)]}))
    v = vol(inv)
    v['refs'] = consumers
    inv.r.cmd('SET', NS + 'volume:' + VOL, json.dumps(v))
    refused(inv, 'detach_network', params('detach_network', network_uuid=FAB1), 'VolumeInUse',
            f'Volume with name wp-uploads is used by {consumers[0]}, which reach it only on '
            f'network {FAB1}', 409)
    # The second consumer reaches it on FAB2 too: FAB2 may go.
    run(inv, 'detach_network', network_uuid=FAB2)
    assert vol(inv)['networks'] == [FAB1]


@case
def attach_and_detach(inv):
    """Acceptance 31 on the records: attach to a second fabric network, detach back."""
    put_volume(inv)
    first_ip = vm(inv)['nics'][0]['ip']
    job, got = run(inv, 'attach_network', network_uuid=FAB2)
    assert got['networks'] == [{'uuid': FAB1}, {'uuid': FAB2}], got
    v, s = vol(inv), vm(inv)
    assert v['networks'] == [FAB1, FAB2] and v['job_uuid'] is None and \
        v['share_state'] == 'running', v
    assert [n['network_uuid'] for n in s['nics']] == [FAB1, FAB2], s['nics']
    assert [n['interface'] for n in s['nics']] == ['net0', 'net1'] and \
        [n['primary'] for n in s['nics']] == [True, False] and \
        all(n['state'] == 'running' for n in s['nics']), s['nics']
    second = s['nics'][1]
    assert second['ip'].startswith('192.168.129.') and ip_taken(inv, FAB2, second['ip'])
    assert json.loads(inv.r.cmd('GET', NS + 'nic:' + second['mac']))['state'] == 'running'
    assert v['filesystem_path'] == first_ip + ':/exports/data', v
    before = (raw(inv), inv.r.cmd('GET', NS + 'vm:' + STORAGE))
    inv.ok('volume_network', step('commit', 'attach_network', job,
                                  params('attach_network', network_uuid=FAB2)))
    assert (raw(inv), inv.r.cmd('GET', NS + 'vm:' + STORAGE)) == before, 'commit wrote twice'

    # Detach the first: its address freed as dc.release frees it; the second becomes
    # net0, primary, and the paths follow its address.
    first_mac = s['nics'][0]['mac']
    _, got = run(inv, 'detach_network', network_uuid=FAB1)
    # begin answered the NICs the instance keeps, as its vm.json is to list them.
    assert [(n['mac'], n['interface'], n['primary']) for n in got['nics']] == \
        [(second['mac'], 'net0', True)], got['nics']
    v, s = vol(inv), vm(inv)
    assert v['networks'] == [FAB2] and len(s['nics']) == 1, (v, s)
    assert s['nics'][0]['mac'] == second['mac'] and s['nics'][0]['interface'] == 'net0' and \
        s['nics'][0]['primary'] is True, s['nics']
    assert not ip_taken(inv, FAB1, first_ip) and ip_free(inv, FAB1, first_ip)
    assert inv.r.cmd('EXISTS', NS + 'nic:' + first_mac) == 0
    assert inv.r.cmd('ZSCORE', NS + 'nics:cn:' + S1, first_mac) is None
    assert inv.r.cmd('ZSCORE', NS + 'nics', first_mac) is None
    assert v['filesystem_path'] == second['ip'] + ':/exports/data' and \
        v['share_endpoint'] == f'nfs://{second["ip"]}/wp-uploads', v
    assert inv.hash('network:' + FAB1)['taken'] == '0'


@case
def a_failed_attach_gives_the_nic_back(inv):
    put_volume(inv)
    before_vol = vol(inv)
    job, got = run(inv, 'attach_network', network_uuid=FAB2, fail=True)
    v, s = vol(inv), vm(inv)
    # fail answers the NICs as they are now, for the instance's vm.json.
    again = inv.ok('volume_network', step('fail', 'attach_network', job,
                                          params('attach_network', network_uuid=FAB2)))
    assert again['nics'] == s['nics'] and len(again['nics']) == 1, again
    assert v['networks'] == [FAB1] and v['job_uuid'] is None and len(s['nics']) == 1 and \
        s['nics'][0]['network_uuid'] == FAB1, (v, s)
    assert inv.hash('network:' + FAB2)['taken'] == '0'
    assert inv.r.cmd('ZCARD', NS + f'network:{FAB2}:free') == 51
    assert v['filesystem_path'] == before_vol['filesystem_path'], v
    # A detach that failed changed nothing but the share, unknown until probed.
    run(inv, 'attach_network', network_uuid=FAB2)
    run(inv, 'detach_network', network_uuid=FAB2, fail=True)
    v, s = vol(inv), vm(inv)
    assert v['networks'] == [FAB1, FAB2] and len(s['nics']) == 2 and \
        v['share_state'] == 'unknown', (v, s)
    # A commit of an attach whose NIC was never made is refused.
    job = str(uuid.uuid4())
    put_volume(inv, networks=[FAB1], share_state='running')
    inv.r.cmd('SET', NS + 'vm:' + STORAGE, json.dumps(dict(vm(inv), nics=vm(inv)['nics'][:1])))
    p = params('attach_network', network_uuid=FAB2)
    inv.ok('volume_network', step('begin', 'attach_network', job, p))
    inv.error('volume_network', step('commit', 'attach_network', job, p), 'InvalidState',
              f'has no NIC on network {FAB2}', 409)


case.exit()
