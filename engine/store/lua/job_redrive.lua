-- include: prelude layout queues events locks retention
-- job_redrive.lua: puts a failed or canceled job back in its queue at a chain step,
-- keeping the results of the steps before it; optionally with corrected params.
-- ARGV: 3 uuid, 4 chain index to start at, 5 new params JSON ('' unchanged),
--       6 uniqueness key for the (new) params ('' none), 7 history entry JSON,
--       8 locks version the caller checked the job's target against, 9 the cap on the
--       instructions of all unfinished jobs' locks (max_lock_instructions)
-- Returns {'OK'} | {'BADSTATE', execution} | {'CONFLICT', other uuid} | {'NOTFOUND'} |
--         {'LOCKS', version, job, pattern, ...} (the caller's table of locks is stale:
--         nothing was written; check the target against these and send again) |
--         {'LOCKCAP', instructions held, cap, the job's} (its lock would pass the cap;
--         nothing was written)
local uuid, idx, params, unique, seen = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[8]
local k = jkey(uuid)
local f = redis.call('HMGET', k, 'execution', 'locks', 'target', 'locks_size')
local ex = f[1]
if not ex then
    return {'NOTFOUND'}
end
if ex ~= 'failed' and ex ~= 'canceled' then
    return {'BADSTATE', ex}
end
-- A retried job is a job created again: its target must not match the locks of an
-- unfinished job (the caller matches them; job_create.lua does the same).
if f[3] then
    local stale = locks_if_stale(seen)
    if stale then
        return stale
    end
end
if unique ~= '' then
    local other = redis.call('HGET', P .. 'unique', unique)
    if other and other ~= uuid then
        local oex = redis.call('HGET', jkey(other), 'execution')
        if oex and UNFINISHED[oex] then
            return {'CONFLICT', other}
        end
    end
end
-- The job's lock is held again: it must fit under the cap, as at create.
local locks_size = tonumber(f[4]) or 0
if f[2] then
    local held = locks_size_fits(locks_size, tonumber(ARGV[9]) or 0)
    if held then
        return {'LOCKCAP', held, ARGV[9], locks_size}
    end
end
local now = now_ms()
-- The story so far goes to the job's stream before the record forgets part of it.
job_stream_open(uuid)
-- The job is live again: its keys are no longer deleted (finish() set the retention).
keep_job(uuid)
if idx == 0 then
    redis.call('DEL', k .. ':res:0')
else
    redis.call('LTRIM', k .. ':res:0', 0, idx - 1)
end
redis.call('DEL', k .. ':res:1', k .. ':res:2')
redis.call('HSET', k, 'phase', WF_CHAIN, 'idx', idx, 'attempt', 0, 'polls', 0, 'rf', '1')
-- It goes back to its workflow's queue: a runner there moves it on to its step's queue
-- if that step names one (one hop; the step's queue is a template of what the job knows
-- when it runs, so it is expanded by a runner, not here).
redis.call('HDEL', k, 'error', 'failed_at', 'timed_out', 'deadline', 'cancel', 'resume',
           'wait_info', 'finished_at', 'runner', 'inflight', 'unique', 'step_queue',
           'queue_timeout', 'fallback_error', 'hopped')
if params ~= '' then
    redis.call('HSET', k, 'params', params)
end
if unique ~= '' then
    redis.call('HSET', k, 'unique', unique)
    redis.call('HSET', P .. 'unique', unique, uuid)
end
if f[2] then
    redis.call('HSET', P .. 'locks', uuid, f[2])
    redis.call('INCR', P .. 'locks:version')
    locks_size_add(uuid, locks_size)
end
redis.call('RPUSH', k .. ':history', ARGV[7])
redis.call('HSET', k, 'xk', '1', 'rf', '1') -- see has_extra_keys, RARE_FIELDS
set_execution(uuid, 'queued')
event(uuid, {type = 'redrive', index = idx}, now)
push_front(uuid)
return {'OK'}
