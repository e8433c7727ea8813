-- include: prelude gather layout
-- lib/events.lua: a job's events: told by its record until the job needs a stream of
-- its own, then written to that stream; every event to the global stream; the texts of
-- the events every job has.

-- A job's own event stream (job:<uuid>:events) starts with the first event its record
-- cannot tell. Until then the record tells the job's story: "created", "running" when it
-- first started, one "step" per result entry, "finished" (job_history.c tells the same
-- to GET /jobs/:uuid/events; job_stream_open below writes it into a new stream). Most
-- jobs never need a stream of their own, which spares Redis four XADD per 1-step job
-- (the largest single cost of such a job: docs/PERFORMANCE.md, "Where the time goes")
-- and about 4 KB
-- per job for as long as a stream was kept. An event the record cannot tell (a retry,
-- progress, a wait, a cancel...), or a watcher (job_events_open.lua), starts the
-- stream: the record's events first, under the ids job_history.c gives them, then
-- every event after, as before.
--
-- Starting a stream also sets the job's field `es`, so a script that reads the job
-- anyway knows that it has no stream without asking Redis (see stream_seen): an EXISTS
-- per event told cost 1.4 us of Redis's CPU, two per 1-step job. A job with `es` may
-- still have none (a finished job's stream expires before the job): that is asked.
local STREAMS = {} -- uuid -> whether the job's stream exists, as known in this call

-- What the job's field `es`, read by the caller, tells of its stream.
local function stream_seen(uuid, es)
    if STREAMS[uuid] == nil and not es then
        STREAMS[uuid] = false
    end
end

local function job_has_stream(uuid)
    local has = STREAMS[uuid]
    if has == nil then
        has = redis.call('EXISTS', jkey(uuid) .. ':events') == 1
        STREAMS[uuid] = has
    end
    return has
end

local function job_xadd(uuid, id, s)
    redis.call('XADD', jkey(uuid) .. ':events', 'MAXLEN', '~', MAXLEN_JOB, id, 'e', s)
end

-- How long a finished job's event stream is kept: a success's story is in its record
-- (results, times, history), so its events are kept a short while for watchers
-- (SUCCESS_EVENTS_MS); a failure's events (retries, progress) as long as the job. 0:
-- no expiry.
local function events_keep_ms(execution)
    if execution == 'succeeded' and SUCCESS_EVENTS_MS > 0 and
        (RETENTION_MS == 0 or SUCCESS_EVENTS_MS < RETENTION_MS) then
        return SUCCESS_EVENTS_MS
    end
    return RETENTION_MS
end

-- The step a result entry names, looked up in the workflow document, for its task.
local WF_PARSED = {}
local function step_task(f, phase, name)
    local wf_uuid = f.workflow_uuid or ''
    local wf = WF_PARSED[wf_uuid]
    if wf == nil then
        local ok, d = pcall(cjson.decode, redis.call('GET', P .. 'wfdoc:' .. wf_uuid) or '')
        wf = ok and type(d) == 'table' and d or false
        WF_PARSED[wf_uuid] = wf
    end
    for _, st in ipairs(wf and type(wf[phase]) == 'table' and wf[phase] or {}) do
        if type(st) == 'table' and st.name == name and st.task then
            return st.task
        end
    end
    return cjson.null
end

-- Starts the job's stream if it has none: writes the events its record tells, as
-- job_history.c tells them (same order, same times, ids "<ms>-<n>", marked
-- "from_record"), so a reader that was told them from the record goes on in the
-- stream after the same id. A finished job's new stream expires as its events would
-- have. Returns false when the job does not exist.
local function job_stream_open(uuid)
    if job_has_stream(uuid) then
        return true
    end
    local k = jkey(uuid)
    local all = redis.call('HGETALL', k)
    if #all == 0 then
        return false
    end
    local f = hash_fields(all)
    local last, n = 0, 0
    local function add(ev, ms)
        ms = math.max(tonumber(ms) or 0, last)
        last = ms
        n = n + 1
        ev.job = uuid
        local t = string.sub(cjson.encode(ev), 1, -2) .. ',"time":' .. string.format('%d', ms) ..
                      ',"from_record":true}'
        job_xadd(uuid, string.format('%d-%d', ms, n), t)
    end
    add({type = 'created', workflow = f.name or cjson.null}, f.created_at)
    if f.started_at then
        add({type = 'running', runner = f.started_by}, f.started_at)
    end
    local phases = {'chain', 'onerror', 'oncancel'}
    for p = WF_CHAIN, WF_ONCANCEL do
        local entries = (p == WF_CHAIN or has_extra_keys(f.xk)) and
                            redis.call('LRANGE', k .. ':res:' .. p, 0, -1) or {}
        for i, text in ipairs(entries) do
            local ok, e = pcall(cjson.decode, text)
            if not ok or type(e) ~= 'table' then
                -- Shown as the text it is (job_view.c), told with no name or time.
                add({type = 'step', status = 'succeeded', phase = phases[p + 1], index = i - 1}, 0)
            else
                local failed = e.error ~= nil and e.error ~= cjson.null
                local ev = {type = 'step', status = failed and 'failed' or 'succeeded',
                            phase = phases[p + 1], index = i - 1, name = e.name or cjson.null,
                            task = step_task(f, phases[p + 1], e.name),
                            attempt = e.attempts or 1, runner = e.runner}
                if failed then
                    ev.error = e.error
                end
                -- An entry stores its start (ms since the epoch) and duration ("ms").
                local begun, took, done = e.started_at, e.ms, 0
                if type(begun) == 'number' and type(took) == 'number' then
                    done = begun + took
                    if begun > 0 and took >= 0 then
                        ev.duration_ms = took
                    end
                end
                add(ev, done)
            end
        end
    end
    if f.finished_at then
        add({type = 'finished', execution = f.execution}, f.finished_at)
        local keep = events_keep_ms(f.execution)
        if keep > 0 then
            redis.call('PEXPIRE', k .. ':events', keep)
        end
    end
    redis.call('HSET', k, 'es', '1', 'rf', '1')
    STREAMS[uuid] = true
    return true
end

-- An event the job's record tells (see STREAMS): to the job's stream only if it has
-- one, and to the global one.
local function event_told(uuid, s)
    if job_has_stream(uuid) then
        job_xadd(uuid, '*', s)
    end
    global_event(s)
end

-- An event whose JSON text C built (it may carry results or progress) that the record
-- does not tell: to the job's stream, started if need be, and to the global one.
local function event_raw(uuid, s)
    if job_stream_open(uuid) then
        job_xadd(uuid, '*', s)
    end
    global_event(s)
end

-- The same for an event given as a table of plain fields. The job and the time are
-- spliced into cjson's text rather than encoded with it (the time as an integer: cjson
-- would format it as a float).
local function event_text(uuid, ev, now)
    return string.sub(cjson.encode(ev), 1, -2) .. ',"job":' .. cjson.encode(uuid) ..
               ',"time":' .. string.format('%d', now) .. '}'
