-- dc.migration_claim: the first step of begin, automatic and schedule. At once: the
-- VM's migration_active claimed (SET NX: of N racing begins exactly one wins), the
-- target's room checked again and its allocation committed, the record created
-- (running, phase begin, the history entry "making a reservation"), the VM marked
-- migrating. ARGV[1]: {vm_uuid, migration_uuid (the job's uuid), job_uuid, action,
-- params (the job's), target_server_uuid (the check's choice), slots, secret (64 hex,
-- drawn by the task), settings: {migration_send_mbps_limit}}. A record of this uuid
-- already there is answered unchanged (a step run again). Answers {migration (public),
-- vm, source_server_uuid, target_server_uuid, source_data_root, target_data_root}: never
-- the secret, as a step's result is shown by GET /jobs/:uuid (the agents' tasks read it
-- with migration_secret.lua).
local a = cjson.decode(ARGV[1])
local now = now_iso_ms()

local function answer(m)
  local vm = get_json('vm:' .. m.vm_uuid)
  return ok({migration = mig_public(m), vm = vm or NULL,
    source_server_uuid = m.source_server_uuid, target_server_uuid = m.target_server_uuid,
    source_data_root = redis.call('HGET', P .. 'server:' .. m.source_server_uuid, 'data_root') or NULL,
    target_data_root = redis.call('HGET', P .. 'server:' .. m.target_server_uuid, 'data_root') or NULL})
end

for _, k in ipairs({'vm_uuid', 'migration_uuid', 'job_uuid', 'target_server_uuid'}) do
  if not uuid_ok(a[k]) then
    return refuse(0, 'InvalidArgument', k .. ': expected a UUID, got ' .. cjson.encode(a[k]))
  end
end
if a.action ~= 'begin' and a.action ~= 'automatic' and a.action ~= 'schedule' then
  return refuse(0, 'InvalidArgument', 'action: expected begin, automatic or schedule, got ' ..
    cjson.encode(a.action))
end
if type(a.secret) ~= 'string' or not string.match(a.secret, '^' .. string.rep('%x', 64) .. '$') then
  return refuse(0, 'InvalidArgument', 'secret: expected 64 hex digits')
end
local existing = mig_get(a.migration_uuid)
if existing then
  if existing.vm_uuid ~= a.vm_uuid then
    return refuse(0, 'InvalidArgument', 'migration_uuid: migration ' .. a.migration_uuid ..
      ' is of vm ' .. existing.vm_uuid .. ', not ' .. a.vm_uuid)
  end
  return answer(existing)
end
local p = type(a.params) == 'table' and a.params or {}

local active = redis.call('GET', P .. 'migration_active:' .. a.vm_uuid)
if active then return mig_refuse(mig_active_refusal(a.vm_uuid, active)) end
local vm = get_json('vm:' .. a.vm_uuid)
if not vm or vm.state == 'destroyed' then
  return refuse(0, 'ResourceNotFound', 'vm ' .. a.vm_uuid .. (vm and ' was destroyed' or ' does not exist'))
end
if vm.state ~= 'running' and vm.state ~= 'stopped' then
  return refuse(0, 'InvalidState', 'vm ' .. a.vm_uuid .. ' is ' .. tostring(vm.state) ..
    ': only a running or stopped instance is migrated')
end
if vm.migrating == true then
  return refuse(0, 'MigrationInProgress', 'An active migration already exists for this instance ' ..
    '(vm ' .. a.vm_uuid .. ', migration ' .. tostring(vm.migration_uuid) .. ')')
end
-- The target the check chose, checked again (capacity may have gone since): the
-- agent steps of the job are already routed to it, so another is not chosen here.
local tgt, e = mig_choose_target(vm, a.target_server_uuid, nil)
if not tgt then return mig_refuse(e) end

-- Nothing was written above this line.
if not redis.call('SET', P .. 'migration_active:' .. a.vm_uuid, a.migration_uuid, 'NX') then
  return mig_refuse(mig_active_refusal(a.vm_uuid, redis.call('GET', P .. 'migration_active:' .. a.vm_uuid)))
end
local al = vm.allocation
local tk = P .. 'server:' .. tgt
redis.call('HINCRBY', tk, 'ram_committed_mib', al.ram)
redis.call('HINCRBY', tk, 'disk_committed_mib', al.disk)
local limit = p.send_mbps_limit
if not mig_given(limit) then limit = tonumber((a.settings or {}).migration_send_mbps_limit) or 500 end
local owner = p.owner_uuid
if not uuid_ok(owner) then owner = NULL end
local m = {uuid = a.migration_uuid, account_uuid = owner, vm_uuid = a.vm_uuid,
  source_server_uuid = vm.server_uuid, target_server_uuid = tgt,
  automatic = a.action == 'automatic' or p.automatic == true, state = 'running', phase = 'begin',
  created_timestamp = now, scheduled_timestamp = mig_given(p.scheduled_timestamp) and
    p.scheduled_timestamp or NULL,
  started_timestamp = now, finished_timestamp = NULL, num_sync_phases = 0, last_sync_size = NULL,
  progress_history = {}, error = NULL, errorDetail = NULL,
  action = a.action, job_uuid = a.job_uuid, switch_step = 0, switch_reason = NULL,
  vm_state_before = vm.state,
  target_allocation = {server_uuid = tgt, ram = al.ram, disk = al.disk,
    rack = redis.call('HGET', tk, 'rack')},
  source_allocation = NULL, reserved_nics = {}, progress = NULL, pause_requested = false,
  abort_requested = false, send_mbps_limit = limit, finalized_timestamp = NULL,
  secret = a.secret}
mig_add_entry(m, 'begin', 'making a reservation', now, a.job_uuid)
local score = math.floor((iso_seconds(now) or 0) * 1000 + 0.5)
redis.call('ZADD', P .. 'migrations', score, m.uuid)
redis.call('ZADD', P .. 'migrations:owner:' .. vm.owner_uuid, score, m.uuid)
redis.call('ZADD', P .. 'migrations:vm:' .. vm.uuid, score, m.uuid)
mig_put(m)
vm.migrating = true
vm.migration_uuid = m.uuid
redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
mig_mark_once(m.uuid, a.job_uuid .. '|begin|start')
return answer(m)
