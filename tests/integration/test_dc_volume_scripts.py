#!/usr/bin/env python3
"""The control-plane scripts of shared volumes (dc.volume_check, dc.volume_claim,
dc.place of a storage instance, dc.volume_ready, dc.volume_fail,
dc.volume_delete_begin, dc.volume_delete_finish, dc.volume_update) and the volume views
against a real redis-server, called as the plugin calls them (dc_scripts.py), the
agent's steps played by this file: every validation rule of RFD 26 (DOMAIN 1.2) with
its code and the words that name the field, and nothing stored after a refusal; 20
racing claims of one name give one volume; delete refused while referenced or reserved,
naming the VMs, and atomic against a reservation racing it; what a deleted volume's
storage instance held given back; a failed create frees its name; rename rules; the
views' filters; storage instances hidden from the instance views and checks.

Usage: test_dc_volume_scripts.py BUILD_ROOT SOURCE_ROOT
"""
import json
import os
import re
import sys
import threading
import uuid

import dc_scripts
from script_cost import Redis

BUILD, SOURCE = sys.argv[1], sys.argv[2]
OWNER = 'a0000000-0000-4000-8000-000000000001'
OTHER = 'a0000000-0000-4000-8000-000000000002'
LONELY = 'a0000000-0000-4000-8000-000000000003'  # owns no fabric network
S1, S2 = '50000000-0000-4000-8000-000000000001', '50000000-0000-4000-8000-000000000002'
# In description order: the admin network (not a fabric), the owner's two fabrics (the
# first of them is the default), another owner's fabric, and a fabric of anyone.
ADMIN, FAB, FAB2, FAB_OTHER, FAB_ANY = (f'7e000000-0000-4000-8000-00000000000{i}'
                                        for i in range(1, 6))
UNKNOWN_NET = '7e000000-0000-4000-8000-0000000000ff'
SIZES = [10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160, 102400, 204800,
         307200, 409600, 512000, 614400, 716800, 819200, 921600, 1024000]
NAME_RE = re.compile(r'^[a-zA-Z0-9][a-zA-Z0-9_.-]+$')


def net(u, name, third, fabric, owners):
    return {'uuid': u, 'name': name, 'subnet': f'10.{third}.0.0/24', 'gateway': f'10.{third}.0.1',
            'provision_start_ip': f'10.{third}.0.10', 'provision_end_ip': f'10.{third}.0.60',
            'vlan_id': third, 'mtu': 1500, 'fabric': fabric, 'owner_uuids': owners}


DOC = {
    'servers': [
        {'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536, 'disk_mib': 4 * 1024000,
         'data_root': '/lab/cn1'},
        {'uuid': S2, 'hostname': 'cn2', 'rack': 'r2', 'ram_mib': 32768, 'disk_mib': 4 * 1024000,
         'data_root': '/lab/cn2'},
    ],
    'networks': [
        net(ADMIN, 'admin', 1, False, []),
        net(FAB2, 'fabric-b', 2, True, [OWNER]),  # uuid order differs from description order
        net(FAB, 'fabric-a', 3, True, [OWNER]),
        net(FAB_OTHER, 'fabric-other', 4, True, [OTHER]),
        net(FAB_ANY, 'fabric-any', 5, True, []),
    ],
    'packages': [],
    'images': [],
}
# LONELY's only fabric would be FAB_ANY: a description without it is used for him.

class Scripts(dc_scripts.Inventory):
    """dc_scripts.Inventory, with ARGV[3] (fresh UUIDs) drawn per call, the view
    refusals ("REFUSED <status> <code> <message>") returned, and the records read."""

    def call(self, name, args):
        uuids = json.dumps([str(uuid.uuid4()) for _ in range(8)])
        reply = self.r.cmd('EVALSHA', self.sha[name], 1, dc_scripts.NS, json.dumps(args),
                           '2026-11-26T12:00:00.000Z', uuids)
        return json.loads(reply)

    def view_refused(self, name, params, status, code, part):
        try:
            got = self.view(name, params)
        except RuntimeError as e:
            text = str(e)
            want = f'REFUSED {status} {code} '
            assert text.startswith(want) and part in text, f'view {name} {params}: {text}'
            return
        raise AssertionError(f'view {name} {params}: expected {code}, got {got}')

    def volume(self, u):
        t = self.r.cmd('GET', dc_scripts.NS + 'volume:' + u)
        return json.loads(t) if t else None

    def vm(self, u):
        t = self.r.cmd('GET', dc_scripts.NS + 'vm:' + u)
        return json.loads(t) if t else None

    def names(self, owner):
        return self.hash('volume_names:' + owner)

    def index(self, key):
        return self.r.cmd('ZRANGE', dc_scripts.NS + key, 0, -1)


def lua_source(stem):
    with open(os.path.join(SOURCE, 'tasks', 'dc', 'lua', stem + '.lua'), encoding='utf-8') as f:
        return f.read()


# What a provision's volumes step and refs step do, with the shared helpers of
# volume_rules.lua (those steps are not this file's subject): a reservation on a volume
# that is creating or ready, refused otherwise; a reference.
RESERVE = '''
local a = cjson.decode(ARGV[1])
local v = volume_get(a.volume_uuid)
if not v then return refuse(404, 'VolumeNotFound', 'gone') end
if v.state ~= 'ready' and v.state ~= 'creating' then
  return refuse(409, 'VolumeNotReady', 'volume is ' .. v.state)
end
reservation_add({uuid = a.uuid, vm_uuid = a.vm_uuid, job_uuid = a.job_uuid,
  owner_uuid = v.owner_uuid, volume_name = v.name, volume_uuid = v.uuid,
  create_timestamp = ARGV[2]})
return ok({reserved = true})
'''
REFERENCE = '''
local a = cjson.decode(ARGV[1])
return ok(volume_refs_add(a.volume_uuid, a.vm_uuid))
'''


