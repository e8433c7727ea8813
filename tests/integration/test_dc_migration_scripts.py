#!/usr/bin/env python3
"""The control plane of a migration (dc.migration_check, dc.migration_claim,
dc.migration_phase, dc.migration_progress, dc.migration_switch, dc.migration_unswitch,
dc.migration_step, dc.migration_request) and its views against a real redis-server,
called as the plugin calls them (dc_scripts.py), the agents' and workflows' steps
played by this file: every transition of the state machine (DOMAIN 5.1) with its one
end event; every refusal with its code and message, and nothing stored after it; the
target chosen read-only with the VM's actual allocation; 20 racing claims give one
record and one commit; the swap and its undoing keep one inventoried copy, the same
MACs and IPs, and the right committed capacity on both servers (the source's released
only at success: DOMAIN 5.6 test 32), run twice they change nothing (test 34); a
provision's NICs racing the swap never get the VM's addresses (test 3); the views
never show `secret`, filter and page; what a watch starts from; start, stop, delete and
disk operations refused while migrating.

Usage: test_dc_migration_scripts.py BUILD_ROOT
"""
import json
import sys
import threading
import uuid
from datetime import datetime, timedelta, timezone

import dc_scripts
from script_cost import Redis

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
OTHER = 'a0000000-0000-4000-8000-000000000002'
S1, S2, S3 = (f'50000000-0000-4000-8000-00000000000{i}' for i in (1, 2, 3))
NET = '7e000000-0000-4000-8000-000000000001'
UNKNOWN = 'f0000000-0000-4000-8000-0000000000ff'
NS = dc_scripts.NS

DOC = {
    'servers': [
        {'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536, 'disk_mib': 1024000,
         'data_root': '/lab/cn1'},
        {'uuid': S2, 'hostname': 'cn2', 'rack': 'r1', 'ram_mib': 32768, 'disk_mib': 1024000,
         'data_root': '/lab/cn2'},
        {'uuid': S3, 'hostname': 'cn3', 'rack': 'r2', 'ram_mib': 16384, 'disk_mib': 1024000,
         'data_root': '/lab/cn3'},
    ],
    'networks': [{'uuid': NET, 'name': 'external', 'subnet': '10.1.0.0/24',
                  'gateway': '10.1.0.1', 'provision_start_ip': '10.1.0.10',
                  'provision_end_ip': '10.1.0.250', 'vlan_id': 1, 'mtu': 1500,
                  'fabric': False, 'owner_uuids': []}],
    'packages': [],
    'images': [],
}
SETTINGS = {'allow_user_migrations': False, 'migration_scheduler': True,
            'max_running_migrations_per_cn': 5, 'migration_send_mbps_limit': 500}
BASE = datetime(2026, 11, 26, 12, 0, 0, tzinfo=timezone.utc)


def iso(t, ms=False):
    return t.strftime('%Y-%m-%dT%H:%M:%S') + (f'.{t.microsecond // 1000:03d}Z' if ms else 'Z')


class Scripts(dc_scripts.Inventory):
    """dc_scripts.Inventory with a clock that moves one millisecond a call (records
    created one after another have distinct, rising timestamps)."""

    clock = [BASE]

    def call(self, name, args):
        Scripts.clock[0] += timedelta(milliseconds=1)
        t = Scripts.clock[0]
        reply = self.r.cmd('EVALSHA', self.sha[name], 1, NS, json.dumps(args), iso(t),
                           json.dumps([str(uuid.uuid4()) for _ in range(8)]), iso(t, ms=True))
        return json.loads(reply)

    def get(self, key):
        t = self.r.cmd('GET', NS + key)
        return json.loads(t) if t is not None else None

    def vm(self, u):
        return self.get('vm:' + u)

    def mig(self, u):
        return self.get('migration:' + u)

    def index(self, key):
        return self.r.cmd('ZRANGE', NS + key, 0, -1)

    def committed(self, s):
        h = self.hash('server:' + s)
        return int(h['ram_committed_mib']), int(h['disk_committed_mib'])

    def events(self, m):
        """The stream's events of migration m, in order."""
        out = []
        for _id, fields in self.r.cmd('XRANGE', NS + f'migration:{m}:events', '-', '+'):
            out.append(json.loads(fields[fields.index('e') + 1]))
        return out

    def ends(self, m):
        return [e for e in self.events(m) if e['type'] == 'end']

    def snapshot(self):
        """Every key and its value: what a call that must change nothing compares."""
        out = {}
        for k in sorted(self.r.cmd('KEYS', NS + '*')):
            kind = self.r.cmd('TYPE', k)
            if kind == 'string':
                out[k] = self.r.cmd('GET', k)
            elif kind == 'hash':
                out[k] = sorted(self.r.cmd('HGETALL', k))
            elif kind == 'zset':
                out[k] = self.r.cmd('ZRANGE', k, 0, -1, 'WITHSCORES')
            elif kind == 'set':
                out[k] = sorted(self.r.cmd('SMEMBERS', k))
            elif kind == 'stream':
                out[k] = self.r.cmd('XLEN', k)
        return out


def vmid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def make_vm(inv, i, server=S1, ram=1024, disk=20480, state='running', owner=OWNER, nics=2,
            internal_metadata=None):
    """A VM as provision leaves it: placed on `server`, its NICs on NET, its disks'
    paths under the server's data root."""
    u = vmid(i)
    inv.ok('place', {'vm_uuid': u, 'owner_uuid': owner, 'alias': f'vm{i}', 'brand': 'bhyve',
                     'ram': ram, 'quota': 0, 'reservation': disk, 'flexible': True,
                     'flexible_disk_size': disk, 'server_uuid': server, 'autoboot': True,
                     'disks': [{'boot': True, 'size': 10240}, {'size': 2048}]})
    if nics:
        inv.ok('nics_provision', {'vm_uuid': u, 'owner_uuid': owner,
                                  'networks': [{'uuid': NET}] * nics})
    root = inv.hash('server:' + server)['data_root']
    inv.ok('vm_set_state', {'vm_uuid': u, 'state': state, 'disks': [
        {'pci_slot': f'0:4:{n}', 'path': f'{root}/{u}/disks/disk{n}.img', 'size': s}
        for n, s in enumerate((10240, 2048))]})
    if internal_metadata is not None:
        vm = inv.vm(u)
        vm['internal_metadata'] = internal_metadata
        inv.r.cmd('SET', NS + 'vm:' + u, json.dumps(vm))
    return inv.vm(u)


def check(inv, action, vm, settings=None, target=None, **params):
    return inv.call('migration_check', {
        'action': action, 'vm_uuid': vm, 'target': target or f'/migrate-{action}-{vm}',
        'params': dict({'vm_uuid': vm}, **params),
        'settings': dict(SETTINGS, **(settings or {}))})


def check_ok(inv, action, vm, **kw):
    got = check(inv, action, vm, **kw)
    assert 'ok' in got, f'migration_check {action} {kw}: {got}'
    return got['ok']


def refused(inv, action, vm, code, message, status, **kw):
    before = inv.snapshot()
    got = check(inv, action, vm, **kw)
    err = got.get('error')
    assert err is not None, f'migration_check {action} {kw}: expected {code}, got {got}'
    assert err['code'] == code and message in err['message'] and err['status'] == status, \
        f'migration_check {action} {kw}: {err}'
    assert inv.snapshot() == before, f'migration_check {action}: a refusal wrote'
    return err


def claim_args(c, job, action='begin', **params):
    return {'vm_uuid': c['vm_uuid'], 'migration_uuid': job, 'job_uuid': job, 'action': action,
            'params': dict({'vm_uuid': c['vm_uuid']}, **params),
            'target_server_uuid': c['target_server_uuid'], 'slots': c['slots'],
            'secret': uuid.uuid4().hex + uuid.uuid4().hex,
            'settings': {'migration_send_mbps_limit': 500}}


def phase(inv, m, job, ph, event, **kw):
    return inv.ok('migration_phase', dict({'migration_uuid': m, 'job_uuid': job, 'phase': ph,
                                           'event': event}, **kw))


def phase_refused(inv, m, job, ph, event, part):
    inv.error('migration_phase', {'migration_uuid': m, 'job_uuid': job, 'phase': ph,
                                  'event': event}, 'InvalidState', part)


def begin(inv, vm, action='begin', done=True, **params):
    """A begin (automatic, schedule) job to the end of its begin phase: check, claim,
    phase start, phase done. Returns the migration's uuid (its job's)."""
    c = check_ok(inv, action, vm, **params)
    job = str(uuid.uuid4())
    got = inv.ok('migration_claim', claim_args(c, job, action, **params))
    assert got['migration']['uuid'] == job and 'secret' not in json.dumps(got), got
    phase(inv, job, job, 'begin', 'start')
    if done:
        phase(inv, job, job, 'begin', 'done')
    return job


