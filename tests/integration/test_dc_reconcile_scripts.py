#!/usr/bin/env python3
"""The NIC reconcile's control-plane scripts (dc.net_reconcile, dc.net_reconcile_check)
against a real redis-server, called as the plugin calls them (dc_scripts.py), the
agent's scan written by this file: RFD 58's acceptance (DOMAIN 3.6) 1-8 and 12-15 on
the records, a vanished VM's volume references (X6), a VM that became running after
the scan, a provisioning VM, every refusal with nothing changed.

Usage: test_dc_reconcile_scripts.py BUILD_ROOT
"""
import json
import sys

import dc_scripts

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
S1 = '50000000-0000-4000-8000-000000000001'
S2 = '50000000-0000-4000-8000-000000000002'
PKG = 'b0000000-0000-4000-8000-000000000001'
IMG = 'c0000000-0000-4000-8000-000000000001'
NET1 = 'e0000000-0000-4000-8000-000000000001'
NET2 = 'e0000000-0000-4000-8000-000000000002'
VOL = 'f1000000-0000-4000-8000-000000000001'
NS = dc_scripts.NS
# dc_scripts calls every script at 12:00:00Z: a scan after the VMs were marked.
AFTER = '2026-11-26T12:00:01.000Z'
BEFORE = '2026-11-26T11:59:59.000Z'

DOC = {
    'servers': [{'uuid': s, 'hostname': f'cn{i}', 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 1024000, 'data_root': f'/lab/cn{i}'}
                for i, s in ((1, S1), (2, S2))],
    'networks': [{'uuid': u, 'name': f'net{i}', 'subnet': f'10.{i}.0.0/24',
                  'gateway': f'10.{i}.0.1', 'provision_start_ip': f'10.{i}.0.10',
                  'provision_end_ip': f'10.{i}.0.200', 'vlan_id': i, 'mtu': 1500}
                 for i, u in ((1, NET1), (2, NET2))],
    'packages': [{'uuid': PKG, 'name': 'small', 'brand': 'joyent', 'ram_mib': 1024,
                  'vcpus': 1, 'disk_mib': 10240}],
    'images': [{'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 1024,
                'file': '/lab/os.img', 'brand': 'joyent'}],
}

def vm_uuid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def make_vm(inv, i, server=S1, state='running'):
    """A VM as a provision leaves it: placed on `server`, a NIC on each network, marked
    `state` (provisioning: left as place left it)."""
    inv.ok('place', {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'alias': f'vm{i}',
                     'brand': 'joyent', 'billing_id': PKG, 'image_uuid': IMG, 'ram': 1024,
                     'quota': 10240, 'reservation': 10240, 'server_uuid': server,
                     'autoboot': True, 'customer_metadata': {},
                     'disks': [{'boot': True, 'size': 10240, 'image': IMG}]})
    inv.ok('nics_provision', {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER,
                              'networks': [{'uuid': NET1}, {'uuid': NET2}]})
    if state != 'provisioning':
        inv.ok('vm_set_state', {'vm_uuid': vm_uuid(i), 'state': state})
    return get(inv, 'vm:' + vm_uuid(i))


def get(inv, key):
    t = inv.r.cmd('GET', NS + key)
    return json.loads(t) if t is not None else None


def put(inv, key, doc):
    inv.r.cmd('SET', NS + key, json.dumps(doc))


def macs_of(vm):
    return [n['mac'] for n in vm['nics']]


def scan(server, *instances, at=AFTER):
    """What dc.instances_scan answers, of VM records or of entries as the scan writes
    them (those with do_not_inventory)."""
    out = [x if 'do_not_inventory' in x else
           {'uuid': x['uuid'], 'state': x['state'], 'role': None, 'do_not_inventory': False,
            'nics': macs_of(x)} for x in instances]
    return {'server_uuid': server, 'scanned_at': at, 'instances': out}


def reconcile(inv, server, sc):
    return inv.ok('net_reconcile', {'server_uuid': server, 'scan': sc})


