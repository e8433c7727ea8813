-- include: prelude schedules
-- schedule_claim.lua: claims the schedules whose tick is due for the calling process.
-- A claim is a lease: the schedule's entry in sched:due moves to the lease's expiry,
-- so no other process claims it meanwhile, and its tick (next_run) stays as it is
-- until schedule_advance.lua moves it on. A process that dies holding the lease
-- leaves the tick to whoever claims it when the lease runs out; that one makes the
-- tick's job again under the same uuid (schedule_job_uuid), which answers "already
-- exists" if the first one made it, so a tick never has two jobs.
-- ARGV: 3 lease ms, 4 most to claim
-- Returns {server now, next due or lease expiry (-1 none),
--          {{uuid, tick ms, definition JSON, anchor ms, 1 when its last job is
--            unfinished else 0}, ...}}
local lease, most = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local until_text = time_text(now + lease)
local out = {}
for _, uuid in ipairs(redis.call('ZRANGEBYSCORE', SCHED_DUE, '-inf', now, 'LIMIT', 0, most)) do
    local sk = skey(uuid)
    local f = redis.call('HMGET', sk, 'doc', 'next_run', 'anchor', 'last_job', 'paused')
    if not f[1] or not f[2] or f[5] then
        redis.call('ZREM', SCHED_DUE, uuid)
    else
        local busy = 0
        if f[4] then
            local ex = redis.call('HGET', jkey(f[4]), 'execution')
            if ex and UNFINISHED[ex] then
                busy = 1
            end
        end
        redis.call('ZADD', SCHED_DUE, until_text, uuid)
        redis.call('HSET', sk, 'lease', until_text)
        out[#out + 1] = {uuid, f[2], f[1], f[3], busy}
    end
end
local nd = redis.call('ZRANGE', SCHED_DUE, 0, 0, 'WITHSCORES')
return {now, nd[2] and tonumber(nd[2]) or -1, out}
