// A node-workflow workflow with JavaScript task bodies: tern refuses it (409) and
// names the first body it found.
var VERSION = '1.0.0';

module.exports = {
    name: 'wfc-js-' + VERSION,
    version: VERSION,
    chain: [ {
        name: 'say',
        timeout: 10,
        retry: 1,
        body: function say(job, cb) {
            return cb(null, 'said');
        }
    } ],
    onerror: []
};
