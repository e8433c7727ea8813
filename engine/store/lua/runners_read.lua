-- include: prelude
-- runners_read.lua: the runners that hold a lease (GET /runners), with what each
-- last reported, in one round trip. A runner whose lease expired stays listed (not
-- alive) until another runner reaps its jobs.
-- Returns {now, {id, lease expiry ms, info JSON or false, last seen ms or false,
--          jobs held}, ...}
local now = now_ms()
local out = {now}
local all = redis.call('ZRANGE', P .. 'runners', 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
    local id = all[i]
    local f = redis.call('HMGET', P .. 'runner:' .. id, 'info', 'seen')
    out[#out + 1] = {id, all[i + 1], f[1], f[2], redis.call('LLEN', P .. 'r:' .. id .. ':jobs')}
end
return out
