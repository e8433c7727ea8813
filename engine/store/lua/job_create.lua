-- include: prelude batch gather layout queues events locks workflows snapshot
-- batched (see run_batch): stores new jobs and queues them (or schedules them for
-- exec_after). Each item:
-- ARGV: 3 workflow reference (uuid, name@version or name), 4 the workflow uuid the
--       caller parsed for it ('' none yet), 5 uuid, 6 queue, 7 exec_after ms (0: now),
--       8 unique key ('' none), 9 locks version the caller checked the target against,
--       10 locks regex ('' none), 11 caller-built 'created' event JSON, 12 runner that
--       may start the job at once ('' none: see below), 13 '1' when the caller made the
--       uuid itself (random, 122 bits) and has not sent this create before with a chance
--       that it ran: no job can have it, so it is not looked up ('' otherwise: a uuid
--       given by a client may be a create repeated), 14 the instructions of the
--       compiled locks (0 none), 15 the cap on the instructions of all unfinished jobs'
--       locks (max_lock_instructions), 16.. field/value pairs stored as they are.
-- Answers {'OK', created_at} for a new job, {'RUN', created_at, the fields its start
--         wrote (start_fields)} for a new job started at once on the runner of ARGV 12
--         (fence 1), {'OK', now, snapshot (see
--         job_snapshot)} for the same create repeated
--       | {'WF', uuid, document} (the reference names this workflow, not the one the
--         caller parsed: parse it and send again) | {'NOWF'} (no such workflow)
--       | {'EXISTS'} (a job with this uuid is already stored, made by another create;
--         the same create repeated gets 'OK' and the job as it is now)
--       | {'CONFLICT', other uuid} | {'LOCKS', version, uuid1, regex1, ...}
--       | {'LOCKCAP', instructions held, cap} (the lock would pass the cap: nothing
--         stored; see locks_size_fits)
-- The job shares its workflow's frozen document (wfdoc:<workflow uuid>, written by
-- workflow_put.lua, or here for workflows stored before it did).
local ref, wf_uuid, uuid, queue = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local exec_after, unique, seen, locks = tonumber(ARGV[7]), ARGV[8], ARGV[9], ARGV[10]
local runner, made_here = ARGV[12], ARGV[13] == '1'
local locks_size, locks_cap = tonumber(ARGV[14]) or 0, tonumber(ARGV[15]) or 0
local target, params, holds, timeout_ms = '', '', nil, nil
local rare = unique ~= '' or locks ~= '' -- see RARE_FIELDS
for i = 16, #ARGV, 2 do
    if IS_RARE_FIELD[ARGV[i]] then
        rare = true
    end
    if ARGV[i] == 'target' then
        target = ARGV[i + 1]
    elseif ARGV[i] == 'params' then
        params = ARGV[i + 1]
    elseif ARGV[i] == 'holds' then
        holds = ARGV[i + 1]
    elseif ARGV[i] == 'timeout_ms' then
        timeout_ms = tonumber(ARGV[i + 1])
    end
end
local actual = resolve_workflow(ref)
if not actual then
    return {'NOWF'}
end
local dockey = P .. 'wfdoc:' .. actual
if actual ~= wf_uuid then
    local doc = redis.call('GET', dockey) or redis.call('HGET', P .. 'wf:' .. actual, 'doc')
    if not doc then
        return {'NOWF'}
    end
    return {'WF', actual, doc}
end
local k = jkey(uuid)
-- (An EXISTS per every create showed in Redis's instructions per job:
-- tests/bench/script_cost.py --callgrind.)
if not made_here and redis.call('EXISTS', k) == 1 then
    -- The same create again (a client retrying after a lost answer): the same
    -- workflow, params and target get the job as it is now; anything else is refused.
    local f = redis.call('HMGET', k, 'workflow_uuid', 'params', 'target')
    if f[1] == wf_uuid and f[2] == params and (f[3] or '') == target then
        local now = now_ms()
        return {'OK', now, job_snapshot(uuid, now)}
    end
    return {'EXISTS'}
end
-- Only a job with a target can match a lock.
if target ~= '' then
    local stale = locks_if_stale(seen)
    if stale then
        return stale
    end
