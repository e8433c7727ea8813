-- include: prelude gather queues events
-- lib/holds.lua: resource tickets: taken for a job or a step, waited for in line,
-- released at the step's or the job's end.

-- Resource tickets. tern:hold:<res>:h is the set of holders, :w the FIFO of waiters,
-- :cap the capacity each waiter asked for. A waiter is granted in order when a holder
-- releases, so tickets are first come first served.
local function hold_try(uuid, res, cap)
    local hk = P .. 'hold:' .. res
    if redis.call('SISMEMBER', hk .. ':h', uuid) == 1 then
        return true
    end
    local head = redis.call('LINDEX', hk .. ':w', 0)
    if redis.call('SCARD', hk .. ':h') < cap and (not head or head == uuid) then
        if head == uuid then
            redis.call('LPOP', hk .. ':w')
            redis.call('HDEL', hk .. ':cap', uuid)
        end
        redis.call('SADD', hk .. ':h', uuid)
        redis.call('SADD', jkey(uuid) .. ':held', res)
        redis.call('HSET', jkey(uuid), 'xk', '1', 'rf', '1')
        return true
    end
    if not redis.call('LPOS', hk .. ':w', uuid) then
        redis.call('RPUSH', hk .. ':w', uuid)
    end
    redis.call('HSET', hk .. ':cap', uuid, cap)
    return false
end

-- Plugin streams told of waits for holds (the job's field hold_events: Redis keys, one
-- a line, from the workflow's hold_events). Tells them, if the job (key k) has any, of
-- event ev: one entry each, field 'e' the JSON a streaming view sends as it is; for a
-- wait, hk is the resource's key, whose holders and the jobs in line ahead are told.
-- Trimmed near 10000 entries, above what a plugin keeps of a stream it writes too (its
-- own trim then rules). Only a wait, a grant or a job leaving the line reads the field:
-- a job that takes its tickets at once, and every job without holds, never does. The
-- function uses no local of the script (only its arguments and Redis's globals): every
-- call of a script that includes this library makes it anew, and a closure that
-- captures none is the cheapest to make.
local function hold_tell(k, uuid, ev, now, hk)
    local f = redis.call('HMGET', k, 'hold_events', 'name', 'target')
    if not f[1] or f[1] == '' then
        return
    end
    if hk then
        ev.holders = redis.call('SCARD', hk .. ':h')
        ev.ahead = redis.call('LPOS', hk .. ':w', uuid) or 0
    end
    ev.job_uuid = uuid
    ev.workflow = f[2]
    if f[3] then
        ev.target = f[3]
    end
    ev.timestamp = now
    local s = cjson.encode(ev)
    for key in string.gmatch(f[1], '[^\n]+') do
        redis.call('XADD', key, 'MAXLEN', '~', 10000, '*', 'e', s)
    end
end

local function hold_release(uuid, res, now)
    local hk = P .. 'hold:' .. res
    redis.call('SREM', hk .. ':h', uuid)
    redis.call('SREM', jkey(uuid) .. ':held', res)
    while true do
        local w = redis.call('LINDEX', hk .. ':w', 0)
        if not w then
            break
        end
        local cap = tonumber(redis.call('HGET', hk .. ':cap', w) or '1')
        local wk = jkey(w)
        if redis.call('HGET', wk, 'blocked_on') ~= res then
            -- The waiter went away (canceled, deleted): forget it.
            redis.call('LPOP', hk .. ':w')
            redis.call('HDEL', hk .. ':cap', w)
        elseif redis.call('SCARD', hk .. ':h') < cap then
            redis.call('LPOP', hk .. ':w')
            redis.call('HDEL', hk .. ':cap', w)
            redis.call('SADD', hk .. ':h', w)
            redis.call('SADD', wk .. ':held', res)
            redis.call('HSET', wk, 'xk', '1', 'rf', '1')
            redis.call('HDEL', wk, 'blocked_on')
            push_front(w)
            event(w, {type = 'hold_granted', resource = res}, now)
            hold_tell(wk, w, {type = 'hold_granted', resource = res, capacity = cap}, now)
        else
            break
        end
    end
    if redis.call('EXISTS', hk .. ':h', hk .. ':w') == 0 then
        redis.call('DEL', hk .. ':cap')
    end
end

-- Releases the holds of the current step only (names kept in the step_holds field).
local function release_step_holds(uuid, now)
    local k = jkey(uuid)
    local sh = redis.call('HGET', k, 'step_holds')
    if sh and sh ~= '' then
        for res in string.gmatch(sh, '[^\n]+') do
            hold_release(uuid, res, now)
        end
        redis.call('HDEL', k, 'step_holds')
    end
end

-- Takes the job out of the line for the resource it waits for, if any (canceled, timed
-- out, sent to its onerror chain): its hold event streams are told it left.
local function drop_hold_wait(uuid, now)
    local blocked = redis.call('HGET', jkey(uuid), 'blocked_on')
    if blocked then
        hold_tell(jkey(uuid), uuid, {type = 'hold_left', resource = blocked}, now)
        redis.call('LREM', P .. 'hold:' .. blocked .. ':w', 0, uuid)
        redis.call('HDEL', P .. 'hold:' .. blocked .. ':cap', uuid)
        redis.call('HDEL', jkey(uuid), 'blocked_on')
    end
end

local function release_all_holds(uuid, now)
    local held = redis.call('SMEMBERS', jkey(uuid) .. ':held')
    for _, res in ipairs(held) do
        hold_release(uuid, res, now)
    end
    redis.call('HDEL', jkey(uuid), 'step_holds')
    drop_hold_wait(uuid, now)
end

-- A job no runner holds is sent to its onerror or oncancel chain: it leaves its step
-- (the step's tickets and any place in line go) and keeps its job-level tickets until
-- it ends, as a job sent there by its runner does.
local function leave_step_holds(uuid, now)
    release_step_holds(uuid, now)
    drop_hold_wait(uuid, now)
end

-- Tries to take every job-level hold; on the first refusal parks the job (queued,
-- blocked_on set, off the runner) and returns false.
local function take_job_holds(uuid, runner, now)
    local k = jkey(uuid)
    local holds = redis.call('HGET', k, 'holds')
    if not holds or holds == '' then
        return true
    end
    for line in string.gmatch(holds, '[^\n]+') do
        local cap, res = string.match(line, '^(%d+) (.+)$')
        if not hold_try(uuid, res, tonumber(cap)) then
            redis.call('HSET', k, 'blocked_on', res, 'rf', '1')
            runner_list_rem(runner, uuid)
            set_execution(uuid, 'queued')
            rearm_deadline(uuid)
            event(uuid, {type = 'hold_wait', resource = res}, now)
            hold_tell(k, uuid, {type = 'hold_wait', resource = res, capacity = tonumber(cap)}, now,
                      P .. 'hold:' .. res)
            return false
        end
    end
    return true
end
