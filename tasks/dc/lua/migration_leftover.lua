-- dc.migration_target_leave, dc.migration_leftover_check, dc.migration_leftover_done:
-- the hidden target copy an abort leaves on a lost target server, and its removal once
-- that server is back (docs/MIGRATION.md "A lost target"). ARGV[1]: {op, ...}:
--
--   op "leave" {migration_uuid, job_uuid, target_lost}: the abort's step after the
--     source was put right. target_lost false: {left: false, queue: "server:<target>"},
--     the abort removes the target itself (and a target_cleanup an earlier abort of the
--     migration left pending is cleared: this one's end gives the allocation back). true: the record gets target_cleanup
--     "pending" and a warning history entry, the migration's index of leftovers on the
--     target (`migrations:target_cleanup:<server>`) lists it, and the answer is {left:
--     true, queue: "default", post: the migrate-target-clean job}; the target's
--     allocation stays committed until the copy is removed. Refused (InvalidState) from
--     switch step 5 on: the swap may have shown the target with the VM's NICs.
--   op "check" {migration_uuid, target, params}: admission of migrate-target-clean:
--     {migration_uuid, vm_uuid, target_server_uuid} of a migration whose target copy is
--     pending; anything else is refused, naming the parameter.
--   op "stale" {migration_uuid, vm_uuid}: (dc.migration_target_create, on the agent of
--     a target that finds a hidden copy of another migration of the VM in its way)
--     {stale: true} when that migration is the VM's, aborted, and its copy left to
--     remove: the begin may remove it. Reads only.
--   op "done" {migration_uuid, job_uuid, removed, other_migration}: the copy is gone
--     (removed now, already gone, or replaced by a newer migration's target): the
--     record says target_cleanup "done" with a history entry, the target's allocation
--     is given back and the index no longer lists it. Run again: answered unchanged.
local a = cjson.decode(ARGV[1])
local now = now_iso_ms()
local WORKFLOW = 'migrate-target-clean'

-- A history entry finished at once, placed before the entry still running (the
-- abort's own, when it has not ended yet), and published.
local function add_closed_entry(m, fields)
  local e = {type = 'progress', phase = 'abort', state = 'successful', started_timestamp = now,
    finished_timestamp = now, duration_ms = 0, current_progress = 1, total_progress = 1}
  for k, v in pairs(fields) do e[k] = v end
  m.progress_history = m.progress_history or {}
  local h = m.progress_history
  if mig_open_entry(m) then table.insert(h, #h, e) else h[#h + 1] = e end
  mig_event(m, e)
end

local function index_key(m) return P .. 'migrations:target_cleanup:' .. m.target_server_uuid end

if a.op == 'check' then
  local p = a.params
  if p == nil or p == NULL then p = {} end
  if type(p) ~= 'table' then
    return refuse(422, 'InvalidArgument', 'params: expected an object, got ' .. cjson.encode(p))
  end
  for k in pairs(p) do
    if k ~= 'migration_uuid' then
      return refuse(422, 'InvalidArgument', 'params.' .. tostring(k) .. ': unknown parameter of ' ..
        WORKFLOW .. ' (it takes migration_uuid)')
    end
  end
  if not uuid_ok(p.migration_uuid) then
    return refuse(422, 'InvalidArgument', 'params.migration_uuid: expected a UUID, got ' ..
      cjson.encode(p.migration_uuid))
  end
  local want = '/' .. WORKFLOW .. '-' .. p.migration_uuid
  if a.target ~= want then
    return refuse(422, 'InvalidArgument', 'target: ' .. WORKFLOW .. ' of migration ' ..
      p.migration_uuid .. ' has the target ' .. want .. ', not ' .. cjson.encode(a.target))
  end
  local m = mig_get(p.migration_uuid)
  if not m then
    return refuse(404, 'MigrationNotFound', 'migration ' .. p.migration_uuid .. ' does not exist')
  end
  if m.target_cleanup ~= 'pending' then
    return refuse(409, 'InvalidState', 'migration ' .. m.uuid .. ' has no target copy left to ' ..
      'remove (target_cleanup: ' .. cjson.encode(m.target_cleanup or NULL) .. ')')
  end
  return ok({migration_uuid = m.uuid, vm_uuid = m.vm_uuid, target_server_uuid = m.target_server_uuid})
end

local m, e = mig_for_step(a.migration_uuid)
if a.op == 'stale' then
  local state = m and m.state or NULL
  return ok({stale = m ~= nil and m.vm_uuid == a.vm_uuid and m.state == 'aborted' and
    m.target_cleanup == 'pending', state = state})
end
if not m then return mig_refuse(e) end

if a.op == 'leave' then
  if a.target_lost ~= true then
    -- An abort with target_lost that failed after leaving the target (its clean-up job
    -- could not be asked for), aborted again without it: this abort removes the target
    -- itself and gives its allocation back at its end.
    if m.target_cleanup == 'pending' then
      m.target_cleanup = nil
      redis.call('ZREM', index_key(m), m.uuid)
      mig_put(m)
    end
    return ok({left = false, queue = 'server:' .. m.target_server_uuid})
  end
  local post = {uuid = uuid_of_text(WORKFLOW .. ':' .. m.uuid), workflow = WORKFLOW,
    target = '/' .. WORKFLOW .. '-' .. m.uuid, params = {migration_uuid = m.uuid}}
  local answer = {left = true, queue = 'default', post = post}
  if m.target_cleanup == 'pending' or m.target_cleanup == 'done' then return ok(answer) end
  if m.state ~= 'running' or m.phase ~= 'abort' or m.job_uuid ~= a.job_uuid then
    return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ': its target is left only by ' ..
      'the abort in flight (state ' .. m.state .. ', phase ' .. m.phase .. ', job ' ..
      tostring(m.job_uuid) .. ')')
  end
  local step = tonumber(m.switch_step) or 0
  if step >= 5 then
    return refuse(0, 'InvalidState', 'migration ' .. m.uuid .. ': target_lost is refused once ' ..
      'the swap was made (switch step ' .. step .. '): the target may show the VM with its NICs; ' ..
      'abort without it once server ' .. m.target_server_uuid .. ' is back')
  end
  m.target_cleanup = 'pending'
  m.target_cleanup_job = post.uuid
  add_closed_entry(m, {level = 'warning', job_uuid = a.job_uuid,
    message = 'target server ' .. m.target_server_uuid .. ' is lost: its hidden copy of vm ' ..
      m.vm_uuid .. ' is left there and removed when the server is back (job ' .. post.uuid .. ')',
    target_server_uuid = m.target_server_uuid, target_cleanup_job = post.uuid})
  redis.call('ZADD', index_key(m), redis.call('ZSCORE', P .. 'migrations', m.uuid) or 0, m.uuid)
  mig_put(m)
  return ok(answer)
end

if a.op == 'done' then
  local answer = {migration_uuid = m.uuid, target_cleanup = m.target_cleanup or NULL,
    removed = a.removed == true}
  if m.target_cleanup ~= 'pending' then return ok(answer) end
  local other = a.other_migration
  local message = 'the hidden copy of vm ' .. m.vm_uuid .. ' left on server ' ..
    m.target_server_uuid .. ' is removed'
  if a.removed ~= true then
    message = mig_given(other) and
      ('the hidden copy of vm ' .. m.vm_uuid .. ' on server ' .. m.target_server_uuid ..
        ' was already replaced by the target of migration ' .. tostring(other)) or
      ('the hidden copy of vm ' .. m.vm_uuid .. ' on server ' .. m.target_server_uuid ..
        ' was already gone')
  end
  m.target_cleanup = 'done'
  m.target_cleanup_timestamp = now
  -- Its capacity on the target was held until now: the copy's disks were there.
  mig_alloc_release(m.target_allocation)
  add_closed_entry(m, {job_uuid = mig_given(a.job_uuid) and a.job_uuid or NULL, message = message,
    target_server_uuid = m.target_server_uuid})
  redis.call('ZREM', index_key(m), m.uuid)
  mig_put(m)
  answer.target_cleanup = 'done'
  return ok(answer)
end

return refuse(0, 'InvalidArgument', 'op: expected leave, check, stale or done, got ' .. cjson.encode(a.op))
