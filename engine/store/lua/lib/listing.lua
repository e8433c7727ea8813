-- include:
-- lib/listing.lua: one page of a listing, newest first, merged from sorted sets.

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