def sync(inv, m, vm, passes=1, done=True, job=None, bytes_=1 << 20):
    """A sync job: check, start, the send's passes, done. Returns the job's uuid."""
    if job is None:
        check_ok(inv, 'sync', vm)
        job = str(uuid.uuid4())
        phase(inv, m, job, 'sync', 'start')
    for n in range(1, passes + 1):
        inv.ok('migration_progress', {'migration_uuid': m, 'event': {
            'current_progress': bytes_ // 2, 'total_progress': bytes_,
            'transfer_bytes_second': 1000}})
        inv.ok('migration_progress', {'migration_uuid': m, 'pass_done': {
            'pass': n, 'bytes': bytes_ // n, 'total': bytes_, 'duration_ms': 10}})
    if done:
        phase(inv, m, job, 'sync', 'done')
    return job


def switch(inv, m, vm, job=None, done=True, state_before='running'):
    """A switch job: check (on demand), start, steps 1 to 3, the swap, steps 6, 7, done."""
    if job is None:
        check_ok(inv, 'switch', vm)
        job = str(uuid.uuid4())
    phase(inv, m, job, 'switch', 'start')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1,
                              'vm_state_before': state_before})
    inv.ok('migration_progress', {'migration_uuid': m, 'pass_done': {
        'pass': 1, 'bytes': 4096, 'total': 4096, 'duration_ms': 5}})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 2})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 3})
    inv.ok('migration_switch', {'migration_uuid': m})
    if done:
        inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 6})
        inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 7})
        phase(inv, m, job, 'switch', 'done')
    return job


def make_scripts(r, scripts):
    inv = Scripts(r, scripts)
    inv.port = r.sock.getpeername()[1]
    return inv


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-migration.', make=make_scripts)


def assert_record_types(m):
    # DOMAIN 5.6 test 4: every field of RFD 34 and tern's, with its type.
    types = {'uuid': str, 'vm_uuid': str, 'source_server_uuid': str, 'target_server_uuid': str,
             'automatic': bool, 'state': str, 'phase': str, 'created_timestamp': str,
             'num_sync_phases': int, 'progress_history': list, 'action': str,
             'switch_step': int, 'vm_state_before': str, 'target_allocation': dict,
             'reserved_nics': list, 'pause_requested': bool, 'abort_requested': bool,
             'send_mbps_limit': (int, float)}
    for k, t in types.items():
        assert isinstance(m.get(k), t), f'{k}: {m.get(k)!r}'
    for k in ('account_uuid', 'scheduled_timestamp', 'started_timestamp', 'finished_timestamp',
              'last_sync_size', 'error', 'errorDetail', 'job_uuid', 'switch_reason',
              'source_allocation', 'progress', 'finalized_timestamp'):
        assert k in m, f'{k} missing: {sorted(m)}'
    assert 'secret' not in m, 'secret shown'
    assert m['state'] in ('scheduled', 'running', 'paused', 'aborted', 'failed', 'successful')


@case
def on_demand_begin_sync_sync_switch_finalize(inv):
    # DOMAIN 5.1's table, on demand; 5.6 tests 4, 8, 32.
    vm = make_vm(inv, 1)
    before1, before2 = inv.committed(S1), inv.committed(S2)
    m = begin(inv, vm['uuid'], done=False)
    rec = inv.mig(m)
    assert (rec['state'], rec['phase'], rec['target_server_uuid']) == ('running', 'begin', S2), rec
    assert len(rec['secret']) == 64 and rec['account_uuid'] is None, rec
    assert rec['target_allocation'] == {'server_uuid': S2, 'ram': 1024, 'disk': 20480,
                                        'rack': 'r1'}, rec
    assert inv.committed(S2) == (before2[0] + 1024, before2[1] + 20480)
    assert inv.committed(S1) == before1
    assert inv.vm(vm['uuid'])['migrating'] is True
    assert inv.vm(vm['uuid'])['migration_uuid'] == m
    assert inv.r.cmd('GET', NS + 'migration_active:' + vm['uuid']) == m
    assert rec['progress_history'][0]['message'] == 'making a reservation'
    phase(inv, m, m, 'begin', 'done')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('paused', 'begin'), rec
    assert inv.ends(m) == [{'type': 'end', 'phase': 'begin', 'state': 'paused'}], inv.ends(m)
    sync(inv, m, vm['uuid'])
    rec = inv.mig(m)
    assert (rec['state'], rec['phase'], rec['num_sync_phases']) == ('paused', 'sync', 1), rec
    assert rec['last_sync_size'] == 1 << 20
    sync(inv, m, vm['uuid'])
    assert inv.mig(m)['num_sync_phases'] == 2
    assert [e['state'] for e in inv.ends(m)] == ['paused'] * 3
    switch(inv, m, vm['uuid'])
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('successful', 'switch'), rec
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'switch', 'state': 'successful'}
    assert len(inv.ends(m)) == 4
    assert_record_types(inv.view('migration', {'uuid': m})[0])
    assert rec['created_timestamp'] <= rec['started_timestamp'] <= rec['finished_timestamp']
    msgs = [e['message'] for e in rec['progress_history']]
    assert msgs[0] == 'making a reservation' and 'synchronizing filesystems' in msgs, msgs
    assert 're-synchronizing filesystems' in msgs and 'switching instance information' in msgs
    assert all(e['state'] != 'running' for e in rec['progress_history']), rec['progress_history']
    # Test 32: the source's capacity given back, the target's kept.
    assert inv.committed(S1) == (before1[0] - 1024, before1[1] - 20480)
    assert inv.committed(S2) == (before2[0] + 1024, before2[1] + 20480)
    v = inv.vm(vm['uuid'])
    assert v['migrating'] is False and v['server_uuid'] == S2, v
    # Until finalized, a new migration is refused as Triton words it.
    refused(inv, 'begin', vm['uuid'], 'PreviousMigration',
            'A previous migration exists for this instance, use migration finalize to complete it.',
            409)
    check_ok(inv, 'finalize', vm['uuid'])
    fj = str(uuid.uuid4())
    phase(inv, m, fj, 'finalize', 'start')
    phase(inv, m, fj, 'finalize', 'done')
    rec = inv.mig(m)
    assert rec['finalized_timestamp'] and rec['state'] == 'successful', rec
    assert inv.r.cmd('GET', NS + 'migration_active:' + vm['uuid']) is None
    assert check_ok(inv, 'begin', vm['uuid'])['source_server_uuid'] == S2
    refused(inv, 'rollback', vm['uuid'], 'MigrationNotFound', 'has no migration', 404)


@case
def automatic_runs_through_without_stopping(inv):
    vm = make_vm(inv, 1)
    job = str(uuid.uuid4())
    c = check_ok(inv, 'automatic', vm['uuid'])
    assert c['automatic'] is True and c['migration_uuid'] is None
    inv.ok('migration_claim', claim_args(c, job, 'automatic'))
    phase(inv, job, job, 'begin', 'start')
    phase(inv, job, job, 'begin', 'done')
    assert inv.mig(job)['state'] == 'running'
    phase(inv, job, job, 'sync', 'start')
    sync(inv, job, vm['uuid'], passes=3, done=False, job=job)
    inv.ok('migration_progress', {'migration_uuid': job, 'switch_reason': 'size'})
    phase(inv, job, job, 'sync', 'done')
    rec = inv.mig(job)
    assert (rec['state'], rec['num_sync_phases'], rec['switch_reason']) == ('running', 3, 'size')
    assert [h['pass'] for h in rec['progress_history'] if 'pass' in h] == [1, 2, 3]
    assert inv.ends(job) == [], inv.ends(job)
    switch(inv, job, vm['uuid'], job=job)
    assert inv.mig(job)['state'] == 'successful'
    assert inv.ends(job) == [{'type': 'end', 'phase': 'switch', 'state': 'successful'}]


@case
def a_paused_automatic_migration_resumed_by_sync_pauses_again(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u, 'automatic')
    phase(inv, m, m, 'sync', 'start')
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'pause'})
    phase(inv, m, m, 'sync', 'done')
    assert inv.mig(m)['state'] == 'paused'
    assert inv.ends(m) == [{'type': 'end', 'phase': 'sync', 'state': 'paused'}]
    # The automatic job itself goes no further: its switch is refused, its onerror's
    # fail changes nothing, and the migration stays paused.
    phase_refused(inv, m, m, 'switch', 'start', 'Migration was paused')
    phase(inv, m, m, 'switch', 'fail', error='refused')
    assert inv.mig(m)['state'] == 'paused', inv.mig(m)
    sync(inv, m, u)
    assert inv.mig(m)['state'] == 'paused' and inv.mig(m)['automatic'] is True
    switch(inv, m, u)
    assert inv.mig(m)['state'] == 'successful'


