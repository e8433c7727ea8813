'use strict';
// Starts node-workflow's HTTP API (the same code as wf's bin/workflow-api) from
// a config file. wf 1.2.2 calls server.listen(port) without a host, which binds
// every interface; this wrapper pins every listen with a bare port to
// 127.0.0.1 so that the benchmark stays on loopback.
const net = require('net');
const fs = require('fs');
const origListen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
    if (typeof a[0] === 'number' && typeof a[1] !== 'string') a.splice(1, 0, '127.0.0.1');
    return origListen.apply(this, a);
};
const API = require('wf').API;
const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const api = new API(config);
api.init(function () {
    process.stdout.write('ready\n');
}, function (err) {
    process.stderr.write('wf API backend error: ' + err + '\n');
    process.exit(1);
});
