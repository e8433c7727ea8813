-- dc.volumes_unreserve: what a failed provision gives back on volumes, at once.
-- ARGV[1]: {"vm_uuid", "job_uuid", "expired"?}. Every reservation of this job is
-- deleted. Each volume this job created (created_by_job, from the VM's "volumes") that nothing uses
-- (no refs, no reservation of another job) is to be deleted: ready or failed ones are
-- answered in "delete" with the uuid of their volume-delete job; ones still creating
-- (a volume-create job running) in "pending", to be asked again once they settle, or
-- in "left" once the task's wait expired (an operator deletes them).
-- Volumes that existed before the job are left as they are (RFD 26, onerror).
-- Answers {"released": [reservation uuid], "delete": [{volume_uuid, owner_uuid,
-- job_uuid}], "pending": [{volume_uuid, name, state}], "left": [the same]}.
local a = cjson.decode(ARGV[1])
local released = {}
for _, ru in ipairs(redis.call('ZRANGE', P .. 'job_reservations:' .. a.job_uuid, 0, -1)) do
  if reservation_del(ru) then released[#released + 1] = ru end
end
local vm = get_json('vm:' .. a.vm_uuid)
local delete, pending, left, seen = {}, {}, {}, {}
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
      elseif v.state == 'creating' or v.state == 'rolling_back' then
        local into = a.expired == true and left or pending
        into[#into + 1] = {volume_uuid = v.uuid, name = v.name, state = v.state}
      end
    end
  end
end
return ok_lists({released = released, delete = delete, pending = pending, left = left},
  {'released', 'delete', 'pending', 'left'})
