-- dc.nics_provision: one NIC per requested network for a placed VM, each with an
-- address of the network's provision range, and the VM's "nics" written, at once.
-- ARGV[1]: {"vm_uuid", "owner_uuid", "networks": [{"uuid", "primary"?, "ip"?}]}.
-- A network on which the VM has a NIC keeps it (a re-run creates nothing twice); else
-- the address is the one asked for, the one the VM held before a release when it is
-- still free, or the lowest free one. Everything is checked before anything is written.
local a = cjson.decode(ARGV[1])
local vk = 'vm:' .. a.vm_uuid
local vm = get_json(vk)
if not vm then
  return refuse(404, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. ' does not exist (place it first)')
end
if vm.allocation == NULL or vm.allocation == nil then
  return refuse(409, 'InvalidState', 'vm ' .. a.vm_uuid .. ' holds no allocation (state ' ..
    vm.state .. '): place it first')
end

local have = {}
for _, nic in ipairs(vm.nics or {}) do have[nic.network_uuid] = nic end
local before = {}
for _, r in ipairs(vm.released_nics or {}) do before[r.network_uuid] = r end

-- First pass: what each network gives, nothing written.
local plan, chosen = {}, {}
for i, want in ipairs(a.networks) do
  local nk = P .. 'network:' .. want.uuid
  if have[want.uuid] then
    plan[i] = {reuse = have[want.uuid]}
  else
    local net = redis.call('HMGET', nk, 'start_n', 'end_n', 'name')
    if not net[1] then
      return refuse(404, 'ResourceNotFound', 'networks[' .. (i - 1) .. ']: network ' .. want.uuid ..
        ' does not exist')
    end
    chosen[want.uuid] = chosen[want.uuid] or {}
    local taken_here = chosen[want.uuid]
    local n
    if want.ip and want.ip ~= NULL then
      n = ip_int(want.ip)
      if not n or not redis.call('ZSCORE', nk .. ':free', n) or taken_here[n] then
        return refuse(409, 'IpTaken', 'networks[' .. (i - 1) .. '].ip: ' .. tostring(want.ip) ..
          ' is not a free address of network ' .. net[3] .. ' (' .. want.uuid .. ')')
      end
    else
      local old = before[want.uuid]
      if old and not taken_here[ip_int(old.ip)] and redis.call('ZSCORE', nk .. ':free', ip_int(old.ip)) then
        n = ip_int(old.ip)
      else
        local k = 0
        for _ in pairs(taken_here) do k = k + 1 end
        for _, m in ipairs(redis.call('ZRANGE', nk .. ':free', 0, k)) do
          m = tonumber(m)
          if not taken_here[m] then n = m break end
        end
      end
      if not n then
        return refuse(409, 'SubnetFull', 'network ' .. net[3] .. ' (' .. want.uuid ..
          ') has no free address left in its provision range')
      end
    end
    taken_here[n] = true
    plan[i] = {n = n, old_mac = before[want.uuid] and before[want.uuid].mac}
  end
end

local new_macs = 0
for _, p in ipairs(plan) do if not p.reuse then new_macs = new_macs + 1 end end
if tonumber(redis.call('GET', P .. 'mac_seq') or 0) + new_macs > 16777215 then
  return refuse(0, 'MacsExhausted', 'every MAC address of the prefix 90:b8:d0 is used')
end

-- Second pass: write.
local nics, primary_seen = {}, false
for i, want in ipairs(a.networks) do
  local p = plan[i]
  local nic = p.reuse
  if not nic then
    local nk = P .. 'network:' .. want.uuid
    local net = redis.call('HMGET', nk, 'netmask', 'gateway', 'vlan_id', 'mtu', 'name')
    local mac = p.old_mac
    if not mac or redis.call('EXISTS', P .. 'nic:' .. mac) == 1 then
      local seq = redis.call('INCR', P .. 'mac_seq')
      mac = string.format('90:b8:d0:%02x:%02x:%02x', math.floor(seq / 65536) % 256,
        math.floor(seq / 256) % 256, seq % 256)
    end
    local ip = ip_text(p.n)
    redis.call('ZREM', nk .. ':free', p.n)
    redis.call('HINCRBY', nk, 'taken', 1)
    redis.call('ZADD', nk .. ':ips', p.n, ip)
    redis.call('HSET', P .. 'ip:' .. want.uuid .. ':' .. ip, 'ip', ip, 'network_uuid', want.uuid,
      'state', 'taken', 'belongs_to_uuid', a.vm_uuid, 'belongs_to_type', 'zone',
      'owner_uuid', a.owner_uuid)
    nic = {mac = mac, ip = ip, netmask = net[1], gateway = net[2], vlan_id = tonumber(net[3]),
      mtu = tonumber(net[4]), nic_tag = net[5], network_uuid = want.uuid,
      belongs_to_uuid = a.vm_uuid, belongs_to_type = 'zone', owner_uuid = a.owner_uuid,
      cn_uuid = vm.server_uuid, primary = false, state = 'provisioning'}
    index_add('nics', mac)
    index_add('nics:cn:' .. vm.server_uuid, mac)
  end
  nic.primary = want.primary == true and not primary_seen
  primary_seen = primary_seen or nic.primary
  nic.interface = 'net' .. (i - 1)
  nics[i] = nic
end
if not primary_seen and #nics > 0 then nics[1].primary = true end
for _, nic in ipairs(nics) do redis.call('SET', P .. 'nic:' .. nic.mac, enc(nic)) end
vm.nics = nics
vm.released_nics = nil
redis.call('SET', P .. vk, enc(vm))
return ok({nics = nics})
