-- dc.net_reconcile_check: the admission check of net-reconcile. Reads only.
-- ARGV[1]: {"params": the job's params, "target": the job's target}. The params are
-- server_uuid (a server of the inventory), optionally reason (why it runs: the lab's
-- start reconcile says "agent-start", so an operator's reconcile of the same server is
-- not refused as a duplicate while it waits) and, in a job a schedule made, the
-- schedule_uuid and scheduled_for every such job gets; any other is refused, as is a
-- target other than /net-reconcile-<server_uuid>. Answers {server_uuid, hostname}.
local a = cjson.decode(ARGV[1])
local params = a.params
if type(params) ~= 'table' then
  return refuse(422, 'InvalidArgument', 'params: expected an object {server_uuid}')
end
local known = {server_uuid = true, reason = true, schedule_uuid = true, scheduled_for = true}
local names = {}
for k in pairs(params) do names[#names + 1] = tostring(k) end
table.sort(names)
for _, k in ipairs(names) do
  if not known[k] then
    return refuse(422, 'InvalidArgument', 'params.' .. k .. ': unknown parameter (expected server_uuid)')
  end
end
if params.reason ~= nil and (type(params.reason) ~= 'string' or
    not string.match(params.reason, '^[a-z][a-z0-9-]*$') or #params.reason > 64) then
  return refuse(422, 'InvalidArgument', 'params.reason: expected 1-64 of a-z, 0-9 and "-", ' ..
    'starting with a letter, got ' .. cjson.encode(params.reason))
end
local L = '[0-9a-f]'
local UUID = '^' .. string.rep(L, 8) .. '%-' .. string.rep(L, 4) .. '%-' .. string.rep(L, 4) ..
  '%-' .. string.rep(L, 4) .. '%-' .. string.rep(L, 12) .. '$'
local server = params.server_uuid
if type(server) ~= 'string' or not string.match(server, UUID) then
  return refuse(422, 'InvalidArgument', 'params.server_uuid: expected a lowercase UUID, got ' ..
    cjson.encode(server))
end
if a.target ~= '/net-reconcile-' .. server then
  return refuse(422, 'InvalidArgument', 'target: a reconcile of server ' .. server ..
    ' has the target /net-reconcile-' .. server .. ', not ' ..
    string.gsub(cjson.encode(a.target), '\\/', '/'))
end
local hostname = redis.call('HGET', P .. 'server:' .. server, 'hostname')
if not hostname then
  return refuse(404, 'ResourceNotFound', 'params.server_uuid: server ' .. server ..
    ' is not a server of the inventory')
end
return ok({server_uuid = server, hostname = hostname})
