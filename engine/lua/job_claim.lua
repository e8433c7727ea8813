-- job_claim.lua: starts jobs on a runner. Jobs named explicitly are already in the
-- runner's list (moved there by BLMOVE, or found there after a lost reply); up to
-- `more` further jobs are moved from the queue here. Each is checked (a job canceled
-- while queued is skipped), takes its job-level holds (or is parked), gets a new
-- fence token, and is returned whole. An explicitly named job that already runs on
-- this runner is adopted again with a new fence (its claim reply was lost, or the
-- runner restarted under the same id), unless an irreversible step was in flight.
-- ARGV: 3 runner, 4 queue, 5 more (count), 6.. explicit uuids.
-- Returns a list of jobs, each {uuid, fence, job fields (HGETALL), chain results,
-- onerror results, oncancel results, state (HGETALL)}.
local runner, queue, more = ARGV[3], ARGV[4], tonumber(ARGV[5])
local rlist = P .. 'r:' .. runner .. ':jobs'
local now = now_ms()
local candidates = {}
local explicit = {}
for i = 6, #ARGV do
    candidates[#candidates + 1] = ARGV[i]
    explicit[ARGV[i]] = true
end
for _ = 1, more do
    local u = redis.call('LMOVE', qkey(queue), rlist, 'RIGHT', 'LEFT')
    if not u then
        break
    end
    candidates[#candidates + 1] = u
end
local out = {}
for _, uuid in ipairs(candidates) do
    local k = jkey(uuid)
    local ex = redis.call('HGET', k, 'execution')
    local adopt = explicit[uuid] and ex == 'running' and redis.call('HGET', k, 'runner') == runner
    if adopt then
        ex = 'queued'
        -- A runner restarted under the same id finds the job it held: if it had begun
        -- an irreversible step and never committed it, the step may have done its
        -- work, so the job fails with StepInterrupted, as tick.lua fails the same job
        -- of a runner that died for good. (A live runner that lost a claim's answer
        -- has begun no step under that claim, so this never stops it.)
        local f = redis.call('HMGET', k, 'inflight', 'phase', 'idx')
        if f[1] and f[1] == f[2] .. ':' .. f[3] then
            interrupt(uuid, runner, 'restarted', f[1], now)
            ex = 'failed'
        end
    end
    if ex ~= 'queued' and ex ~= 'retried' then
        -- Canceled, finished or deleted while queued: not ours to run.
        redis.call('LREM', rlist, 0, uuid)
    elseif redis.call('HGET', k, 'cancel') == '1' or redis.call('HGET', k, 'timed_out') == '1'
        or take_job_holds(uuid, runner, now) then
        local fence = redis.call('HINCRBY', k, 'fence', 1)
        redis.call('HSET', k, 'runner', runner)
        if not redis.call('HGET', k, 'started_at') then
            redis.call('HSET', k, 'started_at', now)
        end
        local tmo = tonumber(redis.call('HGET', k, 'timeout_ms') or '0')
        if tmo > 0 and not redis.call('HGET', k, 'deadline') then
            redis.call('HSET', k, 'deadline', now + tmo)
            redis.call('ZADD', P .. 'deadlines', now + tmo, uuid)
        end
        set_execution(uuid, 'running')
        event(uuid, {type = 'running', runner = runner, fence = fence}, now)
        out[#out + 1] = {uuid, fence, redis.call('HGETALL', k),
                         redis.call('LRANGE', k .. ':res:0', 0, -1),
                         redis.call('LRANGE', k .. ':res:1', 0, -1),
                         redis.call('LRANGE', k .. ':res:2', 0, -1),
                         redis.call('HGETALL', k .. ':state'), now}
    end
end
return out