@case
def a_storage_instance_moves_its_volume(inv):
    # The swap moves the volume's server and export with its storage instance, and the
    # export every consumer's record names (asked to remount); the unswitch of a
    # rollback moves them back. The address (filesystem_path, endpoint) stays.
    vm = make_vm(inv, 1, internal_metadata={'sdc:system_role': 'nfsvolumestorage'})
    u = vm['uuid']
    vol = 'a7000000-0000-4000-8000-000000000002'
    vm['volume_uuid'] = vol
    inv.r.cmd('SET', NS + 'vm:' + u, json.dumps(vm))
    c1, c2 = make_vm(inv, 2), make_vm(inv, 3, server=S3)
    src_export = f'/lab/cn1/{u}/export'
    for c in (c1, c2):
        c['volumes'] = [{'name': 'shared', 'volume_uuid': vol, 'mountpoint': '/shared',
                         'export_path': src_export}]
        inv.r.cmd('SET', NS + 'vm:' + c['uuid'], json.dumps(c))
    volume = {'uuid': vol, 'name': 'shared', 'owner_uuid': OWNER, 'state': 'ready',
              'vm_uuid': u, 'job_uuid': None, 'server_uuid': S1, 'export_path': src_export,
              'filesystem_path': '192.168.128.200:/exports/data', 'share_state': 'running',
              'share_endpoint': 'nfs://192.168.128.200/shared', 'refs': [c1['uuid'], c2['uuid']],
              'version': 1}
    inv.r.cmd('SET', NS + 'volume:' + vol, json.dumps(volume))
    m = begin(inv, u, target_server_uuid=S2)
    switch(inv, m, u)
    got = inv.get('volume:' + vol)
    assert (got['server_uuid'], got['export_path'], got['share_state']) == \
        (S2, f'/lab/cn2/{u}/export', 'starting'), got
    assert got['filesystem_path'] == volume['filesystem_path'] and \
        got['share_endpoint'] == volume['share_endpoint'], got
    for c in (c1, c2):
        rec = inv.vm(c['uuid'])
        assert rec['volumes'][0]['export_path'] == f'/lab/cn2/{u}/export', rec
        assert rec.get('remount_requested_at'), rec
    rj = str(uuid.uuid4())
    check_ok(inv, 'rollback', u)
    phase(inv, m, rj, 'rollback', 'start')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, rj, 'rollback', 'done')
    got = inv.get('volume:' + vol)
    assert (got['server_uuid'], got['export_path']) == (S1, src_export), got
    assert inv.vm(c1['uuid'])['volumes'][0]['export_path'] == src_export


@case
def a_failed_rollback_may_be_run_again(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    switch(inv, m, u)
    rj = str(uuid.uuid4())
    phase(inv, m, rj, 'rollback', 'start')
    phase(inv, m, rj, 'rollback', 'fail', error='target agent unreachable')
    assert (inv.mig(m)['state'], inv.mig(m)['phase']) == ('failed', 'rollback')
    refused(inv, 'abort', u, 'InvalidState', 'point of no return', 409)
    check_ok(inv, 'rollback', u)
    rj = str(uuid.uuid4())
    phase(inv, m, rj, 'rollback', 'start')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, rj, 'rollback', 'done')
    assert inv.mig(m)['state'] == 'aborted' and inv.vm(u)['server_uuid'] == S1


@case
def schedule_waits_scheduled_then_switches(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    future = iso(BASE + timedelta(days=1))
    refused(inv, 'schedule', u, 'SchedulerDisabled', 'scheduler is disabled', 409,
            settings={'migration_scheduler': False}, scheduled_timestamp=future)
    refused(inv, 'schedule', u, 'InvalidArgument', 'params.scheduled_timestamp: ', 422)
    refused(inv, 'schedule', u, 'InvalidArgument', 'is not in the future', 422,
            scheduled_timestamp='2026-11-26T11:00:00Z')
    refused(inv, 'schedule', u, 'InvalidArgument', 'params.scheduled_timestamp', 422,
            scheduled_timestamp='tomorrow')
    refused(inv, 'begin', u, 'InvalidArgument', 'params.scheduled_timestamp: a migration begin '
            'does not take it', 422, scheduled_timestamp=future)
    m = begin(inv, u, 'schedule', scheduled_timestamp=future)
    assert inv.mig(m)['state'] == 'running' and inv.mig(m)['scheduled_timestamp'] == future
    phase(inv, m, m, 'sync', 'start')
    sync(inv, m, u, job=m)
    rec = inv.mig(m)
    assert rec['state'] == 'scheduled' and rec['num_sync_phases'] == 1, rec
    assert inv.ends(m) == [{'type': 'end', 'phase': 'sync', 'state': 'scheduled'}]
    # The delayed switch job the schedule asks for: at scheduled_timestamp, its uuid the
    # same each time (a step run again finds its job), another migration's another.
    snap = inv.snapshot()
    asked = inv.ok('migration_switch_job', {'migration_uuid': m})
    assert asked == inv.ok('migration_switch_job', {'migration_uuid': m}), asked
    post = asked['post']
    assert asked['state'] == 'scheduled' and post['exec_after'] == future, asked
    assert (post['workflow'], post['target']) == ('migrate-switch', '/migrate-switch-' + u), post
    assert post['params'] == {'vm_uuid': u, 'scheduled_timestamp': future}, post
    assert post['uuid'] not in (m, u), post
    # That job is admitted; one naming another time is refused, naming both; a switch by
    # hand (no scheduled_timestamp) is admitted too, its params not the delayed job's.
    check_ok(inv, 'switch', u, scheduled_timestamp=future)
    other = iso(BASE + timedelta(days=2))
    refused(inv, 'switch', u, 'InvalidState',
            f'params.scheduled_timestamp: migration {m} is scheduled for {future}, not "{other}"',
            409, scheduled_timestamp=other)
    check_ok(inv, 'switch', u)
    assert len(post['uuid']) == 36 and post['uuid'][14] == '5', post
    assert inv.snapshot() == snap
    vm2 = make_vm(inv, 2)
    m2 = begin(inv, vm2['uuid'])
    inv.error('migration_switch_job', {'migration_uuid': m2}, 'InvalidState', 'is not scheduled',
              409)
    inv.error('migration_switch_job', {'migration_uuid': str(uuid.uuid4())}, 'MigrationNotFound',
              'does not exist', 404)
    switch(inv, m, u)
    assert inv.mig(m)['state'] == 'successful'


@case
def pause_only_in_a_running_sync(inv):
    # DOMAIN 5.6 tests 10, 11.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u, done=False)
    refused(inv, 'pause', u, 'InvalidState', 'Pause requires a running migration sync action', 409)
    inv.error('migration_request', {'migration_uuid': m, 'what': 'pause'}, 'InvalidState',
              'Pause requires a running migration sync action')
    phase(inv, m, m, 'begin', 'done')
    job = sync(inv, m, u, passes=0, done=False)
    check_ok(inv, 'pause', u)
    got = inv.ok('migration_request', {'migration_uuid': m, 'what': 'pause'})
    assert got['job_uuid'] == job and got['state'] == 'running' and got['phase'] == 'sync', got
    told = inv.ok('migration_progress', {'migration_uuid': m, 'event': {'current_progress': 1}})
    assert told['pause_requested'] is True and told['abort_requested'] is False, told
    phase(inv, m, job, 'sync', 'done')
    rec = inv.mig(m)
    assert rec['state'] == 'paused' and rec['pause_requested'] is False, rec
    assert rec['progress_history'][-1]['state'] == 'paused', rec['progress_history'][-1]
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'sync', 'state': 'paused'}
    # Switch after a pause: allowed; pause during switch: refused.
    job = str(uuid.uuid4())
    check_ok(inv, 'switch', u)
    phase(inv, m, job, 'switch', 'start')
    refused(inv, 'pause', u, 'InvalidState', 'Pause requires a running migration sync action', 409)


@case
def abort_during_sync_restores_everything(inv):
    # DOMAIN 5.6 test 12: aborted, the target's capacity back, the VM untouched.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    before = (inv.committed(S1), inv.committed(S2))
    m = begin(inv, u)
    job = sync(inv, m, u, done=False)
    check_ok(inv, 'abort', u)
    got = inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    assert got['job_uuid'] == job and got['switch_step'] == 0, got
    phase_refused(inv, m, job, 'switch', 'start', 'an abort was asked')
    assert inv.ok('migration_progress', {'migration_uuid': m})['abort_requested'] is True
    # The stopped sync's onerror changes nothing: the abort takes over.
    phase(inv, m, job, 'sync', 'fail', error='canceled')
    assert inv.mig(m)['state'] == 'running'
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    got = inv.ok('migration_unswitch', {'migration_uuid': m})  # never swapped: nothing
    assert got['vm']['server_uuid'] == S1
    phase(inv, m, aj, 'abort', 'done')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('aborted', 'abort'), rec
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'abort', 'state': 'aborted'}
    assert (inv.committed(S1), inv.committed(S2)) == before
    v = inv.vm(u)
    assert v['server_uuid'] == S1 and v['migrating'] is False and v['nics'] == vm['nics'], v
    assert inv.r.cmd('GET', NS + 'migration_active:' + u) is None
    refused(inv, 'abort', u, 'MigrationNotFound', 'has no migration', 404)
    check_ok(inv, 'begin', u)