def test_scripts():
    head = lua_source('prelude') + lua_source('volume_rules')
    return {'test_reserve': head + RESERVE, 'test_reference': head + REFERENCE}


def vuuid():
    return str(uuid.uuid4())


def target(action, volume_uuid):
    return f'/volume-{action}-{volume_uuid}'


def check(inv, action, params, tgt=None):
    return inv.call('volume_check', {'action': action, 'params': params,
                                     'target': tgt or target(action, params.get('volume_uuid'))})


def check_ok(inv, action, params):
    got = check(inv, action, params)
    assert 'ok' in got, f'volume_check {action} {params}: {got}'
    return got['ok']


def check_refused(inv, action, params, code, part, status):
    got = check(inv, action, params)
    err = got.get('error')
    assert err is not None, f'volume_check {action} {params}: expected {code}, got {got}'
    assert err['code'] == code and part in err['message'] and err['status'] == status, \
        f'volume_check {action} {params}: {err}'
    return err


def claim_args(c, job):
    return {'volume_uuid': c['volume_uuid'], 'owner_uuid': c['owner_uuid'], 'name': c['name'],
            'size': c['size'], 'type': c['type'], 'networks': c['networks'], 'tags': c['tags'],
            'storage_vm_uuid': c['storage_vm_uuid'], 'job_uuid': job}


def place_args(claimed, c):
    v = claimed['volume']
    return {'vm_uuid': claimed['storage_vm_uuid'], 'owner_uuid': v['owner_uuid'],
            'role': 'nfsvolumestorage', 'volume_uuid': v['uuid'], 'alias': claimed['alias'],
            'package_name': claimed['package_name'], 'ram': 256, 'quota': v['size'],
            'reservation': v['size'], 'flexible': False, 'disks': [],
            'server_uuid': c['server_uuid']}


def create(inv, owner=OWNER, until='ready', **params):
    """A volume-create job as the workflow runs it, to step `until` (claim, place,
    nics or ready). Returns (volume record, check answer, job uuid)."""
    p = dict({'volume_uuid': vuuid(), 'owner_uuid': owner}, **params)
    c = check_ok(inv, 'create', p)
    job = vuuid()
    claimed = inv.ok('volume_claim', claim_args(c, job))
    if until != 'claim':
        inv.ok('place', place_args(claimed, c))
    if until in ('nics', 'ready'):
        inv.ok('nics_provision', {'vm_uuid': claimed['storage_vm_uuid'], 'owner_uuid': owner,
                                  'networks': claimed['networks']})
    if until == 'ready':
        inv.ok('volume_ready', {'volume_uuid': p['volume_uuid'],
                                'vm_uuid': claimed['storage_vm_uuid'], 'state': 'running',
                                'job_uuid': job})
    return inv.volume(p['volume_uuid']), c, job


def delete(inv, v, force=None):
    """A volume-delete job: check, begin, (the agent's destroy), finish."""
    p = {'volume_uuid': v['uuid'], 'owner_uuid': v['owner_uuid']}
    if force is not None:
        p['force'] = force
    check_ok(inv, 'delete', p)
    job = vuuid()
    begun = inv.ok('volume_delete_begin', dict(p, force=force is True, job_uuid=job))
    assert inv.volume(v['uuid'])['state'] == 'deleting'
    return begun, inv.ok('volume_delete_finish', {'volume_uuid': v['uuid'],
                                                  'owner_uuid': v['owner_uuid'], 'job_uuid': job})


def reserve(inv, v, vm, job=None):
    return inv.call('test_reserve', {'uuid': vuuid(), 'volume_uuid': v['uuid'], 'vm_uuid': vm,
                                     'job_uuid': job or vuuid()})


def server(inv, s):
    h = inv.hash('server:' + s)
    return int(h['ram_committed_mib']), int(h['disk_committed_mib']), int(h['instances'])


def network_free(inv, n):
    return int(inv.r.cmd('ZCARD', dc_scripts.NS + 'network:' + n + ':free'))


def make_scripts(r, scripts):
    """The Scripts of a case: the plugin's scripts and this test's own."""
    inv = Scripts(r, dict(scripts, **test_scripts()))
    inv.port = r.sock.getpeername()[1]
    return inv


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-volume.', make=make_scripts)


def nothing_stored(inv):
    assert inv.index('volumes') == [], inv.index('volumes')
    assert inv.r.cmd('KEYS', dc_scripts.NS + 'volume_names:*') == []


@case
def names_follow_the_rule(inv):
    # DOMAIN 1.6 test 5.
    for name in ('a', '_ab', '-ab', '.ab', 'a b', 'a/b', 'é1', 'x' * 257, '', 'ab\n'):
        check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': name},
                      'InvalidArgument', 'name: ', 422)
    for name in ('ab', 'a.b-c_d', 'x' * 256, '0-9'):
        c = check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': name})
        assert c['name'] == name, c
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': 12},
                  'InvalidArgument', 'name: expected a string', 422)
    nothing_stored(inv)
    # The claim checks the rule again: a name the check never saw is refused there too.
    c = check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER})
    inv.error('volume_claim', dict(claim_args(c, vuuid()), name='-x'), 'InvalidArgument', 'name')
    nothing_stored(inv)


@case
def sizes_are_the_nineteen_never_rounded(inv):
    # DOMAIN 1.6 test 2.
    c = check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'size': 20480})
    assert c['size'] == 20480 and c['package_name'] == 'sdc_volume_nfs_20', c
    assert check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER})['size'] == 10240
    err = check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                        'size': 21504},
                        'VolumeSizeNotAvailable', 'Volume size not available', 409)
    listed = [int(s) for s in re.findall(r'\d+', err['message'].split('sizes:')[1])]
    assert listed == SIZES, listed
    for bad in (0, -1, '10', 1.5, True, [10240]):
        check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'size': bad},
                      'InvalidArgument', 'size: expected a positive integer', 422)
    nothing_stored(inv)


