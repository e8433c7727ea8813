-- GET /vms/:uuid (a destroyed VM too)
local t = redis.call('GET', P .. 'vm:' .. Q.uuid)
if not t then return false end
return t