def snapshot(inv):
    """Every record of the namespace: equal snapshots, nothing changed."""
    out = {}
    for k in sorted(inv.r.cmd('KEYS', NS + '*')):
        kind = inv.r.cmd('TYPE', k)
        out[k] = (inv.r.cmd('GET', k) if kind == 'string' else
                  inv.r.cmd('HGETALL', k) if kind == 'hash' else
                  inv.r.cmd('ZRANGE', k, 0, -1, 'WITHSCORES'))
    return out


def ip_free(inv, net, ip):
    n = sum(int(p) << (8 * (3 - i)) for i, p in enumerate(ip.split('.')))
    return (inv.r.cmd('ZSCORE', NS + f'network:{net}:free', n) is not None and
            inv.r.cmd('EXISTS', NS + f'ip:{net}:{ip}') == 0)


def in_index(inv, server, mac):
    return inv.r.cmd('ZSCORE', NS + 'nics:cn:' + server, mac) is not None


EMPTY = {'backfilled': [], 'reaped': [], 'state_fixed': [], 'vanished': []}


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-reconcile.')


@case
def vanished_vm_reaped_others_untouched_second_run_changes_nothing(inv):
    # 1, 12: vm1's directory is gone; vm2 stays.
    vm1, vm2 = make_vm(inv, 1), make_vm(inv, 2)
    before_vm2 = {m: get(inv, 'nic:' + m) for m in macs_of(vm2)}
    server_before = inv.hash('server:' + S1)
    res = reconcile(inv, S1, scan(S1, vm2))
    assert res == dict(EMPTY, reaped=sorted(macs_of(vm1)), vanished=[vm_uuid(1)]), res
    for nic in vm1['nics']:
        assert get(inv, 'nic:' + nic['mac']) is None, nic
        assert ip_free(inv, nic['network_uuid'], nic['ip']), nic
        assert not in_index(inv, S1, nic['mac'])
    gone = get(inv, 'vm:' + vm_uuid(1))
    assert gone['state'] == 'destroyed' and gone['nics'] == [] and gone['allocation'] is None, gone
    assert inv.r.cmd('ZSCORE', NS + 'vms:server:' + S1, vm_uuid(1)) is None
    after = inv.hash('server:' + S1)
    assert int(after['ram_committed_mib']) == int(server_before['ram_committed_mib']) - 1024
    assert int(after['instances']) == int(server_before['instances']) - 1
    assert {m: get(inv, 'nic:' + m) for m in macs_of(vm2)} == before_vm2
    snap = snapshot(inv)
    assert reconcile(inv, S1, scan(S1, vm2)) == EMPTY
    assert snapshot(inv) == snap, 'the second run changed records'


@case
def leaked_nics_reaped_server_and_other_nics_never(inv):
    # 2, 6, 7: NIC records of a VM that never existed; a server and an other NIC.
    ghost = 'f0000000-0000-4000-8000-00000000dead'
    leaked = {'mac': '90:b8:d0:ff:00:01', 'ip': '10.1.0.150', 'network_uuid': NET1,
              'belongs_to_uuid': ghost, 'belongs_to_type': 'zone', 'owner_uuid': OWNER,
              'cn_uuid': S1, 'state': 'running'}
    put(inv, 'nic:' + leaked['mac'], leaked)
    inv.r.cmd('ZADD', NS + 'nics', 0, leaked['mac'])
    inv.r.cmd('ZADD', NS + 'nics:cn:' + S1, 0, leaked['mac'])
    inv.r.cmd('HSET', NS + f'ip:{NET1}:10.1.0.150', 'ip', '10.1.0.150', 'network_uuid', NET1,
              'state', 'taken', 'belongs_to_uuid', ghost, 'belongs_to_type', 'zone')
    inv.r.cmd('ZREM', NS + f'network:{NET1}:free', int(0x0a010096))
    inv.r.cmd('ZADD', NS + f'network:{NET1}:ips', int(0x0a010096), '10.1.0.150')
    special = {}
    for kind, mac in (('server', '90:b8:d0:ff:00:02'), ('other', '90:b8:d0:ff:00:03')):
        special[mac] = {'mac': mac, 'ip': '10.2.0.20' if kind == 'server' else '10.2.0.21',
                        'network_uuid': NET2, 'belongs_to_uuid': ghost if kind == 'other' else S1,
                        'belongs_to_type': kind, 'cn_uuid': S1, 'state': 'provisioning'}
        put(inv, 'nic:' + mac, special[mac])
        inv.r.cmd('ZADD', NS + 'nics:cn:' + S1, 0, mac)
    res = reconcile(inv, S1, scan(S1))
    assert res == dict(EMPTY, reaped=[leaked['mac']],
                       state_fixed=sorted(special)), res
    assert get(inv, 'nic:' + leaked['mac']) is None
    assert ip_free(inv, NET1, '10.1.0.150')
    for mac in special:
        nic = get(inv, 'nic:' + mac)
        assert nic is not None and nic['state'] == 'running', nic
        assert in_index(inv, S1, mac)
    assert reconcile(inv, S1, scan(S1)) == EMPTY


