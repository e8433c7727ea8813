-- include: prelude listing snapshot
-- job_list.lua: one page of jobs, newest first by creation time, with each job's
-- snapshot, in one round trip. Paging, the marker and the examination budget are
-- list_page's (lib/listing.lua). Filters compare a job's params (node-workflow's
-- GET /jobs?key=value): a string must be equal, a number or boolean must print equal.
-- Matching jobs up to `offset` are skipped before any is listed. A page also ends
-- once the jobs on it pass `max_bytes` (the lengths of their stored strings, about the
-- size of their JSON views), after at least one job: a page of big params would
-- otherwise hold Redis, then ternd's loop, for seconds.
-- ARGV: 3 execution ('' every job), 4 limit, 5 marker time ('' first page),
--       6 marker uuid, 7 offset (matching jobs to skip first), 8 budget, 9 max_bytes,
--       10.. filter key/value pairs
-- Returns {total in the index, next marker time ('' last page), next marker uuid,
--         {snapshot, ...}}
local ex, limit, mtime, muuid = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local offset, budget, max_bytes = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
-- Every job is in the index of its execution; listing them all merges those indexes.
local keys = {}
for _, e in ipairs(ex == '' and EXECUTIONS or {ex}) do
    keys[#keys + 1] = P .. 'jobs:' .. e
end
local filters = {}
for i = 10, #ARGV, 2 do
    filters[#filters + 1] = {ARGV[i], ARGV[i + 1]}
end

local function matches(uuid)
    if #filters == 0 then
        return true
    end
    local text = redis.call('HGET', jkey(uuid), 'params')
    if not text then
        return false
    end
    local ok, params = pcall(cjson.decode, text)
    if not ok or type(params) ~= 'table' then
        return false
    end
    for _, f in ipairs(filters) do
        local v = params[f[1]]
        local t = type(v)
        if t == 'string' then
            if v ~= f[2] then
                return false
            end
        elseif t == 'number' then
            if tonumber(f[2]) ~= v then
                return false
            end
        elseif t == 'boolean' then
            if tostring(v) ~= f[2] then
                return false
            end
        else
            return false
        end
    end
    return true
end

-- The bytes of a snapshot's strings (fields, results, state, history, post-backs,
-- document), nested one level as job_snapshot builds it.
local function snapshot_bytes(snap)
    local n = 0
    for _, part in ipairs(snap) do
        local t = type(part)
        if t == 'string' then
            n = n + #part
        elseif t == 'table' then
            for _, s in ipairs(part) do
                if type(s) == 'string' then
                    n = n + #s + 8 -- a little per element for the JSON around it
                end
            end
        end
    end
    return n
end
local page_bytes = 0
local function full(snap)
    page_bytes = page_bytes + snapshot_bytes(snap)
    return page_bytes > max_bytes
end

local now = now_ms()
local skipped = 0
local docs = {} -- workflow documents, read once per call
local out, last_time, last_uuid = list_page(keys, limit, mtime, muuid, budget, matches,
    function(uuid)
        if skipped < offset then
            skipped = skipped + 1
            return nil
        end
        return job_snapshot(uuid, now, docs)
    end, full)
local total = 0
for _, key in ipairs(keys) do
    total = total + redis.call('ZCARD', key)
end
return {total, last_time, last_uuid, out}
