-- include: prelude gather events
-- lib/retention.lua: every key of a job, and when a finished job's keys are deleted.

-- Every key of a job (the job hash first), for retention: see store.h. Only the first
-- three exist for most jobs (a job records in its field `xk` that it got any of the
-- others); tick.lua deletes them all when the job's retention has run out.
local JOB_KEY_SUFFIXES = {'', ':res:0', ':events', ':res:1', ':res:2', ':state', ':history',
                          ':info', ':held', ':postbacks'}

-- Schedules the deletion of a finished job's keys, `ms` from now: tick.lua deletes them
-- then (at its next tick), with the job's place in the listings. The keys get no expiry
-- of their own: two PEXPIRE per job were a visible part of Redis's instructions per job
-- (tests/bench/script_cost.py --callgrind), and an expiry costs memory per key. Only a
-- succeeded job's event stream, kept a shorter while (`events_ms`), expires by itself.
local function expire_job(uuid, ms, now, events_ms)
    if events_ms < ms and job_has_stream(uuid) then
        redis.call('PEXPIRE', jkey(uuid) .. ':events', events_ms)
    end
    zset_add(P .. 'expiring', time_text(now + ms), uuid)
end

-- Cancels the deletion of a job's keys: it is live again (redrive).
local function keep_job(uuid)
    zset_rem(P .. 'expiring', uuid)
end
