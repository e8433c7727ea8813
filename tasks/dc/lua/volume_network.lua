-- dc.volume_network: the control steps of volume-attach-network and
-- volume-detach-network, each one script run at once. ARGV[1]: {"op", "action",
-- "params": {volume_uuid, owner_uuid, network_uuid}, "job_uuid"} (the C wrapper adds
-- the job's uuid).
--
--   begin   every rule again (volume_op_rules.lua), then the volume marked as this
--           job's (job_uuid). Answers the networks the storage instance is to have,
--           [{uuid}] in the volume's order, the attached one last: what the attach's
--           next step hands dc.nics_provision, which adds its NIC and keeps the others;
--           and the NICs it keeps of them (a detach's: what its vm.json is to list).
--   commit  the volume's networks changed; the storage instance's NICs made to match
--           them (a detached network's NIC removed and its address freed; the NICs
--           ordered as the networks, net0 the first and primary, all running: the
--           share was just started again on them); filesystem_path and share_endpoint
--           from the first NIC's address; the share `running`; job_uuid cleared.
--   fail    (onerror) the NICs made to match the volume's networks as they were (an
--           attach's new NIC removed, its address freed); the share `unknown` until the
--           next probe; job_uuid cleared.
--
-- Run again for the same job each answers the same without writing twice. Answers
-- {volume_uuid, vm_uuid, server_uuid, owner_uuid, networks: [{uuid}], nics: [NIC]}:
-- commit and fail, the storage instance's NICs as they are now (for its vm.json).
local a = cjson.decode(ARGV[1])
local e = vop_step_fault(a, {'attach_network', 'detach_network'}, {'begin', 'commit', 'fail'})
if e then return e end
local p, job = a.params, a.job_uuid
local attach = a.action == 'attach_network'

local v
v, e = volume_of_owner(p.volume_uuid, p.owner_uuid)
if not v then
  if a.op == 'fail' then return ok({volume_uuid = p.volume_uuid, networks = {}, nics = {}}) end
  return e
end
local before = v.state
local mine = v.job_uuid == job
local has_job = v.job_uuid ~= nil and v.job_uuid ~= NULL
local vk = 'vm:' .. tostring(v.vm_uuid)
local vm = get_json(vk)

-- The networks the storage instance has once the operation is done.
local function wanted()
  local out = {}
  for _, n in ipairs(v.networks or {}) do
    if attach or n ~= p.network_uuid then out[#out + 1] = n end
  end
  if attach and not volume_has_network(v, p.network_uuid) then out[#out + 1] = p.network_uuid end
  return out
end

local function answer(nets, nics)
  local list = {}
  for _, n in ipairs(nets) do list[#list + 1] = {uuid = n} end
  return ok({volume_uuid = v.uuid, vm_uuid = v.vm_uuid, server_uuid = v.server_uuid,
    owner_uuid = v.owner_uuid, networks = list, nics = nics or (vm and vm.nics) or {}})
end

-- The storage instance's NICs made to match nets: the kept ones in the order of nets
-- (net0 first and primary; `running` sets their state), returned. With `write`, the
-- others are given back and the NICs and the instance written; without, nothing is.
local function nics_match(nets, running, write)
  if not vm then return {} end
  local by_net, extra = {}, {}
  for _, nic in ipairs(vm.nics or {}) do
    if by_net[nic.network_uuid] then
      extra[#extra + 1] = nic -- a second NIC on one network: never made by these steps
    else
      by_net[nic.network_uuid] = nic
    end
  end
  local keep, order = {}, {}
  for _, n in ipairs(nets) do keep[n] = true end
  if write then
    for _, nic in ipairs(extra) do nic_free(nic, vm.uuid) end
    for net, nic in pairs(by_net) do
      if not keep[net] then nic_free(nic, vm.uuid) end
    end
  end
  for _, n in ipairs(nets) do
    local nic = by_net[n]
    if nic then
      nic.interface = 'net' .. #order
      nic.primary = #order == 0
      if running then nic.state = 'running' end
      order[#order + 1] = nic
      if write then redis.call('SET', P .. 'nic:' .. nic.mac, enc(nic)) end
    end
  end
  if write then
    vm.nics = order
    redis.call('SET', P .. vk, enc(vm))
  end
  return order
end

-- What begin answers: the networks to have and the NICs the instance keeps of them
-- (an attach's new one is made by the next step, dc.nics_provision).
local function begun()
  local nets = wanted()
  return answer(nets, nics_match(nets, false, false))
end

if a.op == 'begin' then
  if mine then return begun() end
  if has_job then
    return vop_busy(v, job)
  end
  local r
  r, e = volume_op_rules(a.action, p, VOLUME_MAX_SNAPSHOTS_DEFAULT)
  if not r then return e end
  if not vm or vm.allocation == nil or vm.allocation == NULL then
    return refuse(409, 'InvalidState', 'volume ' .. v.name .. ': its storage instance ' ..
      tostring(v.vm_uuid) .. ' is not placed')
  end
  v.job_uuid = job
  volume_put(v, before)
  return begun()
end

if a.op == 'commit' then
  if not mine then
    local done = not has_job and (volume_has_network(v, p.network_uuid) == attach)
    if done then return answer(v.networks or {}) end
    return vop_not_begun(v, a.action, job)
  end
  local nets = wanted()
  if attach then
    local have = false
    for _, nic in ipairs(vm and vm.nics or {}) do have = have or nic.network_uuid == p.network_uuid end
    if not have then
      return refuse(409, 'InvalidState', 'volume ' .. v.name .. ': its storage instance ' ..
        tostring(v.vm_uuid) .. ' has no NIC on network ' .. p.network_uuid .. ' to attach')
    end
  end
  v.networks = nets
  nics_match(nets, true, true)
  local first = vm and vm.nics and vm.nics[1]
  if first then
    v.filesystem_path = first.ip .. ':/exports/data'
    v.share_endpoint = 'nfs://' .. first.ip .. '/' .. v.name
  end
  v.share_state = 'running'
  v.job_uuid = NULL
  volume_put(v, before)
  return answer(nets)
end

-- fail
if not mine then return answer(v.networks or {}) end
nics_match(v.networks or {}, false, true)
v.share_state = 'unknown'
v.job_uuid = NULL
volume_put(v, before)
return answer(v.networks or {})
