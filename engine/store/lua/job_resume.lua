-- include: prelude queues events
-- job_resume.lua: releases a `waiting` job. The outcome ({"result": ...} or
-- {"error": {"code", "message"}}) is kept on the job and becomes the waiting step's
-- outcome when a runner picks the job up again.
-- ARGV: 3 uuid, 4 outcome JSON, 5 history entry JSON
-- Returns {'OK'} | {'NOTWAITING', execution} | {'NOTFOUND'}
local uuid = ARGV[3]
local k = jkey(uuid)
local ex = redis.call('HGET', k, 'execution')
if not ex then
    return {'NOTFOUND'}
end
if ex ~= 'waiting' then
    return {'NOTWAITING', ex}
end
local now = now_ms()
redis.call('HSET', k, 'resume', ARGV[4], 'rf', '1')
redis.call('HDEL', k, 'wait_info')
redis.call('RPUSH', k .. ':history', ARGV[5])
redis.call('HSET', k, 'xk', '1', 'rf', '1') -- see has_extra_keys, RARE_FIELDS
set_execution(uuid, 'queued')
event(uuid, {type = 'resumed'}, now)
push_front(uuid)
return {'OK'}
