#!/usr/bin/env python3
"""The dc plugin's inventory scripts against a real redis-server, called as the
plugin calls them (dc_scripts.py): the load is idempotent and keeps what is live;
placement follows the rule of docs/DATACENTER.md, honours a pinned server and never
commits more than a server has, 20 places racing for room for 3 included; addresses
are the lowest free ones, never the gateway or a reserved one, and exhaustion names
the network; release gives back exactly what was taken and a re-run takes the same
back; each bad input of a provision is refused by the admission check with its code;
each view pages and filters.

Usage: test_dc_inventory.py BUILD_ROOT
"""
import copy
import json
import re
import sys
import threading

import dc_scripts
from script_cost import Redis

BUILD = sys.argv[1]
OWNER = 'a0000000-0000-4000-8000-000000000001'
OTHER = 'a0000000-0000-4000-8000-000000000002'
S1, S2, S3 = ('50000000-0000-4000-8000-000000000001', '50000000-0000-4000-8000-000000000002',
              '50000000-0000-4000-8000-000000000003')
NET, NET2 = '7e000000-0000-4000-8000-000000000001', '7e000000-0000-4000-8000-000000000002'
PKG, PKG_ZONE = 'b0000000-0000-4000-8000-000000000001', 'b0000000-0000-4000-8000-000000000002'
IMG, IMG_ZONE = 'c0000000-0000-4000-8000-000000000001', 'c0000000-0000-4000-8000-000000000002'
# DOMAIN's package P (102400 MiB of flexible disk space) with each default layout, its
# inflexible twin, and images of 10 GiB (IMG), 90 GiB and 1 TiB.
P, P_REM, P_BOOT, P_FIXED = (f'b0000000-0000-4000-8000-00000000000{i}' for i in (3, 4, 5, 6))
IMG90, IMG1T = 'c0000000-0000-4000-8000-000000000003', 'c0000000-0000-4000-8000-000000000004'

DOC = {
    'servers': [
        {'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 8192, 'disk_mib': 100000,
         'data_root': '/lab/cn1'},
        {'uuid': S2, 'hostname': 'cn2', 'rack': 'r1', 'ram_mib': 8192, 'disk_mib': 100000,
         'data_root': '/lab/cn2'},
        {'uuid': S3, 'hostname': 'cn3', 'rack': 'r2', 'ram_mib': 4096, 'disk_mib': 100000,
         'data_root': '/lab/cn3'},
    ],
    'networks': [
        # The gateway inside the provision range: never handed out.
        {'uuid': NET, 'name': 'external', 'subnet': '203.0.113.0/24', 'gateway': '203.0.113.11',
         'provision_start_ip': '203.0.113.10', 'provision_end_ip': '203.0.113.20',
         'vlan_id': 0, 'mtu': 1500},
        {'uuid': NET2, 'name': 'tiny', 'subnet': '10.9.0.0/29', 'gateway': '10.9.0.1',
         'provision_start_ip': '10.9.0.2', 'provision_end_ip': '10.9.0.3',
         'vlan_id': 9, 'mtu': 9000},
    ],
    'packages': [
        {'uuid': PKG, 'name': 'small', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
         'disk_mib': 20480, 'flexible_disk': True},
        {'uuid': PKG_ZONE, 'name': 'zone', 'brand': 'joyent', 'ram_mib': 512, 'vcpus': 1,
         'disk_mib': 10240, 'flexible_disk': False},
        {'uuid': P, 'name': 'p', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
         'disk_mib': 102400, 'flexible_disk': True},
        {'uuid': P_REM, 'name': 'p-remaining', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
         'disk_mib': 102400, 'flexible_disk': True, 'disks': [{'size': 'remaining'}]},
        {'uuid': P_BOOT, 'name': 'p-boot', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
         'disk_mib': 102400, 'flexible_disk': True, 'quota_mib': 512, 'disks': [{}]},
        {'uuid': P_FIXED, 'name': 'p-fixed', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
         'disk_mib': 102400},
    ],
    'images': [
        {'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 10240, 'file': '/lab/os.img',
         'brand': 'bhyve'},
        {'uuid': IMG_ZONE, 'name': 'base', 'version': '1', 'size_mib': 2048,
         'file': '/lab/base.img', 'brand': 'joyent'},
        {'uuid': IMG90, 'name': 'os90', 'version': '1.0', 'size_mib': 92160,
         'file': '/lab/os90.img', 'brand': 'bhyve'},
        {'uuid': IMG1T, 'name': 'os1t', 'version': '1.0', 'size_mib': 1048576,
         'file': '/lab/os1t.img', 'brand': 'bhyve'},
    ],
}

case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-inv.')


def vm_uuid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def place_args(i, owner=OWNER, ram=1024, disk=20480, server=None, alias=None):
    """A flexible VM of `disk` MiB (what the server commits) on the package small."""
    return {'vm_uuid': vm_uuid(i), 'owner_uuid': owner, 'alias': alias or f'vm{i}',
            'brand': 'bhyve', 'billing_id': PKG, 'image_uuid': IMG, 'ram': ram, 'quota': 0,
            'reservation': disk, 'flexible': True, 'flexible_disk_size': disk,
            'server_uuid': server, 'autoboot': True, 'customer_metadata': {},
            'disks': [{'boot': True, 'size': 10240, 'image': IMG}, {'boot': False, 'size': 10240}]}