@case
def abort_of_a_scheduled_migration_and_during_begin(inv):
    # Scheduled: aborted; the delayed switch job, when its time comes, starts nothing.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u, 'schedule', scheduled_timestamp=iso(BASE + timedelta(days=1)))
    phase(inv, m, m, 'sync', 'start')
    sync(inv, m, u, job=m)
    assert inv.mig(m)['state'] == 'scheduled'
    check_ok(inv, 'abort', u)
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    refused(inv, 'abort', u, 'InvalidState', 'Abort cannot work on a migration that is aborting',
            409)
    phase(inv, m, aj, 'abort', 'done')
    assert inv.mig(m)['state'] == 'aborted'
    sj = str(uuid.uuid4())
    phase_refused(inv, m, sj, 'switch', 'start', 'Cannot switch in migration state: aborted')
    snap = inv.snapshot()
    phase(inv, m, sj, 'switch', 'fail', error='refused')
    assert inv.snapshot() == snap
    # During begin: the begin job's later steps are refused, its onerror changes nothing.
    vm2 = make_vm(inv, 2, nics=0)
    m2 = begin(inv, vm2['uuid'], done=False)
    inv.ok('migration_request', {'migration_uuid': m2, 'what': 'abort'})
    aj = str(uuid.uuid4())
    phase(inv, m2, aj, 'abort', 'start')
    phase_refused(inv, m2, m2, 'begin', 'done', 'the begin phase is not running')
    phase(inv, m2, m2, 'begin', 'fail', error='canceled')
    assert (inv.mig(m2)['state'], inv.mig(m2)['phase']) == ('running', 'abort')
    phase(inv, m2, aj, 'abort', 'done')
    assert inv.mig(m2)['state'] == 'aborted'
    assert inv.committed(S2) == (0, 0), inv.committed(S2)


@case
def abort_after_the_swap_moves_back(inv):
    # DOMAIN 5.6 test 14: NICs back on the source with the same addresses.
    vm = make_vm(inv, 1, state='stopped')
    u = vm['uuid']
    before = (inv.committed(S1), inv.committed(S2))
    m = begin(inv, u)
    assert inv.mig(m)['vm_state_before'] == 'stopped'
    job = switch(inv, m, u, done=False, state_before='stopped')
    assert inv.vm(u)['server_uuid'] == S2
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 6}, 'InvalidState',
              'being aborted')
    phase(inv, m, job, 'switch', 'fail', error='canceled')
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    phase_refused(inv, m, aj, 'abort', 'done', 'unswitch it')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    snap = inv.snapshot()
    inv.ok('migration_unswitch', {'migration_uuid': m})
    assert inv.snapshot() == snap, 'a second unswitch changed something'
    phase(inv, m, aj, 'abort', 'done')
    v = inv.vm(u)
    assert v['server_uuid'] == S1 and v['nics'] == vm['nics'] and v['disks'] == vm['disks'], v
    assert (inv.committed(S1), inv.committed(S2)) == before
    assert inv.index('vms:server:' + S1) == [u] and inv.index('vms:server:' + S2) == []
    assert sorted(inv.index('nics:cn:' + S1)) == sorted(n['mac'] for n in vm['nics'])
    assert inv.mig(m)['state'] == 'aborted'


@case
def abort_refused_from_the_point_of_no_return(inv):
    # DOMAIN 5.6 test 15; step 6 and an abort never both win.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    job = switch(inv, m, u, done=False)
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 6})
    refused(inv, 'abort', u, 'InvalidState',
            'Abort is refused after the point of no return: the target runs', 409)
    inv.error('migration_request', {'migration_uuid': m, 'what': 'abort'}, 'InvalidState',
              'point of no return')
    phase_refused(inv, m, str(uuid.uuid4()), 'abort', 'start', 'point of no return')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 7})
    phase(inv, m, job, 'switch', 'done')
    refused(inv, 'abort', u, 'InvalidState', 'Abort cannot work on a successful migration', 409)


@case
def failure_keeps_the_hold_until_aborted(inv):
    # DOMAIN 5.6 test 26: failed with error, the VM still on the source and held.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    job = sync(inv, m, u, done=False)
    phase(inv, m, job, 'sync', 'fail', error='target lost\nEIO writing disk0.img')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('failed', 'sync'), rec
    assert rec['error'] == 'target lost' and rec['errorDetail'] == 'EIO writing disk0.img', rec
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'sync', 'state': 'failed',
                               'message': 'target lost'}
    # A second fail (the step run again) and a stale job's fail change nothing.
    snap = inv.snapshot()
    phase(inv, m, job, 'sync', 'fail', error='again')
    phase(inv, m, str(uuid.uuid4()), 'sync', 'fail', error='stale')
    assert inv.snapshot() == snap
    assert inv.vm(u)['migrating'] is True and inv.vm(u)['server_uuid'] == S1
    for action in ('start', 'stop', 'delete'):
        inv.error('vm_check', {'vm_uuid': u, 'action': action, 'target': f'/{action}-{u}'},
                  'VmMigrating', f'vm {u} is migrating (migration {m}): {action} refused', 409)
    refused(inv, 'sync', u, 'InvalidState', 'Cannot sync in migration state: failed', 409)
    refused(inv, 'switch', u, 'InvalidState', 'Cannot switch in migration state: failed', 409)
    refused(inv, 'begin', u, 'MigrationInProgress', 'An active migration already exists', 409)
    check_ok(inv, 'abort', u)
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    phase(inv, m, aj, 'abort', 'done')
    assert inv.mig(m)['state'] == 'aborted' and inv.vm(u)['migrating'] is False
    assert inv.ok('vm_check', {'vm_uuid': u, 'action': 'stop', 'target': f'/stop-{u}'})


