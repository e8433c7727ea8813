#!/usr/bin/env python3
"""The disk operations' control-plane scripts (dc.disk_check, dc.disk_reserve,
dc.disk_commit, dc.disk_settle) against a real redis-server, called as the plugin
calls them (dc_scripts.py), with the agent's answers played by this file: every
refusal with its code and the words that name the problem, and the record unchanged
after it; the space rule with snapshots measured fresh at reserve (acceptance 16, 17,
18); sticky slots (21); two reserves racing for space that fits one (22); unknown keys
(24); an inflexible VM (25); quota and allocation constant, the server's committed disk
the sum over its VMs (26); commit and settle run twice are run once; what a failed
operation leaves is what the files say.

Usage: test_dc_disk_scripts.py BUILD_ROOT
"""
import json
import math
import sys
import threading
import uuid

import dc_scripts
from script_cost import Redis

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
S1 = '50000000-0000-4000-8000-000000000001'
PKG = 'b0000000-0000-4000-8000-000000000001'
IMG = 'c0000000-0000-4000-8000-000000000001'
MiB = 1 << 20

DOC = {
    'servers': [{'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 10 * 102400, 'data_root': '/lab/cn1'}],
    'networks': [],
    'packages': [{'uuid': PKG, 'name': 'flex', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
                  'disk_mib': 102400, 'flexible_disk': True}],
    'images': [{'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 10240,
                'file': '/lab/os.img', 'brand': 'bhyve'}],
}

class Scripts(dc_scripts.Inventory):
    """dc_scripts.Inventory, with ARGV[3] (fresh UUIDs) given as the plugin gives it."""

    def call(self, name, args):
        uuids = json.dumps([str(uuid.uuid4()) for _ in range(8)])
        reply = self.r.cmd('EVALSHA', self.sha[name], 1, dc_scripts.NS, json.dumps(args),
                           '2026-11-26T12:00:00Z', uuids)
        return json.loads(reply)


def vm_uuid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def disk_id(i, n):
    return f'd0000000-0000-4000-8000-{i:06d}{n:06d}'


def make_vm(inv, i, sizes=(10240, 92160), state='stopped', fds=102400, flexible=True,
            snapshots=()):
    """A VM as provision leaves it: placed on S1 (its allocation committed there),
    then its record given the flexible disk fields of a package of `fds` MiB."""
    committed = fds if flexible else sum(sizes)
    inv.ok('place', {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'alias': f'vm{i}',
                     'brand': 'bhyve', 'billing_id': PKG, 'image_uuid': IMG, 'ram': 1024,
                     'quota': committed, 'reservation': committed, 'flexible': flexible,
                     'flexible_disk_size': fds if flexible else None, 'server_uuid': S1,
                     'autoboot': True, 'customer_metadata': {},
                     'disks': [dict({'boot': n == 0, 'size': s}, **({'image': IMG} if n == 0
                                                                    else {}))
                               for n, s in enumerate(sizes)]})
    vm = get(inv, i)
    vm['state'] = state
    vm['flexible'] = flexible
    vm['quota'] = 0 if flexible else sum(sizes)
    if flexible:
        vm['flexible_disk_size'] = fds
    vm['disks'] = [{'id': disk_id(i, n), 'boot': n == 0, 'size': s, 'snapshot_size': 0,
                    'pci_slot': f'0:4:{n}', 'path': f'/lab/cn1/{vm_uuid(i)}/disks/disk{n}.img'}
                   for n, s in enumerate(sizes)]
    vm['disks'][0]['image'] = IMG
    vm['snapshots'] = [{'name': n, 'created_timestamp': '2026-11-26T11:00:00Z'}
                       for n in snapshots]
    if flexible:
        vm['free_space'] = fds - sum(sizes)
    put(inv, vm)
    return vm


def get(inv, i):
    return json.loads(inv.r.cmd('GET', dc_scripts.NS + 'vm:' + vm_uuid(i)))


def put(inv, vm):
    inv.r.cmd('SET', dc_scripts.NS + 'vm:' + vm['uuid'], json.dumps(vm))


def raw(inv, i):
    return inv.r.cmd('GET', dc_scripts.NS + 'vm:' + vm_uuid(i))


class Agent:
    """What dc.disk_usage / disk_apply / disk_undo answer for one VM: its files, kept
    here as {slot: {id, size, snapshot_bytes}} and a list of snapshot names."""

    def __init__(self, vm):
        self.vm = vm['uuid']
        self.disks = {d['pci_slot']: {'id': d['id'], 'size': d['size'], 'snapshot_bytes': 0}
                      for d in vm['disks']}
        self.snapshots = [s['name'] for s in vm.get('snapshots', [])]

    def usage(self):
        out = []
        for slot in sorted(self.disks, key=lambda s: int(s.split(':')[2])):
            d = self.disks[slot]
            out.append({'id': d['id'], 'pci_slot': slot, 'size': d['size'],
                        'path': f'/lab/cn1/{self.vm}/disks/disk{slot.split(":")[2]}.img',
                        'data_bytes': 0, 'snapshot_bytes': d['snapshot_bytes'],
                        'snapshot_size': math.ceil(d['snapshot_bytes'] / MiB)})
        return out

    def apply(self, c):
        if c['op'] == 'add':
            self.disks[c['pci_slot']] = {'id': c['id'], 'size': c['new_size'],
                                         'snapshot_bytes': 0}
        elif c['op'] == 'resize':
            self.disks[c['pci_slot']]['size'] = c['new_size']
        elif c['op'] == 'delete':
            del self.disks[c['pci_slot']]
        elif c['op'] == 'snapshot_create':
            self.snapshots.append(c['name'])
        elif c['op'] == 'snapshot_delete':
            self.snapshots.remove(c['name'])
        return self.usage()


def params_of(action, i, **kw):
    return dict({'vm_uuid': vm_uuid(i)}, **kw)


WF = {'add': 'disk-add', 'resize': 'disk-resize', 'delete': 'disk-delete',
      'snapshot_create': 'vm-snapshot-create', 'snapshot_delete': 'vm-snapshot-delete',
      'usage': 'vm-disk-usage'}


def check_args(action, i, params):
    return {'action': action, 'vm_uuid': vm_uuid(i), 'target': f'/{WF[action]}-{vm_uuid(i)}',
            'params': params}


def reserve_args(action, i, params, job, usage=None):
    a = {'action': action, 'vm_uuid': vm_uuid(i), 'job_uuid': job, 'params': params}
    if usage is not None:
        a['usage'] = usage
    return a


def run_op(inv, agent, action, i, **params):
    """A whole job as the workflow runs it: check, measure (add, resize), reserve,
    apply, commit. Returns commit's answer."""
    p = params_of(action, i, **params)
    inv.ok('disk_check', check_args(action, i, p))
    job = str(uuid.uuid4())
    usage = agent.usage() if action in ('add', 'resize') else None
    c = inv.ok('disk_reserve', reserve_args(action, i, p, job, usage))['disk_change']
    after = agent.apply(c)
    return inv.ok('disk_commit', {'vm_uuid': vm_uuid(i), 'job_uuid': job, 'usage': after,
                                  'snapshots': agent.snapshots})


def refused(inv, action, i, params, code, part, status):
    """Refused by the admission check and, with the same code, by reserve; the
    record is unchanged."""
    before = get(inv, i)
    inv.error('disk_check', check_args(action, i, params), code, part, status)
    inv.error('disk_reserve', reserve_args(action, i, params, str(uuid.uuid4())), code, part)
    assert get(inv, i) == before, 'a refused request changed the record'


def server_committed(inv):
    return int(inv.hash('server:' + S1)['disk_committed_mib'])


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-disk.', make=Scripts)


@case
def bad_params_are_refused_naming_the_field(inv):
    make_vm(inv, 1)
    d1 = disk_id(1, 1)
    # 24: the seed's own typo is an unknown key, never ignored.
    refused(inv, 'resize', 1, params_of('resize', 1, id=d1, size=20480,
                                        dangrous_allow_shrink=True),
            'InvalidArgument', 'params.dangrous_allow_shrink: unknown key for disk-resize', 422)
    refused(inv, 'add', 1, params_of('add', 1, size=100, colour='red', alpha=1),
            'InvalidArgument', 'params.alpha: unknown keys alpha, colour for disk-add', 422)
    refused(inv, 'delete', 1, params_of('delete', 1, id=d1, size=10), 'InvalidArgument',
            'params.size: unknown key for disk-delete', 422)
    for size in (0, -5, 1.5, '10G', '100', None, True, 67108865, [1]):
        refused(inv, 'add', 1, params_of('add', 1, size=size), 'InvalidArgument',
                'params.size: expected a whole number of MiB from 1 to 67108864', 422)
    refused(inv, 'add', 1, params_of('add', 1), 'InvalidArgument', 'params.size', 422)
    refused(inv, 'resize', 1, params_of('resize', 1, id=d1, size='remaining'),
            'InvalidArgument', 'params.size', 422)
    for slot in ('0:4:8', '4:1', '0:3:1', 1, ''):
        refused(inv, 'add', 1, params_of('add', 1, size=10, pci_slot=slot), 'InvalidArgument',
                'params.pci_slot: expected "0:4:N"', 422)
    refused(inv, 'resize', 1, params_of('resize', 1, size=20), 'InvalidArgument',
            'exactly one of id and pci_slot', 422)
    refused(inv, 'delete', 1, params_of('delete', 1, id=d1, pci_slot='0:4:1'),
            'InvalidArgument', 'exactly one of id and pci_slot, not both', 422)
    refused(inv, 'delete', 1, params_of('delete', 1, id='disk1'), 'InvalidArgument',
            'params.id: expected a disk\'s lowercase UUID', 422)
    refused(inv, 'resize', 1, params_of('resize', 1, id=d1, size=1,
                                        dangerous_allow_shrink='yes'),
            'InvalidArgument', 'params.dangerous_allow_shrink: expected true or false', 422)
    for name in ('', '-x', 'a b', 'x' * 65, 7, None, 'nightly.part'):
        refused(inv, 'snapshot_create', 1, params_of('snapshot_create', 1, name=name),
                'InvalidArgument', 'params.name', 422)
    refused(inv, 'usage', 1, {'vm_uuid': 'F0000000-0000-4000-8000-000000000001'},
            'InvalidArgument', 'params.vm_uuid: expected a lowercase UUID', 422)
    inv.error('disk_check', dict(check_args('add', 1, params_of('add', 1, size=1)),
                                 target='/disk-add-x'), 'InvalidArgument', 'target', 422)
    inv.error('disk_check', dict(check_args('add', 1, params_of('add', 1, size=1)),
                                 action='grow'), 'InvalidArgument', 'action', 422)
    # 64 TiB exactly is a size (refused for space, not as a size).
    inv.error('disk_check', check_args('resize', 1, params_of('resize', 1, id=disk_id(1, 0),
                                                            size=67108864)),
              'InsufficientSpace', 'growing 10240 -> 67108864 MiB', 409)


@case
def the_vm_must_exist_be_flexible_and_settled(inv):
    inv.error('disk_check', check_args('add', 9, params_of('add', 9, size=10)), 'ResourceNotFound',
              f'vm {vm_uuid(9)} does not exist', 404)
    # 25: an inflexible instance.
    make_vm(inv, 2, sizes=(10240, 102400), flexible=False)
    for action, p in (('add', {'size': 10}), ('resize', {'pci_slot': '0:4:1', 'size': 204800}),
                      ('delete', {'pci_slot': '0:4:1'}), ('snapshot_create', {'name': 's'}),
                      ('usage', {})):
        refused(inv, action, 2, params_of(action, 2, **p), 'InvalidArgument',
                f'vm {vm_uuid(2)} is not a flexible disk instance', 422)
    vm = make_vm(inv, 3)
    for state in ('provisioning', 'failed'):
        vm['state'] = state
        put(inv, vm)
        refused(inv, 'resize', 3, params_of('resize', 3, pci_slot='0:4:0', size=10241),
                'InvalidState', f'is {state}: disk-resize needs it running or stopped', 409)
    vm['state'] = 'destroyed'
    put(inv, vm)
    refused(inv, 'usage', 3, params_of('usage', 3), 'ResourceNotFound', 'was destroyed', 404)
    vm['state'], vm['migrating'] = 'stopped', True
    put(inv, vm)
    refused(inv, 'snapshot_create', 3, params_of('snapshot_create', 3, name='s'),
            'VmMigrating', f'vm {vm_uuid(3)} is migrating (migration unknown)', 409)


@case
def a_disk_is_named_by_id_or_slot_of_this_vm(inv):
    make_vm(inv, 1)
    make_vm(inv, 2)
    # 15: a missing disk id, an id of another VM, a free slot.
    refused(inv, 'resize', 1, params_of('resize', 1, id=disk_id(2, 1), size=20),
            'ResourceNotFound', f'vm {vm_uuid(1)} has no disk with id {disk_id(2, 1)}', 404)
    refused(inv, 'delete', 1, params_of('delete', 1, pci_slot='0:4:5'), 'ResourceNotFound',
            f'vm {vm_uuid(1)} has no disk at pci_slot 0:4:5', 404)
    got = inv.ok('disk_check', check_args('delete', 1, params_of('delete', 1, id=disk_id(1, 1))))
    assert got['disk'] == disk_id(1, 1) and got['pci_slot'] == '0:4:1' and \
        got['old_size'] == 92160 and got['server_uuid'] == S1, got


@case
def grow_beyond_free_space_names_the_disk_and_numbers(inv):
    make_vm(inv, 1)
    # 11: free_space 0.
    refused(inv, 'resize', 1, params_of('resize', 1, pci_slot='0:4:1', size=102400),
            'InsufficientSpace',
            f'vm {vm_uuid(1)} disk 0:4:1 ({disk_id(1, 1)}): growing 92160 -> 102400 MiB needs '
            '10240 MiB, free_space is 0 MiB (flexible_disk_size 102400, disks 102400, '
            'snapshots 0)', 409)


@case
def grow_shrink_and_the_shrink_guard(inv):
    # Layout (4): a boot disk of 10240 alone.
    vm = make_vm(inv, 1, sizes=(10240,), state='running')
    agent = Agent(vm)
    committed = server_committed(inv)
    # 12: grow while running.
    got = run_op(inv, agent, 'resize', 1, id=disk_id(1, 0), size=20480)
    assert got['before'] == 10240 and got['after'] == 20480 and got['free_space'] == 81920, got
    vm = get(inv, 1)
    assert vm['disks'][0]['size'] == 20480 and vm['free_space'] == 81920, vm
    assert vm['disks'][0]['image'] == IMG and vm['disks'][0]['boot'] is True, vm
    # 14: the size it has.
    refused(inv, 'resize', 1, params_of('resize', 1, id=disk_id(1, 0), size=20480),
            'InvalidArgument', 'is already 20480 MiB (size unchanged)', 422)
    # 13: shrink without the flag, or with it false.
    for flag in ({}, {'dangerous_allow_shrink': False}):
        refused(inv, 'resize', 1, params_of('resize', 1, id=disk_id(1, 0), size=10240, **flag),
                'InvalidArgument', 'Can not shrink disk from 20480 MiB to 10240 MiB without '
                'dangerous_allow_shrink: true', 422)
    # With the flag, only while stopped.
    refused(inv, 'resize', 1, params_of('resize', 1, id=disk_id(1, 0), size=10240,
                                        dangerous_allow_shrink=True),
            'InvalidState', 'is running: a disk is shrunk only while it is stopped', 409)
    vm['state'] = 'stopped'
    put(inv, vm)
    got = run_op(inv, agent, 'resize', 1, id=disk_id(1, 0), size=10240,
                 dangerous_allow_shrink=True)
    assert got['before'] == 20480 and got['after'] == 10240 and got['free_space'] == 92160, got
    assert 'dangerous_allow_shrink' not in raw(inv, 1), 'the flag was stored'
    # The boundary: a grow by free_space + 1 is refused, by free_space exactly fits.
    refused(inv, 'resize', 1, params_of('resize', 1, id=disk_id(1, 0), size=102401),
            'InsufficientSpace', 'growing 10240 -> 102401 MiB needs 92161 MiB, free_space is '
            '92160 MiB', 409)
    got = run_op(inv, agent, 'resize', 1, id=disk_id(1, 0), size=102400)
    assert got['after'] == 102400 and got['free_space'] == 0, got
    # 26: the allocation and the server's committed disk do not move.
    vm = get(inv, 1)
    assert vm['quota'] + vm['flexible_disk_size'] == vm['allocation']['disk'] == 102400, vm
    assert server_committed(inv) == committed


@case
def snapshot_space_is_measured_fresh_at_reserve(inv):
    # 16: disks 10240 + 20480, a snapshot whose blocks use 5000 MiB.
    vm = make_vm(inv, 1, sizes=(10240, 20480))
    agent = Agent(vm)
    run_op(inv, agent, 'snapshot_create', 1, name='before-upgrade')
    vm = get(inv, 1)
    assert [s['name'] for s in vm['snapshots']] == ['before-upgrade'], vm
    assert vm['free_space'] == 71680, vm  # a fresh snapshot costs nothing
    # Writes over the snapshotted data: the agent now measures 5000 MiB of snapshot.
    agent.disks['0:4:1']['snapshot_bytes'] = 5000 * MiB - 12345
    # The record does not know yet: admission passes 66681 on the recorded numbers...
    p = params_of('add', 1, size=66681)
    inv.ok('disk_check', check_args('add', 1, p))
    # ...and the job's reserve, with the fresh measure, refuses it, and records it.
    err = inv.error('disk_reserve', reserve_args('add', 1, p, str(uuid.uuid4()), agent.usage()),
                    'InsufficientSpace', 'adding 66681 MiB needs 66681 MiB, free_space is '
                    '66680 MiB (flexible_disk_size 102400, disks 30720, snapshots 5000)')
    assert err['status'] == 409, err
    vm = get(inv, 1)
    assert vm['free_space'] == 66680 and vm['disks'][1]['snapshot_size'] == 5000, vm
    assert vm.get('disk_change') is None, vm
    # Now admission knows it too.
    refused(inv, 'add', 1, p, 'InsufficientSpace', 'free_space is 66680 MiB', 409)
    got = run_op(inv, agent, 'add', 1, size=66680)
    assert got['after'] == 66680 and got['pci_slot'] == '0:4:2' and got['free_space'] == 0, got
    # 17: more writes raise snapshot_size; vm-disk-usage records it (no caching).
    agent.disks['0:4:0']['snapshot_bytes'] = 1
    run_op(inv, agent, 'usage', 1)
    vm = get(inv, 1)
    assert vm['disks'][0]['snapshot_size'] == 1 and vm['free_space'] == -1, vm
    # Deleting the snapshot gives its space back.
    for d in agent.disks.values():
        d['snapshot_bytes'] = 0
    got = run_op(inv, agent, 'snapshot_delete', 1, name='before-upgrade')
    vm = get(inv, 1)
    assert vm['snapshots'] == [] and vm['free_space'] == 5000, vm
    assert '"snapshots":[]' in raw(inv, 1), 'an empty snapshot list is stored as an object'


@case
def remaining_takes_what_is_free(inv):
    # 18: 30000 free.
    vm = make_vm(inv, 1, sizes=(10240, 62160))
    agent = Agent(vm)
    got = run_op(inv, agent, 'add', 1, size='remaining')
    assert got['after'] == 30000 and got['free_space'] == 0, got
    vm = get(inv, 1)
    assert [d['size'] for d in vm['disks']] == [10240, 62160, 30000], vm
    assert vm['disks'][2]['boot'] is False and vm['disks'][2]['path'].endswith('disk2.img'), vm
    refused(inv, 'add', 1, params_of('add', 1, size='remaining'), 'InsufficientSpace',
            'size "remaining" comes to 0 MiB', 409)


@case
def add_and_delete_only_while_stopped(inv):
    make_vm(inv, 1, sizes=(10240, 20480), state='running')
    # 19
    refused(inv, 'add', 1, params_of('add', 1, size=100), 'InvalidState',
            f'vm {vm_uuid(1)} is running: a disk is added only while it is stopped', 409)
    refused(inv, 'delete', 1, params_of('delete', 1, pci_slot='0:4:1'), 'InvalidState',
            'is running: a disk is deleted only while it is stopped', 409)
    # 20: never the boot disk, running or not.
    refused(inv, 'delete', 1, params_of('delete', 1, pci_slot='0:4:0'), 'InvalidArgument',
            f'disk 0:4:0 ({disk_id(1, 0)}) is the boot disk: it cannot be deleted', 422)
    # A grow is fine while running; snapshots too.
    inv.ok('disk_check', check_args('resize', 1, params_of('resize', 1, pci_slot='0:4:1',
                                                         size=30000)))
    inv.ok('disk_check', check_args('snapshot_create', 1, params_of('snapshot_create', 1,
                                                                  name='a')))


@case
def delete_gives_back_the_disk_and_its_snapshot_space(inv):
    vm = make_vm(inv, 1, sizes=(10240, 20480, 30000), snapshots=('s1',))
    agent = Agent(vm)
    agent.disks['0:4:1']['snapshot_bytes'] = 100 * MiB
    run_op(inv, agent, 'usage', 1)
    assert get(inv, 1)['free_space'] == 102400 - 60720 - 100
    got = run_op(inv, agent, 'delete', 1, pci_slot='0:4:1')
    assert got['before'] == 20480 and got['after'] is None, got
    vm = get(inv, 1)
    # 20: free_space grows by the disk's size and the space its snapshots used.
    assert vm['free_space'] == 102400 - 40240, vm
    assert [d['pci_slot'] for d in vm['disks']] == ['0:4:0', '0:4:2'], vm


@case
def slots_are_sticky(inv):
    # 21
    vm = make_vm(inv, 1, sizes=(10240, 1000, 1000))
    agent = Agent(vm)
    run_op(inv, agent, 'delete', 1, pci_slot='0:4:1')
    vm = get(inv, 1)
    assert [(d['pci_slot'], d['id']) for d in vm['disks']] == \
        [('0:4:0', disk_id(1, 0)), ('0:4:2', disk_id(1, 2))], vm
    a = run_op(inv, agent, 'add', 1, size=100)
    b = run_op(inv, agent, 'add', 1, size=100)
    assert (a['pci_slot'], b['pci_slot']) == ('0:4:1', '0:4:3'), (a, b)
    vm = get(inv, 1)
    assert [d['pci_slot'] for d in vm['disks']] == ['0:4:0', '0:4:1', '0:4:2', '0:4:3'], vm
    assert vm['disks'][1]['id'] == a['disk'] != b['disk'], vm
    assert vm['disks'][1]['path'].endswith('/disks/disk1.img'), vm
    # A slot asked for is honoured; a taken one refused naming its disk.
    c = run_op(inv, agent, 'add', 1, size=100, pci_slot='0:4:7')
    assert c['pci_slot'] == '0:4:7', c
    refused(inv, 'add', 1, params_of('add', 1, size=100, pci_slot='0:4:2'), 'InvalidArgument',
            f'params.pci_slot: 0:4:2 is taken by disk {disk_id(1, 2)}', 422)


@case
def eight_disks_at_most(inv):
    vm = make_vm(inv, 1, sizes=(10240,) + (100,) * 7)
    refused(inv, 'add', 1, params_of('add', 1, size=1), 'InvalidArgument',
            'has 8 disks, the most a vm can have', 422)
    assert len(vm['disks']) == 8


@case
def snapshots_are_named_uniquely_sixteen_at_most(inv):
    vm = make_vm(inv, 1, snapshots=[f's{n}' for n in range(15)])
    agent = Agent(vm)
    refused(inv, 'snapshot_create', 1, params_of('snapshot_create', 1, name='s3'),
            'InvalidArgument', f'vm {vm_uuid(1)} already has a snapshot named s3', 422)
    run_op(inv, agent, 'snapshot_create', 1, name='x' * 64)
    refused(inv, 'snapshot_create', 1, params_of('snapshot_create', 1, name='s99'),
            'InvalidArgument', 'has 16 snapshots, the most a vm can have', 422)
    refused(inv, 'snapshot_delete', 1, params_of('snapshot_delete', 1, name='nope'),
            'ResourceNotFound', f'vm {vm_uuid(1)} has no snapshot named nope', 404)
    run_op(inv, agent, 'snapshot_delete', 1, name='s0')
    assert len(get(inv, 1)['snapshots']) == 15


@case
def concurrent_reserves_exactly_one_gets_the_space(inv):
    # 22: 50000 free; two grows of 30000 each.
    vm = make_vm(inv, 1, sizes=(10240, 20000, 22160))
    agent = Agent(vm)
    answers = [None, None]
    ready = threading.Barrier(2)

    def grow(k):
        c = Scripts(Redis(inv.r.sock.getpeername()[1]), {})
        c.sha = inv.sha
        slot = f'0:4:{k + 1}'
        size = agent.disks[slot]['size'] + 30000
        ready.wait(5)
        answers[k] = c.call('disk_reserve', reserve_args(
            'resize', 1, params_of('resize', 1, pci_slot=slot, size=size),
            f'job-{k}', agent.usage()))

    threads = [threading.Thread(target=grow, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    won = [a for a in answers if 'ok' in a]
    lost = [a for a in answers if 'error' in a]
    assert len(won) == 1 and len(lost) == 1, answers
    assert lost[0]['error']['code'] == 'InvalidState' and 'pending resize of job' in \
        lost[0]['error']['message'], lost
    assert get(inv, 1)['free_space'] == 20000
    # Admission meanwhile counts the pending grow: the other is refused at once.
    other = '0:4:2' if won[0]['ok']['disk_change']['pci_slot'] == '0:4:1' else '0:4:1'
    size = agent.disks[other]['size'] + 30000
    inv.error('disk_check', check_args('resize', 1, params_of('resize', 1, pci_slot=other,
                                                            size=size)),
              'InsufficientSpace', 'needs 30000 MiB, free_space is 20000 MiB (flexible_disk_size '
              '102400, disks 52400, snapshots 0, pending change 30000)', 409)
    # Serialised by the VM's hold, as the workflows run them: the winner commits, then the
    # loser's reserve finds too little space.
    c = won[0]['ok']['disk_change']
    inv.ok('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': c['job_uuid'],
                           'usage': agent.apply(c)})
    inv.error('disk_reserve', reserve_args('resize', 1, params_of('resize', 1, pci_slot=other,
                                                                  size=size), 'job-late',
                                           agent.usage()),
              'InsufficientSpace', 'free_space is 20000 MiB', 409)
    vm = get(inv, 1)
    assert vm['free_space'] == 20000 and sum(d['size'] for d in vm['disks']) == 82400, vm


@case
def reserve_commit_and_settle_run_twice_are_run_once(inv):
    vm = make_vm(inv, 1, sizes=(10240, 20480))
    agent = Agent(vm)
    job = str(uuid.uuid4())
    p = params_of('add', 1, size=1000)
    first = inv.ok('disk_reserve', reserve_args('add', 1, p, job, agent.usage()))
    again = inv.ok('disk_reserve', reserve_args('add', 1, p, job, agent.usage()))
    assert first == again and first['free_space'] == 102400 - 30720 - 1000, (first, again)
    usage = agent.apply(first['disk_change'])
    done = inv.ok('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': job, 'usage': usage})
    stored = get(inv, 1)
    twice = inv.ok('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': job, 'usage': usage})
    assert done == twice, (done, twice)
    assert len(stored['disks']) == 3 and get(inv, 1) == stored, (stored, get(inv, 1))
    assert done['before'] is None and done['after'] == 1000 and done['op'] == 'add', done
    # A settle of the same job afterwards changes nothing the files do not say.
    inv.ok('disk_settle', {'vm_uuid': vm_uuid(1), 'job_uuid': job, 'usage': agent.usage()})
    assert len(get(inv, 1)['disks']) == 3


@case
def a_failed_operation_leaves_what_the_files_say(inv):
    vm = make_vm(inv, 1, sizes=(10240, 20480))
    agent = Agent(vm)
    # An add that failed: the undo removed its file.
    job = str(uuid.uuid4())
    c = inv.ok('disk_reserve', reserve_args('add', 1, params_of('add', 1, size=5000), job,
                                            agent.usage()))['disk_change']
    assert get(inv, 1)['free_space'] == 102400 - 30720 - 5000
    for _ in range(2):
        got = inv.ok('disk_settle', {'vm_uuid': vm_uuid(1), 'job_uuid': job,
                                     'usage': agent.usage(), 'snapshots': []})
    vm = get(inv, 1)
    assert vm.get('disk_change') is None and len(vm['disks']) == 2, vm
    assert vm['free_space'] == 102400 - 30720, vm
    # A grow whose file grew before the job failed: the record follows the file.
    job = str(uuid.uuid4())
    c = inv.ok('disk_reserve', reserve_args('resize', 1, params_of('resize', 1, pci_slot='0:4:1',
                                                                   size=40000), job,
                                            agent.usage()))['disk_change']
    agent.apply(c)
    inv.ok('disk_settle', {'vm_uuid': vm_uuid(1), 'job_uuid': job, 'usage': agent.usage()})
    vm = get(inv, 1)
    assert vm['disks'][1]['size'] == 40000 and vm['free_space'] == 102400 - 50240, vm
    # No measure (the agent unreachable): the change stays, its space still counted, and
    # the next operation is refused until vm-disk-usage settles it.
    job = str(uuid.uuid4())
    c = inv.ok('disk_reserve', reserve_args('resize', 1, params_of('resize', 1, pci_slot='0:4:1',
                                                                   size=50000), job,
                                            agent.usage()))['disk_change']
    got = inv.ok('disk_settle', {'vm_uuid': vm_uuid(1), 'job_uuid': job, 'usage': None})
    assert got['settled'] is False and got['disk_change']['job_uuid'] == job, got
    assert get(inv, 1)['free_space'] == 102400 - 60240
    inv.error('disk_reserve', reserve_args('add', 1, params_of('add', 1, size=1), 'next', None),
              'InvalidState', f'pending resize of job {job}, which ended without settling it', 409)
    usage = inv.ok('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': 'usage-job',
                                   'usage': agent.usage(), 'action': 'usage'})
    assert usage['op'] == 'settled resize', usage
    vm = get(inv, 1)
    assert vm.get('disk_change') is None and vm['disks'][1]['size'] == 40000, vm
    assert vm['free_space'] == 102400 - 50240, vm
    # A disk operation's commit never clears another job's change.
    inv.ok('disk_reserve', reserve_args('snapshot_create', 1,
                                        params_of('snapshot_create', 1, name='s'), 'j1'))
    inv.error('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': 'j2', 'usage': agent.usage()},
              'InvalidState', 'pending snapshot_create of job j1', 409)
    # The agent's measure is checked.
    inv.error('disk_commit', {'vm_uuid': vm_uuid(1), 'job_uuid': 'j1',
                              'usage': [{'pci_slot': '0:4:9', 'size': 1}]},
              'InvalidArgument', 'usage[0].pci_slot', 422)


@case
def quota_allocation_and_server_commitment_stay_put(inv):
    # 26, over a series of operations on two VMs.
    agents = [Agent(make_vm(inv, i)) for i in (1, 2)]
    before = server_committed(inv)
    assert before == 2 * 102400
    for i, agent in zip((1, 2), agents):
        run_op(inv, agent, 'resize', i, pci_slot='0:4:1', size=50000,
               dangerous_allow_shrink=True)
        run_op(inv, agent, 'add', i, size=2000)
        run_op(inv, agent, 'resize', i, pci_slot='0:4:2', size=3000)
        run_op(inv, agent, 'snapshot_create', i, name='s')
        run_op(inv, agent, 'delete', i, pci_slot='0:4:1')
    total = 0
    for i in (1, 2):
        vm = get(inv, i)
        assert vm['quota'] == 0 and vm['allocation']['disk'] == 102400, vm
        assert vm['quota'] + vm['flexible_disk_size'] == vm['allocation']['disk']
        assert vm['free_space'] == 102400 - 10240 - 3000, vm
        total += vm['allocation']['disk']
    assert server_committed(inv) == total == before


case.exit()
