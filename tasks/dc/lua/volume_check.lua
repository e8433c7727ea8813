-- dc.volume_check: the admission check of volume-create, volume-delete and
-- volume-update, and, as action "unplaced", the check that a volume's storage instance
-- never reached a server (volume-delete's destroy step falls back to it). Reads only.
-- ARGV[1]: {"action", "target", "params"} (params: the job's, whole, so a parameter
-- the workflow does not take is refused naming it). ARGV[3]: fresh UUIDs (create: the
-- storage instance's uuid is drawn here, so every step of the job names the same one).
local a = cjson.decode(ARGV[1])
local p = a.params
if type(p) ~= 'table' then return bad_arg('params', 'expected an object, got ' .. cjson.encode(p)) end

local TAKES = {
  create = {volume_uuid = true, owner_uuid = true, name = true, size = true, type = true,
    networks = true, tags = true, server_uuid = true},
  delete = {volume_uuid = true, owner_uuid = true, force = true},
  update = {volume_uuid = true, owner_uuid = true, name = true, tags = true},
  unplaced = {volume_uuid = true, owner_uuid = true, force = true},
}
local takes = TAKES[a.action]
if not takes then
  return bad_arg('action', 'expected create, delete, update or unplaced, got ' .. cjson.encode(a.action))
end
local keys = {}
for k in pairs(p) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do
  if not takes[k] then
    if a.action == 'update' and k == 'size' then
      return bad_arg('size', 'volumes are not resizable in place: create a new volume and copy the data')
    elseif a.action == 'update' and k == 'networks' then
      return bad_arg('networks', 'a volume\'s networks change through volume-attach-network and ' ..
        'volume-detach-network, not volume-update')
    end
    return bad_arg(k, 'volume-' .. a.action .. ' takes no such parameter')
  end
end
if not uuid_ok(p.volume_uuid) then
  return bad_arg('volume_uuid', 'expected a UUID, got ' .. cjson.encode(p.volume_uuid))
end
if not uuid_ok(p.owner_uuid) then
  return bad_arg('owner_uuid', 'expected a UUID, got ' .. cjson.encode(p.owner_uuid))
end
local wf = a.action == 'unplaced' and 'delete' or a.action
if a.action ~= 'unplaced' and a.target ~= '/volume-' .. wf .. '-' .. p.volume_uuid then
  return bad_arg('target', 'a volume-' .. wf .. ' of volume ' .. p.volume_uuid ..
    ' has the target /volume-' .. wf .. '-' .. p.volume_uuid .. ', not ' .. cjson.encode(a.target))
end

if a.action == 'create' then
  local name = p.name
  if name == NULL then name = nil end
  if name ~= nil then
    local fault = volume_name_fault(name)
    if fault then return bad_arg('name', fault) end
  end
  local size = p.size
  if size == NULL or size == nil then size = VOLUME_SIZE_DEFAULT end
  if type(size) ~= 'number' or size ~= math.floor(size) or size <= 0 then
    return bad_arg('size', 'expected a positive integer of MiB, got ' .. cjson.encode(p.size))
  end
  if not volume_size_ok(size) then return volume_sizes_refusal() end
  local vtype = p.type
  if vtype == NULL or vtype == nil then vtype = 'tritonnfs' end
  if vtype ~= 'tritonnfs' then
    return bad_arg('type', 'Volume type: ' .. cjson.encode(vtype) .. ' is not supported (only tritonnfs)')
  end
  local nets = p.networks
  if nets == NULL then nets = nil end
  if nets == nil then
    nets = fabric_networks_of(p.owner_uuid)
    if #nets == 0 then return bad_arg('networks', 'owner ' .. p.owner_uuid .. ' has no fabric network') end
    nets = {nets[1]}
  else
    if type(nets) ~= 'table' or #nets == 0 or next(nets, #nets) ~= nil then
      return bad_arg('networks', 'expected a non-empty array of network UUIDs, got ' .. cjson.encode(p.networks))
    end
    local seen = {}
    for i, u in ipairs(nets) do
      local e = volume_network_fault(p.owner_uuid, u, 'networks[' .. (i - 1) .. ']')
      if e then return e end
      if seen[u] then return bad_arg('networks[' .. (i - 1) .. ']', 'network ' .. u .. ' is given twice') end
      seen[u] = true
    end
  end
  local tags = p.tags
  if tags == NULL or tags == nil then tags = {} end
  local tf = volume_tags_fault(tags)
  if tf then return bad_arg('tags', tf) end
  local server = p.server_uuid
  if server == NULL then server = nil end
  if server ~= nil then
    if not uuid_ok(server) then return bad_arg('server_uuid', 'expected a UUID, got ' .. cjson.encode(server)) end
    if redis.call('EXISTS', P .. 'server:' .. server) == 0 then
      return refuse(404, 'ResourceNotFound', 'server_uuid: server ' .. server .. ' does not exist')
    end
  end
  -- A record of this uuid: one a provision's volumes step made (creating, this owner,
  -- no job yet) is adopted; anything else is another volume.
  local v = volume_get(p.volume_uuid)
  local storage_vm = fresh_uuids()[1]
  if v then
    if v.owner_uuid ~= p.owner_uuid or v.state ~= 'creating' or (v.job_uuid ~= nil and v.job_uuid ~= NULL) then
      return refuse(409, 'VolumeAlreadyExists', 'volume ' .. p.volume_uuid .. ' already exists')
    end
    if uuid_ok(v.vm_uuid) then storage_vm = v.vm_uuid end
    name = name or v.name
  end
  if name ~= nil then
    local holder = volume_uuid_by_name(p.owner_uuid, name)
    if holder and holder ~= p.volume_uuid then
      return refuse(409, 'VolumeAlreadyExists', 'Volume with name ' .. name .. ' already exists (' ..
        'volume ' .. holder .. ' of owner ' .. p.owner_uuid .. ')')
    end
  end
  local networks = {}
  for i, u in ipairs(nets) do networks[i] = {uuid = u} end
  return ok({volume_uuid = p.volume_uuid, owner_uuid = p.owner_uuid, name = name or NULL,
    size = size, type = vtype, networks = networks, tags = tags, server_uuid = server or NULL,
    storage_vm_uuid = storage_vm, package_name = volume_package_name(size)})
end

local v, e = volume_of_owner(p.volume_uuid, p.owner_uuid)
if not v then return e end

if a.action == 'unplaced' then
  -- The destroy step found no agent for the storage instance: that is done only when
  -- it never reached a server (a create that failed before its place step) or is
  -- destroyed already (its directory removed behind the control plane's back, which
  -- the NIC reconcile recorded).
  local vm = uuid_ok(v.vm_uuid) and get_json('vm:' .. v.vm_uuid) or nil
  if vm and vm.server_uuid and vm.server_uuid ~= NULL and vm.state ~= 'destroyed' then
    return refuse(0, 'StorageNotDestroyed', 'volume ' .. v.uuid .. ': storage instance ' .. v.vm_uuid ..
      ' is on server ' .. vm.server_uuid .. ' and was not destroyed there')
  end
  return ok({volume_uuid = v.uuid, vm_uuid = v.vm_uuid, placed = false})
end

if a.action == 'delete' then
  if p.force ~= nil and p.force ~= NULL and type(p.force) ~= 'boolean' then
    return bad_arg('force', 'expected true or false, got ' .. cjson.encode(p.force))
  end
  if v.state == 'deleting' then
    return ok({volume_uuid = v.uuid, state = v.state, vm_uuid = v.vm_uuid})
  end
  if v.state ~= 'ready' and v.state ~= 'failed' then
    return volume_not_ready(v, 'it is deleted from ready or failed')
  end
  local migrating = volume_storage_migration(v)
  if migrating then return volume_migrating_refusal(v, migrating) end
  local users = volume_users(v)
  if #users > 0 and p.force ~= true then return volume_in_use_refusal(v, users) end
  return ok({volume_uuid = v.uuid, state = v.state, vm_uuid = v.vm_uuid, users = users})
end

-- update
if p.name ~= nil and p.name ~= NULL then
  local fault = volume_name_fault(p.name)
  if fault then return bad_arg('name', fault) end
end
if p.tags ~= nil and p.tags ~= NULL then
  local tf = volume_tags_fault(p.tags)
  if tf then return bad_arg('tags', tf) end
end
if v.state ~= 'ready' and v.state ~= 'failed' then
  return volume_not_ready(v, 'it is updated when ready or failed')
end
if type(p.name) == 'string' and p.name ~= v.name then
  local users = volume_users(v)
  if #users > 0 then return volume_in_use_refusal(v, users) end
  local holder = volume_uuid_by_name(v.owner_uuid, p.name)
  if holder and holder ~= v.uuid then
    return refuse(409, 'VolumeAlreadyExists', 'Volume with name ' .. p.name .. ' already exists (' ..
      'volume ' .. holder .. ')')
  end
end
return ok({volume_uuid = v.uuid, state = v.state, name = v.name})
