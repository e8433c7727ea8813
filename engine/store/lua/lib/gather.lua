-- include: prelude
-- lib/gather.lua: writes to keys that every job shares (listings, queue tails, runners'
-- lists of jobs, the global event stream), gathered while a script runs and sent once at
-- its end (run_gathered).

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
-- longest run of them that ends the list, and only the others cost an LREM each (an
-- LREM per job showed in tests/bench/script_cost.py --callgrind).
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
