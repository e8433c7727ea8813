-- The secret of a migration, for its agents' tasks only (dc.migration_recv_open writes
-- it for the target's listener, dc.migration_send proves it): never an argument or a
-- result of a step, which GET /jobs/:uuid shows. ARGV[1]: {migration_uuid}. Answers
-- {secret} while the migration may still move data (running, paused, scheduled);
-- another state refuses InvalidState, so an ended migration's transfer cannot be
-- reopened. Reads only.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
if m.state ~= 'running' and m.state ~= 'paused' and m.state ~= 'scheduled' then
  return refuse(409, 'InvalidState', 'migration ' .. m.uuid .. ' is ' .. tostring(m.state) ..
    ': its transfer is closed')
end
if type(m.secret) ~= 'string' then
  return refuse(409, 'InvalidState', 'migration ' .. m.uuid .. ' has no secret')
end
return ok({secret = m.secret})
