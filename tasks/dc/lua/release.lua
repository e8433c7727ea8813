-- dc.release: gives back all a VM took, at once: its allocation (the server's
-- counters), its NICs and their addresses (back to the free pool), and sets its final
-- state. ARGV[1]: {"vm_uuid", "final_state": "failed"|"destroyed"}. What was held is
-- kept in "released_nics" so a re-run of the provision takes the same addresses back
-- when they are still free. A second release finds nothing held and changes nothing
-- but the state.
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local vm = get_json(vk)
if not vm then return ok({released = false}) end
if vm.state == 'destroyed' then return ok({released = false, state = 'destroyed'}) end

local al = vm.allocation
local released = false
if al and al ~= NULL then
  local sk = P .. 'server:' .. al.server_uuid
  if redis.call('EXISTS', sk) == 1 then
    redis.call('HINCRBY', sk, 'ram_committed_mib', -al.ram)
    redis.call('HINCRBY', sk, 'disk_committed_mib', -al.disk)
    redis.call('HINCRBY', sk, 'instances', -1)
  end
  if al.rack then redis.call('HINCRBY', P .. 'owner_racks:' .. vm.owner_uuid, al.rack, -1) end
  vm.allocation = NULL
  released = true
end

local kept = {}
for _, nic in ipairs(vm.nics or {}) do
  local nk = P .. 'network:' .. nic.network_uuid
  local n = ip_int(nic.ip)
  local ik = P .. 'ip:' .. nic.network_uuid .. ':' .. nic.ip
  if redis.call('HGET', ik, 'belongs_to_uuid') == a.vm_uuid then
    redis.call('DEL', ik)
    redis.call('ZREM', nk .. ':ips', nic.ip)
    redis.call('HINCRBY', nk, 'taken', -1)
    local r = redis.call('HMGET', nk, 'start_n', 'end_n', 'gateway_n')
    if r[1] and n >= tonumber(r[1]) and n <= tonumber(r[2]) and n ~= tonumber(r[3]) then
      redis.call('ZADD', nk .. ':free', n, n)
    end
  end
  redis.call('DEL', P .. 'nic:' .. nic.mac)
  index_rem('nics', nic.mac)
  index_rem('nics:cn:' .. nic.cn_uuid, nic.mac)
  kept[#kept + 1] = {network_uuid = nic.network_uuid, ip = nic.ip, mac = nic.mac}
  released = true
end
if #kept > 0 then vm.released_nics = kept end
vm.nics = {}

-- Neither failed nor destroyed is active: its volume references and reservations go.
vm_volumes_release(vm)

index_rem('vms:state:' .. vm.state, a.vm_uuid)
vm.state = a.final_state
index_add('vms:state:' .. vm.state, a.vm_uuid)
if vm.state == 'destroyed' then
  -- A destroyed VM leaves every list but the one of destroyed VMs.
  index_rem('vms', a.vm_uuid)
  index_rem('vms:owner:' .. vm.owner_uuid, a.vm_uuid)
  if vm.server_uuid and vm.server_uuid ~= NULL then
    index_rem('vms:server:' .. vm.server_uuid, a.vm_uuid)
  end
  if vm.alias and vm.alias ~= NULL and vm.alias ~= '' then
    index_rem('vms:alias:' .. vm.alias, a.vm_uuid)
  end
  vm.released_nics = nil
end
redis.call('SET', P .. vk, enc(vm))
return ok({released = released, state = vm.state})
