-- dc.vm_set_state: the VM's state and its NICs' at once, and its disks as the agent
-- made them when given. ARGV[1]: {"vm_uuid", "state": "running"|"stopped", "disks"?}.
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local vm = get_json(vk)
if not vm then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist')
end
if vm.state == 'destroyed' or vm.state == 'failed' then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. vm.state ..
    ': it cannot become ' .. a.state)
end
if vm.state ~= a.state then
  index_rem('vms:state:' .. vm.state, a.vm_uuid)
  index_add('vms:state:' .. a.state, a.vm_uuid)
  vm.state = a.state
end
if a.disks and a.disks ~= NULL then vm.disks = a.disks end
for _, nic in ipairs(vm.nics or {}) do
  nic.state = a.state
  redis.call('SET', P .. 'nic:' .. nic.mac, enc(nic))
end
redis.call('SET', P .. vk, enc(vm))
return ok({state = vm.state})
