-- include:
-- lib/layout.lua: how a job's record is laid out: its phases and cursor, the layout
-- version it is stored in, the keys beyond its hash, the fields most jobs never get, its
-- hash read as a table.

-- The three chains of a workflow, numbered as wf_phase_t numbers them in C
-- (engine/model/workflow.h): a job's field phase and its key res:<phase> carry the number.
local WF_CHAIN, WF_ONERROR, WF_ONCANCEL = 0, 1, 2
-- The same as text, as a job's field and a script's arguments give them.
local WF_CHAIN_TEXT, WF_ONCANCEL_TEXT = '0', '2'

-- A job's cursor as inflight records it, "<phase>:<idx>". A job stores no fence,
-- phase, idx or attempt while they are 0 (four fields fewer to write and read back for
-- every job), so a missing one reads as 0.
local function cursor_text(phase, idx)
    return (phase or '0') .. ':' .. (idx or '0')
end

-- True when the job may have keys beyond its hash, res:0 and events (field xk; see
-- JOB_KEY_SUFFIXES).
local function has_extra_keys(xk)
    return xk == '1'
end

-- Fields most jobs never get. A job that may have any of them carries rf = '1', written
-- with the field and never taken back, so that step_commit.lua, which must see them
-- when they are there, asks for them only then: each field HMGET asks for and the hash
-- lacks costs Redis a scan of the whole hash, and a 1-step job lacked 12 of the 19
-- fields its commit asked for (tests/bench/script_cost.py --callgrind shows the scans). Every script that writes one of these also
-- writes rf.
local RARE_FIELDS = {'step_holds', 'inflight', 'resume', 'unique', 'locks', 'deadline',
                     'post_back_urls', 'xk', 'blocked_on', 'polls', 'es', 'step_queue',
                     'queue_timeout', 'fallback_error'}
-- The layout of the jobs stored now, written in their field lv. No script reads lv: a
-- job of an earlier layout (one that may lack xk, es or rf) is not read, and a later
-- layout will tell this one's jobs apart by it.
local LAYOUT = 4
local LAYOUT_TEXT = tostring(LAYOUT) -- as stored in lv
local IS_RARE_FIELD = {}
for _, name in ipairs(RARE_FIELDS) do
    IS_RARE_FIELD[name] = true
end

local function may_have_rare_fields(rf)
    return rf == '1'
end

-- A hash as HGETALL answers it (a flat list) as a table of field -> value.
local function hash_fields(flat)
    local f = {}
    for i = 1, #flat, 2 do
        f[flat[i]] = flat[i + 1]
    end
    return f
end
