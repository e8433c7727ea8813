#!/usr/bin/env python3
"""The share states' control-plane scripts (dc.share_states, dc.share_watch_check, and
volume_rules.lua's share_state_shown) against a real redis-server, called as the plugin
calls them (dc_scripts.py), the agent's probe played by this file: a running share
makes a failed volume ready again only when the watch failed it; a dead one makes the
volume failed, error_since the first tick's, and asks every consumer to remount on
every tick; a share is restarted only once an earlier tick saw it dead; volumes in
creating, deleting or rolling_back are never changed; a share stopped on purpose is
`stopped`; the settle step records what started and who remounted; another server's
volumes are left alone; every bad input refused with nothing changed.

Usage: test_dc_share_scripts.py BUILD_ROOT
"""
import json
import sys
import time

import dc_scripts

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
S1 = '50000000-0000-4000-8000-000000000001'
S2 = '50000000-0000-4000-8000-000000000002'
T0, T1, T2, T3 = ('2026-11-26T12:00:00.000Z', '2026-11-26T12:00:05.000Z',
                  '2026-11-26T12:00:10.000Z', '2026-11-26T12:00:15.000Z')

DOC = {
    'servers': [{'uuid': s, 'hostname': h, 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 1024000, 'data_root': '/lab/' + h}
                for s, h in ((S1, 'cn1'), (S2, 'cn2'))],
    'networks': [], 'packages': [], 'images': [],
}


def vol_uuid(i):
    return f'a1000000-0000-4000-8000-{i:012d}'


def storage_uuid(i):
    return f'51000000-0000-4000-8000-{i:012d}'


def consumer_uuid(i):
    return f'c1000000-0000-4000-8000-{i:012d}'


class World:
    """Records written as the volume and provision scripts leave them."""

    def __init__(self, inv):
        self.inv, self.r = inv, inv.r

    def put_volume(self, i, state='ready', share_state='running', refs=(), server=S1,
                   error_since=None):
        v = {'uuid': vol_uuid(i), 'owner_uuid': OWNER, 'name': f'vol{i}', 'type': 'tritonnfs',
             'create_timestamp': T0, 'state': state, 'networks': [], 'snapshots': [],
             'tags': {}, 'billing_id': None, 'refs': list(refs),
             'filesystem_path': f'192.168.128.{200 + i}:/exports/data',
             'vm_uuid': storage_uuid(i), 'size': 10240, 'server_uuid': server,
             'export_path': f'/lab/cn1/{storage_uuid(i)}/export', 'share_state': share_state,
             'share_endpoint': f'nfs://192.168.128.{200 + i}/vol{i}', 'share_probed_at': None,
             'error_since': error_since, 'created_by_job': None, 'job_uuid': None,
             'version': 1}
        self.r.cmd('SET', dc_scripts.NS + 'volume:' + v['uuid'], json.dumps(v))
        self.r.cmd('ZADD', dc_scripts.NS + 'volumes:state:' + state, 0, v['uuid'])
        self.put_vm(storage_uuid(i), server, volume_uuid=v['uuid'],
                    internal_metadata={'sdc:system_role': 'nfsvolumestorage'})
        return v

    def put_vm(self, uuid, server=S1, volumes=(), **extra):
        vm = dict({'uuid': uuid, 'server_uuid': server, 'state': 'running', 'owner_uuid': OWNER,
                   'volumes': [{'name': f'vol{i}', 'volume_uuid': vol_uuid(i),
                                'mountpoint': f'/m{i}', 'mode': 'rw', 'type': 'tritonnfs'}
                               for i in volumes]}, **extra)
        self.r.cmd('SET', dc_scripts.NS + 'vm:' + uuid, json.dumps(vm))

    def volume(self, i):
        t = self.r.cmd('GET', dc_scripts.NS + 'volume:' + vol_uuid(i))
        return json.loads(t) if t else None

    def raw(self, key):
        return self.r.cmd('GET', dc_scripts.NS + key)

    def vm(self, uuid):
        return json.loads(self.raw('vm:' + uuid))

    def in_state(self, state, i):
        return self.r.cmd('ZSCORE', dc_scripts.NS + 'volumes:state:' + state, vol_uuid(i)) \
            is not None

    def apply(self, now, storage=(), consumers=(), server=S1):
        return self.inv.ok('share_states', {'server_uuid': server, 'now': now, 'probe': {
            'server_uuid': server, 'storage': list(storage), 'consumers': list(consumers)}})

    def settle(self, now, started=(), remounted=(), server=S1):
        return self.inv.ok('share_states', {'server_uuid': server, 'now': now,
                                            'started': list(started),
                                            'remounted': list(remounted)})


