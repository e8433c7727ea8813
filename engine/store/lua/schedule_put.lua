-- include: prelude schedules
-- schedule_put.lua: stores a new schedule, or, for one keyed by name ("<workflow>/
-- <schedule name>", a workflow's declared schedule), changes the one of that key in
-- place: its uuid, counts and pause stay; the same definition again changes nothing.
-- ARGV: 3 uuid (of a new schedule), 4 definition JSON (normalized), 5 now ms (the
--       anchor of intervals), 6 next run ms, 7 paused 0|1 (a new schedule's), 8 key
--       ('' none)
-- Returns {'CREATED'|'UPDATED'|'UNCHANGED', uuid, fields as a flat array}
local uuid, doc, now, nxt, paused, key = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local status = 'CREATED'
if key ~= '' then
    local old = redis.call('HGET', SCHED_NAMES, key)
    if old and redis.call('EXISTS', skey(old)) == 1 then
        uuid = old
        if redis.call('HGET', skey(uuid), 'doc') == doc then
            return {'UNCHANGED', uuid, redis.call('HGETALL', skey(uuid))}
        end
        status = 'UPDATED'
    end
end
local sk = skey(uuid)
if status == 'CREATED' then
    redis.call('HSET', sk, 'created_at', now, 'fired', '0', 'skipped', '0', 'failed', '0')
    redis.call('ZADD', SCHED_ALL, now, uuid)
    if key ~= '' then
        redis.call('HSET', sk, 'key', key)
        redis.call('HSET', SCHED_NAMES, key, uuid)
    end
    if paused == '1' then
        redis.call('HSET', sk, 'paused', '1')
    end
end
-- A tick at or before the last one fired never fires again.
local last = tonumber(redis.call('HGET', sk, 'last_run') or '-1')
if tonumber(nxt) <= last then
    nxt = time_text(last + 1)
end
redis.call('HSET', sk, 'doc', doc, 'anchor', now, 'next_run', nxt)
redis.call('HDEL', sk, 'lease')
if not redis.call('HGET', sk, 'paused') then
    redis.call('ZADD', SCHED_DUE, nxt, uuid)
    sched_wake_if_first(uuid, tonumber(nxt))
end
return {status, uuid, redis.call('HGETALL', sk)}
