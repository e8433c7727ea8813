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
-- (wfdoc:<workflow uuid>, named by the job's field workflow_uuid); false when there is
-- none. `docs` caches documents within one call (listings read many jobs of one
-- workflow).
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