def seen(i, alive=True, state='running'):
    """A probe's entry for storage instance i."""
    return {'vm_uuid': storage_uuid(i), 'volume_uuid': vol_uuid(i), 'state': state,
            'alive': alive, 'pid': 4242 if alive else None}


def test_running(w):
    # ready and alive: running, probed, nothing asked.
    w.put_volume(1)
    assert w.apply(T1, [seen(1)]) == {'restart': [], 'remount': []}
    v = w.volume(1)
    assert (v['state'], v['share_state'], v['share_probed_at'], v['error_since']) == \
        ('ready', 'running', T1, None), v
    assert v['version'] == 2
    # failed by the watch (error_since set) and alive again: ready, the index moved.
    w.put_volume(2, state='failed', share_state='error', error_since=T0)
    w.apply(T1, [seen(2)])
    v = w.volume(2)
    assert (v['state'], v['share_state'], v['error_since']) == ('ready', 'running', None), v
    assert w.in_state('ready', 2) and not w.in_state('failed', 2)
    # failed at create (no error_since): stays failed whatever its share says.
    w.put_volume(3, state='failed', share_state='error')
    w.apply(T1, [seen(3)])
    v = w.volume(3)
    assert v['state'] == 'failed' and w.in_state('failed', 3), v


def test_dead_then_restart(w):
    w.put_volume(4, refs=[consumer_uuid(1), consumer_uuid(2)])
    w.put_vm(consumer_uuid(1), volumes=[4])
    w.put_vm(consumer_uuid(2), server=S2, volumes=[4])
    # First tick that sees it dead: error, failed, every consumer asked; no restart yet.
    out = w.apply(T1, [seen(4, alive=False)], [{'vm_uuid': consumer_uuid(1), 'mounts_ok': True}])
    assert out == {'restart': [], 'remount': []}, out
    v = w.volume(4)
    assert (v['state'], v['share_state'], v['error_since'], v['share_probed_at']) == \
        ('failed', 'error', T1, T1), v
    assert w.in_state('failed', 4) and not w.in_state('ready', 4)
    for c in (consumer_uuid(1), consumer_uuid(2)):
        assert w.vm(c)['remount_requested_at'] == T1, w.vm(c)
    # The endpoint is kept (the service's name), the path too.
    assert v['share_endpoint'] == 'nfs://192.168.128.204/vol4'
    # An earlier tick saw it: restarted, `starting`; error_since the first tick's; the
    # consumers asked again (continuously while in error, seed 003).
    out = w.apply(T2, [seen(4, alive=False)], [{'vm_uuid': consumer_uuid(1), 'mounts_ok': False}])
    assert out == {'restart': [storage_uuid(4)], 'remount': []}, out
    v = w.volume(4)
    assert (v['state'], v['share_state'], v['error_since']) == ('failed', 'starting', T1), v
    for c in (consumer_uuid(1), consumer_uuid(2)):
        assert w.vm(c)['remount_requested_at'] == T2
    # The restart started it: running, ready again.
    out = w.settle(T2, started=[storage_uuid(4)])
    assert out == {'running': [vol_uuid(4)], 'remounted': []}, out
    v = w.volume(4)
    assert (v['state'], v['share_state'], v['error_since']) == ('ready', 'running', None), v
    assert w.in_state('ready', 4) and not w.in_state('failed', 4)
    # Next tick: alive; the consumer of this server is asked to remount now that every
    # volume it mounts runs; the other server's consumer is that server's watch's.
    out = w.apply(T3, [seen(4)], [{'vm_uuid': consumer_uuid(1), 'mounts_ok': True},
                                  {'vm_uuid': consumer_uuid(2), 'mounts_ok': True}])
    # With where each of its volumes is served now (what the restart points it at).
    assert out == {'restart': [], 'remount': [consumer_uuid(1)],
                   'exports': {vol_uuid(4): f'/lab/cn1/{storage_uuid(4)}/export'}}, out
    out = w.settle(T3, remounted=[consumer_uuid(1), consumer_uuid(2)])
    assert out == {'running': [], 'remounted': [consumer_uuid(1)]}, out
    assert w.vm(consumer_uuid(1))['remounted_at'] == T3
    assert 'remounted_at' not in w.vm(consumer_uuid(2))
    # Remounted since asked: not listed again.
    out = w.apply('2026-11-26T12:00:20.000Z', [seen(4)],
                  [{'vm_uuid': consumer_uuid(1), 'mounts_ok': True}])
    assert out == {'restart': [], 'remount': []}, out
    # A link broken while the volume runs: remade.
    out = w.apply('2026-11-26T12:00:25.000Z', [seen(4)],
                  [{'vm_uuid': consumer_uuid(1), 'mounts_ok': False}])
    assert out == {'restart': [], 'remount': [consumer_uuid(1)],
                   'exports': {vol_uuid(4): f'/lab/cn1/{storage_uuid(4)}/export'}}, out


