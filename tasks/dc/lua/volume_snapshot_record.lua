-- dc.volume_snapshot_record: the control steps of volume-snapshot-create,
-- volume-snapshot-delete and volume-rollback, each one script run at once.
-- ARGV[1]: {"op", "action", "params": {volume_uuid, owner_uuid, name}, "job_uuid",
-- "max_snapshots"} (the C wrapper adds the job's uuid and max_snapshots_per_volume).
--
--   begin     every rule again (volume_op_rules.lua), then the volume marked as this
--             job's (job_uuid); snapshot_create: the snapshot appended `creating` (a
--             `failed` one of its name, which only a retried job gets past admission
--             with, taken back as `creating`);
--             rollback: the volume `rolling_back`, its share `stopped`
--   starting  rollback: the share `starting` (its process is being started again)
--   commit    snapshot_create: the snapshot `created`; snapshot_delete: the snapshot
--             removed; rollback: the snapshots taken after it removed, the volume
--             `ready`, its share `running`. job_uuid cleared.
--   fail      (onerror) snapshot_create and snapshot_delete: the snapshot kept as
--             `failed` (a delete may have removed part of its copy), the volume
--             `ready` as it was; rollback: the volume `failed`, its share `unknown`
--             until the next probe. job_uuid cleared.
--
-- Each op run again for the same job answers the same without writing twice; a
-- volume busy with another job's operation is refused VolumeNotReady naming the job.
-- Answers {volume_uuid, vm_uuid, server_uuid, name, later, state, share_state,
-- snapshot}: later, the names a rollback removes (for the agent's step).
local a = cjson.decode(ARGV[1])
local e = vop_step_fault(a, {'snapshot_create', 'snapshot_delete', 'rollback'},
  {'begin', 'starting', 'commit', 'fail'})
if e then return e end
local p, job = a.params, a.job_uuid

local v
v, e = volume_of_owner(p.volume_uuid, p.owner_uuid)
if not v then
  -- A volume deleted since is nothing left to undo.
  if a.op == 'fail' then return vop_ok({volume_uuid = p.volume_uuid, state = NULL}) end
  return e
end
local before = v.state
local mine = v.job_uuid == job

local function answer()
  local s, i = volume_snapshot_find(v, p.name)
  local later = {}
  if s and a.action == 'rollback' and v.state == 'rolling_back' then
    later = volume_snapshots_after(v, i)
  end
  return vop_ok({volume_uuid = v.uuid, vm_uuid = v.vm_uuid, server_uuid = v.server_uuid,
    name = p.name, later = later, state = v.state, share_state = v.share_state,
    snapshot = s or NULL})
end

local function not_begun() return vop_not_begun(v, a.action, job) end

local has_job = v.job_uuid ~= nil and v.job_uuid ~= NULL

if a.op == 'begin' then
  if mine then return answer() end
  if has_job then return vop_busy(v, job) end
  local r, out = volume_op_rules(a.action, p, volume_max_snapshots(a), true)
  if not r then return out end
  if a.action == 'snapshot_create' and out.retake then
    -- out.retake is r's own entry: r is written, not v.
    v = r
    out.retake.state = 'creating'
    out.retake.create_timestamp = now_iso_ms()
  elseif a.action == 'snapshot_create' then
    v.snapshots = v.snapshots or {}
    v.snapshots[#v.snapshots + 1] = {name = p.name, create_timestamp = now_iso_ms(), state = 'creating'}
  elseif a.action == 'rollback' then
    v.state = 'rolling_back'
    v.share_state = 'stopped'
  end
  v.job_uuid = job
  volume_put(v, before)
  return answer()
end

if a.op == 'starting' then
  if not mine then return not_begun() end
  if a.action == 'rollback' and v.share_state ~= 'starting' then
    v.share_state = 'starting'
    volume_put(v, before)
  end
  return answer()
end

local s, i = volume_snapshot_find(v, p.name)

if a.op == 'commit' then
  if not mine then
    -- Committed by an earlier run: what the commit leaves is there.
    if a.action == 'snapshot_create' and s and s.state == 'created' and not has_job then
      return answer()
    elseif a.action == 'snapshot_delete' and not s and not has_job then
      return answer()
    elseif a.action == 'rollback' and v.state == 'ready' and s and not has_job and
      i == #v.snapshots then
      return answer()
    end
    return not_begun()
  end
  if a.action == 'snapshot_create' then
    if not s then return not_begun() end
    s.state = 'created'
  elseif a.action == 'snapshot_delete' then
    if s then table.remove(v.snapshots, i) end
  else
    if not s then return not_begun() end
    local kept = {}
    for j, x in ipairs(v.snapshots) do
      if j <= i then kept[#kept + 1] = x end
    end
    v.snapshots = kept
    v.state = 'ready'
    v.share_state = 'running'
    v.error_since = NULL
  end
  v.job_uuid = NULL
  volume_put(v, before)
  return answer()
end

-- fail
if not mine then return answer() end
if a.action == 'rollback' then
  v.state = 'failed'
  v.share_state = 'unknown'
elseif s then
  s.state = 'failed'
end
v.job_uuid = NULL
volume_put(v, before)
return answer()
