-- dc.volume_op_check: the admission check of volume-snapshot-create,
-- volume-snapshot-delete, volume-rollback, volume-attach-network and
-- volume-detach-network. Reads only. ARGV[1]: {"action", "target", "params",
-- "max_snapshots"} (the C wrapper adds the job's target and the dc settings'
-- max_snapshots_per_volume). Every rule of volume_op_rules.lua against the volume as it
-- is, so a request that cannot succeed is refused at POST /jobs with its code; the
-- job's begin step checks them all again at once before it writes.
-- Answers {volume_uuid, vm_uuid, server_uuid, state, networks, snapshot?, later?}: the
-- storage instance and its server (the agent steps' queue), the snapshot named and,
-- for a rollback, the snapshots taken after it.
local a = cjson.decode(ARGV[1])
if not VOLUME_OP_WORKFLOWS[a.action] then
  return refuse(422, 'InvalidArgument', 'action: expected snapshot_create, snapshot_delete, ' ..
    'rollback, attach_network or detach_network, got ' .. vop_show(a.action))
end
local e = volume_op_params_fault(a.action, a.params)
if e then return e end
local p = a.params
local want = '/' .. VOLUME_OP_WORKFLOWS[a.action] .. '-' .. p.volume_uuid
if a.target ~= want then
  return vop_refuse_param('target', 'a ' .. VOLUME_OP_WORKFLOWS[a.action] .. ' of volume ' ..
    p.volume_uuid .. ' has the target ' .. want .. ', not ' .. vop_show(a.target))
end
local v, out = volume_op_rules(a.action, p, volume_max_snapshots(a))
if not v then return out end
return vop_ok({volume_uuid = v.uuid, vm_uuid = v.vm_uuid, server_uuid = v.server_uuid,
  state = v.state, networks = v.networks, snapshot = out.snapshot, later = out.later})
