// A workflow the test stores and then deletes through wf-client.
var VERSION = '1.0.0';

module.exports = {
    name: 'wfc-gone-' + VERSION,
    version: VERSION,
    chain: [ { name: 'noop', task: 'core.noop' } ],
    onerror: []
};
