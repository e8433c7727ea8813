// wf_client_test.js -- drives a real ternd with Joyent's wf-client (installed from
// the npm registry by run.sh), the way Triton's services use node-workflow's API:
// load workflows by name, create jobs, poll them to the end, list jobs by execution
// and params, cancel a job, post and read job info, delete a workflow.
//
// Usage: node wf_client_test.js URL WORKFLOWS_DIR   (NODE_PATH finds wf-client)
// Prints one line per check and exits 0 when all passed, 1 at the first failure.
'use strict';

var assert = require('assert');
var util = require('util');
var bunyan = require('bunyan');
var WfClient = require('wf-client');

var url = process.argv[2];
var dir = process.argv[3];
var log = bunyan.createLogger({ name: 'wf-client-test', level: 'fatal' });

// Every step of the test is bounded; a hang fails the test instead of meson's timeout.
var deadline = setTimeout(function () {
    console.error('FAIL: wf-client test did not finish within 90 s');
    process.exit(1);
}, 90000);

function client(opts) {
    var o = { url: url, path: dir, log: log, retry: { retries: 1 } };
    Object.keys(opts || {}).forEach(function (k) { o[k] = opts[k]; });
    return new WfClient(o);
}

function p(obj, method) {
    return util.promisify(obj[method]).bind(obj);
}

// The restify JSON client under wf-client, for the calls it has no method for.
function raw(wf, method, path, body) {
    return new Promise(function (resolve, reject) {
        var cb = function (err, req, res, obj) {
            if (err) {
                err.res = res;
                return reject(err);
            }
            return resolve({ res: res, body: obj });
        };
        if (body !== undefined) {
            wf.client[method](path, body, cb);
        } else {
            wf.client[method](path, cb);
        }
    });
}

function check(what) {
    console.log('ok - ' + what);
}

async function waitFor(wf, uuid, executions) {
    var until = Date.now() + 20000;
    for (;;) {
        var job = await p(wf, 'getJob')(uuid);
        if (executions.indexOf(job.execution) !== -1) {
            return job;
        }
        if (Date.now() > until) {
            throw new Error('job ' + uuid + ' still ' + job.execution + ' after 20 s');
        }
        await new Promise(function (r) { setTimeout(r, 100); });
    }
}

