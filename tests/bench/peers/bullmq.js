'use strict';
// BullMQ side of the peer benchmarks. Producer and worker run in this one node
// process; the worker uses concurrency 50. Jobs keep BullMQ's default retention
// (finished jobs stay in Redis), which is what scenario e measures.
const { Queue, Worker, FlowProducer } = require('bullmq');
const c = require('./common');

const args = c.parseArgs(process.argv);
if (args.db === null) args.db = 2;
const CONC = 50;
const N_A = args.jobsA !== null ? args.jobsA : args.quick ? 2000 : 20000;
const N_B = args.quick ? 200 : 2000;
const N_C = args.quick ? 100 : 1000;
const LIMIT_MS = 120000;
const SYS = 'bullmq';

function out(scenario, metric, value, rep, mode, n) {
    c.emit({ system: SYS, scenario, metric, value, rep, mode, n });
}

async function oneRep(rep) {
    const admin = c.redisClient(args);
    await admin.flushdb();
    const conn = c.redisClient(args);
    const wconn = c.redisClient(args);
    const qname = 'bench' + rep;
    const queue = new Queue(qname, { connection: conn });
    let done = 0;
    let onStart = null;
    // The processor does no work; for scenario c it reports when it started.
    const worker = new Worker(qname, async (job) => {
        if (onStart) onStart(job);
        return 0;
    }, { connection: wconn, concurrency: CONC });
    worker.on('completed', () => { done++; });
    worker.on('failed', (job, err) => { c.log('bullmq job failed', err && err.message); });
    await worker.waitUntilReady();
    const mode = 'library, worker concurrency ' + CONC + ', one node process';

    // Redis's CPU per job of a scenario that started at CPU `cpu0` (seconds).
    const redisUsPerJob = async (scen, cpu0, n, m) => {
        const us = ((await c.redisCpuSeconds(admin)) - cpu0) * 1e6 / n;
        out(scen, 'redis_us_per_job', us, rep, m, n);
    };

    // a-api: one queue.add per job, at most 1,000 in flight at a time.
    if (args.wants('a-api')) {
        done = 0;
        const cpu0 = await c.redisCpuSeconds(admin);
        const t0 = performance.now();
        for (let i = 0; i < N_A; i += 1000) {
            const batch = [];
            for (let j = i; j < Math.min(N_A, i + 1000); j++) batch.push(queue.add('noop', { i: j }));
            await Promise.all(batch);
        }
        await c.waitFor(() => done >= N_A, LIMIT_MS, 2, 'a-api');
        out('a-api', 'jobs_per_s', N_A / ((performance.now() - t0) / 1000), rep, 'queue.add, ' + mode, N_A);
        await redisUsPerJob('a-api', cpu0, N_A, 'queue.add, ' + mode);
    }

    // a-bulk: addBulk in batches of 1,000.
    if (args.wants('a-bulk')) {
        done = 0;
        const cpu0 = await c.redisCpuSeconds(admin);
        const t0 = performance.now();
        for (let i = 0; i < N_A; i += 1000) {
            const batch = [];
            for (let j = i; j < Math.min(N_A, i + 1000); j++) batch.push({ name: 'noop', data: { i: j } });
            await queue.addBulk(batch);
        }
        await c.waitFor(() => done >= N_A, LIMIT_MS, 2, 'a-bulk');
        out('a-bulk', 'jobs_per_s', N_A / ((performance.now() - t0) / 1000), rep, 'addBulk x1000, ' + mode, N_A);
        await redisUsPerJob('a-bulk', cpu0, N_A, 'addBulk x1000, ' + mode);
    }

    // b and e (from b's jobs): 10-deep FlowProducer chains; the root is the last step to run.
    if (args.wants('b')) {
        const flow = new FlowProducer({ connection: c.redisClient(args) });
        function chain(depth) {
            const node = { name: 'step' + depth, queueName: qname, data: {} };
            if (depth < 9) node.children = [chain(depth + 1)];
            return node;
        }
        done = 0;
        const mem0 = await c.usedMemory(admin);
        const cpu0 = await c.redisCpuSeconds(admin);
        const t0 = performance.now();
        for (let i = 0; i < N_B; i += 100) {
            const batch = [];
            for (let j = i; j < Math.min(N_B, i + 100); j++) batch.push(flow.add(chain(0)));
            await Promise.all(batch);
        }
        await c.waitFor(() => done >= N_B * 10, LIMIT_MS, 2, 'b');
        const secs = (performance.now() - t0) / 1000;
        const bmode = '10-deep FlowProducer chain, ' + mode;
        out('b', 'jobs_per_s', N_B / secs, rep, bmode, N_B);
        out('b', 'steps_per_s', (N_B * 10) / secs, rep, bmode, N_B);
        await redisUsPerJob('b', cpu0, N_B, bmode);
        await c.sleep(200);
        const mem1 = await c.usedMemory(admin);
        out('e', 'bytes_per_job', (mem1 - mem0) / N_B, rep,
            'used_memory delta over finished 10-deep chains, default retention', N_B);
        await flow.close();
    }

    // c: idle submit-to-start latency, one job at a time.
    if (args.wants('c')) {
        const lat = [];
        for (let i = 0; i < N_C; i++) {
            await c.sleep(2);
            const started = new Promise((resolve) => { onStart = () => resolve(performance.now()); });
            const ts = performance.now();
            const add = queue.add('noop', { i });
            const tStart = await Promise.race([started, c.sleep(5000).then(() => null)]);
            await add;
            if (tStart === null) throw new Error('c: job did not start within 5 s');
            lat.push(tStart - ts);
        }
        onStart = null;
        out('c', 'p50_ms', c.percentile(lat, 50), rep, 'queue.add to processor start, idle, ' + mode, N_C);
        out('c', 'p99_ms', c.percentile(lat, 99), rep, 'queue.add to processor start, idle, ' + mode, N_C);
    }

    await worker.close();
    await queue.close();
    await admin.flushdb();
    for (const cl of [admin, conn, wconn]) cl.disconnect();
}

(async () => {
    for (let rep = args.firstRep; rep < args.firstRep + args.reps; rep++) {
        c.log('bullmq rep', rep);
        await oneRep(rep);
    }
    process.exit(0);
})().catch((e) => { c.log('bullmq failed:', e.stack || e); process.exit(1); });