def provision(inv, i, owner=OWNER, nets=None, **kw):
    placed = inv.ok('place', place_args(i, owner=owner, **kw))
    nics = inv.ok('nics_provision', {'vm_uuid': vm_uuid(i), 'owner_uuid': owner,
                                     'networks': nets or [{'uuid': NET, 'primary': True}]})
    return placed['server_uuid'], nics['nics']


def committed(inv, server):
    h = inv.hash('server:' + server)
    return int(h['ram_committed_mib']), int(h['disk_committed_mib']), int(h['instances'])


@case
def load_is_idempotent_and_keeps_what_is_live(inv):
    server, nics = provision(inv, 1)
    before = committed(inv, server)
    res = inv.ok('inventory_load', dc_scripts.description(DOC))
    assert res['servers'] == 3 and res['images'] == 4, res
    assert committed(inv, server) == before, (committed(inv, server), before)
    free = inv.r.cmd('ZRANGE', dc_scripts.NS + f'network:{NET}:free', 0, -1)
    assert '3405803786' not in free, 'the taken 203.0.113.10 went back to the pool'
    assert len(free) == 11 - 2, free  # 11 in the range, less the gateway and the taken one
    vm, _, _ = inv.view('vm', {'uuid': vm_uuid(1)})
    assert vm['nics'][0]['ip'] == nics[0]['ip'] == '203.0.113.10', vm
    # A server holding an instance cannot leave the description; an empty one can.
    doc = copy.deepcopy(DOC)
    doc['servers'] = [s for s in doc['servers'] if s['uuid'] != server]
    inv.error('inventory_load', dc_scripts.description(doc), 'InventoryInUse', server)
    assert inv.hash('server:' + server)['hostname'], 'the refused load changed the records'
    doc['servers'] = [s for s in DOC['servers'] if s['uuid'] == server]
    res = inv.ok('inventory_load', dc_scripts.description(doc))
    assert res['servers_dropped'] == 2, res
    servers, _, count = inv.view('servers')
    assert [s['uuid'] for s in servers] == [server] and count == 1, servers


@case
def placement_most_free_ram_then_rack_spread_then_uuid(inv):
    # S1 and S2 (rack r1) tie on free RAM: the lower uuid, S1; then S2 has the most.
    got = [inv.ok('place', place_args(i, disk=1))['server_uuid'] for i in range(1, 9)]
    assert got == [S1, S2] * 4, got
    # All three have 4096 free: the owner has 8 instances in r1, none in r2: S3.
    got = inv.ok('place', place_args(9, disk=1))['server_uuid']
    assert got == S3, got
    # S1 and S2 have the most free RAM again, the same rack: the lower uuid.
    got = inv.ok('place', place_args(10, disk=1))['server_uuid']
    assert got == S1, got
    # Another owner, with nothing anywhere: the most free RAM, S2.
    got = inv.ok('place', place_args(11, owner=OTHER, disk=1))['server_uuid']
    assert got == S2, got


@case
def rack_spread_breaks_a_tie(inv):
    # Make every server have 4096 free: S1 and S2 each take 4096 of another owner.
    inv.ok('place', place_args(1, owner=OTHER, ram=4096, disk=1, server=S1))
    inv.ok('place', place_args(2, owner=OTHER, ram=4096, disk=1, server=S2))
    # OWNER has one instance in r1 (pinned to S1): the tie goes to r2's S3.
    inv.ok('place', place_args(3, ram=1, disk=1, server=S1))
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'destroyed'})
    inv.ok('place', place_args(1 + 100, owner=OTHER, ram=4095, disk=1, server=S1))
    # Free RAM now: S1 4096, S2 4096, S3 4096.
    assert [committed(inv, s)[0] for s in (S1, S2, S3)] == [4096, 4096, 0]
    assert inv.ok('place', place_args(4))['server_uuid'] == S3


@case
def pinned_server_and_no_room(inv):
    assert inv.ok('place', place_args(1, server=S3))['server_uuid'] == S3
    err = inv.error('place', place_args(2, ram=4096, server=S3), 'NoAllocatableServersError', S3)
    assert '4096 MiB of RAM' in err['message'], err
    inv.error('place', place_args(3, ram=9000), 'NoAllocatableServersError',
              'no server has room for 9000 MiB of RAM and 20480 MiB of disk')
    inv.error('place', place_args(4, server='50000000-0000-4000-8000-00000000dead'),
              'ResourceNotFound', 'does not exist')
    assert committed(inv, S3) == (1024, 20480, 1)
    # A re-run gives back what was placed, and commits nothing more.
    again = inv.ok('place', place_args(1, server=S3))
    assert again['server_uuid'] == S3 and again['reused'] is True, again
    assert committed(inv, S3) == (1024, 20480, 1)


@case
def twenty_racing_places_for_room_for_three(inv):
    # Only S3 can take 1300 MiB with 30000 MiB of disk three times (disk 100000).
    for s in (S1, S2):
        inv.r.cmd('HSET', dc_scripts.NS + 'server:' + s, 'ram_committed_mib', 8192)
    results, lock = [], threading.Lock()

    def one(i):
        r = Redis(inv.r.sock.getpeername()[1])
        mine = dc_scripts.Inventory.__new__(dc_scripts.Inventory)
        mine.r, mine.sha = r, inv.sha
        answer = mine.call('place', place_args(i, ram=1300, disk=30000))
        with lock:
            results.append(answer)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 20
    placed = [a for a in results if 'ok' in a]
    refused = [a for a in results if a.get('error', {}).get('code') == 'NoAllocatableServersError']
    assert len(placed) == 3 and len(refused) == 17, results
    ram, disk, n = committed(inv, S3)
    assert (ram, disk, n) == (3900, 90000, 3) and ram <= 4096 and disk <= 100000


