#!/usr/bin/env python3
"""The control-plane scripts of volumes at provision (dc.provision_check's volumes,
dc.volumes_reserve, dc.volumes_wait, dc.vm_set_state's sdc:volumes,
dc.volumes_reference, dc.volumes_unreserve, dc.reservations_clean) against a real
redis-server, called as the plugin calls them (dc_scripts.py), with what the volume
jobs and the agent do played by this file: every refusal with its code and the words
that name the problem, and nothing stored after it (acceptance 18, 19, 20 of RFD 26,
and a missing volume with no fabric network); reservations made once per job and
volume, idempotent by job (11, X1); the wait's exit for a failed, deleting or deleted
volume and for its bound (TRITON.md 3.3); references replacing reservations (11);
what a failed provision gives back, and which volumes it asks to delete (13, X2);
the clean-up rules (14); a delete racing a reservation (12, X8).

Usage: test_dc_volume_provision_scripts.py BUILD_ROOT
"""
import sys

import dc_scripts
from volume_records import (DOC, EXTERNAL, FABRIC, FABRIC_OTHER, IMG, JOB, JOB2, KIMG,
                            KVM, NS, OTHER, OWNER, PKG, Scripts, make_vm, make_volume,
                            mount, reserve_args, set_vm_state, set_volume, vm_uuid,
                            vol_uuid)

BUILD = sys.argv[1]
def check_args(i, volumes, networks=(FABRIC,), package=PKG, image=IMG):
    return {'vm_uuid': vm_uuid(i), 'owner_uuid': OWNER, 'alias': None, 'package': package,
            'image_uuid': image, 'networks': [{'uuid': n} for n in networks],
            'server_uuid': None, 'autoboot': True, 'customer_metadata': {}, 'disks': None,
            'volumes': volumes, 'target': '/provision-' + vm_uuid(i)}


case = dc_scripts.Cases(BUILD, DOC, 'tern-dc-volprov.', make=Scripts)


# ---- dc.provision_check --------------------------------------------------------------


def check_refused(inv, volumes, code, part, status, **kw):
    before = inv.snapshot()
    inv.error('provision_check', check_args(1, volumes, **kw), code, part, status)
    assert inv.snapshot() == before, 'a refused check changed what is stored'


@case
def check_refuses_bad_volumes_naming_the_field(inv):
    make_volume(inv, 1, 'shared')
    good = {'name': 'shared', 'mountpoint': '/shared'}
    # 18: a mode other than rw/ro, a type other than tritonnfs.
    check_refused(inv, [dict(good, mode='rx')], 'InvalidArgument',
                  'volumes[0].mode: expected "rw" or "ro", got "rx"', 422)
    check_refused(inv, [dict(good, type='nfs')], 'InvalidArgument',
                  'volumes[0].type: volume type "nfs" is not supported', 422)
    # 19: one mountpoint twice (also written with a trailing "/").
    check_refused(inv, [good, {'name': 'other', 'mountpoint': '/shared/'}], 'InvalidArgument',
                  'volumes[1].mountpoint: /shared is also the mountpoint of volumes[0]', 422)
    check_refused(inv, [good, {'name': 'other', 'mountpoint': '/shared/sub'}],
                  'InvalidArgument', 'volumes[1].mountpoint: /shared/sub overlaps the '
                  'mountpoint /shared of volumes[0]', 422)
    for mp in ('shared', '', '/', '/a/../b', '/a/./b', '//a', '/a//b', 'C:/x', '/a\nb'):
        check_refused(inv, [dict(good, mountpoint=mp)], 'InvalidArgument',
                      'volumes[0].mountpoint', 422)
    check_refused(inv, [dict(good, mountpoint='/' + 'a' * 1024)], 'InvalidArgument',
                  'volumes[0].mountpoint: at most 1024 characters, got 1025', 422)
    check_refused(inv, [{'name': 'shared'}], 'InvalidArgument',
                  'volumes[0].mountpoint: required', 422)
    for name in ('a', '-ab', 'a b', 'a/b', None, 7):
        check_refused(inv, [dict(good, name=name)], 'InvalidArgument', 'volumes[0].name', 422)
    check_refused(inv, [dict(good, colour='red')], 'InvalidArgument',
                  'volumes[0].colour: unknown key', 422)
    check_refused(inv, {'name': 'shared'}, 'InvalidArgument', 'volumes: expected a list', 422)
    check_refused(inv, 'shared:/shared', 'InvalidArgument', 'volumes: expected a list', 422)
    check_refused(inv, [{'name': f'v{i:02d}', 'mountpoint': f'/m{i}'} for i in range(17)],
                  'InvalidArgument', 'volumes: at most 16 volumes, got 17', 422)
    # 20: a kvm instance never mounts volumes, refused before anything is taken.
    check_refused(inv, [good], 'InvalidArgument', 'volumes: kvm instances cannot mount volumes',
                  422, package=KVM, image=KIMG)


