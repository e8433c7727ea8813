"""dc_scripts.py -- the dc plugin's Lua scripts as the plugin embeds them (the
generated lua_scripts.h of a build), run against a private redis-server: what the
script tests (test_dc_inventory.py and the other test_dc_*_scripts.py) and the cost
measure (tests/bench/dc_cost.py) share.
"""
import ipaddress
import json
import os
import re
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'bench'))
from script_cost import private_redis  # noqa: E402,F401  (re-exported)

NS = 'tern:p:dc:'


def scripts_of(build_root):
    """{name: Lua text} of build_root/tasks/lua_scripts.h."""
    out = {}
    with open(os.path.join(build_root, 'tasks', 'lua_scripts.h'), encoding='utf-8') as f:
        for line in f:
            m = re.match(r'static const char dc_lua_(\w+)\[\] = (".*");$', line.rstrip('\n'))
            if m:
                out[m.group(1)] = json.loads(m.group(2))
    return out


def description(doc):
    """A datacenter description (the file's form) as dc.inventory_load hands it to
    its script: each network with its netmask and addresses as integers."""
    d = {'servers': [], 'networks': [], 'packages': doc['packages'], 'images': doc['images']}
    for s in doc['servers']:
        d['servers'].append(dict(s, platform_version=s.get('platform_version', '')))
    for n in doc['networks']:
        net = ipaddress.ip_network(n['subnet'])
        d['networks'].append(dict(
            n, netmask=str(net.netmask),
            start_n=int(ipaddress.ip_address(n['provision_start_ip'])),
            end_n=int(ipaddress.ip_address(n['provision_end_ip'])),
            gateway_n=int(ipaddress.ip_address(n['gateway']))))
    return d


class Inventory:
    """Calls the scripts as the plugin does: KEYS[1] the namespace, ARGV[1] the
    arguments as JSON, ARGV[2] the time now, ARGV[3] eight fresh UUIDs; views as the
    engine does (EVAL_RO with limit, offset, marker, params)."""

    def __init__(self, redis, scripts):
        self.r, self.sha = redis, {}
        for name, text in scripts.items():
            self.sha[name] = redis.cmd('SCRIPT', 'LOAD', text)

    def call(self, name, args):
        reply = self.r.cmd('EVALSHA', self.sha[name], 1, NS, json.dumps(args),
                           '2026-11-26T12:00:00Z',
                           json.dumps([str(uuid.uuid4()) for _ in range(8)]),
                           '2026-11-26T12:00:00.000Z')
        return json.loads(reply)

    def ok(self, name, args):
        answer = self.call(name, args)
        assert 'ok' in answer, f'{name} {args}: {answer}'
        return answer['ok']

    def error(self, name, args, code, part, status=None):
        answer = self.call(name, args)
        err = answer.get('error')
        assert err is not None, f'{name}: expected {code}, got {answer}'
        assert err['code'] == code and part in err['message'], f'{name}: {err}'
        if status is not None:
            assert err['status'] == status, f'{name}: {err}'
        return err

    def view(self, name, params=None, limit=100, offset=0, marker=''):
        """(list or object, next marker, count) of view `name` (a stem: vms, vm ...)."""
        reply = self.r.cmd('EVALSHA_RO', self.sha['view_' + name], 1, NS, limit, offset, marker,
                           json.dumps(params or {}))
        if reply is None:
            return None, None, None
        if isinstance(reply, list):
            return (json.loads(reply[0]), reply[1] if len(reply) > 1 else None,
                    reply[2] if len(reply) > 2 else None)
        return json.loads(reply), None, None

    def hash(self, key):
        f = self.r.cmd('HGETALL', NS + key)
        return {f[i]: f[i + 1] for i in range(0, len(f), 2)}


class Cases:
    """The cases of a script test, each on a fresh private redis-server (its socket
    directory named from `prefix`) holding the description `doc` loaded by
    dc.inventory_load. Used as a decorator, it runs the case at once: a failed
    assertion is printed and counted, and the next case still runs; exit() ends the
    test, failing when any case failed. `make(redis, scripts)` makes what a case is
    handed (an Inventory unless given)."""

    def __init__(self, build_root, doc, prefix, make=Inventory):
        self.build_root, self.doc, self.prefix, self.make = build_root, doc, prefix, make
        self.failures = []

    def __call__(self, fn):
        with private_redis(self.prefix) as (_proc, r, _tmp, _cg):
            inv = self.make(r, scripts_of(self.build_root))
            inv.ok('inventory_load', description(self.doc))
            try:
                fn(inv)
                print(f'ok {fn.__name__}')
            except AssertionError as e:
                self.failures.append(fn.__name__)
                print(f'FAIL {fn.__name__}: {e}')
        return fn

    def exit(self):
        if self.failures:
            sys.exit(f'{len(self.failures)} failed: {", ".join(self.failures)}')
        sys.exit(0)