@case
def type_uuids_tags_target_and_unknown_params(inv):
    # DOMAIN 1.6 test 10.
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                  'type': 'tritonebs'}, 'InvalidArgument', 'type: ', 422)
    assert check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                    'type': 'tritonnfs'})['type'] == 'tritonnfs'
    check_refused(inv, 'create', {'volume_uuid': 'nope', 'owner_uuid': OWNER},
                  'InvalidArgument', 'volume_uuid: expected a UUID', 422)
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': None},
                  'InvalidArgument', 'owner_uuid: expected a UUID', 422)
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'labels': {}},
                  'InvalidArgument', 'labels: volume-create takes no such parameter', 422)
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                  'tags': {'a': {'b': 1}}}, 'InvalidArgument', 'tags: tag "a"', 422)
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'tags': 'x'},
                  'InvalidArgument', 'tags: expected an object', 422)
    u = vuuid()
    got = check(inv, 'create', {'volume_uuid': u, 'owner_uuid': OWNER}, tgt='/volume-create-x')
    assert got['error']['code'] == 'InvalidArgument' and 'target' in got['error']['message'], got
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                  'server_uuid': '50000000-0000-4000-8000-0000000000ff'},
                  'ResourceNotFound', 'server_uuid: server', 404)
    nothing_stored(inv)


@case
def networks_are_the_owners_fabrics(inv):
    # DOMAIN 1.6 test 9; the default network.
    def p(**kw):
        return dict({'volume_uuid': vuuid(), 'owner_uuid': OWNER}, **kw)
    check_refused(inv, 'create', p(networks=[ADMIN]), 'InvalidArgument',
                  f'networks[0]: network admin ({ADMIN}) is not a fabric network', 422)
    check_refused(inv, 'create', p(networks=[FAB, FAB_OTHER]), 'InvalidArgument',
                  f'networks[1]: network fabric-other ({FAB_OTHER}) is not a fabric network of '
                  f'owner {OWNER}', 422)
    check_refused(inv, 'create', p(networks=[UNKNOWN_NET]), 'ResourceNotFound',
                  f'networks[0]: network {UNKNOWN_NET} does not exist', 404)
    check_refused(inv, 'create', p(networks=[FAB, FAB]), 'InvalidArgument',
                  'networks[1]: network', 422)
    for bad in ([], 'x', [7], {'a': FAB}):
        check_refused(inv, 'create', p(networks=bad), 'InvalidArgument', 'networks', 422)
    # Another owner may use his own fabric; anyone may use a fabric without owners.
    assert check_ok(inv, 'create', dict(p(networks=[FAB_OTHER]), owner_uuid=OTHER))['networks'] \
        == [{'uuid': FAB_OTHER}]
    assert check_ok(inv, 'create', p(networks=[FAB_ANY, FAB2]))['networks'] == \
        [{'uuid': FAB_ANY}, {'uuid': FAB2}]
    # The default: the owner's first fabric in the description's order (FAB2 comes before
    # FAB there, after it by uuid).
    assert check_ok(inv, 'create', p())['networks'] == [{'uuid': FAB2}]
    assert check_ok(inv, 'create', dict(p(), owner_uuid=OTHER))['networks'] == \
        [{'uuid': FAB_OTHER}]
    nothing_stored(inv)
    # An owner with no fabric of his own (and no fabric of anyone's in the description).
    inv.ok('inventory_load', dc_scripts.description(dict(DOC, networks=DOC['networks'][:4])))
    check_refused(inv, 'create', dict(p(), owner_uuid=LONELY), 'InvalidArgument',
                  f'networks: owner {LONELY} has no fabric network', 422)


@case
def a_volume_is_created_with_its_storage_instance(inv):
    # DOMAIN 1.6 test 1, on the records.
    ram0, disk0, n0 = server(inv, S2)
    free0 = network_free(inv, FAB2)
    v, c, _ = create(inv, name='wp-uploads', server_uuid=S2, tags={'env': 'prod'})
    assert v['state'] == 'ready' and v['size'] == 10240 and v['type'] == 'tritonnfs', v
    assert v['share_state'] == 'running' and v['server_uuid'] == S2 and v['job_uuid'] is None, v
    assert v['networks'] == [FAB2] and v['refs'] == [] and v['snapshots'] == [], v
    assert v['tags'] == {'env': 'prod'} and v['billing_id'] is None, v
    assert v['filesystem_path'] == '10.2.0.10:/exports/data', v
    assert v['share_endpoint'] == 'nfs://10.2.0.10/wp-uploads', v
    assert v['export_path'] == f'/lab/cn2/{v["vm_uuid"]}/export', v
    assert v['vm_uuid'] == c['storage_vm_uuid'] and v['version'] >= 2, v
    vm = inv.vm(v['vm_uuid'])
    assert vm['alias'] == f'volume-wp-uploads-{v["uuid"]}', vm
    assert vm['brand'] == 'joyent-minimal' and vm['ram'] == 256 and vm['quota'] == 10240, vm
    assert vm['vcpus'] == 1 and vm['image_uuid'] is None and vm['billing_id'] is None, vm
    assert vm['package_name'] == 'sdc_volume_nfs_10' and vm['volume_uuid'] == v['uuid'], vm
    assert vm['internal_metadata'] == {'sdc:system_role': 'nfsvolumestorage'}, vm
    assert vm['disks'] == [] and vm['state'] == 'running', vm
    assert vm['allocation']['ram'] == 256 and vm['allocation']['disk'] == 10240, vm
    assert [n['state'] for n in vm['nics']] == ['running'], vm
    assert inv.index('vms:role:nfsvolumestorage') == [v['vm_uuid']]
    assert server(inv, S2) == (ram0 + 256, disk0 + 10240, n0 + 1)
    assert network_free(inv, FAB2) == free0 - 1
    assert inv.names(OWNER) == {'wp-uploads': v['uuid']}
    assert inv.index('volumes:state:ready') == [v['uuid']]
    # The steps run again answer as they did and change nothing.
    before = inv.volume(v['uuid'])
    again = inv.ok('volume_ready', {'volume_uuid': v['uuid'], 'vm_uuid': v['vm_uuid'],
                                    'state': 'running', 'job_uuid': 'j'})
    assert again == before == inv.volume(v['uuid']), again
    # disks [] is a storage instance's only: a VM of no role needs its disks.
    inv.error('place', {'vm_uuid': vuuid(), 'owner_uuid': OWNER, 'ram': 256, 'quota': 1,
                        'reservation': 1, 'disks': []}, 'InvalidArgument', 'disks: expected')
    inv.error('place', {'vm_uuid': vuuid(), 'owner_uuid': OWNER, 'ram': 256, 'quota': 1,
                        'reservation': 1, 'disks': [], 'role': 'web'}, 'InvalidArgument',
              'role: expected "nfsvolumestorage"')


