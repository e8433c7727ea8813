'use strict';
// node-workflow side of the peer benchmarks: wf 1.2.2's HTTP API (through
// wf-api.js, pinned to loopback) and wf's runner, both on wf-redis-backend,
// started here on free loopback ports, driven over HTTP like a real client.
const http = require('http');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const c = require('./common');

const args = c.parseArgs(process.argv);
if (args.db === null) args.db = 1;
const SYS = 'node-workflow';
const LIMIT_MS = 180000;
const q = args.quick ? 0.25 : 1;

// Runner settings per mode. "inproc" is the fastest wf allows: do_fork false
// runs tasks inside the runner process instead of one child process per task,
// forks is the number of jobs in flight (wf runs forks - 1 at once) and
// run_interval is the queue poll period in ms (default 250).
const MODES = [
    { name: 'inproc', runner: { do_fork: false, forks: 51, run_interval: 10 },
      nA: 2000 * q, nB: 300 * q, nC: 1000 * q,
      label: 'HTTP API + runner, do_fork=false, forks=51, run_interval=10ms' },
    { name: 'fork', runner: { do_fork: true, forks: 11, run_interval: 10 },
      nA: 200 * q, nB: 20 * q, nC: 100 * q,
      label: 'HTTP API + runner, default do_fork=true (child process per task), forks=11, run_interval=10ms' },
];
// Children alive right now, so that a SIGTERM (e.g. from run.sh's timeout)
// still stops the API and runner this driver started.
const live = new Set();
process.on('SIGTERM', () => { for (const p of live) p.kill('SIGKILL'); process.exit(143); });
const NOOP = 'function (job, cb) { return cb(null); }';

function out(scenario, metric, value, rep, mode, n) {
    c.emit({ system: SYS, scenario, metric, value, rep, mode, n });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 50 });
function request(port, method, p, body) {
    return new Promise((resolve, reject) => {
        const data = body ? JSON.stringify(body) : null;
        const req = http.request({ host: '127.0.0.1', port, method, path: p, agent,
            headers: data ? { 'content-type': 'application/json',
                              'content-length': Buffer.byteLength(data) } : {} }, (res) => {
            let s = '';
            res.on('data', (d) => { s += d; });
            res.on('end', () => {
                if (res.statusCode >= 300) return reject(new Error(method + ' ' + p + ': ' + res.statusCode + ' ' + s));
                try { resolve(JSON.parse(s)); } catch (e) { reject(e); }
            });
        });
        req.setTimeout(30000, () => req.destroy(new Error('HTTP timeout')));
        req.on('error', reject);
        if (data) req.write(data);
        req.end();
    });
}

// Posts n jobs of one workflow with at most `inflight` requests at once.
async function postJobs(port, wf, n, inflight) {
    let next = 0;
    async function lane() {
        while (next < n) { next++; await request(port, 'POST', '/jobs', { workflow: wf }); }
    }
    const lanes = [];
    for (let i = 0; i < inflight; i++) lanes.push(lane());
    await Promise.all(lanes);
}

async function finished(redis) {
    const [s, f] = await Promise.all([redis.llen('wf_succeeded_jobs'), redis.llen('wf_failed_jobs')]);
    if (f > 0) throw new Error('node-workflow: ' + f + ' jobs failed');
    return s;
}