@case
def check_refuses_volumes_the_vm_cannot_use(inv):
    make_volume(inv, 1, 'shared')
    make_volume(inv, 2, 'broken', state='failed')
    make_volume(inv, 3, 'going', state='deleting')
    make_volume(inv, 4, 'elsewhere', networks=(FABRIC_OTHER,))
    make_volume(inv, 5, 'theirs', owner=OTHER, networks=(FABRIC_OTHER,))
    check_refused(inv, [{'name': 'broken', 'mountpoint': '/b'}], 'VolumeNotReady',
                  'volumes[0]: volume broken (' + vol_uuid(2) + ') is failed', 409)
    check_refused(inv, [{'name': 'going', 'mountpoint': '/g'}], 'VolumeNotReady',
                  'volume going (' + vol_uuid(3) + ') is deleting', 409)
    check_refused(inv, [{'name': 'elsewhere', 'mountpoint': '/e'}], 'VolumeNotReachable',
                  'is reachable on networks ' + FABRIC_OTHER + ', none of which the vm is on',
                  409)
    # A missing volume is made on the VM's fabric networks of the owner: with none
    # (an external network only, or another owner's fabric), refused.
    check_refused(inv, [{'name': 'fresh', 'mountpoint': '/f'}], 'VolumeNotReachable',
                  'volume fresh does not exist and would be created on the vm\'s fabric '
                  'networks of owner ' + OWNER + ', but the vm is on none', 409,
                  networks=(EXTERNAL,))
    check_refused(inv, [{'name': 'fresh', 'mountpoint': '/f'}], 'VolumeNotReachable',
                  'but the vm is on none', 409, networks=(FABRIC_OTHER,))
    # Another owner's volume of that name is not this owner's: it would be made anew.
    got = inv.ok('provision_check', check_args(1, [{'name': 'theirs', 'mountpoint': '/t'}]))
    assert got['volumes'] == [mount('theirs', '/t')], got['volumes']


@case
def check_answers_the_volumes_normalised(inv):
    make_volume(inv, 1, 'shared')
    before = inv.snapshot()
    got = inv.ok('provision_check', check_args(1, [
        {'name': 'shared', 'mountpoint': '/shared/'},
        {'name': 'fresh', 'mountpoint': '/data/fresh', 'mode': 'ro', 'type': 'tritonnfs'}]))
    assert got['volumes'] == [mount('shared', '/shared'), mount('fresh', '/data/fresh', 'ro')], \
        got['volumes']
    assert inv.snapshot() == before, 'the check wrote something'
    for none in (None, []):
        got = inv.ok('provision_check', check_args(1, none))
        assert got['volumes'] == [], got
    # A kvm instance without volumes is fine.
    inv.ok('provision_check', check_args(1, None, package=KVM, image=KIMG))


# ---- dc.volumes_reserve --------------------------------------------------------------


def reservations_of(inv, job):
    return [inv.get('reservation:' + u) for u in inv.members('job_reservations:' + job)]


