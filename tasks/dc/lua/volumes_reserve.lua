-- dc.volumes_reserve: the volumes step of a provision, at once. ARGV[1]: {"vm_uuid",
-- "owner_uuid", "job_uuid", "volumes": [{name, mountpoint, mode, type}] (as
-- dc.provision_check answers them), "networks": [uuid or {"uuid"}] (the VM's)}.
-- For each volume, the owner's volume of that name: one in creating, ready or
-- rolling_back gets one reservation of this job; a missing one is claimed and written
-- `creating` (Docker semantics), created_by_job this job, 10240 MiB, on the VM's fabric
-- networks of the owner; one deleting or failed refuses VolumeNotReady, and nothing is
-- written. The VM's "volumes" are written. Run again by the same job it finds its own
-- reservations and volumes and changes nothing. A volume it makes has job_uuid null
-- until its volume-create job claims it (volume_claim.lua adopts it then).
-- Answers {"volumes": vm.volumes, "reservations": [uuid], "created": [{volume_uuid,
-- owner_uuid, name, size, networks}]}: the volumes this job made that are still
-- `creating`, whose volume-create jobs the task asks for.
local a = cjson.decode(ARGV[1])
local vm = get_json('vm:' .. a.vm_uuid)
if not vm then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist (place it first)')
end
if vm.state == 'failed' or vm.state == 'destroyed' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. vm.state ..
    ': it reserves no volume')
end
if type(a.volumes) ~= 'table' then
  return refuse(0, 'InvalidArgument', 'volumes: expected the list dc.provision_check answers')
end
local nets = {}
for i, n in ipairs(type(a.networks) == 'table' and a.networks or {}) do
  nets[i] = type(n) == 'table' and n.uuid or n
end

-- The reservations this job holds already, by volume.
local held = {}
for _, ru in ipairs(redis.call('ZRANGE', P .. 'job_reservations:' .. a.job_uuid, 0, -1)) do
  local r = get_json('reservation:' .. ru)
  if r and r.vm_uuid == a.vm_uuid then held[r.volume_uuid] = r end
end

-- First pass: what each entry takes, nothing written.
local plan, by_name = {}, {}
for i, m in ipairs(a.volumes) do
  local p = 'volumes[' .. (i - 1) .. ']'
  if type(m) ~= 'table' or type(m.name) ~= 'string' then
    return refuse(0, 'InvalidArgument', p .. ': expected {name, mountpoint, mode, type}')
  end
  if not by_name[m.name] then
    local v = volume_get(volume_uuid_by_name(a.owner_uuid, m.name))
    if v and v.owner_uuid ~= a.owner_uuid then v = nil end
    if v then
      if v.state == 'deleting' or v.state == 'failed' then
        return refuse(409, 'VolumeNotReady', p .. ': volume ' .. m.name .. ' (' .. v.uuid ..
          ') is ' .. v.state)
      end
      by_name[m.name] = {volume = v}
    else
      local on = fabric_networks_of(a.owner_uuid, nets)
      if #on == 0 then
        return refuse(409, 'VolumeNotReachable', p .. ': volume ' .. m.name .. ' does not ' ..
          'exist and would be created on the vm\'s fabric networks of owner ' .. a.owner_uuid ..
          ', but the vm is on none')
      end
      by_name[m.name] = {new = true, networks = on}
    end
  end
  plan[i] = by_name[m.name]
end

-- Second pass: write. New uuids come from the script's fresh ones (random), stretched
-- by SHA-1 so that any number of volumes gets its own.
local seed = fresh_uuids()[1] or ARGV[2]
local drawn = 0
local function draw()
  drawn = drawn + 1
  return uuid_of_text(seed .. ':' .. drawn)
end
local now = now_iso_ms()
local mounts, reservations, created, done = {}, {}, {}, {}
for i, m in ipairs(a.volumes) do
  local t = plan[i]
  local v = t.volume
  if t.new and not t.made then
    local u = draw()
    v = {uuid = u, owner_uuid = a.owner_uuid, name = m.name, type = 'tritonnfs',
      create_timestamp = now, state = 'creating', networks = t.networks, snapshots = {},
      tags = {}, billing_id = NULL, refs = {}, filesystem_path = NULL, vm_uuid = draw(),
      size = VOLUME_SIZE_DEFAULT, server_uuid = NULL, export_path = NULL,
      share_state = 'unknown', share_endpoint = NULL, share_probed_at = NULL,
      error_since = NULL, created_by_job = a.job_uuid, job_uuid = NULL}
    -- A claim whose record is gone names nothing: it is taken over.
    redis.call('HSET', P .. 'volume_names:' .. a.owner_uuid, m.name, u)
    volume_put(v, nil)
    t.volume, t.made = v, true
  end
  if not done[v.uuid] then
    done[v.uuid] = true
    local r = held[v.uuid]
    if not r then
      r = {uuid = draw(), vm_uuid = a.vm_uuid, job_uuid = a.job_uuid, owner_uuid = a.owner_uuid,
        volume_name = v.name, volume_uuid = v.uuid, create_timestamp = now}
      reservation_add(r)
    end
    reservations[#reservations + 1] = r.uuid
    if v.created_by_job == a.job_uuid and v.state == 'creating' then
      created[#created + 1] = {volume_uuid = v.uuid, owner_uuid = v.owner_uuid, name = v.name,
        size = v.size, networks = v.networks}
    end
  end
  mounts[i] = {name = m.name, volume_uuid = v.uuid, mountpoint = m.mountpoint,
    mode = m.mode or 'rw', type = m.type or 'tritonnfs'}
end
vm.volumes = mounts
redis.call('SET', P .. 'vm:' .. a.vm_uuid, enc(vm))
return ok_lists({volumes = mounts, reservations = reservations, created = created},
  {'reservations', 'created'})
