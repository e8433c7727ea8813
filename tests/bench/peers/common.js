'use strict';
// Shared helpers for the peer benchmark drivers: argument parsing, the Redis
// connection to the private server the benchmark driver started, JSON output
// and small statistics.
const net = require('net');
const IORedis = require('ioredis');

// The drivers only ever talk to a Redis on the loopback interface, because
// they flush their own database number between repetitions.
function parseArgs(argv) {
    // --first-rep K numbers the repetitions from K: run.sh runs one repetition of each
    // system in turn, so that a change of the shared machine's speed falls on all.
    // --scenarios a-api,a-bulk runs those only (run.sh runs each system's (a) right
    // after tern's, so that the two meet the same state of the shared machine).
    const args = { redis: null, reps: 3, firstRep: 1, db: null, quick: false, scenarios: null,
                   jobsA: null };
    for (let i = 2; i < argv.length; i++) {
        if (argv[i] === '--redis') args.redis = argv[++i];
        else if (argv[i] === '--reps') args.reps = parseInt(argv[++i], 10);
        else if (argv[i] === '--first-rep') args.firstRep = parseInt(argv[++i], 10);
        else if (argv[i] === '--db') args.db = parseInt(argv[++i], 10);
        else if (argv[i] === '--quick') args.quick = true;
        else if (argv[i] === '--scenarios') args.scenarios = argv[++i].split(',');
        else if (argv[i] === '--jobs-a') args.jobsA = parseInt(argv[++i], 10);
        else throw new Error('unknown argument ' + argv[i]);
    }
    if (!args.redis) throw new Error('--redis redis://127.0.0.1:PORT is required');
    args.wants = (scenario) => args.scenarios === null || args.scenarios.includes(scenario);
    const u = new URL(args.redis);
    if (u.hostname !== '127.0.0.1' && u.hostname !== 'localhost') {
        throw new Error('refusing a Redis that is not on loopback: ' + u.hostname);
    }
    args.host = '127.0.0.1';
    args.port = parseInt(u.port || '6379', 10);
    if (!(args.reps >= 1 && args.reps <= 20)) throw new Error('--reps must be 1..20');
    if (args.jobsA !== null && !(args.jobsA >= 100 && args.jobsA <= 1000000)) {
        throw new Error('--jobs-a must be 100..1000000');
    }
    if (!(args.firstRep >= 1 && args.firstRep <= 20)) throw new Error('--first-rep must be 1..20');
    return args;
}

function redisClient(args, extra) {
    return new IORedis(Object.assign({ host: args.host, port: args.port, db: args.db,
                                       maxRetriesPerRequest: null }, extra || {}));
}

// Redis's CPU seconds so far (user + system, as INFO cpu counts them).
async function redisCpuSeconds(client) {
    const info = await client.info('cpu');
    const num = (name) => parseFloat((info.match(new RegExp('^' + name + ':([0-9.]+)', 'm')) || [0, 0])[1]);
    return num('used_cpu_user') + num('used_cpu_sys');
}

// Reads used_memory from INFO memory.
async function usedMemory(client) {
    const info = await client.info('memory');
    const m = /used_memory:(\d+)/.exec(info);
    return parseInt(m[1], 10);
}

function emit(rec) {
    process.stdout.write(JSON.stringify(rec) + '\n');
}

function log(...a) {
    process.stderr.write('[peers] ' + a.join(' ') + '\n');
}

function percentile(values, p) {
    const s = values.slice().sort((a, b) => a - b);
    const idx = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
    return s[idx];
}

// Asks the kernel for a free port on loopback.
function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const p = srv.address().port;
            srv.close(() => resolve(p));
        });
    });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Waits until check() returns true, polling every `every` ms, and fails after
// `limitMs` so that no run can hang.
async function waitFor(check, limitMs, every, what) {
    const end = Date.now() + limitMs;
    for (;;) {
        if (await check()) return;
        if (Date.now() > end) throw new Error('timed out waiting for ' + what);
        await sleep(every);
    }
}

module.exports = { parseArgs, redisClient, redisCpuSeconds, usedMemory, emit, log, percentile, freePort,
                   sleep, waitFor };