def test_remount_waits_for_every_volume(w):
    w.put_volume(5)
    w.put_volume(6, refs=[consumer_uuid(3)])
    w.put_vm(consumer_uuid(3), volumes=[5, 6], remount_requested_at=T0)
    out = w.apply(T1, [seen(5), seen(6, alive=False)],
                  [{'vm_uuid': consumer_uuid(3), 'mounts_ok': True}])
    assert out['remount'] == [], out
    out = w.apply(T2, [seen(5), seen(6, alive=False)],
                  [{'vm_uuid': consumer_uuid(3), 'mounts_ok': True}])
    assert out == {'restart': [storage_uuid(6)], 'remount': []}, out
    # The restart failed (export gone): the next tick sees it dead again, restarts again.
    out = w.apply(T3, [seen(6, alive=False)])
    assert out == {'restart': [storage_uuid(6)], 'remount': []}, out
    assert w.volume(6)['error_since'] == T1


def test_busy_untouched(w):
    for i, state in ((7, 'creating'), (8, 'deleting'), (9, 'rolling_back')):
        w.put_volume(i, state=state, share_state='unknown', refs=[consumer_uuid(4)])
        w.put_vm(consumer_uuid(4), volumes=[7, 8, 9])
        before = w.raw('volume:' + vol_uuid(i))
        vm_before = w.raw('vm:' + consumer_uuid(4))
        for now in (T1, T2):
            out = w.apply(now, [seen(i, alive=False)])
            assert out == {'restart': [], 'remount': []}, out
            w.apply(now, [seen(i, state='stopped')])
            w.apply(now, [seen(i)])
        w.settle(T3, started=[storage_uuid(i)])
        assert w.raw('volume:' + vol_uuid(i)) == before, (state, w.raw('volume:' + vol_uuid(i)))
        assert w.raw('vm:' + consumer_uuid(4)) == vm_before


def test_stopped_and_other_server(w):
    w.put_volume(10)
    w.apply(T1, [seen(10, alive=False, state='stopped')])
    v = w.volume(10)
    assert (v['state'], v['share_state'], v['share_probed_at']) == ('ready', 'stopped', T1), v
    # Another server's volume, in a probe of S1 (a storage instance left behind by a
    # move): not changed.
    w.put_volume(11, server=S2)
    before = w.raw('volume:' + vol_uuid(11))
    for now in (T1, T2):
        assert w.apply(now, [seen(11, alive=False)]) == {'restart': [], 'remount': []}
    assert w.raw('volume:' + vol_uuid(11)) == before
    # A storage instance whose volume is gone, or names another storage VM: skipped.
    out = w.apply(T1, [{'vm_uuid': storage_uuid(99), 'volume_uuid': vol_uuid(99),
                        'state': 'running', 'alive': False, 'pid': None},
                       {'vm_uuid': storage_uuid(98), 'volume_uuid': vol_uuid(10),
                        'state': 'running', 'alive': False, 'pid': None}])
    assert out == {'restart': [], 'remount': []}
    assert w.volume(10)['share_state'] == 'stopped'


def test_refusals(w):
    w.put_volume(12)
    before = w.raw('volume:' + vol_uuid(12))
    inv = w.inv
    inv.error('share_states', {'server_uuid': 'cn1', 'probe': {}}, 'InvalidArgument',
              'server_uuid: expected a UUID')
    inv.error('share_states', {'server_uuid': S1, 'now': 'yesterday', 'probe': {}},
              'InvalidArgument', 'now: expected an ISO 8601 UTC time')
    inv.error('share_states', {'server_uuid': S1, 'probe': 'x'}, 'InvalidArgument',
              'probe: expected')
    inv.error('share_states', {'server_uuid': S1, 'probe': {'server_uuid': S2, 'storage': []}},
              'InvalidArgument', 'it is server ' + S2)
    inv.error('share_states', {'server_uuid': S1, 'probe': {'storage': [
        seen(12), {'vm_uuid': '../x', 'state': 'running', 'alive': False}]}},
        'InvalidArgument', 'probe.storage[1].vm_uuid: expected a UUID')
    inv.error('share_states', {'server_uuid': S1, 'probe': {'consumers': [{}]}},
              'InvalidArgument', 'probe.consumers[0].vm_uuid')
    inv.error('share_states', {'server_uuid': S1, 'started': storage_uuid(12)},
              'InvalidArgument', 'started: expected an array')
    inv.error('share_states', {'server_uuid': S1, 'remounted': [7]}, 'InvalidArgument',
              'remounted[0]: expected a UUID')
    # A bad entry after a good one: nothing of the good one written either.
    assert w.raw('volume:' + vol_uuid(12)) == before