@case
def the_checks_refusals(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    make_vm(inv, 2, internal_metadata={'user_migration_allowed': True})
    make_vm(inv, 3, internal_metadata={'user_migration_allowed': False})
    refused(inv, 'begin', u, 'InvalidArgument', 'params.bogus: unknown parameter', 422, bogus=1)
    refused(inv, 'move', u, 'InvalidArgument', 'action: expected one of', 422)
    refused(inv, 'begin', u, 'InvalidArgument', 'target: a migration begin of vm', 422,
            target='/migrate-sync-' + u)
    refused(inv, 'begin', 'nope', 'InvalidArgument', 'params.vm_uuid: expected a UUID', 422,
            target='/migrate-begin-nope')
    refused(inv, 'begin', UNKNOWN, 'ResourceNotFound', f'vm {UNKNOWN} does not exist', 404)
    refused(inv, 'begin', u, 'InvalidArgument', 'params.send_mbps_limit', 422, send_mbps_limit=0)
    refused(inv, 'begin', u, 'InvalidArgument', 'params.send_mbps_limit', 422,
            send_mbps_limit='fast')
    refused(inv, 'begin', u, 'InvalidArgument', 'params.automatic', 422, automatic='yes')
    refused(inv, 'begin', u, 'InvalidArgument', 'params.affinity', 422, affinity=[u])
    refused(inv, 'begin', u, 'InvalidArgument', 'params.affinity.far[0]', 422,
            affinity={'far': ['x']})
    refused(inv, 'begin', u, 'InvalidArgument', 'params.affinity.rack', 422,
            affinity={'rack': 'near'})
    refused(inv, 'begin', u, 'InvalidArgument', 'params.affinity.zone: unknown', 422,
            affinity={'zone': 'a'})
    refused(inv, 'sync', u, 'InvalidArgument', 'params.target_server_uuid: a migration sync', 422,
            target_server_uuid=S2)
    refused(inv, 'begin', u, 'InvalidArgument', 'params.owner_uuid: expected a UUID', 422,
            owner_uuid='me')
    # Users (DOMAIN 5.6 test 22): the global flag, then the per-VM one over it.
    refused(inv, 'begin', u, 'NotAllowed', 'User migration on this VM not allowed', 403,
            owner_uuid=OWNER)
    check_ok(inv, 'begin', u, owner_uuid=OWNER, settings={'allow_user_migrations': True})
    check_ok(inv, 'begin', vmid(2), owner_uuid=OWNER)
    refused(inv, 'begin', vmid(3), 'NotAllowed', 'User migration on this VM not allowed', 403,
            owner_uuid=OWNER, settings={'allow_user_migrations': True})
    check_ok(inv, 'begin', vmid(3))  # the operator always may
    refused(inv, 'begin', u, 'ResourceNotFound', 'does not exist', 404, owner_uuid=OTHER,
            settings={'allow_user_migrations': True})
    # No migration yet.
    for action in ('sync', 'switch', 'pause', 'abort', 'rollback', 'finalize'):
        refused(inv, action, u, 'MigrationNotFound', f'vm {u} has no migration to {action}', 404)
    # A second migration of a VM (test 16), and the actions in the wrong state.
    m = begin(inv, u, done=False)
    for action in ('begin', 'automatic'):
        refused(inv, action, u, 'MigrationInProgress',
                'An active migration already exists for this instance', 409)
    refused(inv, 'sync', u, 'InvalidState', 'Cannot sync in migration state: running', 409)
    refused(inv, 'switch', u, 'InvalidState', 'Cannot switch in migration state: running', 409)
    refused(inv, 'rollback', u, 'InvalidState', 'Rollback only works on a successful migration', 409)
    refused(inv, 'finalize', u, 'InvalidState', 'Finalize only works on a successful migration', 409)
    # An owner acting on the operator's migration (test 23).
    refused(inv, 'abort', u, 'NotAllowed', 'is the operator\'s', 403, owner_uuid=OWNER,
            settings={'allow_user_migrations': True})
    got = check_ok(inv, 'abort', u)
    assert got['migration_uuid'] == m and got['target_server_uuid'] == S2, got
    # A user's own migration.
    mu = begin(inv, vmid(2), owner_uuid=OWNER)
    assert inv.mig(mu)['account_uuid'] == OWNER
    check_ok(inv, 'sync', vmid(2), owner_uuid=OWNER)


@case
def estimate_and_a_vm_marked_by_hand(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c = check_ok(inv, 'estimate', u, send_mbps_limit=80)
    assert c['source_server_uuid'] == S1 and c['target_server_uuid'] is None, c
    assert c['send_mbps_limit'] == 80 and c['migration_uuid'] is None, c
    refused(inv, 'estimate', u, 'NotAllowed', 'User migration on this VM not allowed', 403,
            owner_uuid=OWNER)
    refused(inv, 'estimate', u, 'InvalidArgument', 'params.target_server_uuid', 422,
            target_server_uuid=S2)
    begin(inv, u)
    check_ok(inv, 'estimate', u)  # an estimate reads only: a migrating VM may be measured
    # A VM marked migrating with no claim of its own (an operator's hand) is not begun.
    other = make_vm(inv, 2, nics=0)
    other['migrating'] = True
    inv.r.cmd('SET', NS + 'vm:' + other['uuid'], json.dumps(other))
    refused(inv, 'begin', other['uuid'], 'MigrationInProgress', 'marked migrating, migration '
            'unknown', 409)


@case
def storage_and_core_instances(inv):
    vm = make_vm(inv, 1, internal_metadata={'sdc:system_role': 'nfsvolumestorage'})
    refused(inv, 'begin', vm['uuid'], 'NotAllowed', 'User migration on this VM not allowed', 403,
            owner_uuid=OWNER, settings={'allow_user_migrations': True})
    # The operator's: refused while its volume is missing, not ready or busy with a job.
    refused(inv, 'begin', vm['uuid'], 'InvalidState', 'does not exist: nothing to migrate', 409)
    vol = 'a7000000-0000-4000-8000-000000000001'
    vm['volume_uuid'] = vol
    inv.r.cmd('SET', NS + 'vm:' + vm['uuid'], json.dumps(vm))
    volume = {'uuid': vol, 'name': 'shared', 'owner_uuid': vm['owner_uuid'], 'state': 'deleting',
              'vm_uuid': vm['uuid'], 'job_uuid': None}
    inv.r.cmd('SET', NS + 'volume:' + vol, json.dumps(volume))
    refused(inv, 'begin', vm['uuid'], 'VolumeNotReady', 'is deleting', 409)
    volume.update(state='ready', job_uuid='a7000000-0000-4000-8000-0000000000ff')
    inv.r.cmd('SET', NS + 'volume:' + vol, json.dumps(volume))
    refused(inv, 'begin', vm['uuid'], 'VolumeBusy', 'in flight', 409)
    volume.update(job_uuid=None)
    inv.r.cmd('SET', NS + 'volume:' + vol, json.dumps(volume))
    assert check_ok(inv, 'begin', vm['uuid'])['source_server_uuid'] == S1
    core = make_vm(inv, 2)
    core['tags'] = {'smartdc_role': 'imgapi'}
    inv.r.cmd('SET', NS + 'vm:' + core['uuid'], json.dumps(core))
    refused(inv, 'begin', core['uuid'], 'InvalidArgument', 'Cannot migrate a core instance', 409)
    prov = make_vm(inv, 3, state='stopped')
    prov['state'] = 'provisioning'
    inv.r.cmd('SET', NS + 'vm:' + prov['uuid'], json.dumps(prov))
    refused(inv, 'begin', prov['uuid'], 'InvalidState', 'only a running or stopped instance', 409)


@case
def the_target_is_chosen_read_only(inv):
    # DOMAIN 5.6 test 28: never the source; the actual allocation; pinned; affinity.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c = check_ok(inv, 'begin', u)
    assert c['target_server_uuid'] == S2 and c['source_server_uuid'] == S1, c
    assert c['slots'] == 5 and c['send_mbps_limit'] == 500 and c['vm_state'] == 'running', c
    assert check_ok(inv, 'begin', u, send_mbps_limit=80)['send_mbps_limit'] == 80
    assert check_ok(inv, 'begin', u, target_server_uuid=S3)['target_server_uuid'] == S3
    refused(inv, 'begin', u, 'InvalidArgument', 'is the source server', 422,
            target_server_uuid=S1)
    refused(inv, 'begin', u, 'ResourceNotFound', f'server {UNKNOWN} does not exist', 404,
            target_server_uuid=UNKNOWN)
    # Affinity: far from a VM on S2 -> S3; near a VM on S3 -> S3; rack other -> S3.
    make_vm(inv, 2, server=S2, nics=0)
    make_vm(inv, 3, server=S3, nics=0, disk=10240)
    assert check_ok(inv, 'begin', u, affinity={'far': [vmid(2)]})['target_server_uuid'] == S3
    assert check_ok(inv, 'begin', u, affinity={'near': [vmid(3)]})['target_server_uuid'] == S3
    assert check_ok(inv, 'begin', u, affinity={'rack': 'other'})['target_server_uuid'] == S3
    assert check_ok(inv, 'begin', u, affinity={'rack': 'same'})['target_server_uuid'] == S2
    assert check_ok(inv, 'begin', u, affinity={'near': [], 'far': []})['target_server_uuid'] == S2
    assert check_ok(inv, 'begin', u, affinity={})['target_server_uuid'] == S2
    # Pinned: the operator's choice bypasses affinity, not room.
    assert check_ok(inv, 'begin', u, target_server_uuid=S3,
                    affinity={'far': [vmid(3)]})['target_server_uuid'] == S3
    refused(inv, 'begin', u, 'NoAllocatableServersError', 'within its affinity', 409,
            affinity={'near': [vmid(1)]})
    refused(inv, 'begin', u, 'ResourceNotFound', 'affinity.far[0]: vm', 404,
            affinity={'far': [UNKNOWN]})
    # The actual allocation: a VM resized in place to more disk than S2 has free.
    big = make_vm(inv, 4, disk=20480)
    free2 = 1024000 - inv.committed(S2)[1]
    big['allocation']['disk'] = free2 + 1
    inv.r.cmd('SET', NS + 'vm:' + big['uuid'], json.dumps(big))
    assert check_ok(inv, 'begin', big['uuid'])['target_server_uuid'] == S3
    refused(inv, 'begin', big['uuid'], 'NoAllocatableServersError',
            f'server {S2} (pinned) has no room', 409, target_server_uuid=S2)
    big['allocation']['disk'] = 2000000
    inv.r.cmd('SET', NS + 'vm:' + big['uuid'], json.dumps(big))
    refused(inv, 'begin', big['uuid'], 'NoAllocatableServersError',
            'no server but the source has room for 1024 MiB of RAM and 2000000 MiB', 409)


@case
def twenty_racing_claims_make_one_migration(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c = check_ok(inv, 'begin', u)
    before = inv.committed(S2)
    go = threading.Barrier(20)
    answers = [None] * 20

    def claim(k):
        conn = Redis(inv.port)
        mine = Scripts.__new__(Scripts)
        mine.r, mine.sha = conn, inv.sha
        go.wait(timeout=30)
        answers[k] = mine.call('migration_claim', claim_args(c, str(uuid.uuid4())))
        conn.sock.close()

    threads = [threading.Thread(target=claim, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    won = [a['ok'] for a in answers if a and 'ok' in a]
    lost = [a['error'] for a in answers if a and 'error' in a]
    assert len(won) == 1 and len(lost) == 19, f'{len(won)} won, {len(lost)} lost'
    assert all(e['code'] == 'MigrationInProgress' for e in lost), lost
    # A loser's onerror fails no record: it has none, the winner's is untouched.
    snap = inv.snapshot()
    loser = str(uuid.uuid4())
    got = phase(inv, loser, loser, 'begin', 'fail', error='MigrationInProgress')
    assert got == {'uuid': loser, 'state': None}, got
    assert inv.snapshot() == snap
    m = won[0]['migration']['uuid']
    assert inv.r.cmd('ZRANGE', NS + 'migrations', 0, -1) == [m]
    assert inv.r.cmd('KEYS', NS + 'migration:*:events') == [NS + f'migration:{m}:events']
    assert inv.committed(S2) == (before[0] + 1024, before[1] + 20480)
    # The winner's claim run again answers the same and commits nothing more.
    again = inv.ok('migration_claim', dict(claim_args(c, m)))
    assert again['migration']['uuid'] == m and again == won[0]
    assert inv.committed(S2) == (before[0] + 1024, before[1] + 20480)


@case
def a_claim_without_room_writes_nothing(inv):
    vm = make_vm(inv, 1)
    c = check_ok(inv, 'begin', vm['uuid'])
    # S2 filled since the check.
    inv.r.cmd('HSET', NS + 'server:' + S2, 'ram_committed_mib', 32768 - 100)
    snap = inv.snapshot()
    inv.error('migration_claim', claim_args(c, str(uuid.uuid4())), 'NoAllocatableServersError',
              f'server {S2} (pinned) has no room')
    assert inv.snapshot() == snap


@case
def the_swap_keeps_one_copy_and_its_addresses(inv):
    # DOMAIN 5.6 tests 3, 32, 34.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    macs = sorted(n['mac'] for n in vm['nics'])
    ips = sorted(n['ip'] for n in vm['nics'])
    c1, c2 = inv.committed(S1), inv.committed(S2)
    m = begin(inv, u)
    job = str(uuid.uuid4())
    phase(inv, m, job, 'switch', 'start')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'running'})
    inv.error('migration_switch', {'migration_uuid': m}, 'InvalidState', 'once verified')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 3})
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 6}, 'InvalidState',
              'only after the swap')
    got = inv.ok('migration_switch', {'migration_uuid': m})
    v = inv.vm(u)
    assert got['vm'] == v and v['server_uuid'] == S2 and v['allocation']['server_uuid'] == S2, v
    assert [d['path'] for d in v['disks']] == [f'/lab/cn2/{u}/disks/disk0.img',
                                               f'/lab/cn2/{u}/disks/disk1.img'], v['disks']
    assert sorted(n['mac'] for n in v['nics']) == macs and sorted(n['ip'] for n in v['nics']) == ips
    assert all(n['cn_uuid'] == S2 for n in v['nics'])
    for n in v['nics']:
        assert inv.get('nic:' + n['mac'])['cn_uuid'] == S2
        ip = inv.hash(f'ip:{NET}:{n["ip"]}')
        assert ip['state'] == 'taken' and ip['belongs_to_uuid'] == u, ip
    # One inventoried copy: in one server's index, its NICs in one server's.
    assert inv.index('vms:server:' + S1) == [] and inv.index('vms:server:' + S2) == [u]
    assert inv.index('nics:cn:' + S1) == [] and sorted(inv.index('nics:cn:' + S2)) == macs
    rec = inv.mig(m)
    assert rec['switch_step'] == 5 and sorted(r['ip'] for r in rec['reserved_nics']) == ips, rec
    assert rec['source_allocation']['server_uuid'] == S1
    # Both committed until successful.
    assert inv.committed(S1) == c1 and inv.committed(S2) == (c2[0] + 1024, c2[1] + 20480)
    assert inv.hash('server:' + S2)['instances'] == '1'
    assert inv.hash('server:' + S1)['instances'] == '0'
    # Test 34: a second switch (a runner killed after the swap) changes nothing.
    snap = inv.snapshot()
    again = inv.ok('migration_switch', {'migration_uuid': m})
    assert again['vm'] == v and inv.snapshot() == snap
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 6})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 7})
    phase(inv, m, job, 'switch', 'done')
    assert inv.committed(S1) == (c1[0] - 1024, c1[1] - 20480)
    assert inv.committed(S2) == (c2[0] + 1024, c2[1] + 20480)
    snap = inv.snapshot()
    phase(inv, m, job, 'switch', 'done')
    assert inv.snapshot() == snap, 'done run again changed something'
    # Rollback (not finalized): back on the source, the source committed again.
    check_ok(inv, 'rollback', u)
    rj = str(uuid.uuid4())
    phase(inv, m, rj, 'rollback', 'start')
    assert inv.vm(u)['migrating'] is True
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, rj, 'rollback', 'done')
    v = inv.vm(u)
    assert v['server_uuid'] == S1 and v['disks'] == vm['disks'] and v['nics'] == vm['nics'], v
    assert inv.committed(S1) == c1 and inv.committed(S2) == c2
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('aborted', 'rollback'), rec
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'rollback', 'state': 'aborted'}
    assert v['migrating'] is False and inv.r.cmd('GET', NS + 'migration_active:' + u) is None