@case
def nics_without_cn_uuid_backfilled_not_reaped_and_state_fixed(inv):
    # 3, 5: vm1 present, its NICs lost cn_uuid (an old record) and one is stuck in
    # provisioning.
    vm1 = make_vm(inv, 1)
    for i, mac in enumerate(macs_of(vm1)):
        nic = get(inv, 'nic:' + mac)
        del nic['cn_uuid']
        nic['state'] = 'provisioning' if i == 0 else 'running'
        put(inv, 'nic:' + mac, nic)
        inv.r.cmd('ZREM', NS + 'nics:cn:' + S1, mac)
    vm = get(inv, 'vm:' + vm_uuid(1))
    for c in vm['nics']:
        del c['cn_uuid']
    put(inv, 'vm:' + vm_uuid(1), vm)
    res = reconcile(inv, S1, scan(S1, vm1))
    assert res == dict(EMPTY, backfilled=sorted(macs_of(vm1)),
                       state_fixed=[macs_of(vm1)[0]]), res
    for mac in macs_of(vm1):
        nic = get(inv, 'nic:' + mac)
        assert nic['cn_uuid'] == S1 and nic['state'] == 'running', nic
        assert in_index(inv, S1, mac)
    # The VM's copies agree (vm_set_state writes them back over the records).
    assert all(c['cn_uuid'] == S1 and c['state'] == 'running'
               for c in get(inv, 'vm:' + vm_uuid(1))['nics'])
    assert reconcile(inv, S1, scan(S1, vm1)) == EMPTY


@case
def nic_without_cn_uuid_of_a_gone_vm_backfilled_then_reaped(inv):
    # 4: backfill before reap, in one run.
    vm1 = make_vm(inv, 1)
    mac = macs_of(vm1)[0]
    nic = get(inv, 'nic:' + mac)
    del nic['cn_uuid']
    put(inv, 'nic:' + mac, nic)
    inv.r.cmd('ZREM', NS + 'nics:cn:' + S1, mac)
    res = reconcile(inv, S1, scan(S1))
    assert res == dict(EMPTY, backfilled=[mac], reaped=sorted(macs_of(vm1)),
                       vanished=[vm_uuid(1)]), res
    assert get(inv, 'nic:' + mac) is None
    for n in vm1['nics']:
        assert ip_free(inv, n['network_uuid'], n['ip']), n


@case
def another_servers_nics_untouched(inv):
    # 8, and 9's rule: S1's reconcile reads S1's index only. vm3 on S2 is gone from
    # S2 too, and its NICs sit in the unfiltered index (nics): S1 leaves them.
    vm3 = make_vm(inv, 3, server=S2)
    vm1 = make_vm(inv, 1)
    snap = {m: get(inv, 'nic:' + m) for m in macs_of(vm3)}
    # Even a directory of vm3 found on S1 (not its server) changes nothing of it.
    assert reconcile(inv, S1, scan(S1, vm1, vm3)) == EMPTY
    assert {m: get(inv, 'nic:' + m) for m in macs_of(vm3)} == snap
    assert all(in_index(inv, S2, m) and not in_index(inv, S1, m) for m in macs_of(vm3))
    assert get(inv, 'vm:' + vm_uuid(3))['state'] == 'running'


