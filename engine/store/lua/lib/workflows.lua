-- include: prelude
-- lib/workflows.lua: workflows named by reference, and the frozen workflow document a
-- job runs.

-- The uuid of a workflow named by uuid, by "name@version" or by name (the version
-- stored last), or nil. Answers are kept for the rest of the call (a batch of creates
-- names one workflow many times).
local WF_REFS = {}
-- Within one call: workflow documents read (by workflow uuid).
local WF_DOCS = {}
local function resolve_workflow(ref)
    local uuid = WF_REFS[ref]
    if uuid ~= nil then
        return uuid or nil
    end
    if redis.call('EXISTS', P .. 'wf:' .. ref) == 1 then
        uuid = ref
    else
        uuid = redis.call('HGET', P .. 'wf:index', ref) or redis.call('HGET', P .. 'wf:latest', ref)
    end
    WF_REFS[ref] = uuid or false
    return uuid or nil
end

-- The frozen workflow document of a job: jobs share one copy per workflow version
-- (wfdoc:<workflow uuid>); jobs stored before that carry their own in the field
-- `workflow`, which their HGETALL already holds, so nothing more is returned for them.
-- `docs` caches documents within one call (listings read many jobs of one workflow).
local function wf_doc(wf_uuid, docs)
    if not wf_uuid then
        return false
    end
    if docs and docs[wf_uuid] then
        return docs[wf_uuid]
    end
    local doc = redis.call('GET', P .. 'wfdoc:' .. wf_uuid) or false
    if docs then
        docs[wf_uuid] = doc
    end
    return doc
end

-- The same for a job's fields as HGETALL answers them (a flat list), or as a table
-- of field -> value (`f`, when the caller made one: see hash_fields).
local function job_doc(fields, docs, f)
    if f then
        return not f.workflow and wf_doc(f.workflow_uuid, docs)
    end
    local wf_uuid = nil
    for i = 1, #fields, 2 do
        if fields[i] == 'workflow' then
            return false
        elseif fields[i] == 'workflow_uuid' then
            wf_uuid = fields[i + 1]
        end
    end
    return wf_doc(wf_uuid, docs)
end
