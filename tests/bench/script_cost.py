#!/usr/bin/env python3
"""script_cost.py -- Redis's time per job in each script of a 1-step job's life.

Runs engine/store/lua's job_create, job_claim and step_commit (as tools/embed_lua.py builds
them) against a private redis-server (append-only, fsync every second, a free loopback
port), for ROUNDS rounds of BATCH jobs: one batched create call, one claim, one batched
commit per round, with the arguments ternd sends for a no-op job. Prints the time Redis
spent in each script per job (INFO commandstats, usec of EVALSHA), so a change to a
script can be judged in seconds without ternd or a client: these are the microseconds
that bound (a) of the suite (docs/PERFORMANCE.md).

With --callgrind, Redis runs under valgrind's callgrind and the figure is the number
of instructions Redis executes per job (scripts, replies and the append-only file's
formatting; not the kernel's part): slow (a minute), but the same count run after run
whatever else the machine does, so small changes can be told apart on a shared
machine where the times above move from one run to the next (-r 3 shows how much).

--direct measures jobs that creates start at once ("Direct start" in docs/WORKFLOWS.md): no claim.

--per-call counts, under callgrind, the instructions within EVALSHA of one call of each
of the scripts that ternd calls with little to do (a heartbeat's tick, a read of a
missing job, an event for a job without a stream...): mostly the fixed cost of a call,
which the helpers a script carries ahead of its body set (each of them is made anew at
every call). The median of -n counts of 100 calls each.

Usage: tests/bench/script_cost.py [-b BATCH] [-n ROUNDS] [-r REPS] [--lua DIR] [--callgrind]
                                  [--direct] [--per-call]
Prints one JSON line per script and repetition, then the medians.
"""
import argparse
import contextlib
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'tools'))
import embed_lua  # noqa: E402

SCRIPTS = ('job_create', 'job_claim', 'step_commit')