@case
def addresses_lowest_free_gateway_and_reserved_skipped_exhaustion(inv):
    _, nics = provision(inv, 1)
    assert nics[0]['ip'] == '203.0.113.10' and nics[0]['primary'] is True, nics
    assert nics[0]['netmask'] == '255.255.255.0' and nics[0]['gateway'] == '203.0.113.11'
    # A reserved address (an operator's record) is skipped too, after a reload.
    inv.r.cmd('HSET', dc_scripts.NS + f'ip:{NET}:203.0.113.12', 'ip', '203.0.113.12',
              'network_uuid', NET, 'state', 'reserved')
    inv.r.cmd('ZADD', dc_scripts.NS + f'network:{NET}:ips', 3405803788, '203.0.113.12')
    inv.ok('inventory_load', dc_scripts.description(DOC))
    _, nics = provision(inv, 2)
    assert nics[0]['ip'] == '203.0.113.13', nics  # .11 gateway, .12 reserved
    macs = {nics[0]['mac']}
    # The tiny network has 2 addresses: the third asks for one too many.
    for i in (3, 4):
        _, nics = provision(inv, i, nets=[{'uuid': NET2}])
        macs.add(nics[0]['mac'])
    assert len(macs) == 3, macs
    inv.ok('place', place_args(5))
    inv.error('nics_provision', {'vm_uuid': vm_uuid(5), 'owner_uuid': OWNER,
                                 'networks': [{'uuid': NET}, {'uuid': NET2}]},
              'SubnetFull', f'network tiny ({NET2})')
    # Nothing of the refused call was taken.
    vm, _, _ = inv.view('vm', {'uuid': vm_uuid(5)})
    assert vm['nics'] == [], vm
    assert inv.hash('network:' + NET)['taken'] == '2'
    # A requested address: taken, or free.
    inv.error('nics_provision', {'vm_uuid': vm_uuid(5), 'owner_uuid': OWNER,
                                 'networks': [{'uuid': NET, 'ip': '203.0.113.10'}]},
              'IpTaken', '203.0.113.10')
    nics = inv.ok('nics_provision', {'vm_uuid': vm_uuid(5), 'owner_uuid': OWNER,
                                     'networks': [{'uuid': NET, 'ip': '203.0.113.20'}]})['nics']
    assert nics[0]['ip'] == '203.0.113.20'
    # A re-run creates nothing twice.
    again = inv.ok('nics_provision', {'vm_uuid': vm_uuid(5), 'owner_uuid': OWNER,
                                      'networks': [{'uuid': NET, 'ip': '203.0.113.20'}]})['nics']
    assert again == nics and inv.hash('network:' + NET)['taken'] == '3'
    # The last MAC of the prefix used: refused before anything is taken.
    inv.r.cmd('SET', dc_scripts.NS + 'mac_seq', 16777215)
    inv.ok('place', place_args(6))
    inv.error('nics_provision', {'vm_uuid': vm_uuid(6), 'owner_uuid': OWNER,
                                 'networks': [{'uuid': NET}]}, 'MacsExhausted', '90:b8:d0')
    assert inv.hash('network:' + NET)['taken'] == '3'


@case
def release_gives_back_exactly_and_retake(inv):
    server, nics = provision(inv, 1, nets=[{'uuid': NET}, {'uuid': NET2, 'primary': True}])
    assert [n['primary'] for n in nics] == [False, True], nics
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running'})
    nic, _, _ = inv.view('nics', {'belongs_to_uuid': vm_uuid(1)})
    assert {n['state'] for n in nic} == {'running'}, nic
    free_before = inv.r.cmd('ZCARD', dc_scripts.NS + f'network:{NET}:free')
    res = inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'failed'})
    assert res == {'released': True, 'state': 'failed'}, res
    assert committed(inv, server) == (0, 0, 0)
    assert inv.r.cmd('ZCARD', dc_scripts.NS + f'network:{NET}:free') == free_before + 1
    assert inv.view('nics')[0] == [] and inv.r.cmd('KEYS', dc_scripts.NS + 'ip:*:10.*') == []
    # Twice: nothing more given back.
    assert inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'failed'})['released'] is False
    assert committed(inv, server) == (0, 0, 0)
    # The re-run (retry_from place): same server, same addresses and MACs.
    server2, nics2 = provision(inv, 1, nets=[{'uuid': NET}, {'uuid': NET2, 'primary': True}])
    assert server2 == server and [(n['ip'], n['mac']) for n in nics2] == \
        [(n['ip'], n['mac']) for n in nics], (nics, nics2)
    assert committed(inv, server) == (1024, 20480, 1)
    vm, _, _ = inv.view('vm', {'uuid': vm_uuid(1)})
    assert vm['state'] == 'provisioning' and vm['allocation']['server_uuid'] == server
    # Destroyed: out of every list but state=destroyed's.
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'destroyed'})
    assert inv.view('vms')[0] == [] and inv.view('vms', {'owner_uuid': OWNER})[0] == []
    assert [v['uuid'] for v in inv.view('vms', {'state': 'destroyed'})[0]] == [vm_uuid(1)]
    inv.error('place', place_args(1), 'InvalidState', 'destroyed')
    inv.error('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running'}, 'InvalidState',
              'destroyed')