end
if unique ~= '' then
    local other = redis.call('HGET', P .. 'unique', unique)
    if other then
        local ex = redis.call('HGET', jkey(other), 'execution')
        if ex and UNFINISHED[ex] then
            return {'CONFLICT', other}
        end
    end
end
if locks ~= '' then
    local held = locks_size_fits(locks_size, locks_cap)
    if held then
        return {'LOCKCAP', held, locks_cap}
    end
end
local doc = WF_DOCS[actual]
if not doc then
    doc = redis.call('GET', dockey)
    if not doc then
        doc = redis.call('HGET', P .. 'wf:' .. actual, 'doc')
        if not doc then
            return {'NOWF'}
        end
        redis.call('SET', dockey, doc)
    end
    WF_DOCS[actual] = doc
end
local now = now_ms()
-- Direct start: a ternd that serves the API and runs jobs asks, for a create it has a
-- free slot for, that the job start at once on its runner, as if claimed in the same
-- step (fence 1, on the runner's list): no trip through the queue, no claim. Only when
-- that takes no job's turn (the queue is empty, and no earlier job of this call was
-- queued), the job is due now and needs no job-level holds (those are taken in line,
-- by the claim). Anything else is queued as usual, and the caller gives its slot back.
local start = runner ~= '' and exec_after <= now and not holds and not QUEUED_IN_CALL[queue]
if start and redis.call('LLEN', qkey(queue)) > 0 then
    start = false
end
-- lv: this layout (see LAYOUT). fence, phase, idx and attempt are 0 until set (see
-- cursor_text), and a job of the default queue stores no queue (see DEFAULT_QUEUE):
-- fields never written cost nothing to store or read (tests/bench/script_cost.py
-- --callgrind).
local fields = {'created_at', now_text(), 'execution', start and 'running' or 'queued', 'lv',
                LAYOUT_TEXT}
if queue ~= DEFAULT_QUEUE then
    fields[#fields + 1] = 'queue'
    fields[#fields + 1] = queue
end
for i = 16, #ARGV do
    fields[#fields + 1] = ARGV[i]
end
-- What the start wrote, for the caller to apply to the fields it keeps.
local started = {}
if start then
    rare = start_fields(started, uuid, runner, '1', true, timeout_ms or 0, false, now) or rare
    for i = 1, #started do
        fields[#fields + 1] = started[i]
    end
end
if unique ~= '' then
    fields[#fields + 1] = 'unique'
    fields[#fields + 1] = unique
    redis.call('HSET', P .. 'unique', unique, uuid)
end
if locks ~= '' then
    fields[#fields + 1] = 'locks'
    fields[#fields + 1] = locks
    fields[#fields + 1] = 'locks_size'
    fields[#fields + 1] = time_text(locks_size)
    redis.call('HSET', P .. 'locks', uuid, locks)
    redis.call('INCR', P .. 'locks:version')
    locks_size_add(uuid, locks_size)
end
if exec_after > now then
    fields[#fields + 1] = 'exec_after'
    fields[#fields + 1] = time_text(exec_after)
end
if rare then
    fields[#fields + 1] = 'rf'
    fields[#fields + 1] = '1'
end
redis.call('HSET', k, unpack(fields))
move_index(uuid, false, start and 'running' or 'queued', now_text())
if not QUEUES_SEEN[queue] then
    redis.call('SADD', P .. 'queues', queue) -- queue names, for GET /metrics
    QUEUES_SEEN[queue] = true
end
-- A new job has no stream of its own yet: its record tells "created" (see STREAMS).
STREAMS[uuid] = false
event_told(uuid, ARGV[11])
if start then
    -- At the head of the runner's list, as a claim leaves it (see runner_list_rem).
    tail_push(P .. 'r:' .. runner .. ':jobs', uuid)
    event_told(uuid, event_running_text(uuid, runner, '1', now))
    return {'RUN', now, started}
elseif exec_after > now then
    delay(uuid, exec_after)
else
    QUEUED_IN_CALL[queue] = true
    tail_push(qkey(queue), uuid)
end
-- The caller shows the new job from what it sent (job_view_new_text): answering with it
-- was the largest part of this script's answer in tests/bench/script_cost.py --callgrind.
return {'OK', now}