async function oneRep(mode, rep, tmp) {
    const redis = c.redisClient(args);
    await redis.flushdb();
    const apiPort = await c.freePort();
    const cfg = {
        backend: { module: 'wf-redis-backend', opts: { host: args.host, port: args.port, db: args.db } },
        api: { port: apiPort },
        runner: Object.assign({ identifier: '0b6f8f43-7d3c-4e0e-9f38-' + String(100000000000 + rep).slice(-12) }, mode.runner),
        logger: { level: 'warn' },
    };
    const cfgPath = path.join(tmp, 'wf-' + mode.name + '-' + rep + '.json');
    fs.writeFileSync(cfgPath, JSON.stringify(cfg));
    const logFd = fs.openSync(path.join(tmp, 'wf-' + mode.name + '-' + rep + '.log'), 'a');
    const procs = [
        spawn(process.execPath, [path.join(__dirname, 'wf-api.js'), cfgPath],
              { cwd: __dirname, stdio: ['ignore', logFd, logFd] }),
        spawn(process.execPath, [path.join(__dirname, 'node_modules/wf/bin/workflow-runner'), cfgPath],
              { cwd: __dirname, stdio: ['ignore', logFd, logFd] }),
    ];
    for (const p of procs) live.add(p);
    try {
        await c.waitFor(async () => {
            try { await request(apiPort, 'GET', '/ping'); return true; } catch (e) { return false; }
        }, 20000, 50, 'wf API');
        const one = await request(apiPort, 'POST', '/workflows',
            { name: 'one-' + rep, timeout: 600, chain: [{ name: 't0', body: NOOP }] });
        const chain = [];
        for (let i = 0; i < 10; i++) chain.push({ name: 't' + i, body: NOOP });
        const ten = await request(apiPort, 'POST', '/workflows', { name: 'ten-' + rep, timeout: 600, chain });
        await c.sleep(500);

        // a-api: 1-step jobs over HTTP, 50 requests in flight.
        let base = await finished(redis);
        let t0 = performance.now();
        await postJobs(apiPort, one.uuid, mode.nA, 50);
        await c.waitFor(async () => (await finished(redis)) - base >= mode.nA, LIMIT_MS, 2, 'a-api');
        out('a-api', 'jobs_per_s', mode.nA / ((performance.now() - t0) / 1000), rep, mode.label, mode.nA);

        // b and e: 10-task workflows; memory delta over the finished jobs.
        await c.sleep(300);
        const mem0 = await c.usedMemory(redis);
        base = await finished(redis);
        t0 = performance.now();
        await postJobs(apiPort, ten.uuid, mode.nB, 50);
        await c.waitFor(async () => (await finished(redis)) - base >= mode.nB, LIMIT_MS, 2, 'b');
        const secs = (performance.now() - t0) / 1000;
        out('b', 'jobs_per_s', mode.nB / secs, rep, mode.label + ', 10-task workflow', mode.nB);
        out('b', 'steps_per_s', (mode.nB * 10) / secs, rep, mode.label + ', 10-task workflow', mode.nB);
        await c.sleep(300);
        const mem1 = await c.usedMemory(redis);
        out('e', 'bytes_per_job', (mem1 - mem0) / mode.nB, rep,
            mode.label + ', used_memory delta over finished 10-task jobs (wf-redis-backend keeps them)', mode.nB);

        // c: idle latency from just before the POST to the first task's
        // started_at as the runner records it (millisecond resolution).
        const lat = [];
        for (let i = 0; i < mode.nC; i++) {
            await c.sleep(2);
            const ts = Date.now();
            const job = await request(apiPort, 'POST', '/jobs', { workflow: one.uuid });
            let started = null;
            await c.waitFor(async () => {
                const cr = await redis.hget('job:' + job.uuid, 'chain_results');
                const arr = cr ? JSON.parse(cr) : [];
                if (arr.length > 0 && arr[0].started_at) { started = Date.parse(arr[0].started_at); return true; }
                return false;
            }, 10000, 1, 'c job start');
            lat.push(started - ts);
        }
        out('c', 'p50_ms', c.percentile(lat, 50), rep, mode.label + ', POST to first task start, idle', mode.nC);
        out('c', 'p99_ms', c.percentile(lat, 99), rep, mode.label + ', POST to first task start, idle', mode.nC);
    } finally {
        for (const p of procs) { p.kill('SIGKILL'); live.delete(p); }
        fs.closeSync(logFd);
        await redis.flushdb();
        redis.disconnect();
    }
}

(async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-bench-wf-'));
    const only = process.env.WF_MODES ? process.env.WF_MODES.split(',') : null;
    for (const mode of MODES) {
        if (only && !only.includes(mode.name)) continue;
        for (let rep = args.firstRep; rep < args.firstRep + args.reps; rep++) {
            c.log('node-workflow', mode.name, 'rep', rep, '(logs in ' + tmp + ')');
            await oneRep(mode, rep, tmp);
        }
    }
    agent.destroy();
    process.exit(0);
})().catch((e) => { c.log('node-workflow failed:', e.stack || e); process.exit(1); });
