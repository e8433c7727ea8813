-- include: prelude schedules
-- schedule_read.lua: one schedule, or the newest ones.
-- ARGV: 3 uuid ('' : the newest), 4 most to answer
-- Returns {{uuid, fields as a flat array}, ...}: empty when the uuid names none.
local uuid, limit = ARGV[3], tonumber(ARGV[4])
local uuids = {uuid}
if uuid == '' then
    uuids = redis.call('ZREVRANGE', SCHED_ALL, 0, limit - 1)
end
local out = {}
for _, u in ipairs(uuids) do
    local f = redis.call('HGETALL', skey(u))
    if #f > 0 then
        out[#out + 1] = {u, f}
    end
end
return out
