-- include: prelude events
-- job_info_add.lua: appends an entry to a job's info list (node-workflow's
-- POST /jobs/:uuid/info: progress that outside programs publish about a job) and
-- tells the job's watchers with an event. The list is append-only and bounded.
-- ARGV: 3 uuid, 4 entry JSON, 5 most entries kept
-- Returns {'OK', entries} | {'FULL', entries} | {'NOTFOUND'}
local uuid, entry, max = ARGV[3], ARGV[4], tonumber(ARGV[5])
local k = jkey(uuid)
if redis.call('EXISTS', k) == 0 then
    return {'NOTFOUND'}
end
local n = redis.call('LLEN', k .. ':info')
if n >= max then
    return {'FULL', n}
end
n = redis.call('RPUSH', k .. ':info', entry)
redis.call('HSET', k, 'xk', '1', 'rf', '1') -- see has_extra_keys, RARE_FIELDS
-- The record does not tell info: the job's stream starts (with the story the record
-- tells first) if it has none, and expires as a finished job's events do.
event(uuid, {type = 'info', index = n - 1}, now_ms())
return {'OK', n}
