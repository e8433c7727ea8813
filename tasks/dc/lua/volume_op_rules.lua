-- The rules of the operations on an existing volume (snapshot create and delete,
-- rollback, network attach and detach), shared by their admission check
-- (volume_op_check.lua) and by the control steps that check them again at once before
-- writing (volume_snapshot.lua, volume_network.lua). lua_embed.py puts this file after
-- prelude.lua and volume_rules.lua ahead of every volume_op_*, volume_snapshot* and
-- volume_network* script. docs/VOLUMES.md "Snapshots, rollback and networks".

local VOLUME_OP_WORKFLOWS = {
  snapshot_create = 'volume-snapshot-create',
  snapshot_delete = 'volume-snapshot-delete',
  rollback = 'volume-rollback',
  attach_network = 'volume-attach-network',
  detach_network = 'volume-detach-network',
}

-- The params each action takes, all required.
local VOLUME_OP_PARAMS = {
  snapshot_create = {'volume_uuid', 'owner_uuid', 'name'},
  snapshot_delete = {'volume_uuid', 'owner_uuid', 'name'},
  rollback = {'volume_uuid', 'owner_uuid', 'name'},
  attach_network = {'volume_uuid', 'owner_uuid', 'network_uuid'},
  detach_network = {'volume_uuid', 'owner_uuid', 'network_uuid'},
}

-- The snapshots a volume may hold when the dc settings give none.
local VOLUME_MAX_SNAPSHOTS_DEFAULT = 16

local function vop_refuse_param(path, msg)
  return refuse(422, 'InvalidArgument', path .. ': ' .. msg)
end

-- A value as a message shows it: a string in quotes as it is (cjson would write "/"
-- as "\/"), anything else as JSON.
local function vop_show(x)
  if type(x) == 'string' then return '"' .. x .. '"' end
  return cjson.encode(x)
end

local function vop_uuid_ok(s)
  return type(s) == 'string' and
    string.match(s, '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$') ~= nil and
    string.lower(s) == s
end

-- The name rule of a snapshot: a volume name's (volume_name_fault), and two more the
-- files need: the snapshot is the directory snapshots/<name>/, made as
-- snapshots/<name>.part/, so a name never ends in ".part" (it would be taken for a copy
-- cut short and removed) and leaves room for the suffix in a file name (255 bytes).
local VOLUME_SNAPSHOT_NAME_MAX = 250

local function volume_snapshot_name_fault(name)
  local f = volume_name_fault(name)
  if f then return f end
  if #name > VOLUME_SNAPSHOT_NAME_MAX then
    return 'at most ' .. VOLUME_SNAPSHOT_NAME_MAX .. ' characters for a snapshot, got ' .. #name
  end
  if string.sub(name, -5) == '.part' then
    return '"' .. name .. '" ends in ".part", which names a snapshot being made'
  end
  return nil
end

-- The params of action, checked: nil, or the refusal naming the first bad field.
local function volume_op_params_fault(action, params)
  local want = VOLUME_OP_PARAMS[action]
  if type(params) ~= 'table' or params[1] ~= nil then
    return vop_refuse_param('params', 'expected an object')
  end
  local known, unknown = {}, {}
  for _, k in ipairs(want) do known[k] = true end
  for k in pairs(params) do
    if not known[k] then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown > 0 then
    table.sort(unknown)
    return vop_refuse_param('params.' .. unknown[1], 'unknown key' .. (#unknown > 1 and 's ' ..
      table.concat(unknown, ', ') or '') .. ' for ' .. VOLUME_OP_WORKFLOWS[action] ..
      ' (expected ' .. table.concat(want, ', ') .. ')')
  end
  for _, k in ipairs({'volume_uuid', 'owner_uuid', 'network_uuid'}) do
    if known[k] and not vop_uuid_ok(params[k]) then
      return vop_refuse_param('params.' .. k, params[k] == nil and 'required' or
        'expected a lowercase UUID, got ' .. vop_show(params[k]))
    end
  end
  if known.name then
    if params.name == nil then return vop_refuse_param('params.name', 'required') end
    local f = volume_snapshot_name_fault(params.name)
    if f then return vop_refuse_param('params.name', f) end
  end
  return nil