@case
def a_rollback_without_room_on_the_source_is_refused(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    switch(inv, m, u)
    rj = str(uuid.uuid4())
    phase(inv, m, rj, 'rollback', 'start')
    inv.r.cmd('HSET', NS + 'server:' + S1, 'ram_committed_mib', 65536)
    snap = inv.snapshot()
    inv.error('migration_unswitch', {'migration_uuid': m}, 'NoAllocatableServersError',
              f'server {S1} (the source) has no room left')
    assert inv.snapshot() == snap


@case
def a_provision_racing_the_swap_never_gets_its_addresses(inv):
    # DOMAIN 5.6 test 3: provisions before, between and after each step of the swap,
    # and 20 racing it on other connections.
    vm = make_vm(inv, 1)
    u = vm['uuid']
    ips = {n['ip'] for n in vm['nics']}
    got_ips = []
    count = [100]
    lock = threading.Lock()

    def provision(inv_):
        with lock:
            count[0] += 1
            n = count[0]
        got = inv_.call('place', {'vm_uuid': vmid(n), 'owner_uuid': OTHER, 'ram': 64,
                                  'quota': 0, 'reservation': 64, 'flexible': False,
                                  'server_uuid': S3, 'disks': [{'boot': True, 'size': 64}]})
        assert 'ok' in got, got
        got = inv_.call('nics_provision', {'vm_uuid': vmid(n), 'owner_uuid': OTHER,
                                           'networks': [{'uuid': NET}]})
        assert 'ok' in got, got
        got_ips.extend(n['ip'] for n in got['ok']['nics'])

    m = begin(inv, u)
    provision(inv)
    job = str(uuid.uuid4())
    phase(inv, m, job, 'switch', 'start')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'running'})
    provision(inv)
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 3})
    go = threading.Barrier(21)

    def racer(k):
        conn = Redis(inv.port)
        mine = Scripts.__new__(Scripts)
        mine.r, mine.sha = conn, inv.sha
        go.wait(timeout=30)
        provision(mine)
        conn.sock.close()

    threads = [threading.Thread(target=racer, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    go.wait(timeout=30)
    inv.ok('migration_switch', {'migration_uuid': m})
    for t in threads:
        t.join(timeout=60)
    provision(inv)
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    provision(inv)
    inv.ok('migration_unswitch', {'migration_uuid': m})
    provision(inv)
    phase(inv, m, aj, 'abort', 'done')
    provision(inv)
    assert len(got_ips) == 26, len(got_ips)
    assert not ips & set(got_ips), ips & set(got_ips)
    assert len(set(got_ips)) == len(got_ips), 'an address given twice'
    assert {n['ip'] for n in inv.vm(u)['nics']} == ips


@case
def phases_and_steps_refuse_what_does_not_follow(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u, done=False)
    job2 = str(uuid.uuid4())
    # Idempotent: the begin start (the claim's) and done run twice.
    snap = inv.snapshot()
    phase(inv, m, m, 'begin', 'start')
    assert inv.snapshot() == snap
    phase_refused(inv, m, job2, 'begin', 'done', f'run by job {m}')
    phase_refused(inv, m, job2, 'switch', 'done', 'the switch phase is not running')
    phase_refused(inv, m, job2, 'rollback', 'start', 'Rollback only works on a successful')
    phase_refused(inv, m, job2, 'finalize', 'done', 'Finalize only works on a successful')
    phase(inv, m, m, 'begin', 'done')
    snap = inv.snapshot()
    phase(inv, m, m, 'begin', 'done')
    assert inv.snapshot() == snap
    phase_refused(inv, m, job2, 'begin', 'start', 'begin starts only a new migration')
    inv.error('migration_phase', {'migration_uuid': m, 'job_uuid': job2, 'phase': 'dance',
                                  'event': 'start'}, 'InvalidArgument', 'phase: expected')
    inv.error('migration_phase', {'migration_uuid': m, 'job_uuid': job2, 'phase': 'sync',
                                  'event': 'go'}, 'InvalidArgument', 'event: expected')
    inv.error('migration_phase', {'migration_uuid': UNKNOWN, 'job_uuid': job2, 'phase': 'sync',
                                  'event': 'start'}, 'MigrationNotFound', 'does not exist')
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 1}, 'InvalidState',
              'switch steps belong to a running switch')
    job = sync(inv, m, u, done=False)
    # A pass reported twice counts once.
    inv.ok('migration_progress', {'migration_uuid': m, 'pass_done': {
        'pass': 1, 'bytes': 5, 'total': 5, 'duration_ms': 1}})
    assert inv.mig(m)['num_sync_phases'] == 1
    inv.error('migration_progress', {'migration_uuid': m, 'switch_reason': 'bored'},
              'InvalidArgument', 'switch_reason')
    inv.error('migration_progress', {'migration_uuid': m, 'pass_done': {'pass': 'x'}},
              'InvalidArgument', 'pass_done')
    inv.error('migration_request', {'migration_uuid': m, 'what': 'stop'}, 'InvalidArgument',
              'what: expected pause or abort')
    phase(inv, m, job, 'sync', 'done')
    sj = str(uuid.uuid4())
    phase(inv, m, sj, 'switch', 'start')
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 9}, 'InvalidArgument',
              'switch_step: expected an integer 1 to 7')
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 5}, 'InvalidArgument',
              'the swap\'s own')
    inv.error('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'on'},
              'InvalidArgument', 'vm_state_before')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 2, 'vm_state_before': 'stopped'})
    snap = inv.snapshot()
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'running'})
    assert inv.snapshot() == snap, 'a step backwards changed something'
    phase_refused(inv, m, sj, 'switch', 'done', 'only after the swap')


