#!/usr/bin/env python3
"""Per-create latency, and the latency of GET /ping on another connection, while creates
of 1024-character targets are checked against N_LOCKS unfinished jobs holding the
costliest lock within the limits, (.?){1240}x. Starts its own redis-server and ternd
(--role api) on free loopback ports, in a temporary directory it removes; prints one
JSON line. TERN_PLUGIN_DIR, when set, is given as --plugin-dir.

usage: bench_locks.py TERND N_LOCKS [N_CREATES] [CONFIG_JSON]"""
import http.client, json, os, socket, subprocess, sys, tempfile, threading, time, statistics

def free_port():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close(); return p

def wait_port(port, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close(); return
        except OSError:
            time.sleep(0.05)
    raise SystemExit('port %d did not open' % port)

def req(conn, method, path, body=None):
    data = json.dumps(body) if body is not None else None
    conn.request(method, path, data, {'Content-Type': 'application/json'} if data else {})
    r = conn.getresponse(); text = r.read()
    return r.status, text

def main():
    ternd, n_locks = sys.argv[1], int(sys.argv[2])
    n_creates = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    config = sys.argv[4] if len(sys.argv) > 4 else None
    d = tempfile.mkdtemp(prefix='lkbench.')
    rport, aport = free_port(), free_port()
    redis = subprocess.Popen(['redis-server', '--port', str(rport), '--bind', '127.0.0.1',
                              '--dir', d, '--save', '', '--appendonly', 'no'],
                             stdout=subprocess.DEVNULL)
    wait_port(rport)
    args = [ternd, '--role', 'api', '--redis', 'redis://127.0.0.1:%d' % rport,
            '--listen', '127.0.0.1:%d' % aport, '--log-level', 'warn']
    if os.environ.get('TERN_PLUGIN_DIR'):
        args += ['--plugin-dir', os.environ['TERN_PLUGIN_DIR']]
    if config:
        path = os.path.join(d, 'ternd.json'); open(path, 'w').write(config)
        args[1:1] = ['--config', path]
    ternd_p = subprocess.Popen(args, stdout=open(os.path.join(d, 'log'), 'w'), stderr=subprocess.STDOUT)
    try:
        wait_port(aport)
        c = http.client.HTTPConnection('127.0.0.1', aport, timeout=120)
        st, _ = req(c, 'POST', '/workflows', {'name': 'b', 'chain': [{'name': 'n', 'task': 'core.noop'}]})
        assert st in (200, 201), st
        later = int(time.time() * 1000) + 3600 * 1000
        for i in range(n_locks):
            st, t = req(c, 'POST', '/jobs', {'workflow': 'b', 'exec_after': later, 'params': {'i': i},
                                             'locks': '(.?){1240}x'})
            assert st == 201, (st, t)
        # warm the lock table (one create reads and compiles it)
        req(c, 'POST', '/jobs', {'workflow': 'b', 'target': 'warm', 'exec_after': later})
        stop = threading.Event(); pings = []
        def pinger():
            pc = http.client.HTTPConnection('127.0.0.1', aport, timeout=120)
            while not stop.is_set():
                t0 = time.monotonic(); req(pc, 'GET', '/ping'); pings.append(time.monotonic() - t0)
                time.sleep(0.002)
        th = threading.Thread(target=pinger); th.start()
        lat = []
        for i in range(n_creates):
            target = (str(i) + 'a' * 1024)[:1024]
            t0 = time.monotonic()
            st, t = req(c, 'POST', '/jobs', {'workflow': 'b', 'target': target, 'exec_after': later})
            lat.append(time.monotonic() - t0)
            assert st == 201, (st, t)
        stop.set(); th.join()
        ms = lambda x: round(x * 1000, 1)
        print(json.dumps({'locks': n_locks, 'creates': n_creates,
                          'create_median_ms': ms(statistics.median(lat)), 'create_max_ms': ms(max(lat)),
                          'ping_median_ms': ms(statistics.median(pings)), 'ping_max_ms': ms(max(pings)),
                          'pings': len(pings)}))
    finally:
        ternd_p.terminate(); ternd_p.wait(30); redis.terminate(); redis.wait(10)
        subprocess.call(['rm', '-rf', d])

main()
