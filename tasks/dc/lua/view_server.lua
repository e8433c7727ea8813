-- GET /servers/:uuid
local s = server_object(Q.uuid)
if not s then return false end
return enc(s)
