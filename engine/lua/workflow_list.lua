-- workflow_list.lua: one page of workflow versions, newest first by the time they were
-- stored, with their documents, in one round trip. Paging and the examination budget
-- work as in job_list.lua; the filters are the workflow's name and version.
-- ARGV: 3 limit, 4 marker time ('' first page), 5 marker uuid, 6 budget,
--       7 name ('' any), 8 version ('' any)
-- Returns {next marker time ('' last page), next marker uuid, {doc, ...}}
local limit, mtime, muuid, budget = tonumber(ARGV[3]), ARGV[4], ARGV[5], tonumber(ARGV[6])
local name, version = ARGV[7], ARGV[8]
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
local key = P .. 'wf:all'
local max = mtime == '' and '+inf' or mtime
local mnum = tonumber(mtime)
local out, examined = {}, 0
local last_time, last_uuid, page_time, page_uuid = '', '', '', ''
local more = false
local pos, batch = 0, math.min(limit + 1, 500)
while not more do
    local items = redis.call('ZREVRANGEBYSCORE', key, max, '-inf', 'WITHSCORES', 'LIMIT', pos,
                             batch)
    for i = 1, #items, 2 do
        local uuid, t = items[i], items[i + 1]
        if mtime == '' or tonumber(t) < mnum or bytes_before(uuid, muuid) then
            if examined == budget then
                more = true
                break
            end
            examined = examined + 1
            local f = redis.call('HMGET', P .. 'wf:' .. uuid, 'doc', 'name', 'version')
            if f[1] and (name == '' or f[2] == name) and (version == '' or f[3] == version) then
                if #out == limit then
                    more = true
                    last_time, last_uuid = page_time, page_uuid
                    break
                end
                out[#out + 1] = f[1]
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
return {last_time, last_uuid, out}
