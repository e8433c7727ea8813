-- dc.share_watch_check: the admission check of volume-share-watch. Reads only.
-- ARGV[1]: {"params": the job's params, "target"}. The one param is server_uuid, a
-- server of the inventory, with the schedule_uuid and scheduled_for a schedule adds to
-- each job it makes (docs/API.md "Schedules"); the target is
-- /volume-share-watch-<server_uuid>.
local a = cjson.decode(ARGV[1])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
local params = a.params
if type(params) ~= 'table' then
  return refuse(422, 'InvalidArgument', 'params: expected {"server_uuid"}')
end
local known = {server_uuid = true, schedule_uuid = true, scheduled_for = true}
for k, _ in pairs(params) do
  if not known[k] then
    return refuse(422, 'InvalidArgument', tostring(k) .. ': unknown param (expected server_uuid)')
  end
end
local s = params.server_uuid
if type(s) ~= 'string' or not string.match(s, UUID) then
  return refuse(422, 'InvalidArgument', 'server_uuid: expected a UUID, got ' .. cjson.encode(s))
end
if a.target ~= '/volume-share-watch-' .. s then
  return refuse(422, 'InvalidArgument', 'target: a share watch of server ' .. s ..
    ' has the target /volume-share-watch-' .. s .. ', not ' .. cjson.encode(a.target))
end
if redis.call('EXISTS', P .. 'server:' .. s) == 0 then
  return refuse(404, 'ResourceNotFound', 'server ' .. s .. ' does not exist')
end
return ok({server_uuid = s})