@case
def a_claim_run_again_or_adopting_a_provisions_volume(inv):
    c = check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': 'db'})
    job = vuuid()
    first = inv.ok('volume_claim', claim_args(c, job))
    assert inv.ok('volume_claim', claim_args(c, job)) == first
    inv.error('volume_claim', claim_args(c, vuuid()), 'VolumeAlreadyExists', c['volume_uuid'])
    check_refused(inv, 'create', {'volume_uuid': c['volume_uuid'], 'owner_uuid': OWNER},
                  'VolumeAlreadyExists', c['volume_uuid'], 409)
    # A volume a provision's volumes step wrote (creating, no job, its name claimed).
    u = vuuid()
    inv.r.cmd('HSET', dc_scripts.NS + 'volume_names:' + OWNER, 'docker-vol', u)
    inv.r.cmd('SET', dc_scripts.NS + 'volume:' + u, json.dumps(
        {'uuid': u, 'owner_uuid': OWNER, 'name': 'docker-vol', 'type': 'tritonnfs',
         'state': 'creating', 'networks': [FAB], 'size': 10240, 'refs': [], 'snapshots': [],
         'tags': {}, 'vm_uuid': None, 'job_uuid': None, 'created_by_job': 'p1', 'version': 1}))
    c = check_ok(inv, 'create', {'volume_uuid': u, 'owner_uuid': OWNER, 'name': 'docker-vol',
                                 'networks': [FAB]})
    got = inv.ok('volume_claim', claim_args(c, 'j2'))
    assert got['volume']['created_by_job'] == 'p1' and got['volume']['job_uuid'] == 'j2', got
    assert got['storage_vm_uuid'] == c['storage_vm_uuid'] == got['volume']['vm_uuid'], got


