#!/usr/bin/env python3
"""Checks the floor plan of the engine (docs/ARCHITECTURE.md): every file of
engine/<layer>/ includes project headers only as "<layer>/<name>.h", from its own layer
or a layer below it; base and model include no system header of libuv, hiredis, h2o,
curl or OpenSSL (they are the jansson-only library the CLI links); the CLI includes
only base and model of the engine. Prints each fault as file:line and exits 1 when there is one."""
import os
import re
import sys

# Rank of each layer: a file may include its own layer and any layer of lower rank.
# Layers of equal rank do not include each other.
RANK = {
    'base': 0,
    'model': 1,
    'redis': 1,
    'plugins': 2,
    'store': 2,
    'ops': 3,
    'run': 3,
    'events': 3,
    'http': 4,
    'ternd': 5,
}
PURE = ('base', 'model')
IMPURE_SYSTEM = re.compile(r'^(uv\.h|uv/|hiredis/|h2o|curl/|openssl/)')
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')


def faults_of(path, layer, top):
    out = []
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            where = '%s:%d' % (os.path.relpath(path, top), n)
            if kind == '<':
                if layer in PURE and IMPURE_SYSTEM.match(name):
                    out.append('%s: %s includes <%s>, which %s may not use'
                               % (where, layer, name, layer))
                continue
            if layer == 'cli' and '/' not in name:
                continue  # the CLI's own headers
            if layer == 'store' and name == 'store_lua.h':
                continue
            head, _, _ = name.partition('/')
            if head not in RANK:
                out.append('%s: "%s" names no layer (write "<layer>/%s")'
                           % (where, name, os.path.basename(name)))
                continue
            if layer == 'cli':
                if head not in PURE:
                    out.append('%s: the CLI includes "%s"; it may use only base and model'
                               % (where, name))
                continue
            if head != layer and RANK[head] >= RANK[layer]:
                out.append('%s: %s (rank %d) includes "%s" of %s (rank %d): arrows point down'
                           % (where, layer, RANK[layer], name, head, RANK[head]))
    return out


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    faults = []
    engine = os.path.join(top, 'engine')
    for layer in sorted(os.listdir(engine)):
        d = os.path.join(engine, layer)
        if not os.path.isdir(d):
            continue
        if layer not in RANK:
            faults.append('engine/%s: a folder that is no layer of check_layers.py' % layer)
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(('.c', '.h')):
                faults += faults_of(os.path.join(d, name), layer, top)
    cli = os.path.join(top, 'cli')
    for name in sorted(os.listdir(cli)):
        if name.endswith(('.c', '.h')):
            faults += faults_of(os.path.join(cli, name), 'cli', top)
    for f in faults:
        print(f)
    if faults:
        return 1
    print('layers: every include points down')
    return 0


if __name__ == '__main__':
    sys.exit(main())
