-- include: prelude
-- workflow_delete.lua: removes one workflow version (node-workflow's DELETE
-- /workflows/:uuid). Jobs keep the frozen copy they were created with, so nothing
-- else changes; when the version was its name's latest, the latest becomes the most
-- recently stored version left, if any.
-- ARGV: 3 uuid or "name@version"
-- Returns {'DELETED', uuid, name, version} | {'NOTFOUND'}
local ref = ARGV[3]
local uuid = nil
if redis.call('EXISTS', P .. 'wf:' .. ref) == 1 then
    uuid = ref
else
    uuid = redis.call('HGET', P .. 'wf:index', ref)
end
if not uuid then
    return {'NOTFOUND'}
end
local f = redis.call('HMGET', P .. 'wf:' .. uuid, 'name', 'version')
local name, version = f[1], f[2]
redis.call('DEL', P .. 'wf:' .. uuid)
redis.call('ZREM', P .. 'wf:all', uuid)
if name and version then
    redis.call('HDEL', P .. 'wf:index', name .. '@' .. version)
end
if name and redis.call('HGET', P .. 'wf:latest', name) == uuid then
    -- Workflow names cannot hold '@', so the prefix selects this name's versions only.
    local prefix = name .. '@'
    local best, best_time = nil, nil
    local index = redis.call('HGETALL', P .. 'wf:index')
    for i = 1, #index, 2 do
        if string.sub(index[i], 1, #prefix) == prefix then
            local t = tonumber(redis.call('ZSCORE', P .. 'wf:all', index[i + 1]) or '0')
            if not best_time or t > best_time then
                best, best_time = index[i + 1], t
            end
        end
    end
    if best then
        redis.call('HSET', P .. 'wf:latest', name, best)
    else
        redis.call('HDEL', P .. 'wf:latest', name)
    end
end
return {'DELETED', uuid, name or '', version or ''}
