-- The first lines of every dc script (tasks/dc/lua_embed.py puts them ahead of each
-- body). KEYS[1] is the plugin's namespace, "tern:p:dc:", which a script completes
-- into record keys; ARGV[1] is the task's arguments as JSON. A script answers JSON
-- text: {"ok": result} or {"error": {"status", "code", "message"}}, status being the
-- HTTP status an admission check refuses with (0: a plain failure).
local P = KEYS[1]
local NULL = cjson.null

-- cjson writes an empty Lua table as {}: the lists of the records are put right.
local function enc(v)
  local s = cjson.encode(v)
  return (string.gsub(s, '"([%a_]+)":{}', function(k)
    if k == 'nics' or k == 'disks' or k == 'networks' or k == 'released_nics' or
      k == 'snapshots' or k == 'refs' or k == 'volumes' or k == 'owner_uuids' then
      return '"' .. k .. '":[]'
    end
  end))
end

local function ok(v) return enc({ok = v}) end
local function refuse(status, code, msg)
  return cjson.encode({error = {status = status, code = code, message = msg}})
end

local function ip_int(s)
  if type(s) ~= 'string' then return nil end
  local a, b, c, d = string.match(s, '^(%d+)%.(%d+)%.(%d+)%.(%d+)$')
  if not a then return nil end
  a, b, c, d = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  if a > 255 or b > 255 or c > 255 or d > 255 then return nil end
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function ip_text(n)
  return string.format('%d.%d.%d.%d', math.floor(n / 16777216) % 256,
    math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

-- Members of a sorted index (score 0, ordered by name).
local function index_add(key, member) redis.call('ZADD', P .. key, 0, member) end
local function index_rem(key, member) redis.call('ZREM', P .. key, member) end

local function get_json(key)
  local t = redis.call('GET', P .. key)
  if not t then return nil end
  return cjson.decode(t)
end

-- ARGV[3]: fresh UUIDs for the records a script creates (inventory_script.h).
local function fresh_uuids() return cjson.decode(ARGV[3] or '[]') end

-- The space rule of a flexible VM (docs/DISKS.md): free_space = flexible_disk_size
-- minus every disk's size and the space its snapshots use, in MiB. A pending disk
-- change (vm.disk_change) counts at the larger of its sizes, so space it may take is
-- never handed out twice. nil for an inflexible VM.
local function vm_free_space(vm)
  if vm.flexible ~= true then return nil end
  local used = 0
  for _, d in ipairs(vm.disks or {}) do
    used = used + d.size + (tonumber(d.snapshot_size) or 0)
  end
  local c = vm.disk_change
  if c and c ~= NULL then
    if c.op == 'add' then
      used = used + c.new_size
    elseif c.op == 'resize' and c.new_size > c.old_size then
      used = used + c.new_size - c.old_size
    end
  end
  return vm.flexible_disk_size - used
end

-- Gives back all a VM took, at once: its allocation (the server's counters), its NICs
-- and their addresses (back to the free pool), and sets its final state ("failed" or
-- "destroyed"). What was held is kept in "released_nics" so a re-run of a provision
-- takes the same addresses back when they are still free. A second release finds
-- nothing held and changes nothing but the state. Returns the record as written and
-- whether anything was given back, or nil when there is no record. The VM's volume
-- references are the caller's (vm_volumes_release, in volume_rules.lua after this).
local function vm_release(vm_uuid, final_state)
  local vk = 'vm:' .. vm_uuid
  local vm = get_json(vk)
  if not vm then return nil, false end
  if vm.state == 'destroyed' then return vm, false end

  local al = vm.allocation
  local released = false
  if al and al ~= NULL then
    local sk = P .. 'server:' .. al.server_uuid
    if redis.call('EXISTS', sk) == 1 then
      redis.call('HINCRBY', sk, 'ram_committed_mib', -al.ram)
      redis.call('HINCRBY', sk, 'disk_committed_mib', -al.disk)
      redis.call('HINCRBY', sk, 'instances', -1)
    end
    if al.rack then redis.call('HINCRBY', P .. 'owner_racks:' .. vm.owner_uuid, al.rack, -1) end
    vm.allocation = NULL
    released = true
  end

  local kept = {}
  for _, nic in ipairs(vm.nics or {}) do
    local nk = P .. 'network:' .. nic.network_uuid
    local n = ip_int(nic.ip)
    local ik = P .. 'ip:' .. nic.network_uuid .. ':' .. nic.ip
    if redis.call('HGET', ik, 'belongs_to_uuid') == vm_uuid then
      redis.call('DEL', ik)
      redis.call('ZREM', nk .. ':ips', nic.ip)
      redis.call('HINCRBY', nk, 'taken', -1)
      local r = redis.call('HMGET', nk, 'start_n', 'end_n', 'gateway_n')
      if r[1] and n >= tonumber(r[1]) and n <= tonumber(r[2]) and n ~= tonumber(r[3]) then
        redis.call('ZADD', nk .. ':free', n, n)
      end
    end
    redis.call('DEL', P .. 'nic:' .. nic.mac)
    index_rem('nics', nic.mac)
    index_rem('nics:cn:' .. nic.cn_uuid, nic.mac)
    kept[#kept + 1] = {network_uuid = nic.network_uuid, ip = nic.ip, mac = nic.mac}
    released = true
  end
  if #kept > 0 then vm.released_nics = kept end
  vm.nics = {}

  index_rem('vms:state:' .. vm.state, vm_uuid)
  vm.state = final_state
  index_add('vms:state:' .. vm.state, vm_uuid)
  if vm.state == 'destroyed' then
    -- A destroyed VM leaves every list but the one of destroyed VMs.
    index_rem('vms', vm_uuid)
    index_rem('vms:owner:' .. vm.owner_uuid, vm_uuid)
    if vm.server_uuid and vm.server_uuid ~= NULL then
      index_rem('vms:server:' .. vm.server_uuid, vm_uuid)
    end
    if vm.alias and vm.alias ~= NULL and vm.alias ~= '' then
      index_rem('vms:alias:' .. vm.alias, vm_uuid)
    end
    local role = type(vm.internal_metadata) == 'table' and vm.internal_metadata['sdc:system_role']
    if type(role) == 'string' then index_rem('vms:role:' .. role, vm_uuid) end
    vm.released_nics = nil
  end
  redis.call('SET', P .. vk, enc(vm))
  return vm, released
end
