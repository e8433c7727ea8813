-- include: prelude
-- workflow_put.lua: stores a workflow version. A name and version already stored
-- with the same definition is kept as it is (loading a directory twice is harmless);
-- with a different definition it is refused: versions are immutable, so jobs and
-- operators can trust that name@version means one thing. The document is also kept
-- as wfdoc:<uuid>, the frozen copy the version's jobs share (never deleted).
-- ARGV: 3 uuid, 4 name, 5 version, 6 document JSON (with uuid),
--       7 canonical JSON without uuid (for the comparison)
-- Returns {'CREATED', uuid} | {'SAME', uuid} | {'CONFLICT', uuid}
--       | {'TAKEN', uuid} (the uuid the caller chose belongs to another version)
local uuid, name, version, doc, canon = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local key = name .. '@' .. version
local existing = redis.call('HGET', P .. 'wf:index', key)
if existing then
    if redis.call('HGET', P .. 'wf:' .. existing, 'canon') == canon then
        return {'SAME', existing}
    end
    return {'CONFLICT', existing}
end
if redis.call('EXISTS', P .. 'wf:' .. uuid) == 1 then
    return {'TAKEN', uuid}
end
-- The frozen copy jobs share outlives a deleted version; its uuid names that one
-- document for good.
local frozen = redis.call('GET', P .. 'wfdoc:' .. uuid)
if frozen and frozen ~= doc then
    return {'TAKEN', uuid}
end
local now = now_ms()
redis.call('HSET', P .. 'wf:' .. uuid, 'doc', doc, 'canon', canon, 'name', name,
           'version', version, 'created_at', now)
redis.call('SET', P .. 'wfdoc:' .. uuid, doc)
redis.call('HSET', P .. 'wf:index', key, uuid)
redis.call('HSET', P .. 'wf:latest', name, uuid)
redis.call('ZADD', P .. 'wf:all', now, uuid)
return {'CREATED', uuid}
