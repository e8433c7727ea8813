-- include: prelude gather
-- lib/batch.lua: run_batch, which runs the body of a "-- batched" script once per item
-- of a call, the items' shared writes gathered.

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
