-- include: prelude workflows
-- workflow_get.lua: a workflow by uuid, by "name@version", or by name (the version
-- stored last).
-- ARGV: 3 uuid, name@version or name
-- Returns {uuid, doc} or {} when there is none.
local ref = ARGV[3]
local uuid = resolve_workflow(ref)
if not uuid then
    return {}
end
local doc = redis.call('HGET', P .. 'wf:' .. uuid, 'doc')
if not doc then
    return {}
end
return {uuid, doc}
