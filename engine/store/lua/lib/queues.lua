-- include: prelude gather
-- lib/queues.lua: where a job waits to run: the per-execution indexes, its queue, the
-- delayed and deadline sets.

-- Moves the job between the per-execution indexes (old: its execution, false for a
-- new job; created: its creation time) without touching the job's own fields.
local function move_index(uuid, old, new, created)
    if old then
        zset_rem(P .. 'jobs:' .. old, uuid)
    end
    zset_add(P .. 'jobs:' .. new, created or '0', uuid)
end

-- Moves the job between the per-execution indexes and records the new execution.
local function set_execution(uuid, new)
    local k = jkey(uuid)
    local f = redis.call('HMGET', k, 'execution', 'created_at')
    if f[1] == new then
        return
    end
    move_index(uuid, f[1], new, f[2])
    redis.call('HSET', k, 'execution', new)
end

-- Within one call: queue names known to be in the set of queues.
local QUEUES_SEEN = {}
-- Queues a job was queued to in this call (job_create.lua: a later job of the call may
-- not start at once, ahead of it).
local QUEUED_IN_CALL = {}

-- The queue a job is in, or goes back to when it is queued again: the queue of the step
-- it is at when that step named one (field step_queue, written by step_commit.lua when
-- the job hops), else its workflow's. Every path that queues a job again asks here.
local function job_queue(uuid)
    local f = redis.call('HMGET', jkey(uuid), 'step_queue', 'queue')
    return f[1] or f[2] or DEFAULT_QUEUE
end

-- Adds a queue to the set GET /metrics reports the depth of, once per call.
local function queue_seen(queue)
    if not QUEUES_SEEN[queue] then
        redis.call('SADD', P .. 'queues', queue)
        QUEUES_SEEN[queue] = true
    end
end

-- Puts a job at the head of its queue (the end runners pop from): for re-queued and
-- overdue work, which should not wait behind jobs submitted after it.
local function push_front(uuid)
    redis.call('RPUSH', qkey(job_queue(uuid)), uuid)
end

-- Jobs waiting in a step's queue for at most the step's timeout: uuid -> the time (ms)
-- past which tick.lua takes the job out and fails the step (TaskTimeout).
local QUEUE_WAITS = P .. 'queue_waits'

-- A job hops to `queue` (its cursor already at the step that runs there): at the head,
-- as work under way, bounded by wait_ms (0: by the workflow's timeout only). The caller
-- has taken it off its runner and recorded the queue (step_queue).
local function hop(uuid, queue, wait_ms, now)
    redis.call('RPUSH', qkey(queue), uuid)
    queue_seen(queue)
    if wait_ms > 0 then
        redis.call('ZADD', QUEUE_WAITS, now + wait_ms, uuid)
    else
        redis.call('ZREM', QUEUE_WAITS, uuid)
    end
end

-- Schedules a job at `due` (ms) and wakes the runners if it became the earliest.
local function delay(uuid, due)
    redis.call('ZADD', P .. 'delayed', due, uuid)
    local first = redis.call('ZRANGE', P .. 'delayed', 0, 0)
    if first[1] == uuid then
        redis.call('PUBLISH', P .. 'wake', time_text(due))
    end
end

-- Puts the job's workflow deadline back in the index when it leaves its runner
-- (waiting, delayed, parked), so the deadline is enforced while no runner holds it.
local function rearm_deadline(uuid)
    local d = redis.call('HGET', jkey(uuid), 'deadline')
    if d then
        redis.call('ZADD', P .. 'deadlines', d, uuid)
    end
end

-- What a job's start writes, appended to `out` (a flat HSET list): the one statement of
-- it for both ways a job starts, a claim (job_claim.lua) and a create that starts the
-- job at once on the runner that made it (job_create.lua, whose caller applies the
-- same list to the fields it keeps). first: the job never ran, so started_at and
-- started_by (the runner of the first start, for the "running" event the record tells:
-- see STREAMS in lib/events.lua) are written. A workflow timeout (ms, 0 none) whose
-- deadline is not armed yet arms it. Returns true when it wrote a rare field (see
-- RARE_FIELDS in lib/layout.lua).
local function start_fields(out, uuid, runner, fence, first, timeout_ms, armed, now)
    local n = #out
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = 'fence', fence, 'runner', runner
    n = n + 4
    if first then
        out[n + 1], out[n + 2], out[n + 3], out[n + 4] = 'started_at', now_text(), 'started_by',
                                                         runner
        n = n + 4
    end
    if timeout_ms > 0 and not armed then
        out[n + 1], out[n + 2] = 'deadline', string.format('%d', now + timeout_ms)
        redis.call('ZADD', P .. 'deadlines', now + timeout_ms, uuid)
        return true
    end
    return false
end