async function main() {
    var wf = client({ workflows: ['wfc-demo'] });

    var pong = await p(wf, 'ping')();
    assert.strictEqual(pong.backend, 'up');
    check('ping: ' + JSON.stringify(pong));

    // initWorkflows: findWorkflow (GET /workflows?name=wfc-demo-1.0.0) finds nothing,
    // so createWorkflow POSTs the file.
    await p(wf, 'initWorkflows')();
    var uuid = wf.uuids['wfc-demo'];
    assert.ok(uuid, 'initWorkflows stored no uuid');
    check('initWorkflows created wfc-demo-1.0.0 as ' + uuid);

    // A second client finds it by name.
    var wf2 = client({ workflows: ['wfc-demo'] });
    await p(wf2, 'loadWorkflow')('wfc-demo');
    assert.strictEqual(wf2.uuids['wfc-demo'], uuid);
    var found = await p(wf2, 'findWorkflow')('wfc-demo-1.0.0');
    assert.strictEqual(found.uuid, uuid);
    var got = await p(wf2, 'getWorkflow')(uuid);
    assert.strictEqual(got.name, 'wfc-demo-1.0.0');
    assert.strictEqual(got.chain.length, 2);
    check('findWorkflow and getWorkflow by a second client');

    // forceMd5Check: tern's stored definition is normalized, so the hashes differ and
    // wf-client PUTs the same file again, which is the same version: 200, same uuid.
    var wf3 = client({ workflows: ['wfc-demo'], forceMd5Check: true });
    await p(wf3, 'loadWorkflow')('wfc-demo');
    assert.strictEqual(wf3.uuids['wfc-demo'], uuid);
    var wf4 = client({ workflows: ['wfc-demo'], forceReplace: true });
    await p(wf4, 'loadWorkflow')('wfc-demo');
    assert.strictEqual(wf4.uuids['wfc-demo'], uuid);
    check('updateWorkflow (PUT) of the same version is accepted');

    // JavaScript bodies are refused with the path of the code.
    try {
        await p(wf, 'loadWorkflow')('wfc-js');
        throw new Error('a workflow with a JavaScript body was accepted');
    } catch (err) {
        assert.strictEqual(err.statusCode, 409, String(err));
        assert.strictEqual(err.restCode || err.body.code, 'InvalidArgument');
        assert.ok(/chain\[0\]\.body/.test(err.message), err.message);
    }
    check('a JavaScript body is refused: 409 naming chain[0].body');

    // Jobs: create, poll to the end.
    var job = await p(wf, 'createJob')('wfc-demo', { target: 'wfc-vm-1', vm: 'vm-1' });
    assert.strictEqual(job.execution, 'queued');
    assert.strictEqual(job.params.vm, 'vm-1');
    assert.strictEqual(job.target, 'wfc-vm-1');
    assert.strictEqual(job.workflow_uuid, uuid);
    var done = await waitFor(wf, job.uuid, ['succeeded', 'failed']);
    assert.strictEqual(done.execution, 'succeeded', JSON.stringify(done.chain_results));
    assert.strictEqual(done.chain_results.length, 2);
    assert.strictEqual(done.chain_results[0].result.msg, 'wf-client job for vm-1');
    check('createJob and getJob until succeeded: ' + job.uuid);

    var second = await p(wf, 'createJob')('wfc-demo', { target: 'wfc-vm-2', vm: 'vm-2' });
    await waitFor(wf, second.uuid, ['succeeded']);

    // A job that never starts (exec_after in an hour), to cancel.
    var later = new Date(Date.now() + 3600 * 1000).toISOString();
    var queued = await p(wf, 'createJob')('wfc-demo', {
        target: 'wfc-vm-3', vm: 'vm-3', exec_after: later
    });
    assert.strictEqual(queued.exec_after, later);

    // listJobs: by execution, and by params (node-workflow's filters).
    var succeeded = await p(wf, 'listJobs')({ execution: 'succeeded' });
    var ids = succeeded.map(function (j) { return j.uuid; });
    assert.ok(ids.indexOf(job.uuid) !== -1 && ids.indexOf(second.uuid) !== -1);
    assert.ok(succeeded.every(function (j) { return j.execution === 'succeeded'; }));
    var byVm = await p(wf, 'listJobs')({ execution: 'succeeded', vm: 'vm-2' });
    assert.deepStrictEqual(byVm.map(function (j) { return j.uuid; }), [second.uuid]);
    var queuedList = await p(wf, 'listJobs')({ execution: 'queued' });
    assert.ok(queuedList.some(function (j) { return j.uuid === queued.uuid; }));
    var newest = await p(wf, 'listJobs')({ limit: 1 });
    assert.strictEqual(newest.length, 1);
    assert.strictEqual(newest[0].uuid, queued.uuid);
    check('listJobs by execution, params and limit');

    try {
        await p(wf, 'listJobs')({ execution: 'sleeping' });
        throw new Error('an unknown execution was accepted');
    } catch (err) {
        assert.strictEqual(err.statusCode, 409, String(err));
    }

    // Job info: post, read back in order.
    await p(wf, 'postJobInfo')(queued.uuid, { message: { '10%': 'copied the image' } });
    await p(wf, 'postJobInfo')(queued.uuid, { message: { '50%': 'booted' } });
    var info = await p(wf, 'getJobInfo')(queued.uuid);
    assert.deepStrictEqual(info, [
        { message: { '10%': 'copied the image' } },
        { message: { '50%': 'booted' } }
    ]);
    check('postJobInfo and getJobInfo');

    // Cancel (wf-client has no method; its JSON client does the POST).
    var canceled = await raw(wf, 'post', '/jobs/' + queued.uuid + '/cancel', {});
    assert.strictEqual(canceled.res.statusCode, 200);
    assert.strictEqual(canceled.body.execution, 'canceled');
    try {
        await raw(wf, 'post', '/jobs/' + queued.uuid + '/cancel', {});
        throw new Error('a finished job was canceled twice');
    } catch (err) {
        assert.strictEqual(err.statusCode, 409, String(err));
    }
    var canceledList = await p(wf, 'listJobs')({ execution: 'canceled' });
    assert.ok(canceledList.some(function (j) { return j.uuid === queued.uuid; }));
    check('cancel: 200 with the job, then 409');

    // Errors as restify clients see them.
    try {
        await p(wf, 'getJob')('b8d4e8a8-0000-4000-8000-000000000000');
        throw new Error('an unknown job was found');
    } catch (err) {
        assert.strictEqual(err.statusCode, 404, String(err));
        assert.strictEqual(err.restCode || err.body.code, 'ResourceNotFound');
    }
    try {
        await raw(wf, 'post', '/jobs', { workflow: 'wfc-nothing', target: 'x' });
        throw new Error('a job of an unknown workflow was created');
    } catch (err) {
        assert.strictEqual(err.statusCode, 404, String(err));
    }
    check('unknown job and workflow: 404 ResourceNotFound');

    // Delete a workflow; its name is free again.
    var wf5 = client({ workflows: ['wfc-gone'] });
    await p(wf5, 'initWorkflows')();
    var gone = wf5.uuids['wfc-gone'];
    await p(wf5, 'deleteWorkflow')(gone);
    assert.strictEqual(await p(wf5, 'findWorkflow')('wfc-gone-1.0.0'), null);
    try {
        await p(wf5, 'getWorkflow')(gone);
        throw new Error('a deleted workflow was found');
    } catch (err) {
        assert.strictEqual(err.statusCode, 404, String(err));
    }
    check('deleteWorkflow');

    [wf, wf2, wf3, wf4, wf5].forEach(function (c) { c.close(); });
}

main().then(function () {
    clearTimeout(deadline);
    console.log('all wf-client checks passed');
    process.exit(0);
}, function (err) {
    console.error('FAIL: ' + (err && err.stack ? err.stack : err));
    process.exit(1);
});