@case
def reserve_takes_one_reservation_per_volume_and_makes_missing_ones(inv):
    make_vm(inv, 1)
    shared = make_volume(inv, 1, 'shared')
    volumes = [mount('shared', '/shared'), mount('fresh', '/fresh', 'ro'),
               mount('shared', '/again')]
    got = inv.ok('volumes_reserve', reserve_args(1, volumes))
    res = reservations_of(inv, JOB)
    assert len(res) == 2 and len(got['reservations']) == 2, (got, res)
    assert sorted(got['reservations']) == sorted(r['uuid'] for r in res)
    by_name = {r['volume_name']: r for r in res}
    assert set(by_name) == {'shared', 'fresh'}, res
    for r in res:
        assert r['vm_uuid'] == vm_uuid(1) and r['job_uuid'] == JOB and r['owner_uuid'] == OWNER
        assert r['create_timestamp'] == '2026-11-26T12:00:00.000Z', r
        assert inv.members('volume_reservations:' + r['volume_uuid']) == [r['uuid']]
    assert by_name['shared']['volume_uuid'] == shared['uuid']
    # The missing volume: creating, this job's, 10240 MiB, on the VM's fabric network.
    fresh_uuid = inv.r.cmd('HGET', NS + 'volume_names:' + OWNER, 'fresh')
    fresh = inv.get('volume:' + fresh_uuid)
    assert fresh['state'] == 'creating' and fresh['created_by_job'] == JOB, fresh
    assert fresh['size'] == 10240 and fresh['networks'] == [FABRIC], fresh
    assert fresh['owner_uuid'] == OWNER and fresh['type'] == 'tritonnfs', fresh
    assert fresh['refs'] == [] and fresh['share_state'] == 'unknown', fresh
    assert fresh['job_uuid'] is None and fresh['vm_uuid'] not in (None, fresh_uuid)
    assert fresh['filesystem_path'] is None and fresh['export_path'] is None, fresh
    assert fresh_uuid in inv.members('volumes:state:creating')
    assert fresh_uuid in inv.members('volumes:owner:' + OWNER)
    assert by_name['fresh']['volume_uuid'] == fresh_uuid
    assert got['created'] == [{'volume_uuid': fresh_uuid, 'owner_uuid': OWNER, 'name': 'fresh',
                               'size': 10240, 'networks': [FABRIC]}], got['created']
    # The VM's volumes.
    vm = inv.get('vm:' + vm_uuid(1))
    want = [dict(mount('shared', '/shared'), volume_uuid=shared['uuid']),
            dict(mount('fresh', '/fresh', 'ro'), volume_uuid=fresh_uuid),
            dict(mount('shared', '/again'), volume_uuid=shared['uuid'])]
    assert vm['volumes'] == want == got['volumes'], vm['volumes']

    # Run again by the same job: the same reservations, the same volume, the same
    # volume-create job asked for; nothing new.
    before = inv.snapshot()
    again = inv.ok('volumes_reserve', reserve_args(1, volumes))
    assert sorted(again['reservations']) == sorted(got['reservations']), again
    assert again['created'] == got['created'], again
    assert inv.snapshot() == before, 'a second run changed what is stored'
    # Once the volume is ready, a run again asks for no job.
    set_volume(inv, fresh_uuid, state='ready')
    assert inv.ok('volumes_reserve', reserve_args(1, volumes))['created'] == []
    # No volume at all: nothing reserved, vm.volumes [].
    make_vm(inv, 2)
    none = inv.ok('volumes_reserve', reserve_args(2, [], job=JOB2))
    assert none == {'volumes': [], 'reservations': [], 'created': []}, none
    assert inv.get('vm:' + vm_uuid(2))['volumes'] == []


@case
def reserve_refuses_a_deleting_or_failed_volume_and_writes_nothing(inv):
    make_vm(inv, 1)
    make_volume(inv, 1, 'shared')
    make_volume(inv, 2, 'going', state='deleting')
    make_volume(inv, 3, 'broken', state='failed')
    for name, state, i in (('going', 'deleting', 2), ('broken', 'failed', 3)):
        before = inv.snapshot()
        inv.error('volumes_reserve', reserve_args(1, [mount('shared', '/s'), mount('new', '/n'),
                                                      mount(name, '/x')]),
                  'VolumeNotReady', f'volumes[2]: volume {name} ({vol_uuid(i)}) is {state}', 409)
        assert inv.snapshot() == before, 'a refused reserve changed what is stored'
    # A VM with no fabric network of the owner cannot have a volume made for it.
    make_vm(inv, 2, networks=(EXTERNAL,))
    before = inv.snapshot()
    inv.error('volumes_reserve', reserve_args(2, [mount('new', '/n')], networks=(EXTERNAL,)),
              'VolumeNotReachable', 'but the vm is on none', 409)
    assert inv.snapshot() == before
    inv.error('volumes_reserve', reserve_args(9, [mount('shared', '/s')]), 'ResourceNotFound',
              'vm ' + vm_uuid(9) + ' does not exist', 404)


