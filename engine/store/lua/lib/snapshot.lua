-- include: prelude layout workflows
-- lib/snapshot.lua: one consistent snapshot of a job, the answer of reads, creates and
-- listings.

-- One consistent snapshot of a job in the layout job_view.c reads, or nil when the
-- job does not exist: {fields (HGETALL), chain results, onerror results, oncancel
-- results, state (HGETALL), history, server now, post-back attempts, workflow document
-- (false when there is none: see wf_doc)}. Reads, creates and listings all answer with it,
-- so a job looks the same whichever call returned it. A job without extra keys (see
-- has_extra_keys) has only chain results to read.
local function job_snapshot(uuid, now, docs)
    local k = jkey(uuid)
    local fields = redis.call('HGETALL', k)
    if #fields == 0 then
        return nil
    end
    -- Jobs from layout 2 on do not store their uuid (it is in the key): readers get it here.
    fields[#fields + 1] = 'uuid'
    fields[#fields + 1] = uuid
    local xk, wf_uuid = nil, nil
    for i = 1, #fields, 2 do
        if fields[i] == 'xk' then
            xk = fields[i + 1]
        elseif fields[i] == 'workflow_uuid' then
            wf_uuid = fields[i + 1]
        end
    end
    local doc = wf_doc(wf_uuid, docs)
    if not has_extra_keys(xk) then
        return {fields, redis.call('LRANGE', k .. ':res:0', 0, -1), {}, {}, {}, {}, now, {}, doc}
    end
    return {fields, redis.call('LRANGE', k .. ':res:0', 0, -1),
            redis.call('LRANGE', k .. ':res:1', 0, -1),
            redis.call('LRANGE', k .. ':res:2', 0, -1),
            redis.call('HGETALL', k .. ':state'),
            redis.call('LRANGE', k .. ':history', 0, -1), now,
            redis.call('LRANGE', k .. ':postbacks', 0, -1), doc}
end
