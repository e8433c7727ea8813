"""volume_records.py -- what the tests of volumes at provision share: a datacenter
description with fabric networks of two owners and an external one, VMs placed with
their NICs, volume records as volume-create leaves them (docs/VOLUMES.md "Records"),
and the dc scripts called as the plugin calls them (dc_scripts.py).
"""
import json
import uuid

import dc_scripts

NS = dc_scripts.NS
OWNER = 'a0000000-0000-4000-8000-000000000001'
OTHER = 'a0000000-0000-4000-8000-000000000002'
S1 = '50000000-0000-4000-8000-000000000001'
PKG = 'b0000000-0000-4000-8000-000000000001'
KVM = 'b0000000-0000-4000-8000-000000000002'
IMG = 'c0000000-0000-4000-8000-000000000001'
KIMG = 'c0000000-0000-4000-8000-000000000002'
FABRIC = 'e0000000-0000-4000-8000-000000000001'        # OWNER's fabric network
FABRIC_OTHER = 'e0000000-0000-4000-8000-000000000002'  # OTHER's
EXTERNAL = 'e0000000-0000-4000-8000-000000000003'      # not fabric
JOB = '10000000-0000-4000-8000-000000000001'
JOB2 = '10000000-0000-4000-8000-000000000002'
NOW = '2026-11-26T12:00:00Z'  # what Scripts gives as ARGV[2]


def net(uuid_, name, octet, fabric, owners):
    return {'uuid': uuid_, 'name': name, 'subnet': f'10.{octet}.0.0/24',
            'gateway': f'10.{octet}.0.1', 'provision_start_ip': f'10.{octet}.0.10',
            'provision_end_ip': f'10.{octet}.0.250', 'vlan_id': 0, 'mtu': 1500,
            'fabric': fabric, 'owner_uuids': owners}


DOC = {
    'servers': [{'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 65536,
                 'disk_mib': 10 * 102400, 'data_root': '/lab/cn1'}],
    'networks': [net(FABRIC, 'fabric', 1, True, [OWNER]),
                 net(FABRIC_OTHER, 'fabric-other', 2, True, [OTHER]),
                 net(EXTERNAL, 'external', 3, False, [])],
    'packages': [{'uuid': PKG, 'name': 'small', 'brand': 'bhyve', 'ram_mib': 1024, 'vcpus': 1,
                  'disk_mib': 20480, 'flexible_disk': False, 'quota_mib': 0},
                 {'uuid': KVM, 'name': 'kvm', 'brand': 'kvm', 'ram_mib': 1024, 'vcpus': 1,
                  'disk_mib': 20480, 'flexible_disk': False, 'quota_mib': 0}],
    'images': [{'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 10240,
                'file': '/lab/os.img', 'brand': 'bhyve'},
               {'uuid': KIMG, 'name': 'kos', 'version': '1.0', 'size_mib': 10240,
                'file': '/lab/kos.img', 'brand': 'kvm'}],
}

class Scripts(dc_scripts.Inventory):
    """dc_scripts.Inventory, with ARGV[3] (fresh UUIDs) given as the plugin gives it."""

    def call(self, name, args):
        uuids = json.dumps([str(uuid.uuid4()) for _ in range(8)])
        reply = self.r.cmd('EVALSHA', self.sha[name], 1, NS, json.dumps(args), NOW, uuids)
        return json.loads(reply)

    def get(self, key):
        text = self.r.cmd('GET', NS + key)
        return json.loads(text) if text is not None else None

    def put(self, key, value):
        self.r.cmd('SET', NS + key, json.dumps(value))

    def members(self, key):
        return self.r.cmd('ZRANGE', NS + key, 0, -1)

    def snapshot(self):
        """Every key of the namespace with its value: what a refusal must not change."""
        out = {}
        for k in self.r.cmd('KEYS', NS + '*'):
            kind = self.r.cmd('TYPE', k)
            if kind == 'string':
                text = self.r.cmd('GET', k)
                try:
                    out[k] = json.loads(text)
                except ValueError:
                    out[k] = text
            elif kind == 'hash':
                out[k] = sorted(self.r.cmd('HGETALL', k))
            elif kind == 'zset':
                out[k] = self.r.cmd('ZRANGE', k, 0, -1, 'WITHSCORES')
            else:
                out[k] = kind
        return out