@case
def a_delete_racing_a_reservation_sees_it_or_wins(inv):
    # 12 / X8: the delete's atomic check and the reserve are each one script, so one
    # runs wholly before the other.
    make_vm(inv, 1)
    make_vm(inv, 2)
    make_volume(inv, 1, 'shared')
    begin = 'volume_delete_begin' in inv.sha
    # The reserve first: the delete sees the reservation, naming the VM.
    inv.ok('volumes_reserve', reserve_args(1, [mount('shared', '/s')]))
    assert len(inv.members('volume_reservations:' + vol_uuid(1))) == 1
    if begin:
        inv.error('volume_delete_begin', {'volume_uuid': vol_uuid(1), 'owner_uuid': OWNER,
                                          'force': False}, 'VolumeInUse', vm_uuid(1))
        assert inv.get('volume:' + vol_uuid(1))['state'] == 'ready'
    # The delete first (it switched the volume to deleting): the reserve fails cleanly
    # and no VM mounts the volume.
    if begin:
        inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
        inv.ok('volume_delete_begin', {'volume_uuid': vol_uuid(1), 'owner_uuid': OWNER,
                                       'force': False})
    else:
        set_volume(inv, vol_uuid(1), state='deleting')
    inv.error('volumes_reserve', reserve_args(2, [mount('shared', '/s')], job=JOB2),
              'VolumeNotReady', 'is deleting', 409)
    assert reservations_of(inv, JOB2) == []
    assert inv.get('vm:' + vm_uuid(2)).get('volumes') in (None, [])


# ---- dc.volumes_wait -----------------------------------------------------------------


@case
def wait_answers_the_mounts_once_ready_and_exits_for_a_lost_volume(inv):
    make_vm(inv, 1)
    shared = make_volume(inv, 1, 'shared')
    got = inv.ok('volumes_reserve', reserve_args(1, [mount('shared', '/shared'),
                                                     mount('fresh', '/fresh', 'ro')]))
    fresh = got['created'][0]['volume_uuid']
    wait = {'vm_uuid': vm_uuid(1)}
    pending = inv.ok('volumes_wait', wait)
    assert pending == {'pending': [{'name': 'fresh', 'volume_uuid': fresh,
                                    'state': 'creating'}]}, pending
    inv.error('volumes_wait', dict(wait, expired=True, wait_s=300), 'VolumeNotReady',
              'after 300 s, volumes are still not ready: fresh (' + fresh + ') is creating', 409)
    set_volume(inv, fresh, state='ready', filesystem_path='10.1.0.50:/exports/data',
               export_path='/lab/cn1/storage/export')
    ready = inv.ok('volumes_wait', wait)
    assert ready == {'volumes': [
        {'name': 'shared', 'volume_uuid': shared['uuid'], 'mountpoint': '/shared', 'mode': 'rw',
         'type': 'tritonnfs', 'nfsvolume': shared['filesystem_path'],
         'export_path': shared['export_path']},
        {'name': 'fresh', 'volume_uuid': fresh, 'mountpoint': '/fresh', 'mode': 'ro',
         'type': 'tritonnfs', 'nfsvolume': '10.1.0.50:/exports/data',
         'export_path': '/lab/cn1/storage/export'}]}, ready
    # No volumes: ready at once.
    make_vm(inv, 2)
    inv.ok('volumes_reserve', reserve_args(2, [], job=JOB2))
    assert inv.ok('volumes_wait', {'vm_uuid': vm_uuid(2)}) == {'volumes': []}
    # A failed volume ends the wait at once, naming it and its state; so do a deleting
    # one and one deleted (TRITON.md 3.3: Triton's wait had no such exit).
    set_volume(inv, fresh, state='failed')
    inv.error('volumes_wait', wait, 'VolumeNotReady',
              'volume fresh (' + fresh + ') is failed: vm ' + vm_uuid(1) + ' cannot mount it',
              409)
    set_volume(inv, fresh, state='deleting')
    inv.error('volumes_wait', wait, 'VolumeNotReady', 'is deleting', 409)
    inv.r.cmd('DEL', NS + 'volume:' + fresh)
    inv.error('volumes_wait', wait, 'VolumeNotReady',
              'volume fresh (' + fresh + ') is gone: it was deleted while vm', 409)


# ---- mark, refs -----------------------------------------------------------------------


