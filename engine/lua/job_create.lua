-- job_create.lua: stores a new job and queues it (or schedules it for exec_after).
-- ARGV: 3 uuid, 4 queue, 5 exec_after ms (0: now), 6 unique key ('' none),
--       7 locks version the caller checked the target against, 8 locks regex ('' none),
--       9 caller-built 'created' event JSON, 10.. field/value pairs stored as they are.
-- Returns {'OK', created_at, snapshot (see job_snapshot)}
--       | {'EXISTS'} (a job with this uuid is already stored)
--       | {'CONFLICT', other uuid} | {'LOCKS', version, uuid1, regex1, ...}
local uuid, queue = ARGV[3], ARGV[4]
local exec_after, unique, seen, locks = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]
local k = jkey(uuid)
if redis.call('EXISTS', k) == 1 then
    return {'EXISTS'}
end
local version = redis.call('GET', P .. 'locks:version') or '0'
if version ~= seen then
    local out = {'LOCKS', version}
    local all = redis.call('HGETALL', P .. 'locks')
    for i = 1, #all do
        out[#out + 1] = all[i]
    end
    return out
end
if unique ~= '' then
    local other = redis.call('HGET', P .. 'unique', unique)
    if other then
        local ex = redis.call('HGET', jkey(other), 'execution')
        if ex and UNFINISHED[ex] then
            return {'CONFLICT', other}
        end
    end
end
local now = now_ms()
local fields = {}
for i = 10, #ARGV do
    fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', k, 'uuid', uuid, 'queue', queue, 'created_at', now, 'fence', 0, 'phase', 0,
           'idx', 0, 'attempt', 0, unpack(fields))
if unique ~= '' then
    redis.call('HSET', k, 'unique', unique)
    redis.call('HSET', P .. 'unique', unique, uuid)
end
if locks ~= '' then
    redis.call('HSET', k, 'locks', locks)
    redis.call('HSET', P .. 'locks', uuid, locks)
    redis.call('INCR', P .. 'locks:version')
end
redis.call('ZADD', P .. 'jobs', now, uuid)
redis.call('SADD', P .. 'queues', queue) -- queue names, for GET /metrics
set_execution(uuid, 'queued')
event_raw(uuid, ARGV[9])
if exec_after > now then
    redis.call('HSET', k, 'exec_after', exec_after)
    delay(uuid, exec_after)
else
    push_back(uuid)
end
return {'OK', now, job_snapshot(uuid, now)}
