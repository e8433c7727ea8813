-- gathered (see run_gathered). job_claim.lua: starts jobs on a runner. Jobs named explicitly are already in the
-- runner's list (moved there by BLMOVE, or found there after a lost reply); up to
-- `more` further jobs are moved from the queue here. Each is checked (a job canceled
-- while queued is skipped), takes its job-level holds (or is parked), gets a new
-- fence token, and is returned whole. An explicitly named job that already runs on
-- this runner is adopted again with a new fence (its claim reply was lost, or the
-- runner restarted under the same id), unless an irreversible step was in flight.
-- ARGV: 3 runner, 4 queue, 5 more (count), 6.. explicit uuids.
-- Returns a list of jobs, each {uuid, fence, job fields (HGETALL), chain results,
-- onerror results, oncancel results, state (HGETALL), server now, workflow document
-- (false when the fields carry it: see job_doc)}.
local runner, queue, more = ARGV[3], ARGV[4], tonumber(ARGV[5])
local rlist = P .. 'r:' .. runner .. ':jobs'
local now = now_ms()
local candidates = {}
local explicit = {}
for i = 6, #ARGV do
    candidates[#candidates + 1] = ARGV[i]
    explicit[ARGV[i]] = true
end
-- The oldest `more` jobs of the queue (its right end), onto the runner's list in the
-- order one LMOVE each would leave them.
local taken = more > 0 and redis.call('RPOP', qkey(queue), more)
if taken then
    redis.call('LPUSH', rlist, unpack(taken))
    for _, u in ipairs(taken) do
        candidates[#candidates + 1] = u
    end
end
local out = {}
local docs = {}
for _, uuid in ipairs(candidates) do
    local k = jkey(uuid)
    local f = redis.call('HMGET', k, 'execution', 'runner', 'inflight', 'phase', 'idx', 'cancel',
                         'timed_out', 'holds', 'started_at', 'timeout_ms', 'deadline', 'fence',
                         'created_at', 'xk', 'lv')
    local ex = f[1]
    local adopt = explicit[uuid] and ex == 'running' and f[2] == runner
    if adopt then
        ex = 'queued'
        -- A runner restarted under the same id finds the job it held: if it had begun
        -- an irreversible step and never committed it, the step may have done its
        -- work, so the job fails with StepInterrupted, as tick.lua fails the same job
        -- of a runner that died for good. (A live runner that lost a claim's answer
        -- has begun no step under that claim, so this never stops it.)
        if f[3] and f[3] == f[4] .. ':' .. f[5] then
            interrupt(uuid, runner, 'restarted', f[3], now)
            ex = 'failed'
        end
    end
    if ex ~= 'queued' and ex ~= 'retried' then
        -- Canceled, finished or deleted while queued: not ours to run.
        redis.call('LREM', rlist, 0, uuid)
    elseif f[6] == '1' or f[7] == '1' or not f[8] or f[8] == '' or
        take_job_holds(uuid, runner, now) then
        local fence = (tonumber(f[12]) or 0) + 1
        local set = {'fence', fence, 'runner', runner, 'execution', 'running'}
        if not f[9] then
            set[#set + 1] = 'started_at'
            set[#set + 1] = now
        end
        local tmo = tonumber(f[10] or '0')
        if tmo > 0 and not f[11] then
            set[#set + 1] = 'deadline'
            set[#set + 1] = now + tmo
            redis.call('ZADD', P .. 'deadlines', now + tmo, uuid)
        end
        redis.call('HSET', k, unpack(set))
        if adopt then
            -- Still indexed as running: only the claim changed.
        elseif f[1] ~= 'running' then
            move_index(uuid, f[1], 'running', f[13])
        end
        event(uuid, {type = 'running', runner = runner, fence = fence}, now)
        local fields = redis.call('HGETALL', k)
        local doc = job_doc(fields, docs)
        if not f[9] then
            -- It never ran: no results and no state yet.
            out[#out + 1] = {uuid, fence, fields, {}, {}, {}, {}, now, doc}
        else
            out[#out + 1] = {uuid, fence, fields, redis.call('LRANGE', k .. ':res:0', 0, -1),
                             redis.call('LRANGE', k .. ':res:1', 0, -1),
                             redis.call('LRANGE', k .. ':res:2', 0, -1),
                             redis.call('HGETALL', k .. ':state'), now, doc}
        end
    end
end
return out