@case
def mark_writes_sdc_volumes_and_refs_replace_reservations(inv):
    make_vm(inv, 1)
    shared = make_volume(inv, 1, 'wp-uploads', refs=['f0000000-0000-4000-8000-00000000aaaa'])
    inv.ok('volumes_reserve', reserve_args(1, [mount('wp-uploads', '/uploads'),
                                               mount('wp-uploads', '/ro', 'ro')]))
    mounts = inv.ok('volumes_wait', {'vm_uuid': vm_uuid(1)})['volumes']
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running', 'volumes': mounts})
    vm = inv.get('vm:' + vm_uuid(1))
    # 11: the exact text RFD 26 gives.
    ip = shared['filesystem_path']
    assert vm['internal_metadata']['sdc:volumes'] == (
        '[{"mountpoint":"/uploads","name":"wp-uploads","nfsvolume":"' + ip +
        '","mode":"rw","type":"tritonnfs"},{"mountpoint":"/ro","name":"wp-uploads",'
        '"nfsvolume":"' + ip + '","mode":"ro","type":"tritonnfs"}]'), vm['internal_metadata']
    assert vm['state'] == 'running'
    # A mark without volumes (vm-start, vm-stop) leaves it as it is.
    inv.ok('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'stopped'})
    assert inv.get('vm:' + vm_uuid(1))['internal_metadata'] == vm['internal_metadata']
    inv.error('vm_set_state', {'vm_uuid': vm_uuid(1), 'state': 'running', 'volumes': [{}]},
              'InvalidArgument', 'volumes[0]: expected {name, mountpoint')

    got = inv.ok('volumes_reference', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
    assert got == {'referenced': [shared['uuid']], 'dropped': []}, got
    v = inv.get('volume:' + shared['uuid'])
    assert v['refs'] == ['f0000000-0000-4000-8000-00000000aaaa', vm_uuid(1)], v['refs']
    assert v['version'] > shared['version']
    # 11: no reservation remains.
    assert inv.members('reservations') == [] and reservations_of(inv, JOB) == []
    assert inv.members('volume_reservations:' + shared['uuid']) == []
    before = inv.snapshot()
    again = inv.ok('volumes_reference', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
    assert again == {'referenced': [], 'dropped': []} and inv.snapshot() == before
    # 16: destroyed, the VM loses its reference (release, on main).
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'destroyed'})
    assert inv.get('volume:' + shared['uuid'])['refs'] == \
        ['f0000000-0000-4000-8000-00000000aaaa']


@case
def refs_of_a_vm_no_longer_active_are_dropped(inv):
    make_vm(inv, 1)
    make_volume(inv, 1, 'shared')
    inv.ok('volumes_reserve', reserve_args(1, [mount('shared', '/s')]))
    set_vm_state(inv, 1, 'failed')
    got = inv.ok('volumes_reference', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
    assert got['referenced'] == [] and len(got['dropped']) == 1, got
    assert inv.get('volume:' + vol_uuid(1))['refs'] == []
    assert inv.members('reservations') == []


# ---- dc.volumes_unreserve ------------------------------------------------------------


@case
def unreserve_gives_back_reservations_and_the_volumes_the_job_made(inv):
    make_vm(inv, 1)
    make_vm(inv, 2)
    make_volume(inv, 1, 'before')  # existed before the job: left alone
    got = inv.ok('volumes_reserve', reserve_args(1, [
        mount('before', '/b'), mount('mine', '/m'), mount('shared-new', '/s'),
        mount('slow', '/w')]))
    made = {c['name']: c['volume_uuid'] for c in got['created']}
    assert set(made) == {'mine', 'shared-new', 'slow'}, got
    set_volume(inv, made['mine'], state='ready')
    set_volume(inv, made['shared-new'], state='ready')
    # Another provision reserved a volume this job made: it stays.
    inv.ok('volumes_reserve', reserve_args(2, [mount('shared-new', '/s')], job=JOB2))
    # 13: the provision fails; its onerror's release dropped the VM's reservations
    # already (release.lua); unreserve deletes what is left of the job's.
    inv.ok('release', {'vm_uuid': vm_uuid(1), 'final_state': 'failed'})
    out = inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
    assert reservations_of(inv, JOB) == []
    assert len(reservations_of(inv, JOB2)) == 1
    assert out['delete'] == [{'volume_uuid': made['mine'], 'owner_uuid': OWNER,
                              'job_uuid': out['delete'][0]['job_uuid']}], out
    assert out['pending'] == [{'volume_uuid': made['slow'], 'name': 'slow',
                               'state': 'creating'}], out
    assert out['left'] == []
    # The delete job's uuid is the volume's own, the same every run.
    again = inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})
    assert again['delete'] == out['delete'] and again['released'] == [], again
    job = out['delete'][0]['job_uuid']
    assert job not in (made['mine'], JOB) and len(job) == 36 and job[14] == '5', job
    # Past the wait, a volume still creating is left (for an operator), not pending.
    late = inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB,
                                        'expired': True})
    assert late['pending'] == [] and late['left'] == out['pending'], late
    # A volume no volume-create job took (its POST refused) long after it was made:
    # removed, its name freed. One a job took is waited for.
    gone = inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB,
                                        'abandon_before': '2026-11-26T12:00:00.001Z'})
    assert gone['abandoned'] == [made['slow']] and gone['pending'] == [], gone
    assert inv.get('volume:' + made['slow']) is None
    assert inv.r.cmd('HGET', NS + 'volume_names:' + OWNER, 'slow') is None
    assert made['slow'] not in inv.members('volumes:state:creating')
    # Reservations held by the job before release are deleted by unreserve alone.
    make_vm(inv, 3)
    inv.ok('volumes_reserve', reserve_args(3, [mount('before', '/b')], job='j3'))
    out3 = inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(3), 'job_uuid': 'j3'})
    assert len(out3['released']) == 1 and out3['delete'] == [], out3
    assert inv.members('volume_reservations:' + vol_uuid(1)) == []
    # A volume of the job's that a VM references is kept.
    set_volume(inv, made['mine'], refs=[vm_uuid(3)])
    assert inv.ok('volumes_unreserve', {'vm_uuid': vm_uuid(1), 'job_uuid': JOB})['delete'] == []


