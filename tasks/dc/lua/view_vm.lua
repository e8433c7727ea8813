-- GET /vms/:uuid[?system_role] (a destroyed VM too). A volume's storage instance only
-- with system_role=nfsvolumestorage: otherwise it is answered as if absent (RFD 26).
if Q.system_role and Q.system_role ~= STORAGE_ROLE then
  return redis.error_reply('REFUSED 409 InvalidArgument system_role: expected "' .. STORAGE_ROLE ..
    '", got ' .. cjson.encode(Q.system_role))
end
local t = redis.call('GET', P .. 'vm:' .. Q.uuid)
if not t then return false end
local vm = cjson.decode(t)
if vm_system_role(vm) ~= Q.system_role then return false end
-- `migrating` is always shown (false when no migration holds the VM).
if vm.migrating == true then return t end
vm.migrating = false
return enc(vm)