@case
def twenty_racing_claims_of_one_name_make_one_volume(inv):
    # DOMAIN 1.6 test 7: separate connections, released together.
    checks = [check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER,
                                       'name': 'race'}) for _ in range(20)]
    go = threading.Barrier(20)
    answers = [None] * 20

    def claim(k):
        conn = Redis(inv.port)
        mine = Scripts.__new__(Scripts)
        mine.r, mine.sha = conn, inv.sha
        go.wait(timeout=30)
        answers[k] = mine.call('volume_claim', claim_args(checks[k], vuuid()))
        conn.sock.close()

    threads = [threading.Thread(target=claim, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    won = [a for a in answers if a and 'ok' in a]
    lost = [a for a in answers if a and 'error' in a]
    assert len(won) == 1 and len(lost) == 19, f'{len(won)} claims won, {len(lost)} lost'
    assert all(a['error']['code'] == 'VolumeAlreadyExists' for a in lost), lost
    winner = won[0]['ok']['volume']['uuid']
    assert inv.index('volumes') == [winner] and inv.names(OWNER) == {'race': winner}
    # Another owner may use the name.
    v, _, _ = create(inv, owner=OTHER, name='race', until='claim')
    assert v['state'] == 'creating' and inv.names(OTHER) == {'race': v['uuid']}
    # The owner's admission now refuses it (DOMAIN 1.6 test 6).
    check_refused(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': 'race'},
                  'VolumeAlreadyExists', 'Volume with name race already exists', 409)


@case
def generated_names_match_the_rule_and_differ(inv):
    # DOMAIN 1.6 test 8.
    a, _, _ = create(inv, until='claim')
    b, _, _ = create(inv, until='claim')
    for v in (a, b):
        assert re.match(r'^vol-[0-9a-f]{8}$', v['name']) and NAME_RE.match(v['name']), v
    assert a['name'] != b['name'] and inv.names(OWNER) == {a['name']: a['uuid'],
                                                           b['name']: b['uuid']}


@case
def a_failed_create_gives_back_and_frees_its_name(inv):
    before = server(inv, S1)
    free0 = network_free(inv, FAB2)
    v, c, job = create(inv, name='flaky', server_uuid=S1, until='nics')
    assert server(inv, S1) != before
    # The onerror: destroy (the agent's), release of the storage instance, fail.
    inv.ok('release', {'vm_uuid': c['storage_vm_uuid'], 'final_state': 'failed'})
    got = inv.ok('volume_fail', {'volume_uuid': v['uuid'], 'job_uuid': job})
    assert got['failed'] is True
    v = inv.volume(v['uuid'])
    assert v['state'] == 'failed' and v['share_state'] == 'error' and v['job_uuid'] is None, v
    assert inv.names(OWNER) == {} and inv.index('volumes:state:failed') == [v['uuid']]
    assert server(inv, S1) == before and network_free(inv, FAB2) == free0
    # The name is free for a new create; the failed record stays.
    w, _, _ = create(inv, name='flaky')
    assert w['state'] == 'ready' and inv.volume(v['uuid'])['state'] == 'failed'
    # volume_fail of another job, or of a volume that is ready, changes nothing.
    assert inv.ok('volume_fail', {'volume_uuid': w['uuid'], 'job_uuid': 'x'})['failed'] is False
    assert inv.volume(w['uuid'])['state'] == 'ready'
    assert inv.ok('volume_fail', {'volume_uuid': vuuid(), 'job_uuid': 'x'}) == {'failed': False}
    # A failed volume is deleted like a ready one.
    delete(inv, inv.volume(v['uuid']))
    assert inv.volume(v['uuid']) is None and inv.index('volumes:state:failed') == []


@case
def delete_gives_back_the_storage_instance(inv):
    # DOMAIN 1.6 test 15's end: the volume gone, the instance's capacity, NIC and IP back.
    ram0, disk0, n0 = server(inv, S1)
    free0, free0b = network_free(inv, FAB), network_free(inv, FAB_ANY)
    v, _, _ = create(inv, name='gone', networks=[FAB, FAB_ANY], server_uuid=S1, size=1024000)
    vm = inv.vm(v['vm_uuid'])
    macs = [n['mac'] for n in vm['nics']]
    assert len(macs) == 2 and server(inv, S1) == (ram0 + 256, disk0 + 1024000, n0 + 1)
    begun, fin = delete(inv, v)
    assert begun['server_uuid'] == S1 and begun['vm_uuid'] == v['vm_uuid'], begun
    assert fin == {'removed': True, 'vm_uuid': v['vm_uuid'], 'released': True}, fin
    assert inv.volume(v['uuid']) is None and inv.names(OWNER) == {}
    for k in ('volumes', 'volumes:owner:' + OWNER, 'volumes:state:deleting', 'vms:role:nfsvolumestorage'):
        assert inv.index(k) == [], k
    assert server(inv, S1) == (ram0, disk0, n0)
    assert network_free(inv, FAB) == free0 and network_free(inv, FAB_ANY) == free0b
    for m in macs:
        assert inv.r.cmd('GET', dc_scripts.NS + 'nic:' + m) is None
    assert inv.r.cmd('KEYS', dc_scripts.NS + 'ip:' + FAB + ':10.3.0.1?') == []
    vm = inv.vm(v['vm_uuid'])
    assert vm['state'] == 'destroyed' and vm['nics'] == [] and vm['allocation'] is None, vm
    # finish run again: nothing left to do.
    assert inv.ok('volume_delete_finish', {'volume_uuid': v['uuid'], 'owner_uuid': OWNER}) == \
        {'removed': False}
    # A delete of a volume whose storage instance never reached a server (failed at
    # claim): the destroy step's fallback finds nothing placed.
    w, _, job = create(inv, name='never', until='claim')
    inv.ok('volume_fail', {'volume_uuid': w['uuid'], 'job_uuid': job})
    p = {'volume_uuid': w['uuid'], 'owner_uuid': OWNER}
    begun = inv.ok('volume_delete_begin', dict(p, job_uuid='d'))
    assert begun['server_uuid'] is None, begun
    assert inv.ok('volume_check', {'action': 'unplaced', 'params': p})['placed'] is False
    inv.ok('volume_delete_finish', dict(p, job_uuid='d'))
    assert inv.volume(w['uuid']) is None
    # One that was placed is not "unplaced": its destroy must have run.
    x, _, _ = create(inv, name='placed')
    inv.error('volume_check', {'action': 'unplaced', 'params': {'volume_uuid': x['uuid'],
                                                                'owner_uuid': OWNER}},
              'StorageNotDestroyed', 'was not destroyed')


@case
def delete_is_refused_while_in_use_unless_forced(inv):
    # DOMAIN 1.6 tests 12, 15, 16.
    v, _, _ = create(inv, name='shared')
    vm1, vm2, vm3 = (f'f0000000-0000-4000-8000-00000000000{i}' for i in (1, 2, 3))
    inv.ok('test_reference', {'volume_uuid': v['uuid'], 'vm_uuid': vm2})
    inv.ok('test_reference', {'volume_uuid': v['uuid'], 'vm_uuid': vm1})
    p = {'volume_uuid': v['uuid'], 'owner_uuid': OWNER}
    msg = f'Volume with name shared is used by {vm1}, {vm2}'
    check_refused(inv, 'delete', p, 'VolumeInUse', msg, 409)
    check_refused(inv, 'delete', dict(p, force=False), 'VolumeInUse', msg, 409)
    inv.error('volume_delete_begin', dict(p, force=False, job_uuid='j'), 'VolumeInUse', msg)
    assert inv.volume(v['uuid'])['state'] == 'ready'
    # A live reservation counts, naming its VM.
    w, _, _ = create(inv, name='reserved')
    inv.ok('test_reserve', {'uuid': vuuid(), 'volume_uuid': w['uuid'], 'vm_uuid': vm3,
                            'job_uuid': 'pj'})
    check_refused(inv, 'delete', {'volume_uuid': w['uuid'], 'owner_uuid': OWNER},
                  'VolumeInUse', f'Volume with name reserved is used by {vm3}', 409)
    # Forced: both go, and the reservation with the volume.
    check_refused(inv, 'delete', dict(p, force='yes'), 'InvalidArgument', 'force: expected', 422)
    delete(inv, v, force=True)
    delete(inv, inv.volume(w['uuid']), force=True)
    assert inv.volume(v['uuid']) is None and inv.volume(w['uuid']) is None
    assert inv.index('reservations') == [] and inv.index('job_reservations:pj') == []
    # Not ready: creating refused VolumeNotReady; deleting answered as it is.
    x, _, _ = create(inv, name='young', until='claim')
    check_refused(inv, 'delete', {'volume_uuid': x['uuid'], 'owner_uuid': OWNER},
                  'VolumeNotReady', 'is creating', 409)
    inv.error('volume_delete_begin', {'volume_uuid': x['uuid'], 'owner_uuid': OWNER,
                                      'job_uuid': 'j'}, 'VolumeNotReady', 'creating')
    y, _, _ = create(inv, name='old')
    inv.ok('volume_delete_begin', {'volume_uuid': y['uuid'], 'owner_uuid': OWNER, 'job_uuid': 'j'})
    assert check_ok(inv, 'delete', {'volume_uuid': y['uuid'], 'owner_uuid': OWNER})['state'] == \
        'deleting'
    # Another owner's volume, or none: 404 VolumeNotFound.
    check_refused(inv, 'delete', {'volume_uuid': y['uuid'], 'owner_uuid': OTHER},
                  'VolumeNotFound', 'not found', 404)
    check_refused(inv, 'delete', {'volume_uuid': vuuid(), 'owner_uuid': OWNER},
                  'VolumeNotFound', 'not found', 404)
    check_refused(inv, 'delete', dict(p, name='x'), 'InvalidArgument',
                  'name: volume-delete takes no such parameter', 422)


@case
def delete_begin_and_a_reservation_racing_never_both_win(inv):
    # DOMAIN 1.4: the in-use check and the switch to deleting are one step.
    outcomes = set()
    for k in range(20):
        v, _, _ = create(inv, name=f'contested{k}')
        go = threading.Barrier(2)
        got = {}

        def run(which):
            conn = Redis(inv.port)
            mine = Scripts.__new__(Scripts)
            mine.r, mine.sha = conn, inv.sha
            go.wait(timeout=30)
            if which == 'delete':
                got[which] = mine.call('volume_delete_begin', {'volume_uuid': v['uuid'],
                                                               'owner_uuid': OWNER,
                                                               'force': False, 'job_uuid': 'd'})
            else:
                got[which] = mine.call('test_reserve', {'uuid': vuuid(), 'volume_uuid': v['uuid'],
                                                        'vm_uuid': 'f0000000-0000-4000-8000-'
                                                        '000000000009', 'job_uuid': 'p'})
            conn.sock.close()

        threads = [threading.Thread(target=run, args=(w,)) for w in ('delete', 'reserve')]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        state = inv.volume(v['uuid'])['state']
        reservations = inv.index('volume_reservations:' + v['uuid'])
        if 'ok' in got['delete']:
            assert got['reserve']['error']['code'] == 'VolumeNotReady', got
            assert state == 'deleting' and reservations == [], (state, reservations)
            outcomes.add('delete first')
        else:
            assert got['delete']['error']['code'] == 'VolumeInUse' and 'ok' in got['reserve'], got
            assert state == 'ready' and len(reservations) == 1, (state, reservations)
            outcomes.add('reserve first')
    print(f'  outcomes seen: {sorted(outcomes)}')


@case
def rename_and_tags(inv):
    # DOMAIN 1.6 tests 21, 22, 30.
    v, _, _ = create(inv, name='old-name')
    other, _, _ = create(inv, name='taken')
    p = {'volume_uuid': v['uuid'], 'owner_uuid': OWNER}
    check_ok(inv, 'update', dict(p, name='new-name'))
    got = inv.ok('volume_update', dict(p, name='new-name', job_uuid='j'))
    assert got['name'] == 'new-name' and got['share_endpoint'].endswith('/new-name'), got
    assert inv.names(OWNER) == {'new-name': v['uuid'], 'taken': other['uuid']}
    assert inv.volume(v['uuid'])['version'] == v['version'] + 1
    # The old name is free: a create may take it.
    check_ok(inv, 'create', {'volume_uuid': vuuid(), 'owner_uuid': OWNER, 'name': 'old-name'})
    # The new name taken: VolumeAlreadyExists, nothing changed.
    check_refused(inv, 'update', dict(p, name='taken'), 'VolumeAlreadyExists', 'taken', 409)
    inv.error('volume_update', dict(p, name='taken'), 'VolumeAlreadyExists', 'taken')
    assert inv.names(OWNER) == {'new-name': v['uuid'], 'taken': other['uuid']}
    # Tags are replaced whole, and a rename to its own name changes nothing.
    got = inv.ok('volume_update', dict(p, name='new-name', tags={'team': 'web', 'n': 2}))
    assert got['tags'] == {'team': 'web', 'n': 2} and got['name'] == 'new-name', got
    # What volume-update does not take.
    check_refused(inv, 'update', dict(p, size=20480), 'InvalidArgument',
                  'size: volumes are not resizable in place', 422)
    check_refused(inv, 'update', dict(p, networks=[FAB]), 'InvalidArgument',
                  'networks: a volume\'s networks change through volume-attach-network', 422)
    check_refused(inv, 'update', dict(p, type='tritonnfs'), 'InvalidArgument',
                  'type: volume-update takes no such parameter', 422)
    check_refused(inv, 'update', dict(p, name='a'), 'InvalidArgument', 'name: ', 422)
    check_refused(inv, 'update', dict(p, tags=[1]), 'InvalidArgument', 'tags: ', 422)
    check_refused(inv, 'update', dict(p, owner_uuid=OTHER), 'VolumeNotFound', 'not found', 404)
    # Referenced or reserved: a rename is refused VolumeInUse naming the VMs; tags change.
    vm = 'f0000000-0000-4000-8000-000000000001'
    inv.ok('test_reference', {'volume_uuid': v['uuid'], 'vm_uuid': vm})
    check_refused(inv, 'update', dict(p, name='newer'), 'VolumeInUse', vm, 409)
    inv.error('volume_update', dict(p, name='newer'), 'VolumeInUse', vm)
    assert inv.ok('volume_update', dict(p, tags={}))['tags'] == {}
    vm2 = 'f0000000-0000-4000-8000-000000000002'
    reserve(inv, other, vm2)
    check_refused(inv, 'update', {'volume_uuid': other['uuid'], 'owner_uuid': OWNER,
                                  'name': 'other-name'}, 'VolumeInUse', vm2, 409)
    assert inv.names(OWNER) == {'new-name': v['uuid'], 'taken': other['uuid']}
    # Not while creating.
    young, _, _ = create(inv, name='young', until='claim')
    check_refused(inv, 'update', {'volume_uuid': young['uuid'], 'owner_uuid': OWNER,
                                  'name': 'grown'}, 'VolumeNotReady', 'creating', 409)


@case
def the_views_filter_and_refuse(inv):
    # DOMAIN 1.6 tests 4, 23, 25 (VOLAPI's rendering).
    made = {}
    for name, size, tags in (('foo', 10240, {'env': 'prod'}), ('foobar', 20480, {'env': 'dev'}),
                             ('barfoo', 10240, {}), ('xfoox', 10240, {'env': 'prod'}),
                             ('other', 10240, {})):
        made[name], _, _ = create(inv, name=name, size=size, tags=tags)
    theirs, _, _ = create(inv, owner=OTHER, name='foo')
    failed, _, job = create(inv, name='broken', until='claim')
    inv.ok('volume_fail', {'volume_uuid': failed['uuid'], 'job_uuid': job})

    def names(params):
        got, _, _ = inv.view('volumes', dict({'owner_uuid': OWNER}, **params))
        return sorted(v['name'] for v in got)

    assert names({'name': 'foo'}) == ['foo']
    assert names({'name': 'foo*'}) == ['foo', 'foobar']
    assert names({'name': '*foo'}) == ['barfoo', 'foo']
    assert names({'name': '*foo*'}) == ['barfoo', 'foo', 'foobar', 'xfoox']
    assert names({'state': 'failed'}) == ['broken']
    assert names({'state': 'ready', 'size': '20480'}) == ['foobar']
    assert names({'tag': 'env=prod'}) == ['foo', 'xfoox']
    assert names({'type': 'tritonnfs', 'name': 'o*'}) == ['other']
    assert names({'vm_uuid': made['foo']['vm_uuid']}) == ['foo']
    pred = json.dumps({'or': [{'eq': ['name', 'other']},
                              {'and': [{'eq': ['size', 20480]}, {'eq': ['state', 'ready']}]}]})
    assert names({'predicate': pred}) == ['foobar', 'other']
    assert names({'predicate': json.dumps({'eq': ['name', '*bar*']})}) == ['barfoo', 'foobar']
    all_foo, _, _ = inv.view('volumes', {'name': 'foo'})
    assert sorted(v['owner_uuid'] for v in all_foo) == sorted([OWNER, OTHER])
    one = all_foo[0]
    assert one['id'] == one['uuid'] and 'vm_uuid' in one, one
    # Refusals, 409 InvalidArgument naming the parameter.
    inv.view_refused('volumes', {'name': 'foo', 'predicate': json.dumps({'eq': ['name', 'x']})},
                     409, 'InvalidArgument', 'name: given both as a parameter and in the predicate')
    inv.view_refused('volumes', {'state': 'ready', 'predicate': json.dumps(
        {'and': [{'eq': ['size', 10240]}, {'eq': ['state', 'ready']}]})}, 409, 'InvalidArgument',
        'state: given both')
    for bad, part in (({'eq': ['uuid', 'x']}, 'predicate.eq[0]'), ({'ne': ['name', 'x']},
                                                                   'unknown operator'),
                      ({'and': []}, 'predicate.and'), ('[', 'not JSON')):
        inv.view_refused('volumes', {'predicate': bad if isinstance(bad, str) else json.dumps(bad)},
                         409, 'InvalidArgument', part)
    for params, part in (({'name': 'a/b'}, 'name: '), ({'name': '**'}, 'name: '),
                         ({'state': 'deleted'}, 'state: '), ({'size': '010'}, 'size: '),
                         ({'size': '-1'}, 'size: '), ({'type': 'tritonebs'}, 'type: '),
                         ({'tag': 'env'}, 'tag: '), ({'owner_uuid': 'x'}, 'owner_uuid: ')):
        inv.view_refused('volumes', params, 409, 'InvalidArgument', part)
    # One volume: another owner's is not found, as one that does not exist.
    got, _, _ = inv.view('volume', {'uuid': made['foo']['uuid'], 'owner_uuid': OWNER})
    assert got['id'] == got['uuid'] == made['foo']['uuid'], got
    assert got['vm_uuid'] and got['server_uuid'], got  # VOLAPI's rendering: all of it
    # CloudAPI's rendering (DOMAIN 1.6 test 25): id, no uuid, no vm_uuid, nor where the
    # storage lives; the list renders each, and its filters still read the whole record.
    got, _, _ = inv.view('volume', {'uuid': made['foo']['uuid'], 'render': 'cloudapi'})
    assert got['id'] == made['foo']['uuid'] and got['name'] == 'foo', got
    assert not {'uuid', 'vm_uuid', 'server_uuid', 'export_path'} & set(got), got
    listed, _, _ = inv.view('volumes', {'owner_uuid': OWNER, 'render': 'cloudapi',
                                        'vm_uuid': made['foo']['vm_uuid']})
    assert [v['id'] for v in listed] == [made['foo']['uuid']], listed
    assert 'vm_uuid' not in listed[0] and 'uuid' not in listed[0], listed
    inv.view_refused('volume', {'uuid': made['foo']['uuid'], 'render': 'docker'}, 409,
                     'InvalidArgument', 'render: ')
    inv.view_refused('volumes', {'render': 'docker'}, 409, 'InvalidArgument', 'render: ')
    got, _, _ = inv.view('volume', {'uuid': theirs['uuid']})
    assert got['owner_uuid'] == OTHER
    inv.view_refused('volume', {'uuid': theirs['uuid'], 'owner_uuid': OWNER}, 404,
                     'VolumeNotFound', theirs['uuid'])
    inv.view_refused('volume', {'uuid': vuuid()}, 404, 'VolumeNotFound', 'not found')
    # References.
    vm = 'f0000000-0000-4000-8000-000000000001'
    assert inv.view('volume_references', {'uuid': made['foo']['uuid']})[0] == []
    inv.ok('test_reference', {'volume_uuid': made['foo']['uuid'], 'vm_uuid': vm})
    assert inv.view('volume_references', {'uuid': made['foo']['uuid']})[0] == [vm]
    inv.view_refused('volume_references', {'uuid': made['foo']['uuid'], 'owner_uuid': OTHER},
                     404, 'VolumeNotFound', 'not found')
    # Sizes: the 19, ascending; another type refused.
    sizes, _, _ = inv.view('volume_sizes', {})
    assert sizes == [{'size': s, 'type': 'tritonnfs'} for s in SIZES], sizes
    assert inv.view('volume_sizes', {'type': 'tritonnfs'})[0] == sizes
    inv.view_refused('volume_sizes', {'type': 'other'}, 409, 'InvalidArgument', 'type: ')
    # Reservations, by volume and by job.
    reserve(inv, made['foo'], vm, job='job-a')
    reserve(inv, made['foobar'], vm, job='job-a')
    reserve(inv, made['foobar'], 'f0000000-0000-4000-8000-000000000002', job='job-b')
    assert len(inv.view('reservations', {})[0]) == 3
    assert {r['volume_name'] for r in inv.view('reservations', {'job_uuid': 'job-a'})[0]} == \
        {'foo', 'foobar'}
    by_vol = inv.view('reservations', {'volume_uuid': made['foobar']['uuid']})[0]
    assert sorted(r['job_uuid'] for r in by_vol) == ['job-a', 'job-b'], by_vol
    assert len(inv.view('reservations', {'volume_uuid': made['foobar']['uuid'],
                                         'job_uuid': 'job-b'})[0]) == 1
    # Paging: two at a time over the owner's volumes.
    seen, marker = [], ''
    for _ in range(10):
        page, nxt, _ = inv.view('volumes', {'owner_uuid': OWNER}, limit=2, marker=marker)
        seen += [v['uuid'] for v in page]
        if not nxt:
            break
        marker = nxt
    assert seen == sorted(seen) and len(seen) == 6, seen


@case
def storage_instances_are_hidden_from_the_instance_endpoints(inv):
    # DOMAIN 1.6 test 24.
    v, _, _ = create(inv, name='hidden', server_uuid=S1)
    s = v['vm_uuid']
    vms, _, count = inv.view('vms', {})
    assert vms == [] and count == 0, (vms, count)
    assert inv.view('vms', {'owner_uuid': OWNER})[0] == []
    assert inv.view('vms', {'server_uuid': S1, 'state': 'running'})[0] == []
    got, _, _ = inv.view('vms', {'system_role': 'nfsvolumestorage'})
    assert [x['uuid'] for x in got] == [s], got
    got, _, _ = inv.view('vms', {'system_role': 'nfsvolumestorage', 'owner_uuid': OWNER})
    assert [x['uuid'] for x in got] == [s], got
    inv.view_refused('vms', {'system_role': 'web'}, 409, 'InvalidArgument', 'system_role')
    assert inv.view('vm', {'uuid': s}) == (None, None, None)
    got, _, _ = inv.view('vm', {'uuid': s, 'system_role': 'nfsvolumestorage'})
    assert got['uuid'] == s
    inv.error('vm_check', {'vm_uuid': s, 'action': 'stop', 'target': f'/stop-{s}'},
              'ResourceNotFound', f'vm {s} does not exist', 404)
    inv.error('vm_check', {'vm_uuid': s, 'action': 'delete', 'target': f'/delete-{s}'},
              'ResourceNotFound', f'vm {s} does not exist', 404)
    inv.error('disk_check', {'action': 'add', 'vm_uuid': s, 'target': f'/disk-add-{s}',
                             'params': {'vm_uuid': s, 'size': 1024}},
              'ResourceNotFound', f'vm {s} does not exist', 404)
    # An ordinary VM is still listed and counted beside it; once the volume is deleted
    # the storage instance is destroyed and listed nowhere but there.
    inv.ok('place', {'vm_uuid': 'f0000000-0000-4000-8000-000000000001', 'owner_uuid': OWNER,
                     'ram': 256, 'quota': 1024, 'reservation': 1024,
                     'disks': [{'boot': True, 'size': 1024}]})
    vms, _, count = inv.view('vms', {})
    assert [x['uuid'] for x in vms] == ['f0000000-0000-4000-8000-000000000001'] and count == 1
    delete(inv, v)
    assert inv.view('vms', {'state': 'destroyed'})[0] == []
    got, _, _ = inv.view('vms', {'state': 'destroyed', 'system_role': 'nfsvolumestorage'})
    assert [x['uuid'] for x in got] == [s], got


case.exit()
