-- dc.volume_claim: volume-create's claim of the name and the record, at once. ARGV[1]:
-- the check's answer {volume_uuid, owner_uuid, name (null: one is made), size, type,
-- networks [{uuid}], tags, storage_vm_uuid} and the job's "job_uuid"; ARGV[2] the time
-- now; ARGV[3] fresh UUIDs (a generated name's hex). The name is claimed with HSETNX
-- in the script that writes the record, so of N creates racing for one name exactly
-- one gets it; the others fail VolumeAlreadyExists and write nothing. A record of this
-- uuid made by a provision's volumes step ("creating", no job) is adopted as it is;
-- one this job wrote already is answered as it is (a step run again). Answers {volume,
-- storage_vm_uuid, alias, package_name, networks}.
local a = cjson.decode(ARGV[1])
if not uuid_ok(a.volume_uuid) or not uuid_ok(a.owner_uuid) or not uuid_ok(a.storage_vm_uuid) then
  return refuse(0, 'InvalidArgument', 'volume_uuid, owner_uuid, storage_vm_uuid: expected UUIDs, got ' ..
    cjson.encode({a.volume_uuid, a.owner_uuid, a.storage_vm_uuid}))
end
local names = P .. 'volume_names:' .. a.owner_uuid

local function answer(v)
  local nets = {}
  for i, u in ipairs(v.networks or {}) do nets[i] = {uuid = u} end
  return ok({volume = v, storage_vm_uuid = v.vm_uuid, alias = 'volume-' .. v.name .. '-' .. v.uuid,
    package_name = volume_package_name(v.size), networks = nets})
end

local v = volume_get(a.volume_uuid)
if v then
  if v.owner_uuid ~= a.owner_uuid then
    return refuse(0, 'VolumeAlreadyExists', 'volume ' .. a.volume_uuid .. ' already exists')
  end
  if v.job_uuid == a.job_uuid then return answer(v) end
  if v.state ~= 'creating' or (v.job_uuid ~= nil and v.job_uuid ~= NULL) then
    return refuse(0, 'VolumeAlreadyExists', 'volume ' .. a.volume_uuid .. ' already exists (' ..
      v.state .. ')')
  end
  -- Adopted: its name was claimed when it was written.
  if redis.call('HGET', names, v.name) ~= v.uuid and redis.call('HSETNX', names, v.name, v.uuid) == 0 then
    return refuse(0, 'VolumeAlreadyExists', 'Volume with name ' .. v.name .. ' already exists')
  end
  v.job_uuid = a.job_uuid
  v.share_state = 'starting'
  if not uuid_ok(v.vm_uuid) then v.vm_uuid = a.storage_vm_uuid end
  volume_put(v, v.state)
  return answer(v)
end

local name = a.name
if name == NULL or name == nil then
  -- vol-<8 hex> from a fresh uuid, the next one on a collision.
  for _, u in ipairs(fresh_uuids()) do
    local cand = 'vol-' .. string.sub(u, 1, 8)
    if redis.call('HSETNX', names, cand, a.volume_uuid) == 1 then name = cand break end
  end
  if name == nil then
    return refuse(0, 'VolumeAlreadyExists', 'name: every generated name was taken; run again')
  end
else
  local fault = volume_name_fault(name)
  if fault then return refuse(0, 'InvalidArgument', 'name: ' .. fault) end
  if redis.call('HSETNX', names, name, a.volume_uuid) == 0 then
    return refuse(0, 'VolumeAlreadyExists', 'Volume with name ' .. name .. ' already exists (volume ' ..
      redis.call('HGET', names, name) .. ')')
  end
end

local nets = {}
for i, n in ipairs(a.networks or {}) do nets[i] = type(n) == 'table' and n.uuid or n end
v = {uuid = a.volume_uuid, owner_uuid = a.owner_uuid, name = name, type = a.type or 'tritonnfs',
  create_timestamp = now_iso_ms(), state = 'creating', networks = nets, snapshots = {},
  tags = (a.tags ~= nil and a.tags ~= NULL) and a.tags or {}, billing_id = NULL, refs = {},
  filesystem_path = NULL, vm_uuid = a.storage_vm_uuid, size = a.size, server_uuid = NULL,
  -- Its share is being brought up by this job (Longhorn's starting): running at ready.
  export_path = NULL, share_state = 'starting', share_endpoint = NULL, share_probed_at = NULL,
  error_since = NULL, created_by_job = NULL, job_uuid = a.job_uuid, version = 0}
volume_put(v, nil)
return answer(v)