def check_args(**over):
    a = {'vm_uuid': vm_uuid(1), 'owner_uuid': OWNER, 'alias': 'web-1', 'package': 'small',
         'image_uuid': IMG, 'networks': [{'uuid': NET}], 'target': f'/provision-{vm_uuid(1)}'}
    a.update(over)
    return a


@case
def provision_check_admits_and_refuses_each_bad_input(inv):
    res = inv.ok('provision_check', check_args())
    assert res['package']['uuid'] == PKG and res['ram'] == 1024 and res['quota'] == 0
    assert res['reservation'] == 20480 and res['flexible_disk_size'] == 20480, res
    assert res['networks'] == [{'uuid': NET, 'primary': True}], res
    assert res['disks'] == [{'boot': True, 'size': 10240, 'image': IMG},
                            {'boot': False, 'size': 10240}], res['disks']
    assert inv.ok('provision_check', check_args(package=PKG))['package']['name'] == 'small'
    E = inv.error
    E('provision_check', check_args(vm_uuid='nope', target='/provision-nope'), 'InvalidArgument',
      'vm_uuid', 422)
    E('provision_check', check_args(owner_uuid=42), 'InvalidArgument', 'owner_uuid', 422)
    E('provision_check', check_args(alias='-bad alias'), 'InvalidArgument', 'alias', 422)
    E('provision_check', check_args(target='/provision-other'), 'InvalidArgument', 'target', 422)
    E('provision_check', check_args(package='huge'), 'ResourceNotFound', 'package huge', 404)
    E('provision_check', check_args(image_uuid=vm_uuid(99)), 'ResourceNotFound',
      f'image {vm_uuid(99)}', 404)
    E('provision_check', check_args(networks=[{'uuid': vm_uuid(98)}]), 'ResourceNotFound',
      f'network {vm_uuid(98)}', 404)
    E('provision_check', check_args(server_uuid=vm_uuid(97)), 'ResourceNotFound',
      f'server {vm_uuid(97)}', 404)
    E('provision_check', check_args(image_uuid=IMG_ZONE), 'InvalidArgument', 'brand joyent', 422)
    E('provision_check', check_args(networks=[]), 'InvalidArgument', 'networks', 422)
    E('provision_check', check_args(networks=[{'uuid': NET, 'ip': '300.1.1.1'}]),
      'InvalidArgument', 'networks[0].ip', 422)
    E('provision_check', check_args(networks=[{'uuid': NET, 'ip': '203.0.113.11'}]), 'IpTaken',
      '203.0.113.11 is reserved', 409)
    E('provision_check', check_args(networks=[{'uuid': NET, 'ip': '203.0.113.99'}]), 'IpTaken',
      'outside the provision range', 409)
    provision(inv, 1)
    E('provision_check', check_args(), 'VmAlreadyExists', vm_uuid(1), 409)
    other = vm_uuid(5)
    E('provision_check', check_args(vm_uuid=other, target=f'/provision-{other}', alias='vm1'),
      'DuplicateAlias', f'vm1 already names vm {vm_uuid(1)}', 409)
    assert inv.ok('provision_check', check_args(vm_uuid=other, target=f'/provision-{other}',
                                                alias='vm1', owner_uuid=OTHER))
    provision(inv, 2, nets=[{'uuid': NET2}])
    provision(inv, 3, nets=[{'uuid': NET2}])
    E('provision_check', check_args(vm_uuid=vm_uuid(4), target=f'/provision-{vm_uuid(4)}',
                                    networks=[{'uuid': NET2}]), 'SubnetFull', 'network tiny', 409)


@case
def vm_check_by_state(inv):
    E = inv.error
    E('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'start', 'target': f'/start-{vm_uuid(1)}'},
      'ResourceNotFound', 'does not exist', 404)
    provision(inv, 1)
    E('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'start', 'target': f'/start-{vm_uuid(1)}'},
      'InvalidState', 'provisioning', 409)
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running'})
    assert inv.ok('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'stop',
                               'target': f'/stop-{vm_uuid(1)}'})['state'] == 'running'
    E('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'stop', 'target': f'/start-{vm_uuid(1)}'},
      'InvalidArgument', 'target', 422)
    E('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'reboot', 'target': 'x'}, 'InvalidArgument',
      'action', 422)
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'destroyed'})
    E('vm_check', {'vm_uuid': vm_uuid(1), 'action': 'delete', 'target': f'/delete-{vm_uuid(1)}'},
      'ResourceNotFound', 'destroyed', 404)


