#!/usr/bin/env python3
"""vm-update's script (tasks/dc/lua/vm_update.lua: dc.vm_update_check, dc.vm_update,
dc.vm_update_revert) against a real redis-server, called as the plugin calls it
(dc_scripts.py), the migration's steps played by this file: which migration states
admit a metadata update and which refuse it VmMigrating (DOMAIN 5.6 test 17's update),
with nothing written by a refusal; a resize refused; the copy a successful migration
keeps named for the update; the alias index and DuplicateAlias; a step run again
answering the same; the revert, also when the old alias was taken meanwhile.

Usage: test_dc_vm_update_scripts.py BUILD_ROOT
"""
import json
import sys
import uuid

import dc_scripts

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
OTHER = 'a0000000-0000-4000-8000-000000000002'
S1, S2 = (f'50000000-0000-4000-8000-00000000000{i}' for i in (1, 2))
NS = dc_scripts.NS
DOC = {
    'servers': [
        {'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536, 'disk_mib': 1024000,
         'data_root': '/lab/cn1'},
        {'uuid': S2, 'hostname': 'cn2', 'rack': 'r1', 'ram_mib': 32768, 'disk_mib': 1024000,
         'data_root': '/lab/cn2'},
    ],
    'networks': [],
    'packages': [],
    'images': [],
}
SETTINGS = {'allow_user_migrations': False, 'migration_scheduler': True,
            'max_running_migrations_per_cn': 5, 'migration_send_mbps_limit': 500}


def vmid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def make_vm(inv, i, alias=None, owner=OWNER, state='running'):
    """A VM as provision leaves it on S1 (no NICs)."""
    u = vmid(i)
    inv.ok('place', {'vm_uuid': u, 'owner_uuid': owner, 'alias': alias or f'vm{i}',
                     'brand': 'bhyve', 'ram': 1024, 'quota': 0, 'reservation': 20480,
                     'flexible': True, 'flexible_disk_size': 20480, 'server_uuid': S1,
                     'autoboot': True, 'disks': [{'boot': True, 'size': 10240}]})
    inv.ok('vm_set_state', {'vm_uuid': u, 'state': state, 'disks': [
        {'pci_slot': '0:4:0', 'path': f'/lab/cn1/{u}/disks/disk0.img', 'size': 10240}]})
    return inv.get('vm:' + u)


class Scripts(dc_scripts.Inventory):
    def get(self, key):
        t = self.r.cmd('GET', NS + key)
        return json.loads(t) if t is not None else None

    def snapshot(self):
        out = {}
        for k in sorted(self.r.cmd('KEYS', NS + '*')):
            kind = self.r.cmd('TYPE', k)
            if kind == 'string':
                out[k] = self.r.cmd('GET', k)
            elif kind == 'zset':
                out[k] = self.r.cmd('ZRANGE', k, 0, -1)
            elif kind == 'hash':
                out[k] = sorted(self.r.cmd('HGETALL', k))
            elif kind == 'set':
                out[k] = sorted(self.r.cmd('SMEMBERS', k))
        return out

    def index(self, key):
        return self.r.cmd('ZRANGE', NS + key, 0, -1)


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-vm-update.', make=Scripts)


def upd(vm, mode='check', job=None, resize=(), **update):
    a = {'mode': mode, 'vm_uuid': vm, 'update': update, 'resize': list(resize)}
    if job:
        a['job_uuid'] = job
    return a


def allowed(inv, vm, **update):
    return inv.ok('vm_update', upd(vm, **update))


def refused(inv, vm, code, part, status, resize=(), **update):
    before = inv.snapshot()
    for mode in ('check', 'apply'):
        inv.error('vm_update', upd(vm, mode, str(uuid.uuid4()), resize, **update), code, part,
                  status)
    assert inv.snapshot() == before, 'a refusal wrote'


def phase(inv, m, job, ph, event, **kw):
    return inv.ok('migration_phase', dict({'migration_uuid': m, 'job_uuid': job, 'phase': ph,
                                           'event': event}, **kw))


