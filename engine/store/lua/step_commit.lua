-- include: prelude batch gather layout queues events holds finish
-- batched (see run_batch): step_commit.lua commits attempts' outcomes and what each
-- job does next, one item per job, in one round trip: the result entry, the job's
-- state changes, the new cursor or the end of the job, the release of the step's
-- holds, and the event. Each item:
-- ARGV: 3 uuid, 4 runner, 5 fence, 6 phase, 7 idx, 8 action, 9 result entry JSON
--       ('' none), 10 event JSON, 11 error JSON ('' keep), 12 n state pairs, then
--       2n state key/value strings, then the action's arguments:
--   next    <phase> <idx> <failed_at> [<route>]
--                                   move the cursor (attempt back to 0); failed_at
--                                   ('' none) records where the chain failed; route
--                                   (below): where the step at the new cursor runs,
--                                   when that changed
--   move    <route> <fallback error JSON ('' none)>
--                                   the route of the step at the cursor, before it runs:
--                                   a hop goes there without running it (a fallback's
--                                   error: its fallback runs there); otherwise its queue
--                                   is recorded and this runner runs it
--   release <phase> <idx>           move the cursor and give the job back to its queue
--                                   (a runner shutting down after the step)
--   retry   <attempt> <delay ms>    same step again; a delay > 0 leaves the runner
--   finish  <execution> <failed_at> end the job ('' failed_at: none)
--   wait    <info JSON>             park in `waiting` until resumed
--   requeue <delay ms> <info JSON>  run the same step again later, off the runner
-- A route is <queue> <own> <hop> <wait ms>: the queue of the step at the cursor, own
-- '1' when it is the workflow's queue (the record then names none), hop '1' when the
-- job goes there now (the runner does not serve it), wait ms > 0 bounding its wait
-- there (the step's timeout; see hop in lib/queues.lua).
-- Returns 0 | 1 (committed; 1: a cancel was requested) | {'DUP'} (already committed: a
--       retried call) | {'STALE', why, 'same-id' or false} (this runner no longer owns
--       the job: drop it; 'same-id': a newer claim of the same runner id owns it).
--       Committed is a number, not a table: Lua tables are looked at field by field
--       when answered, a cost per item tests/bench/script_cost.py --callgrind shows.
local uuid, runner, fence = ARGV[3], ARGV[4], ARGV[5]
local phase, idx, action = ARGV[6], ARGV[7], ARGV[8]
local k = jkey(uuid)
-- Every field this commit reads (FINISH_FIELDS for finish()): the ones every job has,
-- then RARE_FIELDS when the job may have them.
local c = redis.call('HMGET', k, 'runner', 'fence', 'phase', 'idx', 'execution', 'cancel',
                     'created_at', 'rf')
local cur = {runner = c[1], fence = c[2], phase = c[3], idx = c[4], execution = c[5],
             cancel = c[6], created_at = c[7], rf = c[8]}
if may_have_rare_fields(cur.rf) then
    local r = redis.call('HMGET', k, unpack(RARE_FIELDS))
    for i, name in ipairs(RARE_FIELDS) do
        cur[name] = r[i]
    end
end
if not cur.execution then
    return {'STALE', 'job deleted'}
end
stream_seen(uuid, cur.es)
if cur.runner ~= runner or cur.fence ~= fence then
    if cur.fence == fence and cur.execution ~= 'running' then
        return {'DUP'} -- this very fence ended the job already (a retried finish/wait)
    end
    -- A third element 'same-id' when a later claim under this very runner id holds the
    -- job: another process runs under the id (a restart while this one was stalled).
    return {'STALE', 'owned by ' .. tostring(cur.runner) .. ' fence ' .. tostring(cur.fence),
            cur.runner == runner and 'same-id' or false}
end
if cursor_text(cur.phase, cur.idx) ~= phase .. ':' .. idx then
    return {'DUP'} -- the cursor already moved past this step under this fence
end
local now = now_ms()
-- A cancel requested while the attempt ran (the runner may not have heard of it yet)
-- is never parked with the job: instead of waiting or sitting in the delayed set, it
-- goes to the head of its queue, and the claim that takes it runs oncancel. (During
-- oncancel the flag stays set and asks for nothing more.)
local canceling = cur.cancel == '1' and phase ~= WF_ONCANCEL_TEXT
-- The job's own fields this commit sets, written in one call at the end.
local set = {}
local function put(name, value)
    set[#set + 1] = name
    set[#set + 1] = value
    cur[name] = value
    if IS_RARE_FIELD[name] and cur.rf ~= '1' then
        -- The job may have a rare field from now on (see RARE_FIELDS).
        put('rf', '1')
    end
end
-- Moves the job to another execution (indexes and field).
local function become(execution)
    if cur.execution ~= execution then
        move_index(uuid, cur.execution, execution, cur.created_at)
    end
    put('execution', execution)
end
if ARGV[9] ~= '' then
    redis.call('RPUSH', k .. ':res:' .. phase, ARGV[9])
    if phase ~= WF_CHAIN_TEXT then
        put('xk', '1') -- res:1 or res:2 exists now
    end
end
if ARGV[11] ~= '' then
    put('error', ARGV[11])
end
local nstate = tonumber(ARGV[12])
local a = 13
if nstate > 0 then
    local pairs_ = {}
    for i = a, a + 2 * nstate - 1 do
        pairs_[#pairs_ + 1] = ARGV[i]
    end
    redis.call('HSET', k .. ':state', unpack(pairs_))
    put('xk', '1')
end
a = a + 2 * nstate
-- A resumed step's outcome is used once: the commit consumes it (a move does not: the
-- step has not run yet, and the runner of its queue takes the outcome).
if action ~= 'move' and (cur.inflight or cur.resume) then
    redis.call('HDEL', k, 'inflight', 'resume')
    cur.inflight, cur.resume = nil, nil
end
-- So are the marks a claim read of a step that waited too long in its queue or whose
-- fallback is to run (a move with a fallback to run writes its mark again).
if cur.queue_timeout or cur.fallback_error then
    redis.call('HDEL', k, 'queue_timeout', 'fallback_error')
    cur.queue_timeout, cur.fallback_error = nil, nil
end
-- The step's event (none for a release, or a job ending with no step to run): the
-- record tells a step that left a result entry, unless a fallback ran (the event names
-- the fallback, the entry the step). A canceled step's entry would be told as failed,
-- but a cancel's own event (cancel_requested) has started the stream by then.
if ARGV[10] == '' then
    -- nothing to tell
elseif ARGV[9] ~= '' and not string.find(ARGV[9], '"fallback":', 1, true) then
    event_told(uuid, ARGV[10])
else
    event_raw(uuid, ARGV[10])
end
-- Leaves the runner: off its list, no runner, queued again somewhere.
local function leave_runner()
    runner_list_rem(runner, uuid)
    redis.call('HDEL', k, 'runner')
    become('queued')
    rearm_deadline(uuid)
end
local function step_holds_release()
    if cur.step_holds then
        release_step_holds(uuid, now)
    end
end
-- Where the step at the cursor runs (the route at ARGV[at]): records its queue and, for a
-- hop, takes the job off this runner and queues it there. Returns the index after it.
local function route(at)
    local queue, own, go = ARGV[at], ARGV[at + 1] == '1', ARGV[at + 2] == '1'
    if own then
        if cur.step_queue then
            redis.call('HDEL', k, 'step_queue')
            cur.step_queue = nil
        end
    elseif cur.step_queue ~= queue then
        put('step_queue', queue)
    end
    if go then
        leave_runner()
        put('hopped', '1') -- see job_claim.lua
        hop(uuid, queue, tonumber(ARGV[at + 3]) or 0, now)
    end
    return at + 4
end
if action == 'next' or action == 'release' then
    step_holds_release()
    put('phase', ARGV[a])
    put('idx', ARGV[a + 1])
    put('attempt', '0')
    if cur.polls and cur.polls ~= '0' then
        put('polls', '0')
    end
    if action == 'next' and ARGV[a + 2] and ARGV[a + 2] ~= '' then
        put('failed_at', ARGV[a + 2])
    end
    if action == 'next' and ARGV[a + 3] then
        route(a + 3)
    end
    if action == 'release' then
        leave_runner()
        event(uuid, {type = 'released', runner = runner}, now)
        push_front(uuid)
    end
elseif action == 'retry' then
    local d = tonumber(ARGV[a + 1])
    put('attempt', ARGV[a])
    if d > 0 then
        step_holds_release()
        leave_runner()
        if canceling then
            push_front(uuid)
        else
            delay(uuid, now + d)
        end
    end
elseif action == 'finish' then
    if ARGV[a + 1] ~= '' then
        put('failed_at', ARGV[a + 1])
    end
    -- cur has every field finish() reads, as this commit leaves them but execution.
    finish(uuid, ARGV[a], now, cur, set)
    set = {}
elseif action == 'wait' then
    if canceling then
        leave_runner()
        push_front(uuid)
    else
        runner_list_rem(runner, uuid)
        redis.call('HDEL', k, 'runner')
        put('wait_info', ARGV[a])
        become('waiting')
        rearm_deadline(uuid)
        event(uuid, {type = 'waiting'}, now)
    end
elseif action == 'move' then
    step_holds_release()
    local after = route(a)
    if ARGV[after] and ARGV[after] ~= '' then
        put('fallback_error', ARGV[after])
    end
elseif action == 'requeue' then
    -- (cur.polls is read when the job may have it, and absent otherwise: see RARE_FIELDS.)
    put('polls', tostring((tonumber(cur.polls) or 0) + 1))
    put('requeue_info', ARGV[a + 1])
    leave_runner()
    if canceling then
        push_front(uuid)
    else
        delay(uuid, now + tonumber(ARGV[a]))
    end
else
    return redis.error_reply('ERR step_commit: unknown action ' .. action)
end
if #set > 0 then
    redis.call('HSET', k, unpack(set))
end
return cur.cancel == '1' and 1 or 0
