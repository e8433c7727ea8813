// A workflow file as wf-client loads it (require + serialize + POST /workflows): the
// name carries the version, as wf-client's loadWorkflow expects, and the steps name
// tern tasks instead of holding JavaScript bodies.
var VERSION = '1.0.0';

module.exports = {
    name: 'wfc-demo-' + VERSION,
    version: VERSION,
    timeout: 60,
    chain: [ {
        name: 'greet',
        task: 'core.log',
        args: { msg: 'wf-client job for ${params.vm:-nobody}' }
    }, {
        name: 'pause',
        task: 'core.sleep',
        args: { ms: 50 }
    } ],
    onerror: [ {
        name: 'report',
        task: 'core.log',
        args: { msg: 'failed: ${error.message}' }
    } ]
};
