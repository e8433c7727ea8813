-- The rules of the disk operations (docs/DISKS.md), shared by dc.disk_check,
-- dc.disk_reserve, dc.disk_commit and dc.disk_settle: tasks/dc/lua_embed.py puts this
-- file after prelude.lua ahead of each disk_* script. A rule that refuses answers
-- (nil, err), err being {status, code, message} as refuse() takes them, so the
-- admission check and the job's own steps refuse with the same words.
local DISK_UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
local MAX_DISKS, MAX_SNAPSHOTS = 8, 16
-- 64 TiB in MiB: the largest disk the data plane makes (a file of it still fits an off_t
-- with room to spare; the agent refuses more too).
local MAX_DISK_MIB = 67108864

-- The operations, the workflow of each (whose target names it) and the params it takes.
local DISK_WORKFLOW = {add = 'disk-add', resize = 'disk-resize', delete = 'disk-delete',
  snapshot_create = 'vm-snapshot-create', snapshot_delete = 'vm-snapshot-delete',
  usage = 'vm-disk-usage'}
local DISK_PARAMS = {
  add = {'vm_uuid', 'size', 'pci_slot'},
  resize = {'vm_uuid', 'pci_slot', 'id', 'size', 'dangerous_allow_shrink'},
  delete = {'vm_uuid', 'pci_slot', 'id'},
  snapshot_create = {'vm_uuid', 'name'},
  snapshot_delete = {'vm_uuid', 'name'},
  usage = {'vm_uuid'},
}

local function derr(status, code, msg) return {status = status, code = code, message = msg} end
local function bad_param(path, msg) return derr(422, 'InvalidArgument', path .. ': ' .. msg) end
local function refuse_err(e) return refuse(e.status, e.code, e.message) end
local function given(v) return v ~= nil and v ~= NULL end
local function is_lower_uuid(v)
  return type(v) == 'string' and string.match(v, DISK_UUID) ~= nil and string.lower(v) == v
end
local function is_mib(v)
  return type(v) == 'number' and v == math.floor(v) and v >= 1 and v <= MAX_DISK_MIB
end
-- The PCI function N of a disk's slot "0:4:N", or nil.
local function slot_function(s)
  if type(s) ~= 'string' then return nil end
  local n = string.match(s, '^0:4:([0-7])$')
  return n and tonumber(n)
end

-- The request of an operation from the step's arguments {action, vm_uuid, params}:
-- {action, vm_uuid, size, pci_slot, id, shrink, name}, or nil and the refusal.
local function disk_request(a)
  local wf = DISK_WORKFLOW[a.action]
  if not wf then
    return nil, bad_param('action', 'expected add, resize, delete, snapshot_create, ' ..
      'snapshot_delete or usage, got ' .. cjson.encode(a.action))
  end
  local p = a.params
  if type(p) ~= 'table' then return nil, bad_param('params', 'expected an object') end
  local known, unknown = {}, {}
  for _, k in ipairs(DISK_PARAMS[a.action]) do known[k] = true end
  for k, _ in pairs(p) do
    if not known[k] then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown > 0 then
    table.sort(unknown)
    return nil, bad_param('params.' .. unknown[1], (#unknown > 1 and 'unknown keys ' ..
      table.concat(unknown, ', ') or 'unknown key') .. ' for ' .. wf .. ' (it takes ' ..
      table.concat(DISK_PARAMS[a.action], ', ') .. ')')
  end
  if not is_lower_uuid(p.vm_uuid) then
    return nil, bad_param('params.vm_uuid', 'expected a lowercase UUID, got ' .. cjson.encode(p.vm_uuid))
  end
  if a.vm_uuid ~= p.vm_uuid then
    return nil, bad_param('vm_uuid', cjson.encode(a.vm_uuid) .. ' is not params.vm_uuid ' .. p.vm_uuid)
  end
  local r = {action = a.action, workflow = wf, vm_uuid = p.vm_uuid}
  if a.action == 'add' or a.action == 'resize' then
    if p.size == 'remaining' and a.action == 'add' then
      r.size = 'remaining'
    elseif is_mib(p.size) then
      r.size = p.size
    else
      return nil, bad_param('params.size', 'expected a whole number of MiB from 1 to ' ..
        MAX_DISK_MIB .. (a.action == 'add' and ' or "remaining"' or '') .. ', got ' ..
        cjson.encode(p.size == nil and NULL or p.size))
    end
  end
  if given(p.pci_slot) then
    if not slot_function(p.pci_slot) then
      return nil, bad_param('params.pci_slot', 'expected "0:4:N" with N from 0 to 7, got ' ..
        cjson.encode(p.pci_slot))
    end
    r.pci_slot = p.pci_slot
  end
  if given(p.id) then
    if not is_lower_uuid(p.id) then
      return nil, bad_param('params.id', 'expected a disk\'s lowercase UUID, got ' .. cjson.encode(p.id))
    end
    r.id = p.id
  end
  if a.action == 'resize' or a.action == 'delete' then
    if (r.id == nil) == (r.pci_slot == nil) then
      return nil, bad_param('params', wf .. ' names its disk by exactly one of id and pci_slot' ..
        (r.id and ', not both' or ''))
    end
  end
  if given(p.dangerous_allow_shrink) then
    if type(p.dangerous_allow_shrink) ~= 'boolean' then
      return nil, bad_param('params.dangerous_allow_shrink', 'expected true or false, got ' ..
        cjson.encode(p.dangerous_allow_shrink))
    end
    r.shrink = p.dangerous_allow_shrink
  end
  if a.action == 'snapshot_create' or a.action == 'snapshot_delete' then
    local n = p.name
    -- A name ending ".part" would be taken for a copy being made (the agent's
    -- snapshots/<name>.part/), so it is refused here, before anything runs.
    if type(n) ~= 'string' or #n > 64 or not string.match(n, '^[A-Za-z0-9][A-Za-z0-9_.%-]*$') or
        string.sub(n, -5) == '.part' then
      return nil, bad_param('params.name', cjson.encode(n == nil and NULL or n) .. ' is not a ' ..
        'snapshot name: a letter or digit, then letters, digits, "_", "." or "-", at most 64 ' ..
        'characters, not ending ".part"')
    end
    r.name = n
  end
  return r
