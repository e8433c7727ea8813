-- _common.lua: helpers shared by every script; tools/embed_lua.py prepends this file
-- to each of the others. The key schema is described in engine/store/store.h.
--
-- Conventions of every script: ARGV[1] and ARGV[2] are the caps of the per-job and
-- the global event streams, ARGV[3] the retention of finished jobs in ms (0: kept
-- forever), ARGV[4] how long a succeeded job keeps its event stream (0: as long as
-- the job); those two are taken out of what each script sees (shift_common_args, or
-- run_batch for each item of a batch), so script arguments start at ARGV[3] as seen
-- by each script. Times come from the
-- Redis server's clock (TIME), so leases and due times compare on one clock whatever
-- the runners' clocks say. Payloads that C built (results, params, workflow documents)
-- are stored as opaque strings and never decoded here: cjson would turn [] into {}
-- and round large numbers.

local P = 'tern:'
local MAXLEN_JOB = ARGV[1]
local MAXLEN_ALL = ARGV[2]
local RETENTION_MS = tonumber(ARGV[3]) or 0
local SUCCESS_EVENTS_MS = tonumber(ARGV[4]) or 0

-- tools/embed_lua.py calls this first in every script but the batched ones.
local function shift_common_args()
    table.remove(ARGV, 3)
    table.remove(ARGV, 3)
end

-- The server's time, read once per script call: every item of a batch and every
-- write of one call carry the same time, as if they happened at once (they do).
local NOW, NOW_TEXT = nil, nil
local function now_ms()
    if not NOW then
        local t = redis.call('TIME')
        NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    return NOW
end

-- The same time as text, for arguments of redis.call: Redis formats a Lua number with
-- printf's %.17g, which cost 3 % of its CPU on the hot path when every write passed
-- the time as a number.
local function now_text()
    if not NOW_TEXT then
        NOW_TEXT = string.format('%d', now_ms())
    end
    return NOW_TEXT
end

local function jkey(uuid)
    return P .. 'job:' .. uuid
end

local function qkey(queue)
    return P .. 'q:' .. queue
end

-- The queue of a workflow that names none (TERN_DEFAULT_QUEUE in C). A job of it stores
-- no queue field: every reader takes none as this one.
local DEFAULT_QUEUE = 'default'
local UNFINISHED = {queued = true, running = true, waiting = true, retried = true}
-- Every execution, as job_view.c lists them (each has an index jobs:<execution>).
local EXECUTIONS = {'queued', 'running', 'waiting', 'retried', 'succeeded', 'failed', 'canceled'}

-- Writes to keys that every job shares (the listings jobs and jobs:<execution>, the
-- retention index, a queue's tail, the global event stream, removals from a runner's
-- list of jobs) are gathered while a
-- gathering script runs (job_create, step_commit, job_claim: see run_batch and
-- run_gathered) and sent once at its end, one command per key: a call committing 100
-- jobs then costs one ZADD per index instead of 100. Each redis.call costs about as
-- much as the work it asks for, so this halves Redis's time per job. Other scripts
-- write at once. What makes gathering safe: nothing in a gathering script reads these
-- keys, a sorted set's member ends as its last write left it (kept per member below),
-- a queue's tail is pushed to by creates only, in order, and a job leaves a runner's
-- list only after it was put there.
local GATHER = false
local ZSETS = {}        -- key -> {member -> score, or false for a removal}
local ZSET_KEYS = {}    -- keys in the order first written
local TAILS = {}        -- queue key -> uuids to LPUSH, in order
local TAIL_KEYS = {}
local GLOBAL_EVENTS = {} -- event texts for the global stream, in order
local LIST_REMS = {}    -- runner list key -> uuids to take off it, in order
local LIST_REM_KEYS = {}

