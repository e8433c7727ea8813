-- include: prelude listing
-- workflow_list.lua: one page of workflow versions, newest first by the time they were
-- stored, with their documents, in one round trip. Paging, the marker and the
-- examination budget are list_page's (lib/listing.lua); the filters are the workflow's
-- name and version.
-- ARGV: 3 limit, 4 marker time ('' first page), 5 marker uuid, 6 budget,
--       7 name ('' any), 8 version ('' any)
-- Returns {next marker time ('' last page), next marker uuid, {doc, ...}}
local limit, mtime, muuid, budget = tonumber(ARGV[3]), ARGV[4], ARGV[5], tonumber(ARGV[6])
local name, version = ARGV[7], ARGV[8]
local out, last_time, last_uuid = list_page({P .. 'wf:all'}, limit, mtime, muuid, budget,
    function(uuid)
        local f = redis.call('HMGET', P .. 'wf:' .. uuid, 'doc', 'name', 'version')
        if f[1] and (name == '' or f[2] == name) and (version == '' or f[3] == version) then
            return f[1]
        end
        return nil
    end,
    function(_, doc)
        return doc
    end)
return {last_time, last_uuid, out}
