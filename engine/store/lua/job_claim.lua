-- include: prelude gather layout queues events holds finish workflows
-- gathered (see run_gathered). job_claim.lua: starts jobs on a runner. Jobs named
-- explicitly are already in the runner's list (moved there by BLMOVE, or found there
-- after a lost reply); up to `more` further jobs are moved from the queue here. Each
-- is checked (a job canceled while queued is skipped), takes its job-level holds (or
-- is parked), gets a new fence token, and is returned whole. An explicitly named job
-- that already runs on this runner is adopted again with a new fence (its claim reply
-- was lost, or the runner restarted under the same id), unless an irreversible step
-- was in flight.
-- ARGV: 3 runner, 4 queue, 5 more (count), 6.. explicit uuids.
-- Returns a list of jobs, each {uuid, fence, the job fields the runner reads (flat
-- name/value list: see RUNNER_FIELDS), chain results, onerror results, oncancel results,
-- state (HGETALL), server now, workflow document (false when there is none: see
-- wf_doc; the 0-based index of an earlier job of this answer when that job carries
-- the same one: a document is sent once per answer, not once per job), the workflow
-- uuid (by which the runner finds the version it parsed already; left out when the
-- document is an index: it is the earlier job's)}.
local runner, queue, more = ARGV[3], ARGV[4], tonumber(ARGV[5])
local rlist = P .. 'r:' .. runner .. ':jobs'
local now = now_ms()
local candidates = {}
local explicit = {}
for i = 6, #ARGV do
    candidates[#candidates + 1] = ARGV[i]
    explicit[ARGV[i]] = true
end
-- The oldest `more` jobs of the queue (its right end), onto the runner's list in the
-- order one LMOVE each would leave them.
local taken = more > 0 and redis.call('RPOP', qkey(queue), more)
if taken then
    redis.call('LPUSH', rlist, unpack(taken))
    for _, u in ipairs(taken) do
        candidates[#candidates + 1] = u
    end
end
-- The fields of a job that runner.c's job_adopt reads. Answering with these only, not
-- the whole hash, spares Redis about 20 answer elements per job
-- (tests/bench/script_cost.py --callgrind).
local RUNNER_FIELDS = {'params', 'target', 'phase', 'idx', 'attempt', 'error', 'resume',
                       'cancel', 'timed_out', 'deadline', 'step_queue', 'queue_timeout',
                       'fallback_error', 'admission'}
local out = {}
local docs = {}
local doc_rows = {} -- document text -> the index (0-based) of the first job answered with it
for _, uuid in ipairs(candidates) do
    local k = jkey(uuid)
    -- The job read once; the reply carries the fields the runner reads, as the claim
    -- leaves them (see below).
    local f = hash_fields(redis.call('HGETALL', k))
    stream_seen(uuid, f.es)
    local ex = f.execution
    local adopt = explicit[uuid] and ex == 'running' and f.runner == runner
    if adopt then
        ex = 'queued'
        -- A runner restarted under the same id finds the job it held: if it had begun
        -- an irreversible step and never committed it, the step may have done its
        -- work, so the job fails with StepInterrupted, as tick.lua fails the same job
        -- of a runner that died for good. (A live runner that lost a claim's answer
        -- has begun no step under that claim, so this never stops it.)
        if f.inflight and f.inflight == cursor_text(f.phase, f.idx) then
            interrupt(uuid, runner, 'restarted', f.inflight, now)
            ex = 'failed'
        end
    end
    if ex ~= 'queued' and ex ~= 'retried' then
        -- Canceled, finished or deleted while queued: not ours to run.
        runner_list_rem(runner, uuid)
    elseif f.cancel == '1' or f.timed_out == '1' or not f.holds or f.holds == '' or
        take_job_holds(uuid, runner, now) then
        -- Taking holds writes to the job (xk): it is read again after the claim's write.
        local reread = f.holds and f.holds ~= '' and f.cancel ~= '1' and f.timed_out ~= '1'
        local fence = tostring((tonumber(f.fence) or 0) + 1)
        local set = {'execution', 'running'}
        if start_fields(set, uuid, runner, fence, not f.started_at, tonumber(f.timeout_ms or '0'),
                        f.deadline, now) then
            set[#set + 1] = 'rf' -- see RARE_FIELDS
            set[#set + 1] = '1'
        end
        redis.call('HSET', k, unpack(set))
        -- The job as the claim leaves it (f stays as it was read: see below).
        local now_f, changed = f, {}
        if reread then
            now_f = hash_fields(redis.call('HGETALL', k))
        else
            for i = 1, #set, 2 do
                changed[set[i]] = set[i + 1]
            end
        end
        local fields = {}
        for _, name in ipairs(RUNNER_FIELDS) do
            local v = changed[name] or now_f[name]
            if v then
                fields[#fields + 1] = name
                fields[#fields + 1] = v
            end
        end
        if adopt then
            -- Still indexed as running: only the claim changed.
        elseif f.execution ~= 'running' then
            move_index(uuid, f.execution, 'running', f.created_at)
        end
        -- The record tells a job's first start (started_at), not a later one; nor a start
        -- after a hop to a step's queue, but its result entries name the runner of each
        -- step: a second start would start the job's own stream at every hop, which
        -- doubled Redis's work for a 2-step job (the q-hop scenario of
        -- tests/bench/bench_tern.c).
        local running = event_running_text(uuid, runner, fence, now)
        if f.started_at and not f.hopped then
            event_raw(uuid, running)
        else
            event_told(uuid, running)
        end
        if f.hopped then
            redis.call('HDEL', k, 'hopped')
        end
        local doc = wf_doc(now_f.workflow_uuid, docs)
        local wf_uuid = now_f.workflow_uuid
        if doc then
            -- A real workflow's document is kilobytes: 64 copies of it in one answer
            -- cost Redis and ternd for nothing.
            local row = doc_rows[doc]
            if row then
                doc = row
                wf_uuid = nil
            else
                doc_rows[doc] = #out
            end
        end
        if not f.started_at then
            -- It never ran: no results and no state yet (false, not empty tables, which
            -- Redis turns into answers field by field: tests/bench/script_cost.py).
            out[#out + 1] = {uuid, tonumber(fence), fields, false, false, false, false, now, doc,
                             wf_uuid}
        else
            out[#out + 1] = {uuid, tonumber(fence), fields,
                             redis.call('LRANGE', k .. ':res:0', 0, -1),
                             redis.call('LRANGE', k .. ':res:1', 0, -1),
                             redis.call('LRANGE', k .. ':res:2', 0, -1),
                             redis.call('HGETALL', k .. ':state'), now, doc, wf_uuid}
        end
    end
end
return out
