#!/usr/bin/env python3
"""reconcile_cost.py -- how long one dc.net_reconcile holds Redis, by server size.

Runs the scripts the dc plugin embeds (BUILD/tasks/lua_scripts.h) against a private
redis-server, as the plugin calls them: for each N of --vms, N VMs placed on one
server, two NICs each, running; then the reconcile of a scan listing all of them
(nothing to do: the periodic case), 5 times, and of a scan missing 10 of them (10
vanished, 20 NICs reaped). Times are Redis's own (INFO commandstats, usec per EVALSHA
of the script), so they are the time every other client waits.

Usage: tests/bench/reconcile_cost.py [BUILD] [--vms 100,1000]
Prints one JSON line per size.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'integration'))
import dc_scripts  # noqa: E402

S1 = '50000000-0000-4000-8000-000000000001'
NETS = ('e0000000-0000-4000-8000-000000000001', 'e0000000-0000-4000-8000-000000000002')
PKG, IMG = 'b0000000-0000-4000-8000-000000000001', 'c0000000-0000-4000-8000-000000000001'
DOC = {
    'servers': [{'uuid': S1, 'hostname': 'cn1', 'rack': 'r1', 'ram_mib': 10 ** 8,
                 'disk_mib': 10 ** 10, 'data_root': '/lab/cn1'}],
    'networks': [{'uuid': u, 'name': f'n{i}', 'subnet': f'10.{i}.0.0/16',
                  'gateway': f'10.{i}.0.1', 'provision_start_ip': f'10.{i}.0.10',
                  'provision_end_ip': f'10.{i}.250.250', 'vlan_id': i, 'mtu': 1500}
                 for i, u in enumerate(NETS, 1)],
    'packages': [{'uuid': PKG, 'name': 's', 'brand': 'joyent', 'ram_mib': 1024, 'vcpus': 1,
                  'disk_mib': 10240}],
    'images': [{'uuid': IMG, 'name': 'os', 'version': '1', 'size_mib': 1024,
                'file': '/lab/os.img', 'brand': 'joyent'}],
}


def usec_per_call(r, sha_calls):
    """Redis's usec per EVALSHA since the last CONFIG RESETSTAT."""
    for line in r.cmd('INFO', 'commandstats').splitlines():
        if line.startswith('cmdstat_evalsha:'):
            f = dict(kv.split('=') for kv in line.split(':', 1)[1].split(','))
            return float(f['usec']) / sha_calls
    return None


def run(build, n):
    with dc_scripts.private_redis('tern-reconcile-cost.') as (_proc, r, _tmp, _cg):
        inv = dc_scripts.Inventory(r, dc_scripts.scripts_of(build))
        inv.ok('inventory_load', dc_scripts.description(DOC))
        insts = []
        for i in range(n):
            u = f'f0000000-0000-4000-8000-{i:012d}'
            inv.ok('place', {'vm_uuid': u, 'owner_uuid': S1, 'alias': f'v{i}', 'brand': 'joyent',
                             'billing_id': PKG, 'image_uuid': IMG, 'ram': 1024, 'quota': 10240,
                             'reservation': 10240, 'server_uuid': S1, 'autoboot': True,
                             'customer_metadata': {},
                             'disks': [{'boot': True, 'size': 10240, 'image': IMG}]})
            nics = inv.ok('nics_provision', {'vm_uuid': u, 'owner_uuid': S1,
                                             'networks': [{'uuid': x} for x in NETS]})['nics']
            inv.ok('vm_set_state', {'vm_uuid': u, 'state': 'running'})
            insts.append({'uuid': u, 'state': 'running', 'role': None,
                          'do_not_inventory': False, 'nics': [x['mac'] for x in nics]})
        scan = {'server_uuid': S1, 'scanned_at': '2026-11-26T12:00:01.000Z', 'instances': insts}
        r.cmd('CONFIG', 'RESETSTAT')
        for _ in range(5):
            inv.ok('net_reconcile', {'server_uuid': S1, 'scan': scan})
        idle = usec_per_call(r, 5)
        r.cmd('CONFIG', 'RESETSTAT')
        res = inv.ok('net_reconcile', {'server_uuid': S1, 'scan': dict(scan, instances=insts[10:])})
        vanished = usec_per_call(r, 1)
        assert len(res['vanished']) == 10 and len(res['reaped']) == 20, res
        return {'vms': n, 'nics': 2 * n, 'nothing_to_do_ms': round(idle / 1000, 2),
                'ten_vanished_ms': round(vanished / 1000, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build', nargs='?', default=os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                             'build'))
    ap.add_argument('--vms', default='100,1000')
    a = ap.parse_args()
    for n in (int(x) for x in a.vms.split(',')):
        print(json.dumps(run(a.build, n)), flush=True)


if __name__ == '__main__':
    main()