def begin(inv, vm):
    """A migration of vm to S2 begun and paused: its uuid."""
    c = inv.ok('migration_check', {'action': 'begin', 'vm_uuid': vm, 'target': f'/migrate-begin-{vm}',
                                   'params': {'vm_uuid': vm, 'target_server_uuid': S2},
                                   'settings': SETTINGS})
    job = str(uuid.uuid4())
    inv.ok('migration_claim', {
        'vm_uuid': vm, 'migration_uuid': job, 'job_uuid': job, 'action': 'begin',
        'params': {'vm_uuid': vm, 'target_server_uuid': S2},
        'target_server_uuid': c['target_server_uuid'], 'slots': c['slots'],
        'secret': uuid.uuid4().hex + uuid.uuid4().hex,
        'settings': {'migration_send_mbps_limit': 500}})
    phase(inv, job, job, 'begin', 'start')
    assert allowed(inv, vm, alias='during-begin')            # running / begin
    phase(inv, job, job, 'begin', 'done')
    return job


@case
def metadata_allowed_until_the_switch_begins(inv):
    u = make_vm(inv, 1)['uuid']
    m = begin(inv, u)
    allowed(inv, u, alias='paused', add_tags={'a': 1})                       # paused
    refused(inv, u, 'VmMigrating', f'migration {m}): update of ram, disks refused', 409,
            resize=('ram', 'disks'))
    refused(inv, u, 'VmMigrating', 'update of billing_id refused', 409, resize=('billing_id',),
            alias='x')
    sj = str(uuid.uuid4())
    phase(inv, m, sj, 'sync', 'start')
    got = inv.ok('vm_update', upd(u, 'apply', str(uuid.uuid4()), alias='synced', add_tags={'t': 'v'}))
    assert got['server_uuid'] == S1 and got['kept'] is False and got['kept_server_uuid'] == S1
    assert got['after']['alias'] == 'synced' and got['after']['tags'] == {'t': 'v'}, got
    assert inv.index('vms:alias:synced') == [u] and inv.index('vms:alias:vm1') == []
    phase(inv, m, sj, 'sync', 'done')
    # The switch: refused from its start, before and after step 1.
    wj = str(uuid.uuid4())
    phase(inv, m, wj, 'switch', 'start')
    refused(inv, u, 'VmMigrating', 'update refused while its switch runs', 409, alias='late')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'running'})
    refused(inv, u, 'VmMigrating', 'once its switch has begun (switch step 1)', 409, alias='late')
    # Failed after the source stopped: refused until an abort puts it back.
    phase(inv, m, wj, 'switch', 'fail', error='verify failed')
    assert inv.get('migration:' + m)['state'] == 'failed'
    refused(inv, u, 'VmMigrating', 'switch has begun', 409, alias='late')
    aj = str(uuid.uuid4())
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    phase(inv, m, aj, 'abort', 'start')
    refused(inv, u, 'VmMigrating', 'switch has begun', 409, alias='late')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, aj, 'abort', 'done')
    assert inv.get('vm:' + u)['migrating'] is False
    got = allowed(inv, u, alias='after-abort')
    assert got['server_uuid'] == S1


@case
def abort_asked_or_running_refuses(inv):
    u = make_vm(inv, 1)['uuid']
    m = begin(inv, u)
    sj = str(uuid.uuid4())
    phase(inv, m, sj, 'sync', 'start')
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    refused(inv, u, 'VmMigrating', 'while an abort is asked', 409, alias='x')
    phase(inv, m, sj, 'sync', 'fail', error='canceled')
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    refused(inv, u, 'VmMigrating', 'while its abort runs', 409, alias='x')


