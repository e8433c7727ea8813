-- include: prelude layout queues events holds finish
-- job_cancel.lua: an operator cancels a job.
-- A queued job that never started is removed atomically and ends `canceled`. A job
-- that started and has an oncancel chain, but that no runner holds (waiting, delayed,
-- parked on a hold), is queued at the start of its oncancel chain. A running job is
-- flagged and its runner told on the control channel; the runner cancels the task,
-- runs oncancel and ends the job.
-- ARGV: 3 uuid, 4 history entry JSON
-- Returns {'CANCELED'} | {'CANCELING'} | {'FINISHED', execution} | {'NOTFOUND'}
local uuid = ARGV[3]
local k = jkey(uuid)
local f = redis.call('HMGET', k, 'execution', 'started_at', 'has_oncancel', 'phase', 'cancel')
local ex = f[1]
if not ex then
    return {'NOTFOUND'}
end
if not UNFINISHED[ex] then
    return {'FINISHED', ex}
end
local now = now_ms()
redis.call('RPUSH', k .. ':history', ARGV[4])
redis.call('HSET', k, 'xk', '1', 'rf', '1') -- see has_extra_keys, RARE_FIELDS
if f[5] == '1' then
    return {'CANCELING'} -- already asked; the history records this request too
end
if ex == 'running' then
    redis.call('HSET', k, 'cancel', '1')
    redis.call('PUBLISH', P .. 'control', 'cancel ' .. uuid)
    event(uuid, {type = 'cancel_requested'}, now)
    return {'CANCELING'}
end
redis.call('LREM', qkey(job_queue(uuid)), 0, uuid)
redis.call('ZREM', P .. 'delayed', uuid)
if f[2] and f[3] == '1' and f[4] ~= WF_ONCANCEL_TEXT then
    leave_step_holds(uuid, now)
    redis.call('HSET', k, 'phase', WF_ONCANCEL, 'idx', 0, 'attempt', 0, 'cancel', '1')
    -- oncancel starts on the workflow's queue, whatever step queue it waited in.
    redis.call('HDEL', k, 'resume', 'wait_info', 'step_queue')
    set_execution(uuid, 'queued')
    event(uuid, {type = 'cancel_requested'}, now)
    push_front(uuid)
    return {'CANCELING'}
end
redis.call('HSET', k, 'cancel', '1')
finish(uuid, 'canceled', now)
return {'CANCELED'}
