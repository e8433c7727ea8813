#!/usr/bin/env python3
"""redis_prims.py -- what one Redis command costs when a Lua script calls it.

Runs each probe below inside a Lua script, once per argument of a call (100 uuids a
call, 1,000 calls), against a private redis-server (append-only, fsync every second,
a free loopback port), and prints Redis's process CPU per probe (user + system, so the
append-only file and the replies are counted), minus the same loop doing nothing. A
script that calls Redis pays this per redis.call; these figures are what tern's
scripts are made of (docs/PERFORMANCE.md, "Where (a) through the bulk path stops").

Usage: tests/bench/redis_prims.py [-r REPS] [PROBE...]
"""
import argparse
import os
import statistics
import sys
import uuid as uuidlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_cost import private_redis, process_cpu_us  # noqa: E402

# A job hash as job_create.lua leaves it, for probes that read or change one.
JOB_FIELDS = ('queue default created_at 1700000000000 execution queued lv 3 name bench-noop-1 '
              'version 1.0.0 workflow_uuid 2f1c6d7e-0a55-4c1e-9d4a-1b2c3d4e5f60 params {} '
              'runner runner-1 started_at 1700000000001 started_by runner-1 fence 1').split()
ENTRY = '{"name":"n","result":{},"started_at":1700000000000,"ms":0}'

# Each probe: Lua run once per uuid `u` (i counts calls made so far in this script).
PROBES = {
    'nothing': "",
    'exists (a missing key)': "redis.call('EXISTS', 'x:' .. u)",
    'hset (a new hash, 9 fields)': "redis.call('HSET', 'j:' .. u, %s)" %
        ', '.join("'%s'" % f for f in JOB_FIELDS[:18]),
    'hset (3 fields of a job)': "redis.call('HSET', 'h:' .. (i % 500), 'fence', '2', "
                                "'runner', 'runner-1', 'execution', 'running')",
    'hgetall (a job)': "redis.call('HGETALL', 'h:' .. (i % 500))",
    'hmget (19 fields of a job)': "redis.call('HMGET', 'h:' .. (i % 500), 'runner', 'fence', "
        "'phase', 'idx', 'execution', 'cancel', 'step_holds', 'inflight', 'resume', "
        "'created_at', 'unique', 'locks', 'deadline', 'post_back_urls', 'xk', 'lv', "
        "'blocked_on', 'polls', 'es')",
    'rpush (a new list, one result entry)': "redis.call('RPUSH', 'r:' .. u, '%s')" % ENTRY,
    'pexpire': "redis.call('PEXPIRE', 'h:' .. (i % 500), 604800000)",
    'hdel (a missing field)': "redis.call('HDEL', 'h:' .. (i % 500), 'nothere')",
    'zadd (one member, 200,000 in the set)': "redis.call('ZADD', 'bigz', 1700000000000 + i, u)",
    'lpush + lrem -1': "redis.call('LPUSH', 'rl', u) redis.call('LREM', 'rl', -1, u)",
    'xadd (a new stream)': "redis.call('XADD', 'x:' .. u, 'MAXLEN', '~', 1000, '*', 'e', "
                           "'{\"type\":\"created\",\"time\":1700000000000}')",
    'cjson.encode (3 fields)': "local s = cjson.encode({type = 'running', runner = 'r-1', "
                               "fence = i})",
}


def one_rep(names, batch, calls):
    with private_redis('tern-redis-prims.') as (proc, r, _, _):
        for i in range(500):
            r.cmd('HSET', 'h:%d' % i, *JOB_FIELDS)
        r.cmd('EVAL', "for i = 1, 200000 do redis.call('ZADD', 'bigz', i, 'm' .. i) end", 0)
        cost = {}
        for name in names:
            body = ("local i = 0 for _, u in ipairs(ARGV) do i = i + 1 %s end return 1" %
                    PROBES[name])
            sha = r.cmd('SCRIPT', 'LOAD', body)
            cpu0 = process_cpu_us(proc.pid)
            for _ in range(calls):
                r.cmd('EVALSHA', sha, 0, *[str(uuidlib.uuid4()) for _ in range(batch)])
            cost[name] = (process_cpu_us(proc.pid) - cpu0) / (batch * calls)
        return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-r', type=int, default=3, help='repetitions (each on a new Redis)')
    ap.add_argument('probes', nargs='*', help='probes to run (default: all)')
    a = ap.parse_args()
    names = a.probes or list(PROBES)
    unknown = [n for n in names if n not in PROBES]
    if unknown or not 1 <= a.r <= 20:
        ap.error('unknown probe %r (known: %s)' % (unknown, ', '.join(PROBES)) if unknown
                 else 'expected -r 1..20')
    if 'nothing' not in names:
        names.insert(0, 'nothing')
    reps = [one_rep(names, 100, 1000) for _ in range(a.r)]
    base = statistics.median(c['nothing'] for c in reps)
    print('us of Redis CPU per call, median of %d (minus the empty loop, %.2f us)' % (a.r, base))
    for name in names:
        if name != 'nothing':
            print('  %-40s %6.2f' % (name, statistics.median(c[name] for c in reps) - base))


if __name__ == '__main__':
    main()