@case
def migrating_vm_untouched_on_either_server(inv):
    # 13: vm1 migrates from S1 to S2; its source directory is gone already, the
    # target's is there with do_not_inventory.
    vm1 = make_vm(inv, 1)
    vm = get(inv, 'vm:' + vm_uuid(1))
    vm['migrating'] = True
    put(inv, 'vm:' + vm_uuid(1), vm)
    snap = snapshot(inv)
    assert reconcile(inv, S1, scan(S1)) == EMPTY
    target = {'uuid': vm_uuid(1), 'state': 'stopped', 'role': None, 'do_not_inventory': True,
              'nics': macs_of(vm1)}
    assert reconcile(inv, S2, scan(S2, target)) == EMPTY
    assert snapshot(inv) == snap
    # do_not_inventory alone (no migrating flag) keeps the target's NICs unbackfilled.
    vm['migrating'] = False
    put(inv, 'vm:' + vm_uuid(1), vm)
    snap = snapshot(inv)
    assert reconcile(inv, S2, scan(S2, target)) == EMPTY
    assert snapshot(inv) == snap


@case
def provisioning_and_recently_marked_vms_kept(inv):
    # A provision between its NICs and its directory; a VM marked running after the
    # scan was taken (its directory may have come after the scan).
    make_vm(inv, 1, state='provisioning')
    make_vm(inv, 2)
    snap = snapshot(inv)
    assert reconcile(inv, S1, scan(S1, at=BEFORE)) == dict(EMPTY)
    assert snapshot(inv) == snap
    # Marked at 12:00:00.000 (to the millisecond): a scan of that very millisecond may
    # have missed a directory made just after it, so the VM is kept.
    assert reconcile(inv, S1, scan(S1, at='2026-11-26T12:00:00.000Z')) == EMPTY
    res = reconcile(inv, S1, scan(S1))
    assert res['vanished'] == [vm_uuid(2)], res


@case
def vanished_vm_loses_volume_references(inv):
    # X6: the reference maintenance of a vanished consumer.
    make_vm(inv, 1)
    vm = get(inv, 'vm:' + vm_uuid(1))
    vm['volumes'] = [{'name': 'shared', 'volume_uuid': VOL, 'mountpoint': '/shared',
                      'mode': 'rw', 'type': 'tritonnfs'}]
    put(inv, 'vm:' + vm_uuid(1), vm)
    put(inv, 'volume:' + VOL, {'uuid': VOL, 'owner_uuid': OWNER, 'name': 'shared',
                               'state': 'ready', 'refs': [vm_uuid(1), vm_uuid(9)],
                               'version': 1})
    res = reconcile(inv, S1, scan(S1))
    assert res['vanished'] == [vm_uuid(1)], res
    assert get(inv, 'volume:' + VOL)['refs'] == [vm_uuid(9)]


@case
def vanished_storage_instance_fails_its_volume_and_frees_its_name(inv):
    # sdc-volapi's rule for a storage VM destroyed: a ready volume fails for good (its
    # data is gone) and its name may be made anew; a deleting one is deleted.
    vols = {1: 'ready', 2: 'deleting'}
    for i, state in vols.items():
        vm = make_vm(inv, i)
        vm['internal_metadata'] = {'sdc:system_role': 'nfsvolumestorage'}
        vm['volume_uuid'] = f'f2000000-0000-4000-8000-00000000000{i}'
        put(inv, 'vm:' + vm_uuid(i), vm)
        inv.r.cmd('ZADD', NS + 'vms:role:nfsvolumestorage', 0, vm_uuid(i))
        put(inv, 'volume:' + vm['volume_uuid'],
            {'uuid': vm['volume_uuid'], 'owner_uuid': OWNER, 'name': f'v{i}', 'state': state,
             'share_state': 'running', 'refs': [], 'vm_uuid': vm_uuid(i), 'version': 1})
        inv.r.cmd('HSET', NS + 'volume_names:' + OWNER, f'v{i}', vm['volume_uuid'])
    res = reconcile(inv, S1, scan(S1))
    assert res['vanished'] == [vm_uuid(1), vm_uuid(2)], res
    v1 = get(inv, 'volume:f2000000-0000-4000-8000-000000000001')
    assert (v1['state'], v1['share_state']) == ('failed', 'error'), v1
    assert inv.r.cmd('HGET', NS + 'volume_names:' + OWNER, 'v1') is None
    assert get(inv, 'volume:f2000000-0000-4000-8000-000000000002') is None
    assert inv.r.cmd('HGET', NS + 'volume_names:' + OWNER, 'v2') is None


