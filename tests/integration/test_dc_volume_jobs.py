#!/usr/bin/env python3
"""The volume steps of a provision as a ternd runs them (tasks/dc/provision_volumes.c):
a ternd of the test's own on a private redis-server, its dc plugin configured with
"api_url" (a loopback HTTP server of this test standing in for the control's API,
recording every request) and "api_token_file"; the VM and volume records put in place
with the plugin's own scripts (dc_scripts.py). Checked: dc.volumes_reserve asks for
one volume-create job per volume it made, under the volume's uuid, with the token; run
again it asks for the same job, and a 409 for that uuid is success once GET shows the
job; any other answer fails the step naming the status and body; dc.volumes_wait polls
a creating volume until it is ready, fails at once for a failed one and after wait_s
for one that stays creating; dc.volumes_unreserve asks for the volume-delete job of a
volume the job made (its derived uuid), waiting while it is still creating;
dc.reservations_clean takes its age bound from the settings (900 s by default).

Usage: test_dc_volume_jobs.py SOURCE_ROOT BUILD_ROOT. Every wait is bounded; the ternd
is stopped by its pid.
"""
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dc_scripts  # noqa: E402
from lab_harness import free_port, wait_for  # noqa: E402
from lab_harness import http_request  # noqa: E402
import volume_records as vp  # noqa: E402

SOURCE, BUILD = sys.argv[1], sys.argv[2]
TOKEN = 'volume-jobs-token'
failures = []


