#!/usr/bin/env python3
"""dc_cost.py -- what the dc plugin's inventory costs Redis per provision.

Runs the scripts the dc plugin embeds (BUILD/tasks/lua_scripts.h) against a private
redis-server, as the plugin calls them, for a datacenter of SERVERS servers and one
network of a /16:
  1. N provisions, each dc.place + dc.nics_provision + dc.vm_set_state + dc.release:
     Redis's time in each script per call (INFO commandstats, usec of EVALSHA per
     script, measured one script kind at a time) and Redis's CPU (used_cpu_sys +
     used_cpu_user) per provision;
  2. VMS provisions kept (placed, one NIC, running): INFO memory used_memory after less
     before, per VM.

Usage: tests/bench/dc_cost.py [BUILD] [-n N] [--vms VMS] [--servers SERVERS]
Prints one JSON line of results.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'integration'))
import dc_scripts  # noqa: E402

OWNER = 'a0000000-0000-4000-8000-000000000001'
NET = '7e000000-0000-4000-8000-000000000001'
PKG, IMG = 'b0000000-0000-4000-8000-000000000001', 'c0000000-0000-4000-8000-000000000001'


def doc(servers):
    return {
        'servers': [{'uuid': f'50000000-0000-4000-8000-{i:012d}', 'hostname': f'cn{i}',
                     'rack': f'r{i % 4}', 'ram_mib': 1 << 30, 'disk_mib': 1 << 40,
                     'data_root': f'/lab/cn{i}'} for i in range(servers)],
        'networks': [{'uuid': NET, 'name': 'big', 'subnet': '10.0.0.0/16', 'gateway': '10.0.0.1',
                      'provision_start_ip': '10.0.0.10', 'provision_end_ip': '10.0.255.250',
                      'vlan_id': 0, 'mtu': 1500}],
        'packages': [{'uuid': PKG, 'name': 'small', 'brand': 'bhyve', 'ram_mib': 1024,
                      'vcpus': 1, 'disk_mib': 20480, 'flexible_disk': True}],
        'images': [{'uuid': IMG, 'name': 'os', 'version': '1.0', 'size_mib': 10240,
                    'file': '/lab/os.img', 'brand': 'bhyve'}],
    }


def vm(i):
    return f'f0000000-0000-4000-8000-{i:012d}'


def steps(i):
    return [
        ('place', {'vm_uuid': vm(i), 'owner_uuid': OWNER, 'alias': f'web-{i}', 'brand': 'bhyve',
                   'billing_id': PKG, 'image_uuid': IMG, 'ram': 1024, 'quota': 0,
                   'reservation': 20480, 'flexible': True, 'flexible_disk_size': 20480,
                   'server_uuid': None, 'autoboot': True,
                   'customer_metadata': {'lab:workload': 'idle'},
                   'disks': [{'boot': True, 'size': 10240, 'image': IMG},
                             {'boot': False, 'size': 10240}]}),
        ('nics_provision', {'vm_uuid': vm(i), 'owner_uuid': OWNER,
                            'networks': [{'uuid': NET, 'primary': True}]}),
        ('vm_set_state', {'vm_uuid': vm(i), 'state': 'running',
                          'disks': [{'path': f'/lab/cn0/{vm(i)}/disks/disk0.img', 'size': 10240,
                                     'pci_slot': '0:4:0', 'boot': True, 'image_uuid': IMG},
                                    {'path': f'/lab/cn0/{vm(i)}/disks/disk1.img', 'size': 10240,
                                     'pci_slot': '0:4:1', 'boot': False}]}),
    ]


def info(r, section):
    out = {}
    for line in r.cmd('INFO', section).splitlines():
        if ':' in line:
            k, v = line.split(':', 1)
            out[k] = v
    return out


def evalsha_usec(r):
    s = info(r, 'commandstats').get('cmdstat_evalsha', '')
    return int(s.split('usec=')[1].split(',')[0]) if s else 0


def cpu(r):
    i = info(r, 'cpu')
    return float(i['used_cpu_sys']) + float(i['used_cpu_user'])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build', nargs='?', default=os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                               'build'))
    ap.add_argument('-n', type=int, default=1000)
    ap.add_argument('--vms', type=int, default=10000)
    ap.add_argument('--servers', type=int, default=20)
    a = ap.parse_args()
    scripts = dc_scripts.scripts_of(a.build)
    out = {'n': a.n, 'servers': a.servers, 'vms': a.vms}
    with dc_scripts.private_redis('tern-dc-cost.') as (_p, r, _t, _c):
        inv = dc_scripts.Inventory(r, scripts)
        inv.ok('inventory_load', dc_scripts.description(doc(a.servers)))
        usec = {'place': 0, 'nics_provision': 0, 'vm_set_state': 0, 'release': 0}
        cpu0 = cpu(r)
        for i in range(a.n):
            for name, args in steps(i) + [('release', {'vm_uuid': vm(i),
                                                        'final_state': 'destroyed'})]:
                u0 = evalsha_usec(r)
                inv.ok(name, args)
                usec[name] += evalsha_usec(r) - u0
        cpu1 = cpu(r)
        out['usec_per_call'] = {k: round(v / a.n, 1) for k, v in usec.items()}
        out['usec_per_provision'] = round(sum(usec.values()) / a.n, 1)
        # Redis's CPU includes the INFO calls of the measure itself: an upper bound.
        out['redis_cpu_usec_per_provision_upper'] = round((cpu1 - cpu0) * 1e6 / a.n, 1)
    with dc_scripts.private_redis('tern-dc-mem.') as (_p, r, _t, _c):
        inv = dc_scripts.Inventory(r, scripts)
        inv.ok('inventory_load', dc_scripts.description(doc(a.servers)))
        m0 = int(info(r, 'memory')['used_memory'])
        for i in range(a.vms):
            for name, args in steps(100000 + i):
                inv.ok(name, args)
        m1 = int(info(r, 'memory')['used_memory'])
        out['bytes_per_vm'] = round((m1 - m0) / a.vms)
        # Each taken address leaves the free pool: that part is a saving, not a cost.
        out['vm_record_bytes'] = len(r.cmd('GET', dc_scripts.NS + 'vm:' + vm(100000)))
    print(json.dumps(out))


main()