end

local function volume_snapshot_find(v, name)
  for i, s in ipairs(v.snapshots or {}) do
    if s.name == name then return s, i end
  end
  return nil
end

-- The names of the snapshots taken after the one at index i (what a rollback to it
-- removes), oldest first.
local function volume_snapshots_after(v, i)
  local later = {}
  for j, s in ipairs(v.snapshots or {}) do
    if j > i then later[#later + 1] = s.name end
  end
  return later
end

local function volume_has_network(v, net)
  for _, n in ipairs(v.networks or {}) do
    if n == net then return true end
  end
  return false
end

-- Every rule of action against the volume as it is now: the volume (the owner's and
-- ready) and what the action needs of it. Returns the volume and what the steps use
-- ({snapshot, later, retake}) or nil and the refusal. max is the snapshot limit.
-- retake_failed (a job's begin, never its admission): a snapshot create may take back
-- a failed snapshot of its name, so the retry of a job whose copy failed goes on (a
-- new job is refused at admission).
local function volume_op_rules(action, params, max, retake_failed)
  local v, e = volume_of_owner(params.volume_uuid, params.owner_uuid)
  if not v then return nil, e end
  if v.state ~= 'ready' then
    return nil, refuse(409, 'VolumeNotReady', 'volume ' .. v.name .. ' (' .. v.uuid .. ') is ' ..
      tostring(v.state) .. ': ' .. VOLUME_OP_WORKFLOWS[action] .. ' needs it ready')
  end
  -- Its storage instance migrating: a snapshot or a rollback would stop, start or
  -- rewrite the share the migration moves, a network change its NICs.
  local migrating = volume_storage_migration(v)
  if migrating then
    return nil, refuse(409, 'VolumeMigrating', 'volume ' .. v.name .. ' (' .. v.uuid .. '): its ' ..
      'storage instance ' .. v.vm_uuid .. ' is being migrated (migration ' .. migrating .. '): ' ..
      VOLUME_OP_WORKFLOWS[action] .. ' once the migration is aborted or finalized')
  end
  local out = {}
  if action == 'snapshot_create' then
    local s = volume_snapshot_find(v, params.name)
    if s and retake_failed and s.state == 'failed' then
      out.retake = s -- already counted against the limit
      return v, out
    end
    if s then
      return nil, refuse(409, 'VolumeSnapshotAlreadyExists', 'volume ' .. v.name ..
        ' already has a snapshot named ' .. params.name)
    end
    local n = #(v.snapshots or {})
    if n >= max then
      return nil, refuse(409, 'SnapshotLimitExceeded', 'volume ' .. v.name .. ' has ' .. n ..
        ' snapshots, the most a volume may have (max_snapshots_per_volume ' .. max ..
        '): delete one first')
    end
  elseif action == 'snapshot_delete' or action == 'rollback' then
    local s, i = volume_snapshot_find(v, params.name)
    if not s then
      return nil, refuse(404, 'VolumeSnapshotNotFound', 'volume ' .. v.name ..
        ' has no snapshot named ' .. params.name)
    end
    if action == 'rollback' and s.state ~= 'created' then
      return nil, vop_refuse_param('params.name', 'snapshot ' .. params.name .. ' of volume ' ..
        v.name .. ' is ' .. tostring(s.state) .. ': only a created snapshot is rolled back to')
    end
    out.snapshot, out.later = s, volume_snapshots_after(v, i)
  elseif action == 'attach_network' then
    if volume_has_network(v, params.network_uuid) then
      return nil, vop_refuse_param('params.network_uuid', 'volume ' .. v.name ..
        ' is already attached to network ' .. params.network_uuid)
    end
    e = volume_network_fault(v.owner_uuid, params.network_uuid, 'params.network_uuid')
    if e then return nil, e end
  elseif action == 'detach_network' then
    if not volume_has_network(v, params.network_uuid) then
      return nil, vop_refuse_param('params.network_uuid', 'volume ' .. v.name ..
        ' is not attached to network ' .. params.network_uuid)
    end
    if #v.networks < 2 then
      return nil, vop_refuse_param('params.network_uuid', 'network ' .. params.network_uuid ..
        ' is the last network of volume ' .. v.name .. ': a volume keeps at least one')
    end
    -- A VM that mounts the volume keeps a network it shares with it (DOMAIN 1.2: a
    -- volume is reached on a network both have).
    local cut = {}
    for _, r in ipairs(v.refs or {}) do
      local vm = get_json('vm:' .. r)
      local nics = vm and vm.nics or {}
      local reaches = #nics == 0
      for _, nic in ipairs(nics) do
        if nic.network_uuid ~= params.network_uuid and volume_has_network(v, nic.network_uuid) then
          reaches = true
        end
      end
      if not reaches then cut[#cut + 1] = r end
    end
    if #cut > 0 then
      return nil, refuse(409, 'VolumeInUse', 'Volume with name ' .. v.name .. ' is used by ' ..
        table.concat(cut, ', ') .. ', which reach it only on network ' .. params.network_uuid)
    end
  end
  return v, out
end

-- The snapshot limit given by the C wrapper (max_snapshots_per_volume), else the default.
local function volume_max_snapshots(a)
  local m = tonumber(a.max_snapshots)
  if not m or m < 0 then return VOLUME_MAX_SNAPSHOTS_DEFAULT end
  return m
end

-- ok() for the answers of these scripts, whose lists of names ("later") are written
-- as [] when empty, as enc() does for the records' lists.
local function vop_ok(v)
  return (string.gsub(ok(v), '"later":{}', '"later":[]'))
end

-- "a", "a or b", "a, b or c": the words of a list as a message names its choices.
local function vop_choices(list)
  if #list == 1 then return list[1] end
  return table.concat(list, ', ', 1, #list - 1) .. ' or ' .. list[#list]
end

-- The arguments every control step of these operations takes checked: an action of
-- `actions` and an op of `ops` (lists, in the order the messages name them), the job's
-- uuid and the action's params. Returns nil or the refusal.
local function vop_step_fault(a, actions, ops)
  local function one_of(list, x)
    for _, y in ipairs(list) do if x == y then return true end end
    return false
  end
  if not one_of(actions, a.action) then
    return vop_refuse_param('action', 'expected ' .. vop_choices(actions) .. ', got ' ..
      vop_show(a.action))
  end
  if not one_of(ops, a.op) then
    return vop_refuse_param('op', 'expected ' .. vop_choices(ops) .. ', got ' .. vop_show(a.op))
  end
  if type(a.job_uuid) ~= 'string' or a.job_uuid == '' then
    return vop_refuse_param('job_uuid', 'expected the job\'s uuid')
  end
  return volume_op_params_fault(a.action, a.params)
end

-- The refusal of a step of job `job` on a volume that another job's operation holds.
local function vop_busy(v, job)
  return refuse(409, 'VolumeNotReady', 'volume ' .. v.name .. ' (' .. v.uuid ..
    ') is busy with job ' .. tostring(v.job_uuid) .. ', not job ' .. job)
end

-- The refusal of a step after begin when job `job`'s `action` was never begun (or
-- another job holds the volume).
local function vop_not_begun(v, action, job)
  return refuse(409, 'InvalidState', 'volume ' .. v.name .. ' (' .. v.uuid .. ') has no ' ..
    action .. ' of job ' .. job .. ' in flight (job_uuid ' .. tostring(v.job_uuid) .. ')')
end
