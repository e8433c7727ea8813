-- GET /vms[?owner_uuid&server_uuid&state&alias]: the VMs by uuid, destroyed ones only
-- with state=destroyed. The walk follows the smallest index a filter names; the
-- other filters are checked on each record.
local idx = {}
if Q.owner_uuid then idx[#idx + 1] = 'vms:owner:' .. Q.owner_uuid end
if Q.server_uuid then idx[#idx + 1] = 'vms:server:' .. Q.server_uuid end
if Q.state then idx[#idx + 1] = 'vms:state:' .. Q.state end
if Q.alias then idx[#idx + 1] = 'vms:alias:' .. Q.alias end
local walk, size = 'vms', nil
for _, k in ipairs(idx) do
  local n = redis.call('ZCARD', P .. k)
  if size == nil or n < size then walk, size = k, n end
end
-- Destroyed VMs are in no index but their state's.
if Q.state == 'destroyed' then walk = 'vms:state:destroyed' end
local function get(u) return get_json('vm:' .. u) end
local keep = nil
if #idx > 1 then
  keep = function(vm)
    return (Q.owner_uuid == nil or vm.owner_uuid == Q.owner_uuid) and
      (Q.server_uuid == nil or vm.server_uuid == Q.server_uuid) and
      (Q.state == nil or vm.state == Q.state) and (Q.alias == nil or vm.alias == Q.alias)
  end
end
return page(P .. walk, get, keep)