@case
def views_filter_and_page(inv):
    for i in range(1, 8):
        provision(inv, i, owner=OWNER if i % 2 else OTHER, server=S1 if i <= 4 else S2,
                  nets=[{'uuid': NET}])
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running'})
    page, marker, count = inv.view('vms', limit=3)
    assert [v['uuid'] for v in page] == [vm_uuid(i) for i in (1, 2, 3)] and count == 7
    page, marker, _ = inv.view('vms', limit=3, marker=marker)
    assert [v['uuid'] for v in page] == [vm_uuid(i) for i in (4, 5, 6)], page
    page, marker, _ = inv.view('vms', limit=3, marker=marker)
    assert [v['uuid'] for v in page] == [vm_uuid(7)] and marker is None
    page, _, _ = inv.view('vms', limit=2, offset=5)
    assert [v['uuid'] for v in page] == [vm_uuid(6), vm_uuid(7)], page
    assert [v['uuid'] for v in inv.view('vms', {'owner_uuid': OWNER})[0]] == \
        [vm_uuid(i) for i in (1, 3, 5, 7)]
    assert [v['uuid'] for v in inv.view('vms', {'server_uuid': S2})[0]] == \
        [vm_uuid(i) for i in (5, 6, 7)]
    assert [v['uuid'] for v in inv.view('vms', {'state': 'running'})[0]] == [vm_uuid(1)]
    assert [v['uuid'] for v in inv.view('vms', {'alias': 'vm3'})[0]] == [vm_uuid(3)]
    both, m, _ = inv.view('vms', {'owner_uuid': OWNER, 'server_uuid': S2}, limit=1)
    assert [v['uuid'] for v in both] == [vm_uuid(5)] and m == vm_uuid(5)
    both, m, _ = inv.view('vms', {'owner_uuid': OWNER, 'server_uuid': S2}, limit=1, marker=m)
    assert [v['uuid'] for v in both] == [vm_uuid(7)] and m is None, (both, m)
    assert inv.view('vm', {'uuid': vm_uuid(99)})[0] is None
    servers, _, count = inv.view('servers', limit=2)
    assert [s['uuid'] for s in servers] == [S1, S2] and count == 3
    assert servers[0]['ram_committed_mib'] == 4096 and servers[0]['instances'] == 4
    assert inv.view('server', {'uuid': S2})[0]['ram_free_mib'] == 8192 - 3072
    nets, _, _ = inv.view('networks')
    assert nets[0]['uuid'] == NET and nets[0]['taken'] == 7 and nets[0]['free'] == 3, nets
    ips, marker, count = inv.view('network_ips', {'uuid': NET}, limit=3)
    assert [x['ip'] for x in ips] == ['203.0.113.10', '203.0.113.11', '203.0.113.12'] and \
        count == 8, ips
    assert ips[1]['state'] == 'reserved' and ips[0]['belongs_to_uuid'] == vm_uuid(1)
    ips, _, _ = inv.view('network_ips', {'uuid': NET}, limit=3, marker=marker)
    assert [x['ip'] for x in ips] == ['203.0.113.13', '203.0.113.14', '203.0.113.15'], ips
    assert inv.view('network_ips', {'uuid': vm_uuid(99)})[0] is None
    nics, _, count = inv.view('nics', {'cn_uuid': S2})
    assert sorted(n['belongs_to_uuid'] for n in nics) == [vm_uuid(i) for i in (5, 6, 7)]
    nics, _, _ = inv.view('nics', {'belongs_to_uuid': vm_uuid(2)})
    assert len(nics) == 1 and nics[0]['ip'] == '203.0.113.12', nics
    assert [p['name'] for p in inv.view('packages')[0]] == \
        ['small', 'zone', 'p', 'p-remaining', 'p-boot', 'p-fixed']
    assert [m['name'] for m in inv.view('images', limit=1)[0]] == ['os']


# ---- disks at provision (docs/DATACENTER.md "Disks"; DOMAIN 2.2 and 2.6) --------------

MIB_UUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')


def roomy(inv):
    """Servers with room for the 100 GiB and 1 TiB instances of these tests."""
    for s in (S1, S2, S3):
        inv.r.cmd('HSET', dc_scripts.NS + 'server:' + s, 'disk_mib', 4 * 1048576)


def check_disks(inv, i, package, image=IMG, disks=None):
    """provision_check of vm i with `disks` (None: not given)."""
    over = {'vm_uuid': vm_uuid(i), 'target': f'/provision-{vm_uuid(i)}', 'package': package,
            'image_uuid': image, 'alias': f'd{i}'}
    if disks is not None:
        over['disks'] = disks
    return check_args(**over)


def provision_disks(inv, i, package, image=IMG, disks=None, server=None, chk=None):
    """A provision's control-plane steps as provision.json chains them, the agent's
    create stood in for by the paths it names disks by: the VM record at the end. With
    `chk` (the check's result), a retry from place."""
    chk = chk or inv.ok('provision_check', check_disks(inv, i, package, image, disks))
    placed = inv.ok('place', {
        'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'alias': f'd{i}',
        'brand': chk['package']['brand'], 'billing_id': chk['package']['uuid'],
        'image_uuid': chk['image']['uuid'], 'ram': chk['ram'], 'quota': chk['quota'],
        'reservation': chk['reservation'], 'flexible': chk['flexible'],
        'flexible_disk_size': chk['flexible_disk_size'], 'vcpus': chk['vcpus'],
        'server_uuid': server or chk['server_uuid'], 'autoboot': True,
        'customer_metadata': {}, 'disks': chk['disks']})
    made = [{'id': d['id'], 'boot': d['boot'], 'size': d['size'], 'pci_slot': d['pci_slot'],
             'path': f"/lab/{placed['server_uuid']}/{vm_uuid(i)}/disks/"
                     f"disk{d['pci_slot'].split(':')[2]}.img"}
            for d in placed['disks']]
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(i), 'state': 'running', 'disks': made})
    vm, _, _ = inv.view('vm', {'uuid': vm_uuid(i)})
    placed['check'] = chk
    return vm, placed


def sizes(vm):
    return [d['size'] for d in vm['disks']]


def disk_committed_matches(inv):
    """Test 26: each server's committed disk is the sum of allocation.disk of its VMs."""
    per = {S1: 0, S2: 0, S3: 0}
    for v in inv.view('vms')[0]:
        a = v.get('allocation')
        if a:
            per[a['server_uuid']] += a['disk']
            want = (v['quota'] + v['flexible_disk_size'] if v['flexible']
                    else sum(d['size'] for d in v['disks']))
            assert a['disk'] == want, v
    for s, total in per.items():
        assert committed(inv, s)[1] == total, (s, committed(inv, s), total)


