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

-- Cancels the deletion of a job's keys: it is live again (redrive). Jobs finished by
-- earlier versions had an expiry on each key: it is removed.
local function persist_job(uuid)
    local k = jkey(uuid)
    for _, suffix in ipairs(JOB_KEY_SUFFIXES) do
        redis.call('PERSIST', k .. suffix)
    end
    zset_rem(P .. 'expiring', uuid)
end

-- After a write to a key of a job that may have finished (info, post-back attempts):
-- a job finished by an earlier version has an expiry on each key, and a key the write
-- created gets the job's remaining time. (Jobs finished now have none: tick.lua deletes
-- every key of theirs, new ones included.)
local function follow_job_expiry(uuid)
    local ttl = redis.call('PTTL', jkey(uuid))
    if ttl > 0 then
        local k = jkey(uuid)
        for _, suffix in ipairs(JOB_KEY_SUFFIXES) do
            if redis.call('PTTL', k .. suffix) == -1 then
                redis.call('PEXPIRE', k .. suffix, ttl)
            end
        end
    end
end
