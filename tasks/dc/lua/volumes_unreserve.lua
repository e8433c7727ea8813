-- dc.volumes_unreserve: what a failed provision gives back on volumes, at once.
-- ARGV[1]: {"vm_uuid", "job_uuid", "expired"?, "abandon_before"?}. Every reservation
-- of this job is deleted. Each volume this job created (created_by_job, from the VM's "volumes") that nothing uses
-- (no refs, no reservation of another job) is to be deleted: ready or failed ones are
-- answered in "delete" with the uuid of their volume-delete job; ones still creating
-- (a volume-create job running) in "pending", to be asked again once they settle, or
-- in "left" once the task's wait expired (an operator deletes them). One still
-- creating that no volume-create job took (job_uuid null) though it was made before
-- abandon_before (ISO 8601; a job's claim follows its POST within seconds) never
-- will be: its POST was refused or never answered. It is removed here, its name
-- freed, and answered in "abandoned".
-- Volumes that existed before the job are left as they are (RFD 26, onerror).
-- Answers {"released": [reservation uuid], "delete": [{volume_uuid, owner_uuid,
-- job_uuid}], "pending": [{volume_uuid, name, state}], "left": [the same],
-- "abandoned": [volume uuid]}.
local a = cjson.decode(ARGV[1])
local released = {}
for _, ru in ipairs(redis.call('ZRANGE', P .. 'job_reservations:' .. a.job_uuid, 0, -1)) do
  if reservation_del(ru) then released[#released + 1] = ru end
end
local vm = get_json('vm:' .. a.vm_uuid)
local delete, pending, left, abandoned, seen = {}, {}, {}, {}, {}
local abandon_before = type(a.abandon_before) == 'string' and a.abandon_before or nil
for _, m in ipairs(vm and vm.volumes or {}) do
  local v = volume_get(m.volume_uuid)
  if v and not seen[v.uuid] and v.created_by_job == a.job_uuid then
    seen[v.uuid] = true
    local used = #(v.refs or {}) > 0 or
      redis.call('ZCARD', P .. 'volume_reservations:' .. v.uuid) > 0
    if not used then
      if v.state == 'ready' or v.state == 'failed' then
        delete[#delete + 1] = {volume_uuid = v.uuid, owner_uuid = v.owner_uuid,
          job_uuid = volume_delete_job_uuid(v.uuid)}
      elseif v.state == 'creating' and (v.job_uuid == nil or v.job_uuid == NULL) and
          abandon_before and tostring(v.create_timestamp) < abandon_before then
        volume_remove(v)
        abandoned[#abandoned + 1] = v.uuid
      elseif v.state == 'creating' or v.state == 'rolling_back' then
        local into = a.expired == true and left or pending
        into[#into + 1] = {volume_uuid = v.uuid, name = v.name, state = v.state}
      end
    end
  end
end
return ok_lists({released = released, delete = delete, pending = pending, left = left,
  abandoned = abandoned}, {'released', 'delete', 'pending', 'left', 'abandoned'})
