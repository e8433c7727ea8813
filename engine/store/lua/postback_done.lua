-- include: prelude
-- postback_done.lua: records one post-back attempt on the job and decides what
-- follows: delivered, retried at now + delay, given up, or released unattempted (a
-- process shutting down gives its claims back).
-- ARGV: 3 delivery "<uuid>/<i>", 4 fence, 5 attempt, 6 'delivered' | 'retry' | 'gave_up'
--       | 'release', 7 attempt record JSON ('' none), 8 retry delay ms
-- Returns {'OK'} | {'STALE'} (another claim holds the delivery now, or the job is gone:
-- the attempt is still recorded when the job exists)
local d, fence, attempt, outcome = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local uuid, idx = string.match(d, '^(.+)/(%d+)$')
if not uuid or redis.call('EXISTS', jkey(uuid)) == 0 then
    redis.call('ZREM', P .. 'postbacks:lease', d)
    return {'STALE'}
end
local k = jkey(uuid)
if ARGV[7] ~= '' then
    redis.call('RPUSH', k .. ':postbacks', ARGV[7])
    redis.call('HSET', k, 'xk', '1', 'rf', '1') -- see has_extra_keys, RARE_FIELDS
    redis.call('LTRIM', k .. ':postbacks', -200, -1)
end
if redis.call('HGET', k, 'pb_fence:' .. idx) ~= fence then
    return {'STALE'}
end
redis.call('ZREM', P .. 'postbacks:lease', d)
local now = now_ms()
if outcome == 'release' then
    redis.call('ZADD', P .. 'postbacks', now, d)
    redis.call('PUBLISH', P .. 'postbacks:wake', time_text(now))
    return {'OK'}
end
redis.call('HSET', k, 'pb_attempt:' .. idx, attempt)
if outcome == 'retry' then
    local due = now + tonumber(ARGV[8])
    redis.call('ZADD', P .. 'postbacks', due, d)
    -- Every deliverer learns the due time, so the retry happens even if this process
    -- is gone by then.
    redis.call('PUBLISH', P .. 'postbacks:wake', time_text(due))
end
return {'OK'}