@case
def provision_default_layouts_as_domain_tests_1_to_6(inv):
    roomy(inv)
    # 1: P + a 10 GiB image: boot 10240 from the image, data 92160; no space left.
    vm, placed = provision_disks(inv, 1, 'p')
    assert sizes(vm) == [10240, 92160], vm['disks']
    boot, data = vm['disks']
    assert boot['boot'] is True and boot['image'] == IMG and 'image_uuid' not in boot, boot
    assert data['boot'] is False and 'image' not in data, data
    assert [d['pci_slot'] for d in vm['disks']] == ['0:4:0', '0:4:1']
    assert all(MIB_UUID.match(d['id']) for d in vm['disks']) and boot['id'] != data['id']
    assert [d['snapshot_size'] for d in vm['disks']] == [0, 0]
    assert data['path'].endswith(f'{vm_uuid(1)}/disks/disk1.img'), data
    assert vm['flexible'] is True and vm['flexible_disk_size'] == 102400, vm
    assert vm['free_space'] == 0 and vm['quota'] == 0 and vm['allocation']['disk'] == 102400
    # place answered the disks the agent makes: no path, no snapshot_size.
    assert placed['disks'] == [{k: d[k] for k in ('id', 'boot', 'image', 'size', 'pci_slot')
                                if k in d} for d in vm['disks']], placed
    # 3: the package's layout [{"size": "remaining"}]: one boot disk of all the space.
    vm, _ = provision_disks(inv, 3, 'p-remaining')
    assert sizes(vm) == [102400] and vm['disks'][0]['image'] == IMG and vm['free_space'] == 0
    # 4: the package's layout [{}]: the boot disk at the image's size, the rest free;
    # the package's quota_mib is the zone root's own space, committed too.
    vm, _ = provision_disks(inv, 4, 'p-boot')
    assert sizes(vm) == [10240] and vm['free_space'] == 92160, vm
    assert vm['quota'] == 512 and vm['allocation']['disk'] == 512 + 102400, vm
    # 5: a 90 GiB image on P: boot 92160, data 10240.
    vm, _ = provision_disks(inv, 5, 'p', image=IMG90)
    assert sizes(vm) == [92160, 10240] and vm['disks'][0]['image'] == IMG90
    # 6: the inflexible twin: the traditional layout, boot = image, data = disk_mib,
    # the sum committed; no flexible_disk_size, no free_space.
    vm, _ = provision_disks(inv, 6, 'p-fixed')
    assert sizes(vm) == [10240, 102400], vm['disks']
    assert vm['flexible'] is False and vm['quota'] == 102400, vm
    assert 'flexible_disk_size' not in vm and 'free_space' not in vm, vm
    assert vm['allocation']['disk'] == 112640, vm
    vm, _ = provision_disks(inv, 7, 'p-fixed', image=IMG90)
    assert sizes(vm) == [92160, 102400] and vm['allocation']['disk'] == 194560
    chk = inv.ok('provision_check', check_disks(inv, 8, 'p-fixed', image=IMG1T))
    assert [d['size'] for d in chk['disks']] == [1048576, 102400], chk
    assert chk['reservation'] == 1048576 + 102400
    disk_committed_matches(inv)


@case
def provision_disks_asked_as_domain_tests_2_5_7_to_10(inv):
    roomy(inv)
    E = inv.error
    # 2: [{}, 20480, remaining] is 10240, 20480, 71680: the boot disk is charged (the
    # seed's 81920 would hold only for an image of size 0).
    vm, _ = provision_disks(inv, 1, 'p', disks=[{}, {'size': 20480}, {'size': 'remaining'}])
    assert sizes(vm) == [10240, 20480, 71680], vm['disks']
    assert [d['pci_slot'] for d in vm['disks']] == ['0:4:0', '0:4:1', '0:4:2']
    assert vm['free_space'] == 0 and vm['allocation']['disk'] == 102400
    # Asked disks override the package's layout.
    vm, _ = provision_disks(inv, 2, 'p-boot', disks=[{'size': 20480}, {'size': 1024}])
    assert sizes(vm) == [20480, 1024] and vm['free_space'] == 102400 - 21504, vm
    # 5: a 1 TiB image on P: InsufficientSpace, and nothing in the records.
    before = [committed(inv, s) for s in (S1, S2, S3)]
    E('provision_check', check_disks(inv, 3, 'p', image=IMG1T), 'InsufficientSpace',
      'image os1t 1.0 (1048576 MiB) does not fit the 102400 MiB of flexible disk space of '
      'package p', 409)
    E('provision_check', check_disks(inv, 3, 'p-remaining', image=IMG1T), 'InsufficientSpace',
      'image_uuid', 409)
    assert inv.view('vm', {'uuid': vm_uuid(3)})[0] is None
    assert [committed(inv, s) for s in (S1, S2, S3)] == before
    # 7: disks on an inflexible package.
    E('provision_check', check_disks(inv, 3, 'p-fixed', disks=[{}]), 'InvalidArgument',
      'disks: package p-fixed is not a flexible_disk package', 422)
    # 8: nine disks refused; eight take the functions 0:4:0 to 0:4:7.
    E('provision_check', check_disks(inv, 3, 'p', disks=[{}] + [{'size': 1024}] * 8),
      'InvalidArgument', 'disks: at most 8 disks (PCI functions 0:4:0 to 0:4:7), got 9', 422)
    vm, _ = provision_disks(inv, 3, 'p', disks=[{}] + [{'size': 1024}] * 7)
    assert [d['pci_slot'] for d in vm['disks']] == [f'0:4:{n}' for n in range(8)]
    assert len({d['id'] for d in vm['disks']}) == 8 and vm['free_space'] == 102400 - 10240 - 7168
    # 9: a boot disk smaller than its image; one larger than the space.
    E('provision_check', check_disks(inv, 4, 'p', disks=[{'size': 5120}]), 'InvalidArgument',
      'disks[0].size: 5120 MiB is smaller than image os 1.0 (10240 MiB)', 422)
    E('provision_check', check_disks(inv, 4, 'p', disks=[{'size': 204800}]), 'InsufficientSpace',
      'disks: the disks come to 204800 MiB (204800), more than the 102400 MiB', 409)
    # 10: remaining twice.
    E('provision_check', check_disks(inv, 4, 'p', disks=[{}, {'size': 'remaining'},
                                                        {'size': 'remaining'}]),
      'InvalidArgument', 'disks[2].size: "remaining" is also the size of disks[1]', 422)
    disk_committed_matches(inv)


