-- include: prelude gather layout queues events holds retention finish
-- tick.lua: a runner's periodic work, one round trip: renew its lease, re-queue the
-- jobs of runners whose lease expired, promote delayed jobs that are due, and hand
-- jobs whose workflow timeout passed while no runner held them back to a runner, and
-- delete finished jobs whose retention ran out.
-- ARGV: 3 runner ('' : promote only), 4 lease ms, 5 runner info JSON, 6 reap 0|1
-- Returns {server now, next delayed due (-1 none), next deadline of a workflow or of a
--          wait in a step queue (-1 none), reaped jobs,
--          1 when more finished jobs are due for deletion than one tick deletes}
local runner, lease, info, reap = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local now = now_ms()
if runner ~= '' then
    redis.call('ZADD', P .. 'runners', now + lease, runner)
    redis.call('HSET', P .. 'runner:' .. runner, 'info', info, 'seen', now)
end

local reaped = 0
if reap == '1' then
    local dead = redis.call('ZRANGEBYSCORE', P .. 'runners', '-inf', now, 'LIMIT', 0, 16)
    for _, d in ipairs(dead) do
        if d ~= runner then
            local rlist = P .. 'r:' .. d .. ':jobs'
            for _, uuid in ipairs(redis.call('LRANGE', rlist, 0, -1)) do
                local k = jkey(uuid)
                local f = redis.call('HMGET', k, 'execution', 'runner', 'inflight', 'phase', 'idx')
                if f[1] == 'running' and f[2] == d then
                    reaped = reaped + 1
                    if f[3] and f[3] == cursor_text(f[4], f[5]) then
                        -- An irreversible step was in flight: do not run it again.
                        interrupt(uuid, d, 'died', f[3], now)
                    else
                        -- Revoke the dead runner's claim: should it come back (a stall,
                        -- a partition longer than its lease), its commits are refused as
                        -- STALE instead of being taken for repeats of its own (DUP).
                        redis.call('HINCRBY', k, 'fence', 1)
                        redis.call('HDEL', k, 'runner')
                        redis.call('HINCRBY', k, 'retried', 1)
                        set_execution(uuid, 'retried')
                        event(uuid, {type = 'retried', runner = d}, now)
                        push_front(uuid)
                    end
                elseif f[1] == 'queued' or f[1] == 'retried' then
                    -- Moved by BLMOVE but never started: back to the head of its queue.
                    reaped = reaped + 1
                    push_front(uuid)
                end
            end
            redis.call('DEL', rlist, P .. 'runner:' .. d)
            redis.call('ZREM', P .. 'runners', d)
            global_event(cjson.encode({type = 'runner_dead', runner = d, time = now}))
        end
    end
end

-- Delayed work that is due goes to the head of its queue.
local due = redis.call('ZRANGEBYSCORE', P .. 'delayed', '-inf', now, 'LIMIT', 0, 1000)
for _, uuid in ipairs(due) do
    redis.call('ZREM', P .. 'delayed', uuid)
    local ex = redis.call('HGET', jkey(uuid), 'execution')
    if ex == 'queued' or ex == 'retried' then
        push_front(uuid)
    end
end

-- Workflow timeouts of jobs no runner holds (waiting, delayed, parked on a hold):
-- mark them and queue them, so a runner runs their onerror chain.
local late = redis.call('ZRANGEBYSCORE', P .. 'deadlines', '-inf', now, 'LIMIT', 0, 1000)
for _, uuid in ipairs(late) do
    -- A running job's runner enforces the deadline with its own timer; a job that
    -- leaves its runner later gets its entry back (rearm_deadline).
    redis.call('ZREM', P .. 'deadlines', uuid)
    local k = jkey(uuid)
    local f = redis.call('HMGET', k, 'execution', 'timed_out')
    if f[1] and UNFINISHED[f[1]] and f[1] ~= 'running' and not f[2] then
        redis.call('HSET', k, 'timed_out', '1')
        local queue = job_queue(uuid)
        -- Queue it only where nobody else will: a job already moved into a runner's
        -- list (BLMOVE, claim not answered yet) is timed out by that claim, and a
        -- second copy in the queue would run it twice.
        local parked = redis.call('HGET', k, 'blocked_on')
        local free = redis.call('ZREM', P .. 'delayed', uuid) > 0 or
                     redis.call('LREM', qkey(queue), 0, uuid) > 0 or parked or
                     f[1] == 'waiting'
        -- Its onerror chain starts on the workflow's queue, whatever step queue it
        -- waited in.
        redis.call('HDEL', k, 'step_queue')
        redis.call('ZREM', QUEUE_WAITS, uuid)
        leave_step_holds(uuid, now)
        set_execution(uuid, 'queued')
        event(uuid, {type = 'timed_out'}, now)
        if free then
            push_front(uuid)
        end
    end