-- What was gathered for `key` in `by_key` (created empty, the key noted in `keys`).
local function gathered(by_key, keys, key)
    local g = by_key[key]
    if not g then
        g = {}
        by_key[key] = g
        keys[#keys + 1] = key
    end
    return g
end

local function zset_write(key, member, score)
    if not GATHER then
        if score then
            redis.call('ZADD', key, score, member)
        else
            redis.call('ZREM', key, member)
        end
        return
    end
    gathered(ZSETS, ZSET_KEYS, key)[member] = score or false
end

local function zset_add(key, score, member)
    zset_write(key, member, score)
end

local function zset_rem(key, member)
    zset_write(key, member, nil)
end

-- Appends new work to the tail of a queue (the end runners pop last).
local function tail_push(key, uuid)
    if not GATHER then
        redis.call('LPUSH', key, uuid)
        return
    end
    local t = gathered(TAILS, TAIL_KEYS, key)
    t[#t + 1] = uuid
end

-- The global stream: the events gathered in one call share entries, as one field "a"
-- holding a JSON array of them in order (engine/events/stream_entry.h; one small write
-- instead of one field per event: an entry of 32 events in 64 fields cost Redis as
-- much as 7 us per job). The cap counts events, but MAXLEN counts entries, whose sizes
-- vary from 1 to EVENTS_PER_ENTRY: the stream is trimmed to MAXLEN_ALL / m entries,
-- where m is a moving average of events per entry kept in events:avg (weight 1/16 per
-- write, so it follows a change of load within a few dozen writes). Trimming by the
-- size of the newest entry alone kept far fewer events than the cap when small and
-- large entries mix, and a follower a few seconds behind lost events.
local EVENTS_PER_ENTRY = 64
local function global_xadd(texts, from, to)
    local n = to - from + 1
    local avg = tonumber(redis.call('GET', P .. 'events:avg')) or 1
    avg = avg + (n - avg) / 16
    redis.call('SET', P .. 'events:avg', string.format('%.3f', avg))
    local cap = math.max(1, math.floor(tonumber(MAXLEN_ALL) / math.max(1, avg)))
    if n == 1 then
        redis.call('XADD', P .. 'events', 'MAXLEN', '~', cap, '*', 'e', texts[from])
    else
        redis.call('XADD', P .. 'events', 'MAXLEN', '~', cap, '*', 'a',
                   '[' .. table.concat(texts, ',', from, to) .. ']')
    end
end

local function global_event(s)
    if GATHER then
        GLOBAL_EVENTS[#GLOBAL_EVENTS + 1] = s
    else
        global_xadd({s}, 1, 1)
    end
end

-- Sends n items as commands `cmd key <items>`, at most 1,000 items a command (Lua's
-- unpack has a limit); add(args, i) appends the arguments of item i to a command.
local function send_chunked(cmd, key, n, add)
    local i = 1
    while i <= n do
        local args = {key}
        local last = math.min(n, i + 999)
        for j = i, last do
            add(args, j)
        end
        redis.call(cmd, unpack(args))
        i = last + 1
    end
end

-- Takes the uuids `uuids` off list `key`, one occurrence each, the one nearest the tail
-- (as LREM -1 per uuid would). The jobs that end in one call are mostly the oldest
-- claims of their runner, at its list's tail: one LRANGE and one LTRIM take off the
-- longest run of them that ends the list, and only the others cost an LREM each (one
-- LREM per job cost Redis 3 % of its instructions for a 1-step job).
local function list_rems_flush(key, uuids)
    local want = {}
    for _, u in ipairs(uuids) do
        want[u] = (want[u] or 0) + 1
    end
    local tail = redis.call('LRANGE', key, -#uuids, -1)
    local m = 0
    for i = #tail, 1, -1 do
        local u = tail[i]
        if (want[u] or 0) == 0 then
            break
        end
        want[u] = want[u] - 1
        m = m + 1
    end
    if m > 0 then
        redis.call('LTRIM', key, 0, -(m + 1))
    end
    for _, u in ipairs(uuids) do
        if want[u] > 0 then
            want[u] = want[u] - 1
            redis.call('LREM', key, -1, u)
        end
    end
end

-- Sends what was gathered, in an order that gives each key its final state.
local function gather_flush()
    for _, key in ipairs(ZSET_KEYS) do
        local adds, rems = {}, {}
        for member, score in pairs(ZSETS[key]) do
            if score then
                adds[#adds + 1] = score
                adds[#adds + 1] = member
            else
                rems[#rems + 1] = member
            end
        end
        send_chunked('ZREM', key, #rems, function(args, j) args[#args + 1] = rems[j] end)
        send_chunked('ZADD', key, #adds / 2, function(args, j)
            args[#args + 1] = adds[2 * j - 1]
            args[#args + 1] = adds[2 * j]
        end)
    end
    for _, key in ipairs(TAIL_KEYS) do
        local t = TAILS[key]
        send_chunked('LPUSH', key, #t, function(args, j) args[#args + 1] = t[j] end)
    end
    -- After the pushes: no script takes a job off a runner's list before putting it there
    -- in one call.
    for _, key in ipairs(LIST_REM_KEYS) do
        list_rems_flush(key, LIST_REMS[key])
    end
    local n = #GLOBAL_EVENTS
    for from = 1, n, EVENTS_PER_ENTRY do
        global_xadd(GLOBAL_EVENTS, from, math.min(n, from + EVENTS_PER_ENTRY - 1))
    end
    ZSETS, ZSET_KEYS, TAILS, TAIL_KEYS, GLOBAL_EVENTS = {}, {}, {}, {}, {}
    LIST_REMS, LIST_REM_KEYS = {}, {}
end

-- Runs a whole script gathering (see GATHER); what was gathered is sent even when the
-- script raises an error, as its earlier writes would have been, and the error raised
-- again.
local function run_gathered(body)
    GATHER = true
    local ok, r = pcall(body)
    gather_flush()
    GATHER = false
    if not ok then
        error(r, 0)
    end
    return r
end

-- A job's cursor as inflight records it, "<phase>:<idx>". From layout 3 on a new job
-- stores no fence, phase, idx or attempt while they are 0 (four fields fewer to write
-- and read back for every job), so a missing one reads as 0.
local function cursor_text(phase, idx)
    return (phase or '0') .. ':' .. (idx or '0')
end

-- True when the job may have keys beyond its hash, res:0 and events (fields xk, lv;
-- see JOB_KEY_SUFFIXES).
local function has_extra_keys(xk, lv)
    return xk == '1' or not lv
end

-- Fields most jobs never get. From layout 4 on a job that may have any of them carries
-- rf = '1', written with the field and never taken back, so that step_commit.lua, which
-- must see them when they are there, asks for them only then: each field HMGET asks for
-- and the hash lacks costs Redis a scan of the whole hash, and a 1-step job lacked 12 of
-- the 19 fields its commit asked for (4 % of Redis's instructions per job:
-- tests/bench/script_cost.py --callgrind). Every script that writes one of these also
-- writes rf; jobs of earlier layouts count as having them.
local RARE_FIELDS = {'step_holds', 'inflight', 'resume', 'unique', 'locks', 'deadline',
                     'post_back_urls', 'xk', 'blocked_on', 'polls', 'es'}
local LAYOUT = 4
local LAYOUT_TEXT = tostring(LAYOUT) -- as stored in lv
local IS_RARE_FIELD = {}
for _, name in ipairs(RARE_FIELDS) do
    IS_RARE_FIELD[name] = true
end

local function may_have_rare_fields(rf, lv)
    return rf == '1' or (tonumber(lv) or 0) < LAYOUT
end

-- A hash as HGETALL answers it (a flat list) as a table of field -> value.
local function hash_fields(flat)
    local f = {}
    for i = 1, #flat, 2 do
        f[flat[i]] = flat[i + 1]
    end
    return f
end

-- A job's own event stream (job:<uuid>:events) starts with the first event its record
-- cannot tell. Until then the record tells the job's story: "created", "running" when it
-- first started, one "step" per result entry, "finished" (job_history.c tells the same
-- to GET /jobs/:uuid/events; job_stream_open below writes it into a new stream). Most
-- jobs never need a stream of their own, which spares Redis four XADD per 1-step job
-- (about a sixth of its CPU for such a job: README "Where (a) stops") and about 4 KB
-- per job for as long as a stream was kept. An event the record cannot tell (a retry,
-- progress, a wait, a cancel...), or a watcher (job_events_open.lua), starts the
-- stream: the record's events first, under the ids job_history.c gives them, then
-- every event after, as before.
--
-- Starting a stream also sets the job's field `es`, so a script that reads the job
-- anyway knows, from jobs of layout 3 on (field lv), that it has no stream without
-- asking Redis (see stream_seen): an EXISTS per event told cost 1.4 us of Redis's CPU,
-- two per 1-step job. A job with `es` may still have none (a finished job's stream
-- expires before the job): that is asked.
local STREAMS = {} -- uuid -> whether the job's stream exists, as known in this call

-- What the job's fields `es` and `lv`, read by the caller, tell of its stream.
local function stream_seen(uuid, es, lv)
    if STREAMS[uuid] == nil and not es and lv and lv ~= '2' then
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
    local doc = f.workflow
    local wf_uuid = f.workflow_uuid or ''
    local wf = WF_PARSED[wf_uuid]
    if wf == nil or doc then
        doc = doc or redis.call('GET', P .. 'wfdoc:' .. wf_uuid)
        local ok, d = pcall(cjson.decode, doc or '')
        wf = ok and type(d) == 'table' and d or false
        if not f.workflow then
            WF_PARSED[wf_uuid] = wf
        end
    end
    for _, st in ipairs(wf and type(wf[phase]) == 'table' and wf[phase] or {}) do
        if type(st) == 'table' and st.name == name and st.task then
            return st.task
        end
    end
    return cjson.null
end

-- A time of a result entry: ms since the epoch, or, in entries written before times
-- were stored as numbers, ISO text as tern wrote it (UTC, "Z"); 0 when neither.
local function entry_ms(v)
    if type(v) == 'number' then
        return v
    end
    local y, mo, d, h, mi, s, frac = string.match(type(v) == 'string' and v or '',
        '^(%d%d%d%d)-(%d%d)-(%d%d)T(%d%d):(%d%d):(%d%d)%.?(%d*)Z$')
    if not y then
        return 0
    end
    -- Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
    y, mo = tonumber(y), tonumber(mo)
    if mo <= 2 then
        y = y - 1
    end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + tonumber(d) - 1
    local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy -
                     719468
    local ms = frac ~= '' and tonumber(string.sub(frac .. '00', 1, 3)) or 0
    return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(s) * 1000 + ms
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
    for p = 0, 2 do
        local entries = (p == 0 or has_extra_keys(f.xk, f.lv)) and
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
                            task = e.task or step_task(f, phases[p + 1], e.name),
                            attempt = e.attempts or 1}
                if failed then
                    ev.error = e.error
                end
                -- Entries store the duration ("ms"); older ones the end itself.
                local begun, done = entry_ms(e.started_at), entry_ms(e.finished_at)
                if type(e.started_at) == 'number' and type(e.ms) == 'number' then
                    done = e.started_at + e.ms
                end
                if begun > 0 and done >= begun then
                    ev.duration_ms = done - begun
                end
                add(ev, done)
            end
        end
    end
    if f.finished_at then
        add({type = 'finished', execution = f.execution}, f.finished_at)
        local keep = events_keep_ms(f.execution)
        local ttl = redis.call('PTTL', k)
        if ttl > 0 and (keep == 0 or ttl < keep) then
            keep = ttl
        end
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
-- cjson (a table, an encoder per call, every number printed as a float) they cost 5 % of
-- Redis's instructions for a 1-step job, this a fifth of that. Strings that may need
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

-- A time (or any integer) as text, formatted once per value in a call: the items of a
-- batch share their times. (A Lua number passed to redis.call is formatted with
-- printf's %.17g, which cost 1 % of Redis's instructions for a 1-step job.) Every
-- integer a script makes text of goes through here or now_text: Lua's own tostring,
-- `..` and cjson.encode write numbers with %.14g, so from 10^14 ms (the year 5138) on
-- they write "2.53402300799e+14", which reads back as 2.
local INT_TEXTS = {}
local function time_text(n)
    local t = INT_TEXTS[n]
    if not t then
        t = string.format('%d', n)
        INT_TEXTS[n] = t
    end
    return t
end

local function event_running_text(uuid, runner, fence, now)
    return '{"type":"running","runner":' .. quoted(runner) .. ',"fence":' .. fence ..
               ',"job":' .. quoted_uuid(uuid) .. ',"time":' .. time_text(now) .. '}'
end

local function event_finished_text(uuid, execution, now)
    return '{"type":"finished","execution":' .. quoted(execution) .. ',"job":' ..
               quoted_uuid(uuid) .. ',"time":' .. time_text(now) .. '}'
end

-- Moves the job between the per-execution indexes (old: its execution, false for a
-- new job; created: its creation time) without touching the job's own fields.
local function move_index(uuid, old, new, created)
    if old then
        zset_rem(P .. 'jobs:' .. old, uuid)
    end
    zset_add(P .. 'jobs:' .. new, created or '0', uuid)
end

-- Moves the job between the per-execution indexes and records the new execution.
local function set_execution(uuid, new)
    local k = jkey(uuid)
    local f = redis.call('HMGET', k, 'execution', 'created_at')
    if f[1] == new then
        return
    end
    move_index(uuid, f[1], new, f[2])
    redis.call('HSET', k, 'execution', new)
end

-- The uuid of a workflow named by uuid, by "name@version" or by name (the version
-- stored last), or nil. Answers are kept for the rest of the call (a batch of creates
-- names one workflow many times).
local WF_REFS = {}
-- Within one call: workflow documents read (by workflow uuid) and queue names known to
-- be in the set of queues.
local WF_DOCS = {}
local QUEUES_SEEN = {}
-- Queues a job was queued to in this call (job_create.lua: a later job of the call may
-- not start at once, ahead of it).
local QUEUED_IN_CALL = {}
local function resolve_workflow(ref)
    local uuid = WF_REFS[ref]
    if uuid ~= nil then
        return uuid or nil
    end
    if redis.call('EXISTS', P .. 'wf:' .. ref) == 1 then
        uuid = ref
    else
        uuid = redis.call('HGET', P .. 'wf:index', ref) or redis.call('HGET', P .. 'wf:latest', ref)
    end
    WF_REFS[ref] = uuid or false
    return uuid or nil
end

-- Takes a job off its runner's list (r:<runner>:jobs). A claim puts a job there once,
-- at the head, so the oldest claims are at the tail, and jobs mostly end in the order
-- they started: searching from the tail and stopping at the first match costs a few
-- comparisons where LREM 0 scanned the whole list, up to the runner's concurrency, once
-- per job. A gathering script takes its jobs off at its end (see list_rems_flush).
local function runner_list_rem(runner, uuid)
    local key = P .. 'r:' .. runner .. ':jobs'
    if not GATHER then
        redis.call('LREM', key, -1, uuid)
        return
    end
    local t = gathered(LIST_REMS, LIST_REM_KEYS, key)
    t[#t + 1] = uuid
end

-- Puts a job at the head of its queue (the end runners pop from): for re-queued and
-- overdue work, which should not wait behind jobs submitted after it.
local function push_front(uuid)
    local queue = redis.call('HGET', jkey(uuid), 'queue') or DEFAULT_QUEUE
    redis.call('RPUSH', qkey(queue), uuid)
end

-- Schedules a job at `due` (ms) and wakes the runners if it became the earliest.
local function delay(uuid, due)
    redis.call('ZADD', P .. 'delayed', due, uuid)
    local first = redis.call('ZRANGE', P .. 'delayed', 0, 0)
    if first[1] == uuid then
        redis.call('PUBLISH', P .. 'wake', time_text(due))
    end
end

-- Puts the job's workflow deadline back in the index when it leaves its runner
-- (waiting, delayed, parked), so the deadline is enforced while no runner holds it.
local function rearm_deadline(uuid)
    local d = redis.call('HGET', jkey(uuid), 'deadline')
    if d then
        redis.call('ZADD', P .. 'deadlines', d, uuid)
    end
end

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

-- Takes the job out of the line for the resource it waits for, if any.
local function drop_hold_wait(uuid)
    local blocked = redis.call('HGET', jkey(uuid), 'blocked_on')
    if blocked then
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
    drop_hold_wait(uuid)
end

-- A job no runner holds is sent to its onerror or oncancel chain: it leaves its step
-- (the step's tickets and any place in line go) and keeps its job-level tickets until
-- it ends, as a job sent there by its runner does.
local function leave_step_holds(uuid, now)
    release_step_holds(uuid, now)
    drop_hold_wait(uuid)
end

-- Every key of a job (the job hash first), for retention: see store.h. Only the first
-- three exist for most jobs (a job records in its field `xk` that it got any of the
-- others); tick.lua deletes them all when the job's retention has run out.
local JOB_KEY_SUFFIXES = {'', ':res:0', ':events', ':res:1', ':res:2', ':state', ':history',
                          ':info', ':held', ':postbacks'}

-- Schedules the deletion of a finished job's keys, `ms` from now: tick.lua deletes them
-- then (at its next tick), with the job's place in the listings. The keys get no expiry
-- of their own: two PEXPIRE per job cost 5 % of Redis's instructions for a 1-step job
-- (tests/bench/script_cost.py --callgrind), and an expiry costs memory per key. Only a
-- succeeded job's event stream, kept a shorter while (`events_ms`), expires by itself.
local function expire_job(uuid, ms, now, events_ms)
    if events_ms < ms and job_has_stream(uuid) then
        redis.call('PEXPIRE', jkey(uuid) .. ':events', events_ms)
    end
    zset_add(P .. 'expiring', time_text(now + ms), uuid)
end

-- Cancels the deletion of a job's keys: it is live again (redrive). Jobs finished by
-- earlier versions had an expiry on each key: it is removed.
local function persist_job(uuid)
    local k = jkey(uuid)
    for _, suffix in ipairs(JOB_KEY_SUFFIXES) do
        redis.call('PERSIST', k .. suffix)
    end
    zset_rem(P .. 'expiring', uuid)
end

-- After a write to a key of a job that may have finished (info, post-back attempts):
-- a job finished by an earlier version has an expiry on each key, and a key the write
-- created gets the job's remaining time. (Jobs finished now have none: tick.lua deletes
-- every key of theirs, new ones included.)
local function follow_job_expiry(uuid)
    local ttl = redis.call('PTTL', jkey(uuid))
    if ttl > 0 then
        local k = jkey(uuid)
        for _, suffix in ipairs(JOB_KEY_SUFFIXES) do
            if redis.call('PTTL', k .. suffix) == -1 then
                redis.call('PEXPIRE', k .. suffix, ttl)
            end
        end
    end
end

-- {'LOCKS', version, job1, pattern1, ...}, the table of locks of unfinished jobs, when
-- the caller's copy (version `seen`) is stale; nil when it is current. A create or a
-- retry answers with it instead of storing: the caller matches its target again.
local function locks_if_stale(seen)
    local version = redis.call('GET', P .. 'locks:version') or '0'
    if version == seen then
        return nil
    end
    local out = {'LOCKS', version}
    local all = redis.call('HGETALL', P .. 'locks')
    for i = 1, #all do
        out[#out + 1] = all[i]
    end
    return out
end

-- The size of the locks of unfinished jobs: locks:sizes maps each job of the locks hash
-- that has a size to the instructions of its compiled lock (what a process keeps in
-- memory and matches every create against), and locks:size is their sum. Only the
-- scripts that write the locks hash change them, in the same call (job_create.lua and
-- job_redrive.lua add, finish drops), so they move together; a lock stored by an earlier
-- version has no size and counts 0.

-- The instructions held now when a lock of `size` would take them past `cap`; nil when
-- it fits. With no lock held, a sum left over (by an earlier version's writes) is
-- cleared first.
local function locks_size_fits(size, cap)
    if redis.call('HLEN', P .. 'locks') == 0 then
        redis.call('DEL', P .. 'locks:size', P .. 'locks:sizes')
    end
    local held = tonumber(redis.call('GET', P .. 'locks:size') or '0')
    if held + size > cap then
        return held
    end
    return nil
end

-- Counts the lock of `uuid`, of `size` instructions (replacing a size it had).
local function locks_size_add(uuid, size)
    local was = tonumber(redis.call('HGET', P .. 'locks:sizes', uuid) or '0')
    redis.call('HSET', P .. 'locks:sizes', uuid, size)
    redis.call('INCRBY', P .. 'locks:size', size - was)
end

-- Stops counting the lock of `uuid` (it was taken out of the locks hash).
local function locks_size_drop(uuid)
    local size = redis.call('HGET', P .. 'locks:sizes', uuid)
    if size then
        redis.call('HDEL', P .. 'locks:sizes', uuid)
        redis.call('DECRBY', P .. 'locks:size', size)
    end
end

-- The job fields finish() reads; a caller that has them already passes them in.
local FINISH_FIELDS = {'execution', 'created_at', 'runner', 'unique', 'locks', 'deadline',
                       'post_back_urls', 'xk', 'lv', 'blocked_on', 'cancel', 'inflight',
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
    local extra = has_extra_keys(f.xk, f.lv)
    if extra or f.blocked_on then
        release_all_holds(uuid, now)
    end
    if f.unique and redis.call('HGET', P .. 'unique', f.unique) == uuid then
        redis.call('HDEL', P .. 'unique', f.unique)
    end
    if f.locks or not f.lv then
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
            return false
        end
    end
    return true
end

-- The frozen workflow document of a job: jobs share one copy per workflow version
-- (wfdoc:<workflow uuid>); jobs stored before that carry their own in the field
-- `workflow`, which their HGETALL already holds, so nothing more is returned for them.
-- `docs` caches documents within one call (listings read many jobs of one workflow).
local function wf_doc(wf_uuid, docs)
    if not wf_uuid then
        return false
    end
    if docs and docs[wf_uuid] then
        return docs[wf_uuid]
    end
    local doc = redis.call('GET', P .. 'wfdoc:' .. wf_uuid) or false
    if docs then
        docs[wf_uuid] = doc
    end
    return doc
end

-- The same for a job's fields as HGETALL answers them (a flat list), or as a table
-- of field -> value (`f`, when the caller made one: see hash_fields).
local function job_doc(fields, docs, f)
    if f then
        return not f.workflow and wf_doc(f.workflow_uuid, docs)
    end
    local wf_uuid = nil
    for i = 1, #fields, 2 do
        if fields[i] == 'workflow' then
            return false
        elseif fields[i] == 'workflow_uuid' then
            wf_uuid = fields[i + 1]
        end
    end
    return wf_doc(wf_uuid, docs)
end

-- One consistent snapshot of a job in the layout job_view.c reads, or nil when the
-- job does not exist: {fields (HGETALL), chain results, onerror results, oncancel
-- results, state (HGETALL), history, server now, post-back attempts, workflow document
-- (false when the fields carry it)}. Reads, creates and listings all answer with it,
-- so a job looks the same whichever call returned it. A job without extra keys (see
-- has_extra_keys) has only chain results to read.
local function job_snapshot(uuid, now, docs)
    local k = jkey(uuid)
    local fields = redis.call('HGETALL', k)
    if #fields == 0 then
        return nil
    end
    -- Jobs from layout 2 on do not store their uuid (it is in the key): readers get it here.
    fields[#fields + 1] = 'uuid'
    fields[#fields + 1] = uuid
    local xk, lv = nil, nil
    for i = 1, #fields, 2 do
        if fields[i] == 'xk' then
            xk = fields[i + 1]
        elseif fields[i] == 'lv' then
            lv = fields[i + 1]
        end
    end
    local doc = job_doc(fields, docs)
    if not has_extra_keys(xk, lv) then
        return {fields, redis.call('LRANGE', k .. ':res:0', 0, -1), {}, {}, {}, {}, now, {}, doc}
    end
    return {fields, redis.call('LRANGE', k .. ':res:0', 0, -1),
            redis.call('LRANGE', k .. ':res:1', 0, -1),
            redis.call('LRANGE', k .. ':res:2', 0, -1),
            redis.call('HGETALL', k .. ':state'),
            redis.call('LRANGE', k .. ':history', 0, -1), now,
            redis.call('LRANGE', k .. ':postbacks', 0, -1), doc}
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

-- Byte order, the order of a sorted set's members with equal scores. Lua's `<` on
-- strings follows the server's collation locale, which may differ.
local function bytes_before(a, b)
    for i = 1, math.min(#a, #b) do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then
            return x < y
        end
    end
    return #a < #b
end

-- The entries of the sorted sets `keys` with a score of at most `max`, as one
-- sequence, highest score first and ties by member, descending: the order
-- ZREVRANGEBYSCORE gives one set, kept across sets by merging them (a job is in one
-- jobs:<execution> index at a time, so every job is met once). Each set is read
-- `batch` entries at a time as the merge needs them. Returns a function answering the
-- next member and its score, or nil after the last.
local function merged_desc(keys, max, batch)
    local src = {}
    for i, key in ipairs(keys) do
        src[i] = {key = key, items = {}, at = 1, pos = 0, done = false}
    end
    local function ready(s)
        if s.at > #s.items and not s.done then
            s.items = redis.call('ZREVRANGEBYSCORE', s.key, max, '-inf', 'WITHSCORES', 'LIMIT',
                                 s.pos, batch)
            s.at, s.pos = 1, s.pos + batch
            s.done = #s.items < 2 * batch
        end
        return s.at <= #s.items
    end
    return function()
        local best, best_t = nil, nil
        for _, s in ipairs(src) do
            if ready(s) then
                local t = tonumber(s.items[s.at + 1])
                if not best or t > best_t or
                    (t == best_t and bytes_before(best.items[best.at], s.items[s.at])) then
                    best, best_t = s, t
                end
            end
        end
        if not best then
            return nil
        end
        local uuid, t = best.items[best.at], best.items[best.at + 1]
        best.at = best.at + 2
        return uuid, t
    end
end

-- One page of a listing (job_list.lua, workflow_list.lua), newest first from the
-- sorted sets `keys` scored by creation time, merged (see merged_desc). The page
-- starts after the marker (the time `mtime` and uuid `muuid` of the last entry the
-- previous page examined; mtime '' for the first page): ties in time are ordered by
-- uuid, descending. At most `budget` entries are examined so that a filter
-- matching few entries never blocks Redis for long; such a page may hold fewer than
-- `limit` entries and still have a next marker. A full page looks for one more match
-- (within the budget) so that the last page has no marker.
-- `match(uuid)` returns a true value for an entry the listing wants; while the page is
-- not full, `take(uuid, that value)` returns what to list for it, or nil for nothing.
-- Returns the listed values and the next marker's time and uuid ('' on the last page).
-- `full` (may be nil) is told of each entry take returned, before it is listed; true
-- (the page would pass its size with it) ends the page before that entry, with the
-- marker on the entry listed last, so the next page starts with it. The first entry is
-- always listed (a page bounded in bytes).
local function list_page(keys, limit, mtime, muuid, budget, match, take, full)
    local mnum = tonumber(mtime)
    local out, examined = {}, 0
    -- The marker: the last entry examined, or, once a full page has seen one more
    -- match, the last entry listed (the next page starts right after it).
    local last_time, last_uuid, page_time, page_uuid = '', '', '', ''
    local more = false
    local next_entry = merged_desc(keys, mtime == '' and '+inf' or mtime, math.min(limit + 1, 500))
    while true do
        local uuid, t = next_entry()
        if not uuid then
            break
        end
        -- Entries at the marker's time up to the marker itself were on earlier pages.
        if mtime == '' or tonumber(t) < mnum or bytes_before(uuid, muuid) then
            if examined == budget then
                more = true
                break
            end
            examined = examined + 1
            local m = match(uuid)
            if m then
                if #out == limit then
                    -- A match beyond a full page: there is a next page.
                    more = true
                    last_time, last_uuid = page_time, page_uuid
                    break
                end
                local v = take(uuid, m)
                if v ~= nil then
                    if full and full(v) and #out > 0 then
                        -- v would take the page past its size: the next page starts
                        -- with it.
                        more = true
                        last_time, last_uuid = page_time, page_uuid
                        break
                    end
                    out[#out + 1] = v
                end
                page_time, page_uuid = t, uuid
            end
            last_time, last_uuid = t, uuid
        end
    end
    if not more then
        last_time, last_uuid = '', ''
    end
    return out, last_time, last_uuid
end

-- Scripts whose first line says "-- batched" (tools/embed_lua.py wraps their body in a
-- function) take many calls at once, so that many jobs' creates or step commits share
-- one round trip and one script call: ARGV[5] is the number of items, then each item is
-- its argument count followed by its arguments. Each item gets a table of its own
-- arguments as ARGV[3]... (the body's parameter ARGV, which hides the global: one
-- table built by one unpack per item cost Redis 1 us less per item than rewriting the
-- global's contents) and answers one element of the reply; an item that raises an
-- error answers that error and the others still run. Items run in order, so a later
-- item sees what an earlier one wrote (but for the gathered writes, which no script
-- reads: see GATHER).
local function run_batch(one)
    GATHER = true
    local all = ARGV
    local n = tonumber(all[5]) or 0
    local out = {}
    local pos = 6
    for i = 1, n do
        local cnt = tonumber(all[pos])
        local args = {MAXLEN_JOB, MAXLEN_ALL, unpack(all, pos + 1, pos + cnt)}
        pos = pos + cnt + 1
        local ok, r = pcall(one, args)
        if not ok then
            r = {err = type(r) == 'table' and r.err or tostring(r)}
        elseif r == nil then
            r = false
        end
        out[i] = r
    end
    gather_flush()
    GATHER = false
    return out
end