def test_watch_check(w):
    inv = w.inv
    target = '/volume-share-watch-' + S1
    assert inv.ok('share_watch_check', {'params': {'server_uuid': S1}, 'target': target}) == \
        {'server_uuid': S1}
    # What a schedule adds to its jobs' params is accepted.
    assert inv.ok('share_watch_check', {'params': {
        'server_uuid': S1, 'schedule_uuid': 'e0000000-0000-4000-8000-000000000001',
        'scheduled_for': T1}, 'target': target}) == {'server_uuid': S1}
    inv.error('share_watch_check', {'params': {'server_uuid': S1, 'every': 5}, 'target': target},
              'InvalidArgument', 'every: unknown param', status=422)
    inv.error('share_watch_check', {'params': {}, 'target': target}, 'InvalidArgument',
              'server_uuid: expected a UUID', status=422)
    inv.error('share_watch_check', {'params': {'server_uuid': S1}, 'target': '/x'},
              'InvalidArgument', 'has the target ' + target, status=422)
    u = '50000000-0000-4000-8000-0000000000ff'
    inv.error('share_watch_check', {'params': {'server_uuid': u},
                                    'target': '/volume-share-watch-' + u},
              'ResourceNotFound', 'server ' + u + ' does not exist', status=404)


def test_share_state_shown(w):
    """The view's rule: `unknown` once the last probe is older than 3 periods."""
    text = dc_scripts.scripts_of(BUILD)['share_watch_check']
    rules = text[:text.index('-- dc.share_watch_check:')]
    body = rules + ('local v = cjson.decode(ARGV[1])\n'
                    'return share_state_shown(v, ARGV[2], tonumber(ARGV[3]))\n')

    def shown(probed, now, every=5, state='running'):
        v = {'share_state': state, 'share_probed_at': probed if probed else None}
        return w.r.cmd('EVAL', body, 1, dc_scripts.NS, json.dumps(v), now, every)
    assert shown(T0, T3) == 'running'                       # 15 s: 3 periods, not older
    assert shown(T0, '2026-11-26T12:00:15.001Z') == 'unknown'
    assert shown(T0, '2026-11-26T12:00:31.000Z', every=10) == 'unknown'
    assert shown(T0, '2026-11-26T12:00:30.000Z', every=10) == 'running'
    assert shown(None, '2027-01-01T00:00:00Z', state='starting') == 'starting'
    # Across a day, a month and a leap year's February.
    assert shown('2028-02-28T23:59:58.000Z', '2028-02-29T00:00:10.000Z') == 'running'
    assert shown('2028-02-28T23:59:58.000Z', '2028-03-01T00:00:10.000Z') == 'unknown'
    assert shown('2026-12-31T23:59:59Z', '2027-01-01T00:00:05Z', state='error') == 'error'

    # As a view calls it: read-only, the time from Redis, the period the watch of the
    # volume's server recorded (here 2 s, so 7 s old is stale, 5 s not).
    w.put_volume(13)
    w.inv.error('share_states', {'server_uuid': S1, 'now': T1, 'every_s': 0, 'probe': {}},
                'InvalidArgument', 'every_s: expected a positive integer')
    w.inv.ok('share_states', {'server_uuid': S1, 'now': T1, 'every_s': 2, 'probe': {}})
    assert w.inv.hash('share_watch:' + S1) == {'every_s': '2', 'probed_at': T1}
    view = rules + ('local v = volume_get(ARGV[1])\n'
                    'v.share_probed_at = ARGV[2]\n'
                    'return share_state_shown(v, tonumber(redis.call(\'TIME\')[1]))\n')
    now = int(w.r.cmd('TIME')[0])

    def iso(t):
        return time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(t))
    assert w.r.cmd('EVAL_RO', view, 1, dc_scripts.NS, vol_uuid(13), iso(now - 5)) == 'running'
    assert w.r.cmd('EVAL_RO', view, 1, dc_scripts.NS, vol_uuid(13), iso(now - 7)) == 'unknown'


def main():
    failures = []
    tests = (test_running, test_dead_then_restart, test_remount_waits_for_every_volume,
             test_busy_untouched, test_stopped_and_other_server, test_refusals,
             test_watch_check, test_share_state_shown)
    for fn in tests:
        with dc_scripts.private_redis('tern-dc-share.') as (_proc, r, _tmp, _cg):
            inv = dc_scripts.Inventory(r, dc_scripts.scripts_of(BUILD))
            inv.ok('inventory_load', dc_scripts.description(DOC))
            try:
                fn(World(inv))
                print(f'ok {fn.__name__}')
            except AssertionError as e:
                failures.append(fn.__name__)
                print(f'FAIL {fn.__name__}: {e}')
    if failures:
        sys.exit(f'{len(failures)} failed: {", ".join(failures)}')


main()
