-- include: prelude
-- postback_claim.lua: claims due post-back deliveries for the calling process.
-- A delivery is "<job uuid>/<url index>". Waiting deliveries sit in tern:postbacks by
-- due time; claiming moves one to tern:postbacks:lease by lease expiry and bumps its
-- fence on the job (pb_fence:<i>), so exactly one process makes each attempt and a
-- process whose lease ran out cannot record over the next claimant. A lease that
-- expired (its process died mid-delivery) puts the delivery back, due at once. A
-- delivery whose job is gone, or running again after a retry from failure (the next
-- end schedules a new one), is dropped.
-- ARGV: 3 deliveries wanted (0: only expire leases and report), 4 lease ms
-- Returns {server now, next due or lease expiry (-1 none),
--          {{delivery, fence, attempt, post_back_urls JSON, workflow name, execution,
--            params JSON, error JSON, finished_at ms}, ...}}
local want, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local PB, LEASE = P .. 'postbacks', P .. 'postbacks:lease'
for _, d in ipairs(redis.call('ZRANGEBYSCORE', LEASE, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', LEASE, d)
    redis.call('ZADD', PB, now, d)
end
local out = {}
if want > 0 then
    for _, d in ipairs(redis.call('ZRANGEBYSCORE', PB, '-inf', now, 'LIMIT', 0, want)) do
        redis.call('ZREM', PB, d)
        local uuid, idx = string.match(d, '^(.+)/(%d+)$')
        local f = uuid and redis.call('HMGET', jkey(uuid), 'post_back_urls', 'pb_attempt:' .. idx,
                                      'name', 'execution', 'params', 'error', 'finished_at')
        if f and f[1] and f[4] and not UNFINISHED[f[4]] then
            local fence = redis.call('HINCRBY', jkey(uuid), 'pb_fence:' .. idx, 1)
            redis.call('ZADD', LEASE, now + lease, d)
            out[#out + 1] = {d, fence, tonumber(f[2] or '0') + 1, f[1], f[3] or '', f[4],
                             f[5] or '', f[6] or '', f[7] or ''}
        end
    end
end
local nd = redis.call('ZRANGE', PB, 0, 0, 'WITHSCORES')
local nl = redis.call('ZRANGE', LEASE, 0, 0, 'WITHSCORES')
local nxt = -1
if nd[2] then
    nxt = tonumber(nd[2])
end
if nl[2] and (nxt < 0 or tonumber(nl[2]) < nxt) then
    nxt = tonumber(nl[2])
end
return {now, nxt, out}