end

-- Steps that waited in their queue past their timeout (see hop in lib/queues.lua): taken
-- out of that queue, so none of its runners runs them, and handed to the workflow's
-- queue marked (queue_timeout: the queue waited on), so a runner there fails the step
-- with TaskTimeout through its retries, fallback and onerror. A job no longer in that
-- queue (claimed, or moved on) is left alone.
local waited = redis.call('ZRANGEBYSCORE', QUEUE_WAITS, '-inf', now, 'LIMIT', 0, 1000)
for _, uuid in ipairs(waited) do
    redis.call('ZREM', QUEUE_WAITS, uuid)
    local k = jkey(uuid)
    local f = redis.call('HMGET', k, 'execution', 'step_queue')
    if f[2] and (f[1] == 'queued' or f[1] == 'retried') and
        redis.call('LREM', qkey(f[2]), 0, uuid) > 0 then
        redis.call('HSET', k, 'queue_timeout', f[2], 'rf', '1') -- see RARE_FIELDS
        redis.call('HDEL', k, 'step_queue')
        event(uuid, {type = 'queue_timeout', queue = f[2]}, now)
        push_front(uuid)
    end
end

-- Retention: finished jobs whose time ran out (see expire_job) are deleted, every key
-- of theirs, and leave the listings' indexes, at most SWEEP_MAX a tick; a full sweep
-- asks the runner for another tick at once, so deletion keeps up with any rate of jobs
-- ending. A job still there was given a later time (finished again after a redrive) or
-- none (redriven): ZRANGEBYSCORE does not see it.
local SWEEP_MAX = 1000
local expired = redis.call('ZRANGEBYSCORE', P .. 'expiring', '-inf', now, 'LIMIT', 0, SWEEP_MAX)
if #expired > 0 then
    local by_execution = {}
    for _, uuid in ipairs(expired) do
        local k = jkey(uuid)
        -- Only a finished job goes: one that is unfinished (its uuid taken again by a
        -- new job since) keeps its keys.
        local ex = redis.call('HGET', k, 'execution')
        if ex and not UNFINISHED[ex] then
            local list = by_execution[ex] or {}
            by_execution[ex] = list
            list[#list + 1] = uuid
            local keys = {}
            for i, suffix in ipairs(JOB_KEY_SUFFIXES) do
                keys[i] = k .. suffix
            end
            redis.call('UNLINK', unpack(keys))
        end
    end
    for e, list in pairs(by_execution) do
        redis.call('ZREM', P .. 'jobs:' .. e, unpack(list))
    end
    redis.call('ZREM', P .. 'expiring', unpack(expired))
end

local nd = redis.call('ZRANGE', P .. 'delayed', 0, 0, 'WITHSCORES')
local ndl = redis.call('ZRANGE', P .. 'deadlines', 0, 0, 'WITHSCORES')
local nqw = redis.call('ZRANGE', QUEUE_WAITS, 0, 0, 'WITHSCORES')
-- The next deadline: of a workflow or of a wait in a step queue, whichever is first.
local next_deadline = ndl[2] and tonumber(ndl[2]) or -1
if nqw[2] and (next_deadline < 0 or tonumber(nqw[2]) < next_deadline) then
    next_deadline = tonumber(nqw[2])
end
return {now, nd[2] and tonumber(nd[2]) or -1, next_deadline, reaped,
        #expired == SWEEP_MAX and 1 or 0}