class Redis:
    """A minimal RESP client: enough for SCRIPT LOAD, EVALSHA, INFO."""

    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port), timeout=30)
        self.f = self.sock.makefile('rb')

    def cmd(self, *args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.sock.sendall(b''.join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return rest.decode()
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError('unexpected reply %r' % line)

    def evalsha_usec(self):
        for line in self.cmd('INFO', 'commandstats').splitlines():
            if line.startswith('cmdstat_evalsha:'):
                return int(line.split('usec=')[1].split(',')[0])
        return 0


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def process_cpu_us(pid):
    """User plus system CPU time of a process so far, in microseconds."""
    with open('/proc/%d/stat' % pid, encoding='ascii') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf('SC_CLK_TCK')


def callgrind_instructions(pid, out_file):
    """Dumps callgrind's counts of process `pid` since the last dump or zeroing and
    returns the instructions counted."""
    subprocess.run(['callgrind_control', '-d', str(pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    total = 0
    # Dumps are numbered files next to out_file; the newest holds this interval.
    dumps = sorted((f for f in os.listdir(os.path.dirname(out_file))
                    if f.startswith(os.path.basename(out_file) + '.')),
                   key=lambda f: int(f.rsplit('.', 1)[1]))
    with open(os.path.join(os.path.dirname(out_file), dumps[-1]), encoding='ascii') as f:
        for line in f:
            if line.startswith('summary:') or line.startswith('totals:'):
                total = int(line.split()[1])
    return total


@contextlib.contextmanager
def private_redis(prefix, callgrind=False, within=None):
    """A redis-server of its own (append-only, fsync every second, a free loopback
    port, a temporary directory), under callgrind if asked (counting only within the
    function `within` of Redis, when given): yields (process, client, directory,
    callgrind's output file), and stops it (by its PID) and removes the directory
    afterwards."""
    port, tmp = free_port(), tempfile.mkdtemp(prefix=prefix)
    cg_out = os.path.join(tmp, 'callgrind.out')
    wrap = ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + cg_out] if callgrind else []
    if within:
        wrap += ['--collect-atstart=no', '--toggle-collect=' + within]
    proc = subprocess.Popen(wrap + ['redis-server', '--bind', '127.0.0.1', '--port', str(port),
                                    '--dir', tmp, '--appendonly', 'yes', '--appendfsync',
                                    'everysec', '--save', '', '--logfile',
                                    os.path.join(tmp, 'redis.log')],
                            stderr=subprocess.DEVNULL if callgrind else None)
    try:
        r = None
        for _ in range(600 if callgrind else 100):
            try:
                r = Redis(port)
                r.cmd('PING')
                break
            except OSError:
                time.sleep(0.05)
        if r is None:
            raise RuntimeError('redis-server did not start')
        yield proc, r, tmp, cg_out
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def one_rep(lua_dir, batch, rounds, callgrind=False, direct=False):
    with private_redis('tern-script-cost.', callgrind) as (proc, r, tmp, cg_out):
        return measure(proc, r, cg_out, lua_dir, batch, rounds, callgrind, direct)


def load_scripts(r, lua_dir, names):
    """SCRIPT LOADs the scripts `names` of lua_dir as tools/embed_lua.py builds them;
    returns their SHA1s by name."""
    paths = glob.glob(os.path.join(lua_dir, '*.lua')) + glob.glob(os.path.join(lua_dir, 'lib',
                                                                               '*.lua'))
    sources = dict(embed_lua.build(paths))
    return {name: r.cmd('SCRIPT', 'LOAD', sources[name]) for name in names}


# Stream caps, retention (7 days), how long a success keeps its stream (60 s): the
# arguments every script call starts with.
COMMON_ARGS = ['1000', '100000', str(7 * 86400000), '60000']

# Calls with little to do, as ternd makes them (see --per-call): script, its arguments.
MISSING = '00000000-0000-4000-8000-000000000000'
CHEAP_CALLS = (
    ('tick', ['runner-1', '30000', '{"in_flight":0}', '1']),
    ('job_get', [MISSING]),
    ('job_info_get', [MISSING]),
    ('event_add', [MISSING, '{"type":"progress","job":"%s"}' % MISSING]),
    ('workflow_get', ['no-such-workflow']),
    ('runners_read', []),
    ('postback_claim', ['0', '30000']),
    ('job_stats', ['queued']),
    ('job_list', ['', '10', '', '', '0', '1000', '1048576']),
)


# Calls counted together: Lua's garbage collector works in cycles, paid by the calls
# that allocate while one runs, and a cycle spans tens of calls when the scripts are
# large: a count of fewer calls has it or not (ten calls of a script carrying every
# helper counted a fifth fewer instructions than a hundred).
CALLS_PER_COUNT = 100


def per_call(lua_dir, counts):
    """Instructions Redis executes within EVALSHA (the script, its commands, its answer;
    not the append-only file, the socket or Redis's timers, which move with the time a
    call takes under valgrind) for one call of each of CHEAP_CALLS: the median of
    `counts` counts of CALLS_PER_COUNT calls each, after one that is not counted."""
    with private_redis('tern-script-cost.', True, 'evalShaCommand') as (proc, r, tmp, cg_out):
        sha = load_scripts(r, lua_dir, [name for name, _ in CHEAP_CALLS])
        out = {}
        for name, args in CHEAP_CALLS:
            per = []
            for i in range(counts + 1):
                for _ in range(CALLS_PER_COUNT):
                    r.cmd('EVALSHA', sha[name], 0, *COMMON_ARGS, *args)
                n = callgrind_instructions(proc.pid, cg_out)
                if i >= 1:
                    per.append(n / CALLS_PER_COUNT)
            out[name] = statistics.median(per)
        return out


def measure(proc, r, cg_out, lua_dir, batch, rounds, callgrind, direct):
    """The costs of one repetition against Redis `proc` (client `r`)."""
    sha = load_scripts(r, lua_dir, SCRIPTS)
    # A stored workflow version, as workflow_put.lua leaves it.
    wf = str(uuidlib.uuid4())
    doc = json.dumps({'name': 'bench-noop-1', 'version': '1.0.0', 'uuid': wf,
                      'chain': [{'name': 'n', 'task': 'core.noop'}]})
    r.cmd('HSET', 'tern:wf:' + wf, 'doc', doc, 'name', 'bench-noop-1', 'version', '1.0.0')
    r.cmd('SET', 'tern:wfdoc:' + wf, doc)
    common_args = COMMON_ARGS
    spent = dict.fromkeys(SCRIPTS, 0)

    def call(name, *args):
        if callgrind:
            # Redis's instructions from the end of the previous call to the end of
            # this one: this call's, and the little it did while idle.
            reply = r.cmd('EVALSHA', sha[name], 0, *common_args, *args)
            spent[name] += callgrind_instructions(proc.pid, cg_out)
            return reply
        t0 = r.evalsha_usec()
        reply = r.cmd('EVALSHA', sha[name], 0, *common_args, *args)
        spent[name] += r.evalsha_usec() - t0
        return reply

    now = int(time.time() * 1000)

    def rounds_of(count):
        for _ in range(count):
            one_round()

    def uuids_of(items):
        out, i = [], 0
        while i < len(items):
            out.append(items[i + 3])
            i += items[i] + 1
        return out

    def one_round():
        items = []
        for _ in range(batch):
            u = str(uuidlib.uuid4())
            ev = json.dumps({'type': 'created', 'job': u, 'workflow': 'bench-noop-1',
                             'time': now})
            item = [wf, wf, u, 'default', '0', '', '0', '', ev,
                    'runner-1' if direct else '', '1', 'name', 'bench-noop-1',
                    'version', '1.0.0', 'workflow_uuid', wf, 'params', '{}']
            items += [len(item)] + item
        reply = call('job_create', batch, *items)
        if any(x[0] != ('RUN' if direct else 'OK') for x in reply):
            raise RuntimeError('job_create: %r' % reply[0])
        if direct:
            # Started by the creates (fence 1): no claim.
            claimed = [[u, '1'] for u in uuids_of(items)]
        else:
            claimed = call('job_claim', 'runner-1', 'default', batch)
        if len(claimed) != batch:
            raise RuntimeError('job_claim took %d of %d jobs' % (len(claimed), batch))
        items = []
        for job in claimed:
            u, fence = job[0], job[1]
            entry = json.dumps({'name': 'n', 'result': {}, 'started_at': now, 'ms': 0})
            ev = json.dumps({'type': 'step', 'job': u, 'phase': 'chain', 'idx': 0,
                             'name': 'n', 'task': 'core.noop', 'time': now, 'ms': 0,
                             'result': {}})
            item = [u, 'runner-1', fence, '0', '0', 'finish', entry, ev, '', '0',
                    'succeeded', '']
            items += [len(item)] + item
        reply = call('step_commit', batch, *items)
        # Each item answers 0 or 1 (committed; whether a cancel was asked), or an array
        # naming why not.
        if any(x not in (0, 1) for x in reply):
            raise RuntimeError('step_commit: %r' % reply[0])

    if callgrind:
        # Two rounds first, so that what happens once (script compilation, the first
        # allocations of each key kind) is not counted.
        rounds_of(2)
        for name in SCRIPTS:
            spent[name] = 0
        rounds_of(rounds)
        return {name: spent[name] / (batch * rounds) for name in SCRIPTS}
    cpu0 = process_cpu_us(proc.pid)
    rounds_of(rounds)
    cost = {name: spent[name] / (batch * rounds) for name in SCRIPTS}
    # Everything Redis did for these jobs, parsing calls, writing replies and the
    # append-only file included (commandstats counts the scripts' bodies only).
    cost['redis_cpu'] = (process_cpu_us(proc.pid) - cpu0) / (batch * rounds)
    return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-b', type=int, default=76, help='jobs per call (76: the suite\'s mean)')
    ap.add_argument('-n', type=int, default=100, help='rounds per repetition')
    ap.add_argument('-r', type=int, default=3, help='repetitions')
    ap.add_argument('--lua', default=os.path.join(ROOT, 'engine', 'store', 'lua'))
    ap.add_argument('--direct', action='store_true',
                    help='creates start their jobs at once (direct start): no claim')
    ap.add_argument('--callgrind', action='store_true',
                    help='count Redis\'s instructions per job (valgrind; -n 20 is plenty)')
    ap.add_argument('--per-call', action='store_true',
                    help='count the instructions of one call of scripts with little to do '
                    '(valgrind; the median of -n counts of 100 calls)')
    a = ap.parse_args()
    if not (1 <= a.b <= 128 and 1 <= a.n <= 10000 and 1 <= a.r <= 20):
        ap.error('expected -b 1..128, -n 1..10000, -r 1..20')
    if a.per_call:
        for name, n in per_call(a.lua, a.n).items():
            print('%-14s %9.0f instructions per call' % (name, n))
        return
    if a.callgrind:
        cost = one_rep(a.lua, a.b, a.n, callgrind=True, direct=a.direct)
        for name in SCRIPTS:
            print('%-12s %9.0f instructions per job' % (name, cost[name]))
        print('%-12s %9.0f instructions per job' % ('all three', sum(cost.values())))
        return
    reps = []
    for rep in range(1, a.r + 1):
        cost = one_rep(a.lua, a.b, a.n, direct=a.direct)
        reps.append(cost)
        for name, us in cost.items():
            print(json.dumps({'script': name, 'us_per_job': round(us, 2), 'rep': rep}))
    total = [sum(c[name] for name in SCRIPTS) for c in reps]
    for name in SCRIPTS:
        print('%-12s %6.1f us per job (median of %d)' %
              (name, statistics.median(c[name] for c in reps), a.r))
    print('%-12s %6.1f us per job' % ('all three', statistics.median(total)))
    print('%-12s %6.1f us per job (Redis process CPU: calls, replies, AOF)' %
          ('redis cpu', statistics.median(c['redis_cpu'] for c in reps)))


if __name__ == '__main__':
    main()
