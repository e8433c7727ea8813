-- include: prelude gather layout queues events holds locks retention
-- lib/finish.lua: how a job ends (finish), and how it fails when its runner went away
-- during an irreversible step (interrupt).

-- The job fields finish() reads; a caller that has them already passes them in.
local FINISH_FIELDS = {'execution', 'created_at', 'runner', 'unique', 'locks', 'deadline',
                       'post_back_urls', 'xk', 'blocked_on', 'cancel', 'inflight',
                       'resume'}

-- Fields a finished job no longer has (its runner is set to '': see finish).
local FINISH_GONE = {'cancel', 'inflight', 'resume'}

local function finish_fields(uuid)
    local v = redis.call('HMGET', jkey(uuid), unpack(FINISH_FIELDS))
    local f = {}
    for i, name in ipairs(FINISH_FIELDS) do
        f[name] = v[i]
    end
    return f
end

-- Ends a job however it ends: releases what it holds and every uniqueness claim, and
-- takes it off its runner. With a retention set, every key of the job expires after it.
-- `f`: the job's FINISH_FIELDS (nil: read here); `set`: field/value pairs the caller
-- writes to the job too (nil: none), sent with finish's own. Calls are skipped where
-- the fields show there is nothing to undo: this runs once per job, on the hot path.
local function finish(uuid, execution, now, f, set)
    local k = jkey(uuid)
    f = f or finish_fields(uuid)
    local extra = has_extra_keys(f.xk)
    if extra or f.blocked_on then
        release_all_holds(uuid, now)
    end
    if f.unique and redis.call('HGET', P .. 'unique', f.unique) == uuid then
        redis.call('HDEL', P .. 'unique', f.unique)
    end
    if f.locks then
        if redis.call('HDEL', P .. 'locks', uuid) == 1 then
            redis.call('INCR', P .. 'locks:version')
        end
        locks_size_drop(uuid)
    end
    local gone = {}
    for _, name in ipairs(FINISH_GONE) do
        if f[name] then
            gone[#gone + 1] = name
        end
    end
    if #gone > 0 then
        redis.call('HDEL', k, unpack(gone))
    end
    set = set or {}
    if f.runner and f.runner ~= '' then
        runner_list_rem(f.runner, uuid)
        -- No runner: '' (readers take it as none), written with the other fields
        -- rather than deleted by one more call per job.
        set[#set + 1] = 'runner'
        set[#set + 1] = ''
    end
    if f.execution ~= 'running' then
        -- A running job is in no delayed set: claims take jobs from queues only.
        redis.call('ZREM', P .. 'delayed', uuid)
    end
    if f.deadline then
        redis.call('ZREM', P .. 'deadlines', uuid)
    end
    if f.execution ~= execution then
        move_index(uuid, f.execution, execution, f.created_at)
    end
    set[#set + 1] = 'finished_at'
    set[#set + 1] = time_text(now)
    set[#set + 1] = 'execution'
    set[#set + 1] = execution
    redis.call('HSET', k, unpack(set))
    event_told(uuid, event_finished_text(uuid, execution, now))
    -- Post-backs: one delivery per URL, due now; every ternd's deliverer is woken and
    -- one claims each (postback_claim.lua). A job that ends again after a retry from
    -- failure starts a new round of attempts.
    if f.post_back_urls then
        local ok, list = pcall(cjson.decode, f.post_back_urls)
        if ok and type(list) == 'table' and #list > 0 then
            for i = 0, #list - 1 do
                redis.call('HDEL', k, 'pb_attempt:' .. i)
                redis.call('ZADD', P .. 'postbacks', now, uuid .. '/' .. i)
            end
            redis.call('PUBLISH', P .. 'postbacks:wake', now_text())
        end
    end
    -- Once the stream expires, GET /jobs/:uuid/events tells the job from its record.
    local events_ms = events_keep_ms(execution)
    if RETENTION_MS > 0 then
        expire_job(uuid, RETENTION_MS, now, events_ms)
    elseif events_ms > 0 and job_has_stream(uuid) then
        redis.call('PEXPIRE', k .. ':events', events_ms)
    end
end

-- Fails a job whose irreversible step was in flight (`inflight`, "<phase>:<idx>") when
-- its runner went away (`how`: "died", "restarted"): the step may have done its work,
-- so it must not run again; an operator retries or cancels the job.
local function interrupt(uuid, runner, how, inflight, now)
    local err = cjson.encode({code = 'StepInterrupted',
        message = 'runner ' .. runner .. ' ' .. how .. ' while an irreversible step was ' ..
                  'running; retry or cancel the job'})
    redis.call('HSET', jkey(uuid), 'error', err, 'failed_at', inflight)
    -- The claim it ran under is void: a runner still holding it cannot commit.
    redis.call('HINCRBY', jkey(uuid), 'fence', 1)
    event(uuid, {type = 'step_interrupted', runner = runner}, now)
    finish(uuid, 'failed', now)
end