@case
def provision_disks_bad_input_each_refused(inv):
    roomy(inv)
    E = inv.error
    for disks, path, part in [
            ([], 'disks', 'expected a list of 1 to 8'),
            ({'size': 1}, 'disks', 'expected a list of 1 to 8'),
            ('[{}]', 'disks', 'expected a list'),
            ([{}, {}], 'disks[1].size', 'required for a disk other than the first'),
            ([{}, {'size': 0}], 'disks[1].size', 'expected a positive integer of MiB'),
            ([{}, {'size': -20}], 'disks[1].size', 'got -20'),
            ([{}, {'size': 1.5}], 'disks[1].size', 'got 1.5'),
            ([{}, {'size': '20480'}], 'disks[1].size', 'got "20480"'),
            ([{}, {'size': 'rest'}], 'disks[1].size', 'or "remaining"'),
            ([{}, {'size': True}], 'disks[1].size', 'got true'),
            ([{}, {'size': 67108865}], 'disks[1].size', 'more than a disk file holds'),
            ([{}, {'size': 1024, 'pci_slot': '0:4:1'}], 'disks[1].pci_slot', 'unknown key'),
            ([{'image': IMG}], 'disks[0].image', 'unknown key'),
            ([5], 'disks[0]', 'expected an object'),
            ([[1024]], 'disks[0]', 'expected an object')]:
        err = E('provision_check', check_disks(inv, 1, 'p', disks=disks), 'InvalidArgument',
                path + ': ', 422)
        assert err['message'].startswith(path + ': ') and part in err['message'], (disks, err)
    # Sizes that do not fit: remaining that comes to nothing, a sum beyond the space.
    E('provision_check', check_disks(inv, 1, 'p', disks=[{}, {'size': 92160},
                                                        {'size': 'remaining'}]),
      'InsufficientSpace', 'disks[2].size: "remaining" comes to 0 MiB (102400 MiB of flexible '
      'disk space of package p less 102400 MiB of the other disks)', 409)
    E('provision_check', check_disks(inv, 1, 'p', disks=[{}, {'size': 92161}]),
      'InsufficientSpace', 'the disks come to 102401 MiB (10240 + 92161)', 409)
    E('provision_check', check_disks(inv, 1, 'p', image=IMG90,
                                     disks=[{'size': 'remaining'}, {'size': 20480}]),
      'InsufficientSpace', 'disks[0].size: "remaining" comes to 81920 MiB', 409)
    # An explicit null is no disks: the package's layout.
    res = inv.ok('provision_check', check_disks(inv, 1, 'p-boot', disks=None) | {'disks': None})
    assert [d['size'] for d in res['disks']] == [10240], res
    # Nothing was stored by any of them.
    assert inv.view('vms')[0] == [] and [committed(inv, s) for s in (S1, S2, S3)] == \
        [(0, 0, 0)] * 3


@case
def provision_package_layout_faults_name_the_package(inv):
    # A layout the description's checks cannot see (it depends on the image): the
    # refusal names the package's layout, not the request.
    inv.r.cmd('SET', dc_scripts.NS + 'package:' + P_REM, json.dumps(
        dict(DOC['packages'][3], disks=[{'size': 'remaining'}, {'size': 20480}])))
    inv.error('provision_check', check_disks(inv, 1, 'p-remaining', image=IMG90),
              'InsufficientSpace', 'package p-remaining disks[0].size: "remaining" comes to '
              '81920 MiB', 409)
    inv.r.cmd('SET', dc_scripts.NS + 'package:' + P_REM, json.dumps(
        dict(DOC['packages'][3], disks=[{}, {'size': 'lots'}])))
    inv.error('provision_check', check_disks(inv, 1, 'p-remaining'), 'InvalidArgument',
              'package p-remaining disks[1].size: expected a positive integer', 422)