end

local function event(uuid, ev, now)
    event_raw(uuid, event_text(uuid, ev, now))
end

-- The two events every job has, "running" and "finished", written out by hand: with
-- cjson (a table, an encoder per call, every number printed as a float) they cost
-- Redis five times what this does (tests/bench/script_cost.py --callgrind). Strings that may need
-- escaping (a uuid or runner id given by a client) go through cjson; the texts are the
-- ones event_text makes, members in another order.
local QUOTED = {} -- string -> its JSON text, for the strings of this call
local function quoted(s)
    local q = QUOTED[s]
    if not q then
        q = string.find(s, '^[%w%-%.:_]*$') and ('"' .. s .. '"') or cjson.encode(s)
        QUOTED[s] = q
    end
    return q
end

-- A job's uuid as JSON text (uuids differ: not worth keeping in QUOTED).
local function quoted_uuid(uuid)
    return string.find(uuid, '^[%x%-]*$') and ('"' .. uuid .. '"') or cjson.encode(uuid)
end

local function event_running_text(uuid, runner, fence, now)
    return '{"type":"running","runner":' .. quoted(runner) .. ',"fence":' .. fence ..
               ',"job":' .. quoted_uuid(uuid) .. ',"time":' .. time_text(now) .. '}'
end

local function event_finished_text(uuid, execution, now)
    return '{"type":"finished","execution":' .. quoted(execution) .. ',"job":' ..
               quoted_uuid(uuid) .. ',"time":' .. time_text(now) .. '}'
end