# ---- dc.reservations_clean -----------------------------------------------------------


@case
def clean_removes_stale_reservations_and_references_active_vms(inv):
    make_volume(inv, 1, 'shared')
    make_volume(inv, 2, 'other')
    r = {}
    for i, state in ((1, 'failed'), (2, 'running'), (3, 'stopped'), (4, None), (5, None),
                     (6, 'destroyed')):
        make_vm(inv, i)
        r[i] = inv.ok('volumes_reserve', reserve_args(i, [mount('shared', '/s')],
                                                      job=f'job-{i}'))['reservations'][0]
        if state is not None:
            set_vm_state(inv, i, state)
    # 4 is a provision at work made long ago (past reservation_max_age_s), 5 a recent one.
    old = inv.get('reservation:' + r[4])
    old['create_timestamp'] = '2026-11-26T11:00:00.000Z'
    inv.put('reservation:' + old['uuid'], old)
    # A VM gone and a volume gone.
    make_vm(inv, 7)
    r[7] = inv.ok('volumes_reserve', reserve_args(7, [mount('other', '/o')],
                                                  job='job-7'))['reservations'][0]
    inv.r.cmd('DEL', NS + 'vm:' + vm_uuid(7))
    make_vm(inv, 8)
    r[8] = inv.ok('volumes_reserve', reserve_args(8, [mount('other', '/o')],
                                                  job='job-8'))['reservations'][0]
    inv.r.cmd('DEL', NS + 'volume:' + vol_uuid(2))

    got = inv.ok('reservations_clean', {'older_than': '2026-11-26T11:45:00.000Z'})
    assert sorted(got['removed']) == sorted([r[1], r[4], r[6], r[7], r[8]]), got
    assert sorted(got['referenced']) == sorted([r[2], r[3]]), got
    assert got['more'] is False
    assert inv.members('reservations') == [r[5]]
    assert inv.members('volume_reservations:' + vol_uuid(1)) == [r[5]]
    refs = inv.get('volume:' + vol_uuid(1))['refs']
    assert sorted(refs) == sorted([vm_uuid(2), vm_uuid(3)]), refs
    # A second run changes nothing; the recent one goes once it is old too (14).
    before = inv.snapshot()
    assert inv.ok('reservations_clean', {'older_than': '2026-11-26T11:45:00.000Z'}) == \
        {'removed': [], 'referenced': [], 'more': False}
    assert inv.snapshot() == before
    got = inv.ok('reservations_clean', {'older_than': '2026-11-26T12:00:00.001Z'})
    assert got['removed'] == [r[5]] and inv.members('reservations') == [], got
    inv.error('reservations_clean', {'older_than': 'yesterday'}, 'InvalidArgument',
              'older_than: expected an ISO 8601 time')
    # A bounded run says when it left some unexamined.
    for i in (9, 10, 11):
        make_vm(inv, i)
        inv.ok('volumes_reserve', reserve_args(i, [mount('shared', '/s')], job=f'job-{i}'))
    part = inv.ok('reservations_clean', {'older_than': '2026-11-26T11:45:00.000Z', 'limit': 2})
    assert part['more'] is True and part['removed'] == [] and part['referenced'] == [], part


case.exit()
