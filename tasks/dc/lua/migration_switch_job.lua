-- dc.migration_schedule_switch's script: the migrate-switch job a scheduled migration
-- asks of the control's API, to start at its scheduled_timestamp (the engine's
-- exec_after). ARGV[1]: {migration_uuid, cancel?, job_uuid?}. Its uuid is made from the migration's
-- ("migrate-switch:<migration uuid>"), so a step run again asks for the same job and
-- gets it. Answers {post: {uuid, workflow, target, exec_after, params: {vm_uuid,
-- scheduled_timestamp, owner_uuid?}}, state}; a migration without a scheduled_timestamp is InvalidState.
-- With cancel (dc.migration_cancel_switch, a step of the abort and of the switch)
-- answers {vm_uuid, cancel: the job's uuid, or null when the migration was never
-- scheduled, so no such job exists, or when that job is job_uuid, the one asking}.
-- Reads only.
local a = cjson.decode(ARGV[1])
local m, e = mig_for_step(a.migration_uuid)
if not m then return mig_refuse(e) end
if a.cancel == true then
  local job = NULL
  if mig_given(m.scheduled_timestamp) then job = uuid_of_text('migrate-switch:' .. m.uuid) end
  if job == a.job_uuid then job = NULL end
  return ok({state = m.state, vm_uuid = m.vm_uuid, cancel = job})
end
if not mig_given(m.scheduled_timestamp) then
  return refuse(409, 'InvalidState', 'migration ' .. m.uuid .. ' is not scheduled: it has no ' ..
    'scheduled_timestamp')
end
-- The scheduled time in the params sets this job apart from a switch by hand (which the
-- engine would otherwise refuse as an unfinished job of the same target and params) and
-- is checked against the record when the job is admitted.
local params = {vm_uuid = m.vm_uuid, scheduled_timestamp = m.scheduled_timestamp}
-- A user's schedule gets a user's switch: the same checks of who may migrate.
if mig_given(m.account_uuid) then params.owner_uuid = m.account_uuid end
return ok({state = m.state, post = {uuid = uuid_of_text('migrate-switch:' .. m.uuid),
  workflow = 'migrate-switch', target = '/migrate-switch-' .. m.vm_uuid,
  exec_after = m.scheduled_timestamp, params = params}})
