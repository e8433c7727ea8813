-- dc.volume_ready: the end of volume-create, once the agent started the share process.
-- ARGV[1]: {volume_uuid, vm_uuid (the storage instance), state (what the agent's start
-- answered), job_uuid}. At once: the storage instance and its NICs "running"; the
-- volume "ready", share_state "running", with the address a client mounts
-- (filesystem_path "<ip>:/exports/data" and share_endpoint "nfs://<ip>/<name>", of its
-- first NIC), export_path and server_uuid. A volume already ready is answered as it is.
local a = cjson.decode(ARGV[1])
local v = volume_get(a.volume_uuid)
if not v then
  return refuse(0, 'VolumeNotFound', 'volume ' .. tostring(a.volume_uuid) .. ' not found')
end
if v.state == 'ready' and v.vm_uuid == a.vm_uuid then return ok(v) end
if v.state ~= 'creating' then return volume_not_ready(v, 'only a creating volume becomes ready') end
if a.state ~= 'running' then
  return refuse(0, 'InvalidState', 'storage instance ' .. tostring(a.vm_uuid) .. ' is ' ..
    tostring(a.state) .. ', not running: its share process did not start')
end
local vm = get_json('vm:' .. tostring(a.vm_uuid))
if not vm or vm.uuid ~= v.vm_uuid or vm.allocation == nil or vm.allocation == NULL then
  return refuse(0, 'InvalidState', 'volume ' .. v.uuid .. ': storage instance ' .. tostring(a.vm_uuid) ..
    ' is not its placed storage instance')
end
local nic = (vm.nics or {})[1]
if not nic then
  return refuse(0, 'InvalidState', 'storage instance ' .. vm.uuid .. ' has no NIC: no address to share on')
end
local root = redis.call('HGET', P .. 'server:' .. vm.server_uuid, 'data_root')
if not root then
  return refuse(0, 'ResourceNotFound', 'server ' .. vm.server_uuid .. ' of storage instance ' ..
    vm.uuid .. ' does not exist')
end

if vm.state ~= 'running' then
  index_rem('vms:state:' .. vm.state, vm.uuid)
  index_add('vms:state:running', vm.uuid)
  vm.state = 'running'
end
for _, n in ipairs(vm.nics) do
  n.state = 'running'
  redis.call('SET', P .. 'nic:' .. n.mac, enc(n))
end
redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))

local before = v.state
v.state = 'ready'
v.share_state = 'running'
v.filesystem_path = nic.ip .. ':/exports/data'
v.share_endpoint = 'nfs://' .. nic.ip .. '/' .. v.name
v.export_path = root .. '/' .. vm.uuid .. '/export'
v.server_uuid = vm.server_uuid
v.share_probed_at = now_iso_ms()
v.error_since = NULL
v.job_uuid = NULL
volume_put(v, before)
return ok(v)
