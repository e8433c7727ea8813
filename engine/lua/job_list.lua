-- job_list.lua: one page of jobs, newest first by creation time, with each job's
-- snapshot, in one round trip.
-- The page starts after the marker (the creation time and uuid of the last job the
-- previous page examined): ties in time are ordered by uuid, descending, the order
-- ZREVRANGEBYSCORE gives them. Filters compare a job's params (node-workflow's
-- GET /jobs?key=value): a string must be equal, a number or boolean must print equal.
-- At most `budget` jobs are examined per call so that a filter matching few jobs
-- never blocks Redis for long; such a page may hold fewer than `limit` jobs and still
-- have a next marker. A full page looks for one more match (within the budget) so
-- that the last page has no marker.
-- ARGV: 3 execution ('' every job), 4 limit, 5 marker time ('' first page),
--       6 marker uuid, 7 offset (matching jobs to skip first), 8 budget,
--       9.. filter key/value pairs
-- Returns {total in the index, next marker time ('' last page), next marker uuid,
--         {snapshot, ...}}
local ex, limit, mtime, muuid = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local offset, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local key = ex == '' and P .. 'jobs' or P .. 'jobs:' .. ex
local filters = {}
for i = 9, #ARGV, 2 do
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
local now = now_ms()
local max = mtime == '' and '+inf' or mtime
local mnum = tonumber(mtime)
local out, examined, skipped = {}, 0, 0
-- The marker: the last entry examined, or, once a full page has seen one more match,
-- the last entry listed (the next page starts right after it).
local last_time, last_uuid, page_time, page_uuid = '', '', '', ''
local more = false
local pos, batch = 0, math.min(limit + 1, 500)
while not more do
    local items = redis.call('ZREVRANGEBYSCORE', key, max, '-inf', 'WITHSCORES', 'LIMIT', pos,
                             batch)
    for i = 1, #items, 2 do
        local uuid, t = items[i], items[i + 1]
        -- Entries at the marker's time up to the marker itself were on earlier pages.
        if mtime == '' or tonumber(t) < mnum or bytes_before(uuid, muuid) then
            if examined == budget then
                more = true
                break
            end
            examined = examined + 1
            if matches(uuid) then
                if #out == limit then
                    -- A match beyond a full page: there is a next page. Looking for it
                    -- keeps the last page of a filtered listing from ending in a marker.
                    more = true
                    last_time, last_uuid = page_time, page_uuid
                    break
                end
                if skipped < offset then
                    skipped = skipped + 1
                else
                    local snap = job_snapshot(uuid, now)
                    if snap then
                        out[#out + 1] = snap
                    end
                end
                page_time, page_uuid = t, uuid
            end
            last_time, last_uuid = t, uuid
        end
    end
    if #items < 2 * batch then
        break
    end
    pos = pos + batch
end
if not more then
    last_time, last_uuid = '', ''
end
return {redis.call('ZCARD', key), last_time, last_uuid, out}