end

-- The VM of a request, when disk operations may run on it at all: it exists, is a
-- flexible disk instance, is not migrating and is running or stopped.
local function disk_vm(r)
  local vm = get_json('vm:' .. r.vm_uuid)
  -- A volume's storage instance is answered as if absent (docs/VOLUMES.md).
  if vm and vm_system_role(vm) then vm = nil end
  if not vm or vm.state == 'destroyed' then
    return nil, derr(404, 'ResourceNotFound', 'vm ' .. r.vm_uuid ..
      (vm and ' was destroyed' or ' does not exist'))
  end
  if vm.flexible ~= true then
    return nil, derr(422, 'InvalidArgument', 'vm ' .. r.vm_uuid .. ' is not a flexible disk ' ..
      'instance: its disks are its package\'s and ' .. r.workflow .. ' does not apply')
  end
  if type(vm.flexible_disk_size) ~= 'number' then
    return nil, derr(409, 'InvalidState', 'vm ' .. r.vm_uuid .. ' has no flexible_disk_size in its record')
  end
  if vm.migrating == true then
    return nil, derr(409, 'VmMigrating', 'vm ' .. r.vm_uuid .. ' is migrating (migration ' ..
      (type(vm.migration_uuid) == 'string' and vm.migration_uuid or 'unknown') .. '): ' .. r.workflow .. ' refused')
  end
  if vm.state ~= 'running' and vm.state ~= 'stopped' then
    return nil, derr(409, 'InvalidState', 'vm ' .. r.vm_uuid .. ' is ' .. tostring(vm.state) ..
      ': ' .. r.workflow .. ' needs it running or stopped')
  end
  if type(vm.disks) ~= 'table' then vm.disks = {} end
  if type(vm.snapshots) ~= 'table' then vm.snapshots = {} end
  return vm
end

local function disk_pending(vm)
  local c = vm.disk_change
  if c == nil or c == NULL then return nil end
  return c
end

local function disk_label(vm, d)
  return 'vm ' .. vm.uuid .. ' disk ' .. d.pci_slot .. ' (' .. tostring(d.id) .. ')'
end

-- The numbers of the space rule, for a message: "(flexible_disk_size F, disks D,
-- snapshots S)", and the pending change's share when there is one.
local function space_text(vm)
  local sizes, snaps = 0, 0
  for _, d in ipairs(vm.disks) do
    sizes = sizes + d.size
    snaps = snaps + (tonumber(d.snapshot_size) or 0)
  end
  local pending = vm.flexible_disk_size - sizes - snaps - vm_free_space(vm)
  return '(flexible_disk_size ' .. vm.flexible_disk_size .. ', disks ' .. sizes .. ', snapshots ' ..
    snaps .. (pending ~= 0 and ', pending change ' .. pending or '') .. ')'
end

local function need_stopped(vm, r, what)
  if vm.state ~= 'stopped' then
    return derr(409, 'InvalidState', 'vm ' .. vm.uuid .. ' is ' .. vm.state .. ': ' .. what ..
      ' only while it is stopped')
  end
end