@case
def after_success_the_kept_copy_is_named_until_finalize(inv):
    u = make_vm(inv, 1)['uuid']
    m = begin(inv, u)
    wj = str(uuid.uuid4())
    phase(inv, m, wj, 'switch', 'start')
    for step in (1, 2, 3):
        inv.ok('migration_step', dict({'migration_uuid': m, 'switch_step': step},
                                      **({'vm_state_before': 'running'} if step == 1 else {})))
    inv.ok('migration_switch', {'migration_uuid': m})
    for step in (6, 7):
        inv.ok('migration_step', {'migration_uuid': m, 'switch_step': step})
    phase(inv, m, wj, 'switch', 'done')
    got = inv.ok('vm_update', upd(u, 'apply', str(uuid.uuid4()), alias='moved'))
    assert (got['server_uuid'], got['kept'], got['kept_server_uuid']) == (S2, True, S1), got
    # A rollback runs: refused; done, the VM is S1's again and nothing is kept.
    rj = str(uuid.uuid4())
    phase(inv, m, rj, 'rollback', 'start')
    refused(inv, u, 'VmMigrating', 'switch has begun', 409, alias='x')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, rj, 'rollback', 'done')
    got = inv.ok('vm_update', upd(u, 'apply', str(uuid.uuid4()), alias='back'))
    assert (got['server_uuid'], got['kept'], got['kept_server_uuid']) == (S1, False, S1), got
    assert inv.get('vm:' + u)['alias'] == 'back'


@case
def alias_rules_and_the_index(inv):
    a = make_vm(inv, 1, alias='web')['uuid']
    b = make_vm(inv, 2, alias='db')['uuid']
    c = make_vm(inv, 3, alias='other', owner=OTHER)['uuid']
    refused(inv, b, 'DuplicateAlias', f'alias: web already names vm {a}', 409, alias='web')
    allowed(inv, c, alias='web')                       # another owner's alias is free
    allowed(inv, a, alias='web', add_tags={'k': 'v'})  # its own
    inv.ok('release', {'vm_uuid': a, 'final_state': 'failed'})
    allowed(inv, b, alias='web')                       # a failed VM's does not count
    refused(inv, a, 'InvalidState', 'is failed', 409, alias='z')
    refused(inv, vmid(9), 'ResourceNotFound', 'does not exist', 404, alias='z')
    inv.error('vm_update', dict(upd(b, alias='z'), owner_uuid=OTHER), 'ResourceNotFound',
              'does not exist', 404)
    refused(inv, b, 'InvalidArgument', 'params.ram: vm-update changes alias, tags and '
            'customer_metadata only', 422, resize=('ram',))


@case
def apply_run_again_and_revert(inv):
    u = make_vm(inv, 1, alias='first')['uuid']
    job = str(uuid.uuid4())
    one = inv.ok('vm_update', upd(u, 'apply', job, alias='second', tags={'a': 'b'},
                                  customer_metadata={'m': 'n'}))
    assert one['before'] == {'alias': 'first', 'tags': {}, 'customer_metadata': {}}, one
    again = inv.ok('vm_update', upd(u, 'apply', job, alias='second', tags={'a': 'b'},
                                    customer_metadata={'m': 'n'}))
    assert again == one, (again, one)
    v = inv.get('vm:' + u)
    assert (v['alias'], v['tags'], v['customer_metadata']) == ('second', {'a': 'b'}, {'m': 'n'})
    assert inv.ok('vm_update', {'mode': 'revert', 'vm_uuid': u,
                                'job_uuid': str(uuid.uuid4())})['reverted'] is False
    got = inv.ok('vm_update', {'mode': 'revert', 'vm_uuid': u, 'job_uuid': job})
    assert got == {'vm_uuid': u, 'reverted': True, 'alias_kept': False}, got
    v = inv.get('vm:' + u)
    assert (v['alias'], v['tags'], v['customer_metadata']) == ('first', {}, {}), v
    assert inv.index('vms:alias:first') == [u] and inv.index('vms:alias:second') == []
    assert inv.ok('vm_update', {'mode': 'revert', 'vm_uuid': u, 'job_uuid': job})['reverted'] is False
    # The old alias taken meanwhile by another VM of the owner: the new one stays.
    job = str(uuid.uuid4())
    inv.ok('vm_update', upd(u, 'apply', job, alias='third', add_tags={'x': True}))
    w = make_vm(inv, 2, alias='first')['uuid']
    got = inv.ok('vm_update', {'mode': 'revert', 'vm_uuid': u, 'job_uuid': job})
    assert got['alias_kept'] is True, got
    v = inv.get('vm:' + u)
    assert v['alias'] == 'third' and v['tags'] == {}, v
    assert inv.index('vms:alias:first') == [w] and inv.index('vms:alias:third') == [u]


case.exit()