@case
def migrating_vms_refuse_other_operations_and_show_it(inv):
    # DOMAIN 5.6 test 17.
    vm = make_vm(inv, 1, state='stopped')
    other = make_vm(inv, 2, nics=0)
    u = vm['uuid']
    listed, _, _ = inv.view('vms')
    assert all(v['migrating'] is False for v in listed), listed
    m = begin(inv, u)
    listed, _, _ = inv.view('vms')
    assert {v['uuid']: v['migrating'] for v in listed} == {u: True, other['uuid']: False}
    assert inv.view('vm', {'uuid': u})[0]['migrating'] is True
    assert inv.view('vm', {'uuid': other['uuid']})[0]['migrating'] is False
    inv.error('vm_check', {'vm_uuid': u, 'action': 'start', 'target': f'/start-{u}'},
              'VmMigrating', f'vm {u} is migrating (migration {m}): start refused', 409)
    inv.error('disk_check', {'action': 'resize', 'vm_uuid': u, 'target': f'/disk-resize-{u}',
                             'params': {'vm_uuid': u, 'pci_slot': '0:4:1', 'size': 4096}},
              'VmMigrating', f'vm {u} is migrating (migration {m}): disk-resize refused', 409)
    inv.ok('vm_check', {'vm_uuid': other['uuid'], 'action': 'stop',
                        'target': f'/stop-{other["uuid"]}'})


@case
def the_secret_only_to_the_agents_while_data_may_move(inv):
    # The claim stores the secret and never answers it (a step's result shows in GET
    # /jobs/:uuid); migration_secret answers it while running, paused or scheduled.
    vm = make_vm(inv, 1)
    m = begin(inv, vm['uuid'], done=False)
    secret = inv.mig(m)['secret']
    assert inv.ok('migration_secret', {'migration_uuid': m}) == {'secret': secret}
    phase(inv, m, m, 'begin', 'done')
    assert inv.mig(m)['state'] == 'paused'
    assert inv.ok('migration_secret', {'migration_uuid': m}) == {'secret': secret}
    inv.error('migration_secret', {'migration_uuid': str(uuid.uuid4())}, 'MigrationNotFound',
              'does not exist', 404)
    inv.error('migration_secret', {'migration_uuid': 'nope'}, 'InvalidArgument',
              'migration_uuid', 422)
    aj = str(uuid.uuid4())
    phase(inv, m, aj, 'abort', 'start')
    phase(inv, m, aj, 'abort', 'done')
    snap = inv.snapshot()
    inv.error('migration_secret', {'migration_uuid': m}, 'InvalidState',
              'is aborted: its transfer is closed', 409)
    assert inv.snapshot() == snap


@case
def the_views_filter_page_and_never_show_the_secret(inv):
    # DOMAIN 5.6 test 24.
    for i in range(1, 6):
        make_vm(inv, i, owner=OWNER if i <= 3 else OTHER, nics=0)
    ms = [begin(inv, vmid(i)) for i in range(1, 6)]
    sync(inv, ms[0], vmid(1))
    switch(inv, ms[0], vmid(1))                       # successful
    aj = str(uuid.uuid4())
    phase(inv, ms[1], aj, 'abort', 'start')
    phase(inv, ms[1], aj, 'abort', 'done')            # aborted
    sync(inv, ms[2], vmid(3), done=False)             # running
    raw = inv.r.cmd('GET', NS + 'migration:' + ms[0])
    secret = json.loads(raw)['secret']
    listed, marker, count = inv.view('migrations')
    assert [m['uuid'] for m in listed] == ms[::-1], [m['uuid'] for m in listed]
    assert count == 5 and marker is None, (count, marker)
    assert all('secret' not in m for m in listed) and secret not in json.dumps(listed)
    one, _, _ = inv.view('migration', {'uuid': ms[0]})
    assert one['uuid'] == ms[0] and 'secret' not in one and secret not in json.dumps(one)
    by_vm, _, _ = inv.view('migration', {'uuid': vmid(1)})
    assert by_vm['uuid'] == ms[0], by_vm

    def uuids(params, **kw):
        got, _, _ = inv.view('migrations', params, **kw)
        return [m['uuid'] for m in got]

    assert uuids({'state': 'successful'}) == [ms[0]]
    assert uuids({'state': 'aborted'}) == [ms[1]]
    assert uuids({'state': 'running'}) == [ms[2]]
    assert uuids({'state': 'paused'}) == [ms[4], ms[3]]
    assert uuids({'state': 'active'}) == [ms[4], ms[3], ms[2]]
    assert uuids({'owner_uuid': OWNER}) == [ms[2], ms[1], ms[0]]
    assert uuids({'owner_uuid': OTHER, 'state': 'paused'}) == [ms[4], ms[3]]
    assert uuids({'vm_uuid': vmid(2)}) == [ms[1]]
    assert uuids({'vm_uuid': vmid(2), 'owner_uuid': OTHER}) == []
    # A second migration of vm 2 (the first aborted): both, newest first.
    m6 = begin(inv, vmid(2))
    assert uuids({'vm_uuid': vmid(2)}) == [m6, ms[1]]
    assert inv.view('migration', {'uuid': vmid(2)})[0]['uuid'] == m6
    # Paging: by limit and marker, by offset, filtered and not.
    page1, marker, _ = inv.view('migrations', {}, limit=2)
    assert [m['uuid'] for m in page1] == [m6, ms[4]] and marker == ms[4], (page1, marker)
    page2, marker, _ = inv.view('migrations', {}, limit=2, marker=marker)
    assert [m['uuid'] for m in page2] == [ms[3], ms[2]], page2
    page3, marker, _ = inv.view('migrations', {}, limit=2, marker=marker)
    assert [m['uuid'] for m in page3] == [ms[1], ms[0]] and marker is None, marker
    assert uuids({}, limit=2, offset=3) == [ms[2], ms[1]]
    assert uuids({'state': 'active'}, limit=1, offset=1) == [ms[4]]
    p, marker, _ = inv.view('migrations', {'state': 'active'}, limit=1)
    assert [m['uuid'] for m in p] == [m6] and marker == m6
    assert uuids({'state': 'active'}, limit=5, marker=marker) == [ms[4], ms[3], ms[2]]
    # The state indexes follow every change; a marker whose migration changed state
    # since its page still pages on.
    assert set(inv.index('migrations:state:paused')) == {ms[3], ms[4], m6}
    assert set(inv.index('migrations:active')) == {ms[2], ms[3], ms[4], m6}
    assert set(inv.index('migrations:state:successful')) == {ms[0]}
    p, marker, _ = inv.view('migrations', {'state': 'paused'}, limit=1)
    assert [m['uuid'] for m in p] == [m6] and marker == m6
    aj = str(uuid.uuid4())
    phase(inv, m6, aj, 'abort', 'start')
    assert uuids({'state': 'paused'}, limit=5, marker=marker) == [ms[4], ms[3]]
    assert set(inv.index('migrations:state:running')) == {ms[2], m6}
    phase(inv, m6, aj, 'abort', 'done')
    assert set(inv.index('migrations:active')) == {ms[2], ms[3], ms[4]}
    try:
        inv.view('migrations', {}, marker=UNKNOWN)
        raise AssertionError('an unknown marker accepted')
    except RuntimeError as e:
        assert 'marker: ' in str(e), e
    # Another owner's migration is absent to them; bad parameters refused.
    try:
        inv.view('migration', {'uuid': ms[0], 'owner_uuid': OTHER})
        raise AssertionError('another owner\'s migration shown')
    except RuntimeError as e:
        assert str(e).startswith('REFUSED 404 MigrationNotFound'), e
    assert inv.view('migration', {'uuid': ms[0], 'owner_uuid': OWNER})[0]['uuid'] == ms[0]
    for params, part in (({'state': 'done'}, 'state: expected one of'),
                         ({'owner_uuid': 'x'}, 'owner_uuid: expected a UUID')):
        try:
            inv.view('migrations', params)
            raise AssertionError(f'{params} accepted')
        except RuntimeError as e:
            assert str(e).startswith('REFUSED 409 InvalidArgument') and part in str(e), e
    try:
        inv.view('migration', {'uuid': UNKNOWN})
        raise AssertionError('unknown migration shown')
    except RuntimeError as e:
        assert str(e).startswith('REFUSED 404 MigrationNotFound'), e


