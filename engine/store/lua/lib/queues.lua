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

-- Puts a job at the head of its queue (the end runners pop from): for re-queued and
-- overdue work, which should not wait behind jobs submitted after it.
local function push_front(uuid)
    local queue = redis.call('HGET', jkey(uuid), 'queue') or DEFAULT_QUEUE
    redis.call('RPUSH', qkey(queue), uuid)
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
