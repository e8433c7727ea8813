-- include: prelude
-- metrics_read.lua: the gauges of GET /metrics, read in one round trip.
-- Queue names come from tern:queues (every queue a job was ever created in) and from
-- the queues live runners announce in their info, so a queue nobody serves shows its
-- depth too. Runner infos are decoded only to read numbers and names; nothing is
-- re-encoded.
-- ARGV: none of its own.
-- Returns {{execution, count, ...}, jobs stored, delayed, {queue, depth, ...},
--          live runners, jobs in flight on them, post-backs pending, post-backs leased}
local now = now_ms()
local execs = {}
local stored = 0 -- every job is in the index of its execution
for _, e in ipairs({'queued', 'running', 'waiting', 'succeeded', 'failed', 'canceled',
                    'retried'}) do
    local n = redis.call('ZCARD', P .. 'jobs:' .. e)
    execs[#execs + 1] = e
    execs[#execs + 1] = n
    stored = stored + n
end
local names = {}
for _, q in ipairs(redis.call('SMEMBERS', P .. 'queues')) do
    names[q] = true
end
local live = redis.call('ZRANGEBYSCORE', P .. 'runners', now, '+inf')
local in_flight = 0
for _, id in ipairs(live) do
    local info = redis.call('HGET', P .. 'runner:' .. id, 'info')
    local ok, t = pcall(cjson.decode, info or '')
    if ok and type(t) == 'table' then
        in_flight = in_flight + (tonumber(t.in_flight) or 0)
        if type(t.queues) == 'table' then
            for _, q in ipairs(t.queues) do
                if type(q) == 'string' then
                    names[q] = true
                end
            end
        end
    end
end
local queues = {}
for q in pairs(names) do
    queues[#queues + 1] = q
    queues[#queues + 1] = redis.call('LLEN', qkey(q))
end
return {execs, stored, redis.call('ZCARD', P .. 'delayed'), queues,
        #live, in_flight, redis.call('ZCARD', P .. 'postbacks'),
        redis.call('ZCARD', P .. 'postbacks:lease')}