def vm_uuid(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def vol_uuid(i):
    return f'd0000000-0000-4000-8000-{i:012d}'


def make_vm(inv, i, networks=(FABRIC,), state=None):
    """A VM as the provision's place and nics steps leave it (provisioning)."""
    inv.ok('place', {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'alias': f'vm{i}',
                     'brand': 'bhyve', 'billing_id': PKG, 'image_uuid': IMG, 'ram': 1024,
                     'quota': 20480, 'reservation': 30720, 'flexible': False,
                     'flexible_disk_size': None, 'server_uuid': S1, 'autoboot': True,
                     'customer_metadata': {},
                     'disks': [{'boot': True, 'size': 10240, 'image': IMG},
                               {'boot': False, 'size': 20480}]})
    inv.ok('nics_provision', {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER,
                              'networks': [{'uuid': n} for n in networks]})
    if state is not None:
        set_vm_state(inv, i, state)
    return inv.get('vm:' + vm_uuid(i))


def set_vm_state(inv, i, state):
    vm = inv.get('vm:' + vm_uuid(i))
    inv.r.cmd('ZREM', NS + 'vms:state:' + vm['state'], vm['uuid'])
    vm['state'] = state
    inv.r.cmd('ZADD', NS + 'vms:state:' + state, 0, vm['uuid'])
    inv.put('vm:' + vm['uuid'], vm)


def make_volume(inv, i, name, state='ready', networks=(FABRIC,), owner=OWNER, refs=(),
                created_by_job=None):
    """A volume as volume-create leaves it (V1's records, docs/VOLUMES.md)."""
    u = vol_uuid(i)
    v = {'uuid': u, 'owner_uuid': owner, 'name': name, 'type': 'tritonnfs',
         'create_timestamp': '2026-11-26T11:00:00.000Z', 'state': state,
         'networks': list(networks), 'snapshots': [], 'tags': {}, 'billing_id': None,
         'refs': list(refs), 'filesystem_path': f'10.1.0.{100 + i}:/exports/data',
         'vm_uuid': f'90000000-0000-4000-8000-{i:012d}', 'size': 10240, 'server_uuid': S1,
         'export_path': f'/lab/cn1/90000000-0000-4000-8000-{i:012d}/export',
         'share_state': 'running', 'share_endpoint': f'nfs://10.1.0.{100 + i}/{name}',
         'share_probed_at': None, 'error_since': None, 'created_by_job': created_by_job,
         'job_uuid': None, 'version': 1}
    inv.put('volume:' + u, v)
    for idx in ('volumes', 'volumes:owner:' + owner, 'volumes:state:' + state):
        inv.r.cmd('ZADD', NS + idx, 0, u)
    inv.r.cmd('HSET', NS + 'volume_names:' + owner, name, u)
    return v


def set_volume(inv, u, **fields):
    v = inv.get('volume:' + u)
    inv.r.cmd('ZREM', NS + 'volumes:state:' + v['state'], u)
    v.update(fields)
    inv.r.cmd('ZADD', NS + 'volumes:state:' + v['state'], 0, u)
    inv.put('volume:' + u, v)
    return v


def reserve_args(i, volumes, job=JOB, networks=(FABRIC,)):
    return {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'job_uuid': job, 'volumes': volumes,
            'networks': [{'uuid': n, 'primary': k == 0} for k, n in enumerate(networks)]}


def mount(name, mountpoint, mode='rw'):
    return {'name': name, 'mountpoint': mountpoint, 'mode': mode, 'type': 'tritonnfs'}


