-- TEMPORARY stand-in of dc.migration_progress, so the agent's send builds before the
-- control's migration scripts are in the tree: it appends the event to the
-- migration's stream and answers the record's pause and abort flags. The control's
-- own script replaces this file.
local a = cjson.decode(ARGV[1])
local m = get_json('migration:' .. tostring(a.migration_uuid))
if not m then
  return refuse(404, 'MigrationNotFound', 'migration ' .. tostring(a.migration_uuid) .. ' not found')
end
if type(a.event) == 'table' then
  redis.call('XADD', P .. 'migration:' .. m.uuid .. ':events', 'MAXLEN', '~', 2000, '*', 'e',
    enc(a.event))
end
if type(a.pass_done) == 'table' then
  redis.call('XADD', P .. 'migration:' .. m.uuid .. ':events', 'MAXLEN', '~', 2000, '*', 'e',
    enc({type = 'pass_done', pass = a.pass_done.pass, bytes = a.pass_done.bytes}))
end
return ok({pause_requested = m.pause_requested == true, abort_requested = m.abort_requested == true,
  send_mbps_limit = m.send_mbps_limit, state = m.state})