class FakeApi:
    """A loopback HTTP server recording requests; POST /jobs answers `self.post` (status,
    body), GET /jobs/<uuid> answers the job posted under that uuid (or 404)."""

    def __init__(self):
        self.requests, self.jobs, self.post = [], {}, None
        self.lock = threading.Lock()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                n = int(self.headers.get('Content-Length') or 0)
                body = json.loads(self.rfile.read(n) or b'null')
                with api.lock:
                    api.requests.append(('POST', self.path, dict(self.headers), body))
                    status, answer = api.post or (201, None)
                    if status in (200, 201):
                        api.jobs[body['uuid']] = body
                        answer = dict(body, execution='queued')
                self.answer(status, answer)

            def do_GET(self):
                with api.lock:
                    api.requests.append(('GET', self.path, dict(self.headers), None))
                    job = api.jobs.get(self.path.rsplit('/', 1)[-1])
                self.answer(200 if job else 404, job or {'code': 'ResourceNotFound'})

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self):
        with self.lock:
            return [r for r in self.requests if r[0] == 'POST']

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Ternd:
    def __init__(self, redis_port, api_port, tmp):
        self.port = free_port()
        self.url = f'http://127.0.0.1:{self.port}'
        token_file = os.path.join(tmp, 'token')
        with open(token_file, 'w') as f:
            f.write(TOKEN + '\n')
        os.chmod(token_file, 0o600)
        conf = os.path.join(tmp, 'ternd.json')
        with open(conf, 'w') as f:
            json.dump({'plugins': {'dc': {'api_url': f'http://127.0.0.1:{api_port}/',
                                          'api_token_file': token_file}}}, f)
        env = dict(os.environ)
        env.pop('TERN_API_TOKEN', None)
        self.log = open(os.path.join(tmp, 'ternd.log'), 'w')
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, 'engine', 'ternd'), '--config', conf, '--redis',
             f'redis://127.0.0.1:{redis_port}', '--listen', f'127.0.0.1:{self.port}',
             '--plugin-dir', os.path.join(BUILD, 'tasks'), '--data-dir', tmp,
             '--runner-id', 'volume-jobs'], stdout=self.log, stderr=self.log, env=env)

        def up():
            try:
                return http_request(self.url + '/ping', timeout=2)[0] == 200
            except OSError:
                return False
        wait_for('ternd to answer /ping', up, timeout=30)

    def stop(self):
        """Stops ternd; its exit status (0 after SIGTERM; a sanitizer's report ends it
        otherwise) is what it returns."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def workflow(self, name, chain):
        status, body = http_request(self.url + '/workflows', 'POST',
                            {'name': name, 'version': '1.0.0', 'chain': chain})
        assert status == 201, (status, body)

    def run(self, name, params, want, timeout=30):
        status, job = http_request(self.url + '/jobs', 'POST',
                                   {'workflow': name, 'target': '/' + name,
                                    'uuid': str(uuid.uuid4()), 'params': params})
        assert status == 201, (status, job)

        def finished():
            _, j = http_request(self.url + '/jobs/' + job['uuid'])
            return j if j['execution'] in ('succeeded', 'failed', 'canceled') else None
        j = wait_for(f'the job of {name}', finished, timeout=timeout)
        assert j['execution'] == want, json.dumps(j, indent=1)
        return j


def step_result(job, name):
    for r in job['chain_results']:
        if r['name'] == name:
            return r
    raise AssertionError(f'no result of step {name}: {job["chain_results"]}')


def reserve_step(job_uuid='${params.job}'):
    return {'name': 'volumes', 'task': 'dc.volumes_reserve', 'timeout': 30,
            'args': {'vm_uuid': '${params.vm_uuid}', 'owner_uuid': vp.OWNER,
                     'job_uuid': job_uuid, 'volumes': '${params.volumes}',
                     'networks': [vp.FABRIC]}}


def scenario(inv, api, ternd):
    ternd.workflow('vr-reserve', [reserve_step()])
    ternd.workflow('vr-wait', [{'name': 'wait', 'task': 'dc.volumes_wait', 'timeout': 30,
                                'args': {'vm_uuid': '${params.vm_uuid}',
                                         'volumes': '${params.volumes:-null}',
                                         'wait_s': '${params.wait_s}'}}])
    ternd.workflow('vr-unreserve', [{'name': 'unreserve', 'task': 'dc.volumes_unreserve',
                                     'timeout': 30,
                                     'args': {'vm_uuid': '${params.vm_uuid}',
                                              'job_uuid': '${params.job}', 'wait_s': 30}}])
    ternd.workflow('vr-clean', [{'name': 'clean', 'task': 'dc.reservations_clean',
                                 'timeout': 30, 'args': {}}])
    vp.make_vm(inv, 1)
    shared = vp.make_volume(inv, 1, 'shared')
    volumes = [vp.mount('shared', '/shared'), vp.mount('fresh', '/fresh')]
    job = ternd.run('vr-reserve', {'vm_uuid': vp.vm_uuid(1), 'job': vp.JOB,
                                   'volumes': volumes}, 'succeeded')
    result = step_result(job, 'volumes')['result']
    fresh = result['created'][0]['volume_uuid']
    posts = api.posts()
    assert len(posts) == 1, posts
    _, path, headers, body = posts[0]
    assert path == '/jobs', path
    assert headers.get('Authorization') == 'Bearer ' + TOKEN, headers
    assert body == {'uuid': fresh, 'workflow': 'volume-create',
                    'target': '/volume-create-' + fresh,
                    'params': {'volume_uuid': fresh, 'owner_uuid': vp.OWNER, 'name': 'fresh',
                               'size': 10240, 'networks': [vp.FABRIC]}}, body
    print('ok reserve asks for the volume-create job of the volume it made')

    # Run again by the same provision job: the same job asked for; a 409 for it is
    # success once GET shows the job.
    api.post = (409, {'code': 'Conflict', 'message': f'uuid: job {fresh} already exists'})
    ternd.run('vr-reserve', {'vm_uuid': vp.vm_uuid(1), 'job': vp.JOB, 'volumes': volumes},
              'succeeded')
    posts = api.posts()
    assert len(posts) == 2 and posts[1][3] == body, posts
    assert api.requests[-1][:2] == ('GET', '/jobs/' + fresh), api.requests[-1]
    print('ok a step run again asks for the same job, a 409 for it is success')
    # Any other answer fails the step naming its status and body; so does a 409 for a
    # job that is not this one.
    vp.make_vm(inv, 2)
    for status, code in ((500, 'VolumeJobUnavailable'), (422, 'VolumeJobRefused')):
        api.post = (status, {'code': 'InternalError', 'message': 'boom'})
        failed = ternd.run('vr-reserve', {'vm_uuid': vp.vm_uuid(2), 'job': vp.JOB2,
                                          'volumes': [vp.mount('other', '/o')]}, 'failed')
        err = step_result(failed, 'volumes')['error']
        assert err['code'] == code and f': {status} ' in err['message'] and \
            'boom' in err['message'] and 'volume-create' in err['message'], err
    api.jobs.clear()
    api.post = (409, {'code': 'Conflict', 'message': 'another job'})
    failed = ternd.run('vr-reserve', {'vm_uuid': vp.vm_uuid(2), 'job': vp.JOB2,
                                      'volumes': [vp.mount('other', '/o')]}, 'failed')
    err = step_result(failed, 'volumes')['error']
    assert ': 409 ' in err['message'] and 'another job' in err['message'], err
    api.post = None
    print('ok any other answer fails the step naming its status and body')

    # The wait: polled while creating, then the mounts.
    def flip():
        time.sleep(1.2)
        vp.set_volume(inv, fresh, state='ready', filesystem_path='10.1.0.60:/exports/data',
                      export_path='/lab/cn1/s/export')
    t = threading.Thread(target=flip)
    t.start()
    started = time.monotonic()
    job = ternd.run('vr-wait', {'vm_uuid': vp.vm_uuid(1), 'wait_s': 60}, 'succeeded')
    t.join()
    assert time.monotonic() - started >= 1.2
    mounts = step_result(job, 'wait')['result']['volumes']
    assert [m['volume_uuid'] for m in mounts] == [shared['uuid'], fresh], mounts
    assert mounts[1]['nfsvolume'] == '10.1.0.60:/exports/data', mounts
    print('ok the wait polls a creating volume until it is ready')
    # A failed volume: at once; one that stays creating: after wait_s.
    vp.set_volume(inv, fresh, state='failed')
    started = time.monotonic()
    job = ternd.run('vr-wait', {'vm_uuid': vp.vm_uuid(1), 'wait_s': 60}, 'failed')
    assert time.monotonic() - started < 10
    err = step_result(job, 'wait')['error']
    assert err['code'] == 'VolumeNotReady' and 'is failed' in err['message'], err
    vp.set_volume(inv, fresh, state='creating')
    started = time.monotonic()
    job = ternd.run('vr-wait', {'vm_uuid': vp.vm_uuid(1), 'wait_s': 1}, 'failed')
    assert 1 <= time.monotonic() - started < 15
    err = step_result(job, 'wait')['error']
    assert err['code'] == 'VolumeNotReady' and 'after 1 s' in err['message'], err
    print('ok the wait fails at once for a failed volume and after wait_s')
    # A provision that mounts nothing: answered without a script (the VM need not
    # exist for it).
    job = ternd.run('vr-wait', {'vm_uuid': vp.vm_uuid(99), 'wait_s': 60, 'volumes': []},
                    'succeeded')
    assert step_result(job, 'wait')['result'] == {'volumes': []}, job
    job = ternd.run('vr-wait', {'vm_uuid': vp.vm_uuid(99), 'wait_s': 60}, 'failed')
    assert step_result(job, 'wait')['error']['code'] == 'ResourceNotFound', job
    print('ok a provision without volumes waits for nothing')

    # Unreserve: waits while the volume it made is creating, then asks for its delete.
    before = len(api.posts())
    t = threading.Thread(target=lambda: (time.sleep(1.5),
                                         vp.set_volume(inv, fresh, state='ready')))
    t.start()
    job = ternd.run('vr-unreserve', {'vm_uuid': vp.vm_uuid(1), 'job': vp.JOB}, 'succeeded')
    t.join()
    posts = api.posts()[before:]
    assert len(posts) == 1, posts
    body = posts[0][3]
    result = step_result(job, 'unreserve')['result']
    assert body['workflow'] == 'volume-delete' and body['target'] == '/volume-delete-' + fresh
    assert body['params'] == {'volume_uuid': fresh, 'owner_uuid': vp.OWNER, 'force': False}
    assert body['uuid'] == result['delete'][0]['job_uuid'] != fresh, (body, result)
    assert inv.members('job_reservations:' + vp.JOB) == []
    print('ok unreserve asks for the delete of the volume the job made once it settled')

    # The clean-up: 900 s by default.
    vp.make_vm(inv, 3)
    inv.ok('volumes_reserve', vp.reserve_args(3, [vp.mount('shared', '/s')], job='j-old'))
    inv.ok('volumes_reserve', vp.reserve_args(3, [vp.mount('shared', '/t')], job='j-new'))
    now = datetime.now(timezone.utc)
    for job_uuid, age in (('j-old', 1000), ('j-new', 800)):
        ru = inv.members('job_reservations:' + job_uuid)[0]
        r = inv.get('reservation:' + ru)
        r['create_timestamp'] = (now - timedelta(seconds=age)).strftime(
            '%Y-%m-%dT%H:%M:%S.000Z')
        inv.put('reservation:' + ru, r)
    old = inv.members('job_reservations:j-old')[0]
    job = ternd.run('vr-clean', {}, 'succeeded')
    result = step_result(job, 'clean')['result']
    assert result['removed'] == [old] and result['referenced'] == [], result
    assert inv.members('job_reservations:j-new') != []
    print('ok the clean-up removes reservations older than 900 s')


def main():
    api = FakeApi()
    tmp = tempfile.mkdtemp(prefix='tern-volume-jobs.')
    ternd = None
    try:
        with dc_scripts.private_redis('tern-volume-jobs-redis.') as (_p, r, _t, _c):
            inv = vp.Scripts(r, dc_scripts.scripts_of(BUILD))
            inv.ok('inventory_load', dc_scripts.description(vp.DOC))
            ternd = Ternd(r.sock.getpeername()[1], api.port, tmp)
            try:
                scenario(inv, api, ternd)
            except AssertionError as e:
                failures.append(str(e))
                print('FAIL', e)
                with open(os.path.join(tmp, 'ternd.log')) as f:
                    print(f.read()[-4000:])
            finally:
                status = ternd.stop()
                if status != 0:
                    failures.append(f'ternd exited {status}')
                    with open(os.path.join(tmp, 'ternd.log')) as f:
                        print(f'FAIL ternd exited {status}:', f.read()[-4000:])
    finally:
        api.close()
        subprocess.run(['rm', '-rf', tmp], check=False)
    sys.exit(1 if failures else 0)


main()