-- The disk a request names, or nil and ResourceNotFound naming it and the VM.
local function disk_named(vm, r)
  for _, d in ipairs(vm.disks) do
    if (r.id and d.id == r.id) or (r.pci_slot and d.pci_slot == r.pci_slot) then return d end
  end
  return nil, derr(404, 'ResourceNotFound', 'vm ' .. vm.uuid .. ' has no disk ' ..
    (r.id and ('with id ' .. r.id) or ('at pci_slot ' .. r.pci_slot)))
end

local function snapshot_named(vm, name)
  for i, s in ipairs(vm.snapshots) do
    if s.name == name then return s, i end
  end
end

-- Every rule of the operation against the record as it is (disks' snapshot_size as
-- recorded: the reserve step records the agent's fresh measure first). The change to
-- make, {op, id?, pci_slot?, old_size?, new_size?, name?, image?}, or nil and the
-- refusal. A pending change of another job counts: its space (vm_free_space), and an
-- add's slot and place among the 8.
local function disk_rules(vm, r)
  local pending = disk_pending(vm)
  local free = vm_free_space(vm)
  if r.action == 'usage' then return {op = 'usage'} end
  if r.action == 'add' then
    local e = need_stopped(vm, r, 'a disk is added')
    if e then return nil, e end
    local used, count = {}, #vm.disks
    for _, d in ipairs(vm.disks) do
      local f = slot_function(d.pci_slot)
      if f then used[f] = d.id end
    end
    if pending and pending.op == 'add' then
      count = count + 1
      used[slot_function(pending.pci_slot)] = pending.id
    end
    if count >= MAX_DISKS then
      return nil, derr(422, 'InvalidArgument', 'vm ' .. vm.uuid .. ' has ' .. count ..
        ' disks, the most a vm can have (PCI functions 0:4:0 to 0:4:7)')
    end
    local slot = r.pci_slot
    if slot then
      local holder = used[slot_function(slot)]
      if holder then
        return nil, bad_param('params.pci_slot', slot .. ' is taken by disk ' .. holder ..
          ' of vm ' .. vm.uuid)
      end
    else
      for f = 0, 7 do
        if not used[f] then slot = '0:4:' .. f break end
      end
    end
    local size = r.size
    if size == 'remaining' then
      if free <= 0 then
        return nil, derr(409, 'InsufficientSpace', 'vm ' .. vm.uuid .. ' disk ' .. slot ..
          ' (new): size "remaining" comes to ' .. free .. ' MiB: free_space is ' .. free ..
          ' MiB ' .. space_text(vm))
      end
      size = free
    elseif size > free then
      return nil, derr(409, 'InsufficientSpace', 'vm ' .. vm.uuid .. ' disk ' .. slot ..
        ' (new): adding ' .. size .. ' MiB needs ' .. size .. ' MiB, free_space is ' .. free ..
        ' MiB ' .. space_text(vm))
    end
    return {op = 'add', pci_slot = slot, new_size = size}
  end
  if r.action == 'resize' or r.action == 'delete' then
    local d, e = disk_named(vm, r)
    if not d then return nil, e end
    if r.action == 'delete' then
      if d.boot == true then
        return nil, derr(422, 'InvalidArgument', disk_label(vm, d) .. ' is the boot disk: ' ..
          'it cannot be deleted')
      end
      e = need_stopped(vm, r, 'a disk is deleted')
      if e then return nil, e end
      return {op = 'delete', id = d.id, pci_slot = d.pci_slot, old_size = d.size}
    end
    if r.size == d.size then
      return nil, bad_param('params.size', disk_label(vm, d) .. ' is already ' .. d.size ..
        ' MiB (size unchanged)')
    end
    if r.size < d.size then
      if r.shrink ~= true then
        return nil, derr(422, 'InvalidArgument', disk_label(vm, d) .. ': Can not shrink disk ' ..
          'from ' .. d.size .. ' MiB to ' .. r.size .. ' MiB without dangerous_allow_shrink: ' ..
          'true (which discards everything past ' .. r.size .. ' MiB, snapshots or not)')
      end
      e = need_stopped(vm, r, 'a disk is shrunk')
      if e then return nil, e end
    elseif r.size - d.size > free then
      return nil, derr(409, 'InsufficientSpace', disk_label(vm, d) .. ': growing ' .. d.size ..
        ' -> ' .. r.size .. ' MiB needs ' .. (r.size - d.size) .. ' MiB, free_space is ' ..
        free .. ' MiB ' .. space_text(vm))
    end
    return {op = 'resize', id = d.id, pci_slot = d.pci_slot, old_size = d.size, new_size = r.size}
  end
  if r.action == 'snapshot_create' then
    if snapshot_named(vm, r.name) or (pending and pending.op == 'snapshot_create' and
        pending.name == r.name) then
      return nil, bad_param('params.name', 'vm ' .. vm.uuid .. ' already has a snapshot named ' .. r.name)
    end
    if #vm.snapshots >= MAX_SNAPSHOTS then
      return nil, derr(422, 'InvalidArgument', 'vm ' .. vm.uuid .. ' has ' .. #vm.snapshots ..
        ' snapshots, the most a vm can have: delete one first')
    end
    return {op = 'snapshot_create', name = r.name}
  end
  -- snapshot_delete
  if not snapshot_named(vm, r.name) then
    return nil, derr(404, 'ResourceNotFound', 'vm ' .. vm.uuid .. ' has no snapshot named ' .. r.name)
  end
  return {op = 'snapshot_delete', name = r.name}
end

-- The agent's measure of a disk in MiB, rounded up so space is never over-granted.
local function usage_snapshot_mib(u)
  if type(u.snapshot_size) == 'number' then return math.ceil(u.snapshot_size) end
  if type(u.snapshot_bytes) == 'number' then return math.ceil(u.snapshot_bytes / 1048576) end
  return 0
end

-- Checks the agent's usage list ([{id, pci_slot, path, size, snapshot_size|bytes}]).
local function usage_valid(usage)
  if type(usage) ~= 'table' then return bad_param('usage', 'expected the agent\'s list of disks') end
  for i, u in ipairs(usage) do
    local path = 'usage[' .. (i - 1) .. ']'
    if type(u) ~= 'table' then return bad_param(path, 'expected an object') end
    if not slot_function(u.pci_slot) then return bad_param(path .. '.pci_slot', 'expected "0:4:N"') end
    if type(u.size) ~= 'number' or u.size < 0 or u.size ~= math.floor(u.size) then
      return bad_param(path .. '.size', 'expected a whole number of MiB')
    end
  end
end

local function usage_of(usage, d)
  for _, u in ipairs(usage) do
    if (given(u.id) and u.id == d.id) or (not given(u.id) and u.pci_slot == d.pci_slot) then
      return u
    end
  end
end

-- Records the agent's fresh measure of each disk's snapshots (the reserve step, before
-- the rules run again).
local function record_snapshot_usage(vm, usage)
  for _, d in ipairs(vm.disks) do
    local u = usage_of(usage, d)
    if u then d.snapshot_size = usage_snapshot_mib(u) end
  end
end

local function sort_disks(vm)
  table.sort(vm.disks, function(x, y)
    return (slot_function(x.pci_slot) or 9) < (slot_function(y.pci_slot) or 9)
  end)
end

-- The record made to agree with the data plane: each disk's size, snapshot_size and
-- path as the agent measured them; a data disk whose file is gone leaves the record,
-- a file the record lacks joins it; with `names` (the agent's whole snapshots), the
-- snapshots the record keeps are those present. A boot disk the agent does not have
-- is refused: that is no state a disk operation leaves, and the record is kept.
local function reconcile(vm, usage, names)
  local e = usage_valid(usage)
  if e then return e end
  local kept, seen = {}, {}
  for _, d in ipairs(vm.disks) do
    local u = usage_of(usage, d)
    if u then
      d.size, d.snapshot_size = u.size, usage_snapshot_mib(u)
      if given(u.path) then d.path = u.path end
      kept[#kept + 1] = d
      seen[u] = true
    elseif d.boot == true then
      return derr(409, 'InvalidState', disk_label(vm, d) .. ' is the boot disk and the agent ' ..
        'has no file for it: the record is kept as it is')
    end
  end
  for _, u in ipairs(usage) do
    if not seen[u] then
      kept[#kept + 1] = {id = given(u.id) and u.id or NULL, boot = false, size = u.size,
        snapshot_size = usage_snapshot_mib(u), pci_slot = u.pci_slot, path = u.path}
    end
  end
  vm.disks = kept
  sort_disks(vm)
  if type(names) == 'table' then
    local present, snaps = {}, {}
    for _, n in ipairs(names) do present[n] = true end
    for _, s in ipairs(vm.snapshots) do
      if present[s.name] then
        snaps[#snaps + 1] = s
        present[s.name] = nil
      end
    end
    for _, n in ipairs(names) do
      if present[n] then
        snaps[#snaps + 1] = {name = n, created_timestamp = ARGV[2]}
        present[n] = nil
      end
    end
    vm.snapshots = snaps
  end
end

-- The VM record as stored: free_space rewritten by the rule.
local function disk_save(vm)
  vm.free_space = vm_free_space(vm)
  redis.call('SET', P .. 'vm:' .. vm.uuid, enc(vm))
end
