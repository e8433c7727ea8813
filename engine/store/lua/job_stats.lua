-- include: prelude
-- job_stats.lua: node-workflow's GET /stats, counted from the per-execution indexes
-- (scored by creation time) with ZCOUNT, so the cost does not grow with the number of
-- jobs. The periods are node-workflow's and do not overlap: `current` counts jobs
-- created in the last hour, `past_hour` the hour before, `past_24h` the rest of the
-- last day and `all_time` everything older.
-- ARGV: 3.. executions
-- Returns {now, {current, past_hour, past_24h, all_time, total} per execution}
local now = now_ms()
local hour = 3600 * 1000
local out = {}
for i = 3, #ARGV do
    local key = P .. 'jobs:' .. ARGV[i]
    local current = redis.call('ZCOUNT', key, now - hour, '+inf')
    local past_hour = redis.call('ZCOUNT', key, now - 2 * hour, '(' .. time_text(now - hour))
    local past_24h = redis.call('ZCOUNT', key, now - 24 * hour, '(' .. time_text(now - 2 * hour))
    local all_time = redis.call('ZCOUNT', key, '-inf', '(' .. time_text(now - 24 * hour))
    out[#out + 1] = {current, past_hour, past_24h, all_time, redis.call('ZCARD', key)}
end
return {now, out}