@case
def two_places_with_disk_room_for_one(inv):
    """Test 23: two provisions racing for a server with disk room for one: one placed,
    the other refused; the server never commits more than it has."""
    for s in (S2, S3):
        inv.r.cmd('HSET', dc_scripts.NS + 'server:' + s, 'ram_committed_mib', 8192)
    inv.r.cmd('HSET', dc_scripts.NS + 'server:' + S1, 'disk_mib', 150000)
    chk = inv.ok('provision_check', check_disks(inv, 1, 'p'))
    results, lock = [], threading.Lock()

    def one(i):
        r = Redis(inv.r.sock.getpeername()[1])
        mine = dc_scripts.Inventory.__new__(dc_scripts.Inventory)
        mine.r, mine.sha = r, inv.sha
        args = place_args(i, disk=chk['reservation'])
        args.update(quota=chk['quota'], disks=chk['disks'])
        answer = mine.call('place', args)
        with lock:
            results.append(answer)

    threads = [threading.Thread(target=one, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    placed = [a for a in results if 'ok' in a]
    refused = [a for a in results if a.get('error', {}).get('code') == 'NoAllocatableServersError']
    assert len(placed) == 1 and len(refused) == 1, results
    assert 'no server has room for 1024 MiB of RAM and 102400 MiB of disk' in \
        refused[0]['error']['message'], refused
    assert committed(inv, S1)[1] == 102400 <= 150000
    disk_committed_matches(inv)


@case
def committed_disk_is_the_sum_over_the_vms(inv):
    """Test 26: after provisions of every kind and releases, each server's committed
    disk is the sum of its VMs' allocation.disk (quota + flexible_disk_size for a
    flexible VM, the disks' sizes for an inflexible one)."""
    roomy(inv)
    provision_disks(inv, 1, 'p', server=S1)
    provision_disks(inv, 2, 'p-boot', server=S1)
    provision_disks(inv, 3, 'p-fixed', server=S1)
    _, first = provision_disks(inv, 4, 'p-fixed', image=IMG90, server=S2)
    provision_disks(inv, 5, 'small', server=S2)
    assert committed(inv, S1)[1] == 102400 + 102912 + 112640
    disk_committed_matches(inv)
    inv.ok('release', {'vm_uuid': vm_uuid(2), 'final_state': 'destroyed'})
    inv.ok('release', {'vm_uuid': vm_uuid(4), 'final_state': 'failed'})
    assert committed(inv, S1)[1] == 102400 + 112640 and committed(inv, S2)[1] == 20480
    disk_committed_matches(inv)
    # A failed provision retried from place takes the same amount back, and its disks
    # keep their ids.
    before = inv.view('vm', {'uuid': vm_uuid(4)})[0]['disks']
    again, _ = provision_disks(inv, 4, 'p-fixed', image=IMG90, server=S2, chk=first['check'])
    assert [d['id'] for d in again['disks']] == [d['id'] for d in before]
    assert committed(inv, S2)[1] == 20480 + 194560
    disk_committed_matches(inv)


@case
def mark_merges_the_agents_disks_by_slot(inv):
    roomy(inv)
    chk = inv.ok('provision_check', check_disks(inv, 1, 'p', disks=[{}, {'size': 2048}]))
    args = place_args(1, disk=chk['reservation'])
    args.update(quota=chk['quota'], disks=chk['disks'], flexible_disk_size=102400)
    placed = inv.ok('place', args)
    assert [d['pci_slot'] for d in placed['disks']] == ['0:4:0', '0:4:1']
    rec = inv.view('vm', {'uuid': vm_uuid(1)})[0]
    assert all('path' not in d for d in rec['disks']) and rec['free_space'] == 102400 - 12288
    # The agent answers in another order, with today's image_uuid and no id: the
    # record keeps its ids and image, takes the paths, and stays in slot order.
    made = [{'pci_slot': '0:4:1', 'size': 2048, 'path': '/lab/x/disk1.img', 'boot': False},
            {'pci_slot': '0:4:0', 'size': 10240, 'path': '/lab/x/disk0.img', 'boot': True,
             'image_uuid': IMG}]
    E = inv.error
    E('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running',
                       'disks': [dict(made[0], size=4096), made[1]]}, 'InvalidArgument',
      f'disks: vm {vm_uuid(1)} disk 0:4:1 ({rec["disks"][1]["id"]}) is 2048 MiB in the record '
      'and 4096 MiB on the agent (/lab/x/disk1.img)')
    E('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running', 'disks': made[1:]},
      'InvalidArgument', 'disk 0:4:1 (')
    E('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running',
                       'disks': made + [{'pci_slot': '0:4:2', 'size': 1, 'path': '/lab/x/d2'}]},
      'InvalidArgument', 'the agent made disk 0:4:2 (/lab/x/d2, 1 MiB)')
    after = inv.view('vm', {'uuid': vm_uuid(1)})[0]
    assert after['state'] == 'provisioning' and after['disks'] == rec['disks'], after
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running', 'disks': made})
    vm = inv.view('vm', {'uuid': vm_uuid(1)})[0]
    assert [(d['id'], d['path'], d.get('image')) for d in vm['disks']] == [
        (rec['disks'][0]['id'], '/lab/x/disk0.img', IMG),
        (rec['disks'][1]['id'], '/lab/x/disk1.img', None)], vm['disks']
    assert all('image_uuid' not in d for d in vm['disks']), vm['disks']
    # The reused answer of place is the record's, ids and all.
    again = inv.ok('place', args)
    assert again['reused'] is True and again['disks'] == placed['disks'], again
    # Packages show their disk fields.
    pk = {p['name']: p for p in inv.view('packages')[0]}
    assert pk['p-boot']['quota_mib'] == 512 and pk['p-boot']['disks'] == [{}], pk['p-boot']
    assert pk['p-remaining']['disks'] == [{'size': 'remaining'}], pk['p-remaining']


case.exit()
