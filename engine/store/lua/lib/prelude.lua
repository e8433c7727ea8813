-- include:
-- lib/prelude.lua: what every script starts from: the arguments every call gets, the
-- server's time, key names, the executions, integers as text. The key schema is
-- described in engine/store/store.h.
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