@case
def the_watch_starts_from_the_history_and_the_stream(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    w, _, _ = inv.view('migration_watch', {'uuid': m})
    # Not running: the history, then the end event, nothing to follow.
    assert w['follow'] is None and w['lines'][-1] == {'type': 'end', 'phase': 'begin',
                                                       'state': 'paused'}, w
    assert [line['message'] for line in w['lines'][:-1]] == ['making a reservation']
    assert 'secret' not in json.dumps(w)
    job = sync(inv, m, u, done=False)
    w, _, _ = inv.view('migration_watch', {'uuid': u})
    assert w['follow'] == f'migration:{m}:events', w
    last = inv.r.cmd('XREVRANGE', NS + w['follow'], '+', '-', 'COUNT', 1)[0][0]
    assert w['after'] == last, (w['after'], last)
    assert all(line['type'] == 'progress' for line in w['lines']), w['lines']
    assert w['lines'][-1] == inv.mig(m)['progress'], w['lines'][-1]
    # What follows `after` is what happened since: here the end of the sync.
    phase(inv, m, job, 'sync', 'done')
    later = inv.r.cmd('XRANGE', NS + w['follow'], '(' + w['after'], '+')
    evs = [json.loads(f[1]) for _, f in later]
    assert evs[-1] == {'type': 'end', 'phase': 'sync', 'state': 'paused'}, evs
    assert sum(1 for e in evs if e['type'] == 'end') == 1
    # A failed migration ends with its message.
    job = sync(inv, m, u, done=False)
    phase(inv, m, job, 'sync', 'fail', error='boom')
    w, _, _ = inv.view('migration_watch', {'uuid': m})
    assert w['lines'][-1] == {'type': 'end', 'phase': 'sync', 'state': 'failed',
                              'message': 'boom'}, w['lines'][-1]
    try:
        inv.view('migration_watch', {'uuid': m, 'owner_uuid': OTHER})
        raise AssertionError('another owner watched')
    except RuntimeError as e:
        assert str(e).startswith('REFUSED 404 MigrationNotFound'), e


# ---- The way forward from a failed migration (docs/MIGRATION.md "Failure"): a switch
# that failed once it had swapped is switched forward by a new migrate-switch job; one
# that failed before the swap, and a failed begin or sync, are aborted, after which a
# new begin (to another target) works.


def fail_switch_at(inv, m, u, step):
    """A switch job that fails once it reached `step` (3, 5 or 6): its onerror's fail.
    Returns the job's uuid."""
    check_ok(inv, 'switch', u)
    job = str(uuid.uuid4())
    phase(inv, m, job, 'switch', 'start')
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 1, 'vm_state_before': 'running'})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 2})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 3})
    if step >= 5:
        inv.ok('migration_switch', {'migration_uuid': m})
    if step >= 6:
        inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 6})
    phase(inv, m, job, 'switch', 'fail', error='CleanupFailed: the source agent is gone')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase'], rec['switch_step']) == ('failed', 'switch', step), rec
    assert rec['error'] == 'CleanupFailed: the source agent is gone' and rec['finished_timestamp']
    return job


def addresses(inv, u):
    """The VM's NICs (mac, ip, cn_uuid) and their ip: records, sorted by MAC."""
    out = []
    for n in sorted(inv.vm(u)['nics'], key=lambda n: n['mac']):
        ip = inv.hash(f'ip:{NET}:{n["ip"]}')
        out.append((n['mac'], n['ip'], n['cn_uuid'], ip['state'], ip['belongs_to_uuid']))
    return out


@case
def a_switch_failed_after_the_target_started_is_switched_forward(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c1, c2 = inv.committed(S1), inv.committed(S2)
    m = begin(inv, u)
    sync(inv, m, u)
    old = fail_switch_at(inv, m, u, 6)
    swapped = addresses(inv, u)
    assert [a[2] for a in swapped] == [S2, S2] and all(a[3:] == ('taken', u) for a in swapped)
    # The target runs: abort is refused; a sync too; a switch is admitted.
    refused(inv, 'abort', u, 'InvalidState', 'point of no return', 409)
    refused(inv, 'sync', u, 'InvalidState', 'Cannot sync in migration state: failed', 409)
    c = check_ok(inv, 'switch', u)
    assert c['migration_uuid'] == m and c['target_server_uuid'] == S2, c
    job = str(uuid.uuid4())
    rec = phase(inv, m, job, 'switch', 'start')
    assert (rec['state'], rec['phase'], rec['job_uuid']) == ('running', 'switch', job), rec
    assert rec['error'] is None and rec['finished_timestamp'] is None, rec
    assert rec['switch_step'] == 6, rec
    # The new job's steps before the target's start change nothing: the steps at or
    # below switch_step are answered as they are, the swap once made is answered again.
    snap = inv.snapshot()
    for n in (1, 2, 3):
        inv.ok('migration_step', {'migration_uuid': m, 'switch_step': n,
                                  'vm_state_before': 'running'} if n == 1 else
               {'migration_uuid': m, 'switch_step': n})
    again = inv.ok('migration_switch', {'migration_uuid': m})
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 6})
    assert inv.snapshot() == snap, 'the resumed switch changed the record before step 7'
    assert again['vm']['server_uuid'] == S2 and addresses(inv, u) == swapped
    inv.ok('migration_step', {'migration_uuid': m, 'switch_step': 7})
    # The failed job's onerror run late changes nothing: it is not the job in flight.
    snap = inv.snapshot()
    phase(inv, m, old, 'switch', 'fail', error='late')
    assert inv.snapshot() == snap
    phase(inv, m, job, 'switch', 'done')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase'], rec['switch_step']) == ('successful', 'switch', 7), rec
    assert rec['error'] is None and rec['finished_timestamp'], rec
    assert [e['state'] for e in inv.ends(m)][-2:] == ['failed', 'successful'], inv.ends(m)
    # One swap: the same NICs and addresses, capacity moved once.
    assert addresses(inv, u) == swapped
    assert inv.committed(S1) == (c1[0] - 1024, c1[1] - 20480)
    assert inv.committed(S2) == (c2[0] + 1024, c2[1] + 20480)
    assert inv.hash('server:' + S1)['instances'] == '0'
    assert inv.hash('server:' + S2)['instances'] == '1'
    v = inv.vm(u)
    assert v['migrating'] is False and v['server_uuid'] == S2, v
    # A successful migration is not switched again.
    refused(inv, 'switch', u, 'InvalidState', 'Cannot switch in migration state: successful', 409)


@case
def a_switch_failed_at_the_swap_is_switched_forward_or_aborted(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c1, c2 = inv.committed(S1), inv.committed(S2)
    m = begin(inv, u)
    fail_switch_at(inv, m, u, 5)
    # Both ways are open: the target has not started.
    check_ok(inv, 'switch', u)
    check_ok(inv, 'abort', u)
    aj = str(uuid.uuid4())
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    phase(inv, m, aj, 'abort', 'start')
    # An abort taking over: a switch no longer starts.
    phase_refused(inv, m, str(uuid.uuid4()), 'switch', 'start', 'Cannot switch')
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, aj, 'abort', 'done')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('aborted', 'abort'), rec
    v = inv.vm(u)
    assert v['server_uuid'] == S1 and v['nics'] == vm['nics'] and v['migrating'] is False, v
    assert inv.committed(S1) == c1 and inv.committed(S2) == c2


@case
def a_switch_failed_before_the_swap_is_not_switched_forward(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    m = begin(inv, u)
    fail_switch_at(inv, m, u, 3)
    err = refused(inv, 'switch', u, 'InvalidState', 'Cannot switch in migration state: failed', 409)
    assert 'switch step 3' in err['message'] and 'abort this one' in err['message'], err
    snap = inv.snapshot()
    phase_refused(inv, m, str(uuid.uuid4()), 'switch', 'start',
                  'Cannot switch in migration state: failed')
    assert inv.snapshot() == snap
    check_ok(inv, 'abort', u)


@case
def a_failed_begin_is_aborted_and_begun_again_elsewhere(inv):
    vm = make_vm(inv, 1)
    u = vm['uuid']
    c1, c2, c3 = inv.committed(S1), inv.committed(S2), inv.committed(S3)
    m = begin(inv, u, done=False)
    phase(inv, m, m, 'begin', 'fail', error='AgentUnavailable: server cn2 did not answer')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('failed', 'begin'), rec
    assert inv.ends(m)[-1] == {'type': 'end', 'phase': 'begin', 'state': 'failed',
                               'message': 'AgentUnavailable: server cn2 did not answer'}
    # Not retried in place: a sync or switch is refused, a new begin too (it holds the VM).
    refused(inv, 'sync', u, 'InvalidState', 'Cannot sync in migration state: failed', 409)
    refused(inv, 'switch', u, 'InvalidState', 'Cannot switch in migration state: failed', 409)
    refused(inv, 'begin', u, 'MigrationInProgress', 'An active migration already exists', 409)
    assert inv.committed(S2) == (c2[0] + 1024, c2[1] + 20480)
    check_ok(inv, 'abort', u)
    aj = str(uuid.uuid4())
    inv.ok('migration_request', {'migration_uuid': m, 'what': 'abort'})
    phase(inv, m, aj, 'abort', 'start')
    assert inv.mig(m)['finished_timestamp'] is None
    inv.ok('migration_unswitch', {'migration_uuid': m})
    phase(inv, m, aj, 'abort', 'done')
    rec = inv.mig(m)
    assert (rec['state'], rec['phase']) == ('aborted', 'abort') and rec['finished_timestamp'], rec
    assert inv.committed(S2) == c2, 'the failed target still committed'
    assert inv.vm(u)['migrating'] is False
    assert inv.r.cmd('GET', NS + 'migration_active:' + u) is None
    # A new begin to another server.
    m2 = begin(inv, u, target_server_uuid=S3)
    rec = inv.mig(m2)
    assert (rec['state'], rec['target_server_uuid']) == ('paused', S3), rec
    assert inv.committed(S3) == (c3[0] + 1024, c3[1] + 20480) and inv.committed(S1) == c1


case.exit()