@case
def release_frees_nics_without_the_reconcile(inv):
    # 15: a delete (dc.release) frees the NICs itself.
    vm1 = make_vm(inv, 1)
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'destroyed'})
    for n in vm1['nics']:
        assert get(inv, 'nic:' + n['mac']) is None
        assert ip_free(inv, n['network_uuid'], n['ip'])
        assert not in_index(inv, S1, n['mac'])
    assert reconcile(inv, S1, scan(S1)) == EMPTY


@case
def bad_requests_refused_nothing_changed(inv):
    # 14's rule at the script: a scan that cannot be trusted changes nothing.
    make_vm(inv, 1)
    snap = snapshot(inv)
    ghost = '50000000-0000-4000-8000-00000000ffff'
    inv.error('net_reconcile', {'server_uuid': ghost, 'scan': scan(ghost)},
              'ResourceNotFound', 'not a server of the inventory')
    inv.error('net_reconcile', {'server_uuid': S1, 'scan': scan(S2)}, 'InvalidArgument',
              'scan.server_uuid')
    inv.error('net_reconcile', {'server_uuid': S1, 'scan': {'server_uuid': S1}},
              'InvalidArgument', 'scan')
    inv.error('net_reconcile', {'server_uuid': S1, 'scan': scan(S1, at='yesterday')},
              'InvalidArgument', 'scan.scanned_at')
    bad = scan(S1)
    bad['instances'] = [{'state': 'running'}]
    inv.error('net_reconcile', {'server_uuid': S1, 'scan': bad}, 'InvalidArgument',
              'scan.instances[0].uuid')
    assert snapshot(inv) == snap


@case
def admission_check(inv):
    def check(params, target):
        return {'params': params, 'target': target}
    ok = inv.ok('net_reconcile_check', check({'server_uuid': S1}, '/net-reconcile-' + S1))
    assert ok == {'server_uuid': S1, 'hostname': 'cn1'}, ok
    # A schedule's job carries schedule_uuid and scheduled_for.
    inv.ok('net_reconcile_check', check({'server_uuid': S2, 'schedule_uuid': 'x',
                                         'scheduled_for': AFTER}, '/net-reconcile-' + S2))
    # The lab's start reconcile says why it runs, so an operator's is not its duplicate.
    inv.ok('net_reconcile_check', check({'server_uuid': S1, 'reason': 'agent-start'},
                                        '/net-reconcile-' + S1))
    inv.error('net_reconcile_check', check({'server_uuid': S1, 'reason': 'Agent start'},
                                           '/net-reconcile-' + S1),
              'InvalidArgument', 'params.reason', 422)
    inv.error('net_reconcile_check', check({'server_uuid': S1, 'force': True},
                                           '/net-reconcile-' + S1),
              'InvalidArgument', 'params.force: unknown parameter', 422)
    inv.error('net_reconcile_check', check({}, '/net-reconcile-'), 'InvalidArgument',
              'params.server_uuid', 422)
    inv.error('net_reconcile_check', check({'server_uuid': 'ABCDEF00-0000-4000-8000-000000000001'}, '/x'),
              'InvalidArgument', 'params.server_uuid: expected a lowercase UUID', 422)
    inv.error('net_reconcile_check', check({'server_uuid': S1}, '/net-reconcile-' + S2),
              'InvalidArgument', 'not "/net-reconcile-' + S2 + '"', 422)
    ghost = '50000000-0000-4000-8000-00000000ffff'
    inv.error('net_reconcile_check', check({'server_uuid': ghost}, '/net-reconcile-' + ghost),
              'ResourceNotFound', ghost, 404)
    inv.error('net_reconcile_check', check([], '/x'), 'InvalidArgument', 'params', 422)


case.exit()
