-- dc.provision_check: the admission check of a provision. Reads only. ARGV[1]: the
-- provision's fields ({"vm_uuid", "owner_uuid", "alias"?, "package", "image_uuid",
-- "networks", "server_uuid"?, "autoboot"?, "customer_metadata"?, "disks"?, "volumes"?,
-- "target"}).
-- Each fault refuses with the code the docs give (docs/DATACENTER.md "Refusals"),
-- naming it. It resolves the disk layout (docs/DATACENTER.md "Disks"): the disks asked,
-- else the package's, else the default, and what the VM commits on its server; and the
-- volumes it mounts (docs/VOLUMES.md "Volumes at provision"), answered normalised.
local a = cjson.decode(ARGV[1])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'
local DISKS_MAX = 8          -- PCI functions 0:4:0 .. 0:4:7
local DISK_SIZE_MAX = 67108864 -- MiB (64 TiB): the largest disk file the agent makes

local function is_uuid(v) return type(v) == 'string' and string.match(v, UUID) ~= nil and
  string.lower(v) == v end
local function bad(path, msg) return refuse(422, 'InvalidArgument', path .. ': ' .. msg) end

if not is_uuid(a.vm_uuid) then return bad('vm_uuid', 'expected a lowercase UUID, got ' .. cjson.encode(a.vm_uuid)) end
if not is_uuid(a.owner_uuid) then return bad('owner_uuid', 'expected a lowercase UUID, got ' .. cjson.encode(a.owner_uuid)) end
if a.target ~= '/provision-' .. a.vm_uuid then
  return bad('target', 'a provision of vm ' .. a.vm_uuid .. ' has the target /provision-' ..
    a.vm_uuid .. ', not ' .. cjson.encode(a.target))
end
local alias = a.alias
if alias == NULL then alias = nil end
if alias ~= nil and (type(alias) ~= 'string' or #alias > 189 or
    not string.match(alias, '^[A-Za-z0-9][A-Za-z0-9_.%-]*$')) then
  return bad('alias', cjson.encode(alias) .. ' is not an alias: a letter or digit, then letters, ' ..
    'digits, "_", "." or "-", at most 189 characters')
end
if type(a.package) ~= 'string' or a.package == '' then
  return bad('package', 'expected a package name or uuid')
end
if not is_uuid(a.image_uuid) then return bad('image_uuid', 'expected a lowercase UUID, got ' .. cjson.encode(a.image_uuid)) end
local server = a.server_uuid
if server == NULL then server = nil end
if server ~= nil and not is_uuid(server) then
  return bad('server_uuid', 'expected a lowercase UUID, got ' .. cjson.encode(server))
end
if a.autoboot ~= nil and a.autoboot ~= NULL and type(a.autoboot) ~= 'boolean' then
  return bad('autoboot', 'expected true or false')
end
if a.customer_metadata ~= nil and a.customer_metadata ~= NULL and type(a.customer_metadata) ~= 'table' then
  return bad('customer_metadata', 'expected an object')
end
if type(a.networks) ~= 'table' or #a.networks == 0 then
  return bad('networks', 'expected a non-empty list of {"uuid", "primary"?, "ip"?}')
end
local primaries = 0
for i, n in ipairs(a.networks) do
  local path = 'networks[' .. (i - 1) .. ']'
  if type(n) == 'string' then n = {uuid = n} a.networks[i] = n end
  if type(n) ~= 'table' or not is_uuid(n.uuid) then
    return bad(path .. '.uuid', 'expected a lowercase UUID')
  end
  if n.primary ~= nil and n.primary ~= NULL and type(n.primary) ~= 'boolean' then
    return bad(path .. '.primary', 'expected true or false')
  end
  if n.primary == true then primaries = primaries + 1 end
  if n.ip ~= nil and n.ip ~= NULL and not ip_int(n.ip) then
    return bad(path .. '.ip', cjson.encode(n.ip) .. ' is not an IPv4 address')
  end
end
if primaries > 1 then return bad('networks', 'more than one network is primary') end

-- The volumes the VM mounts: [{name, mountpoint, mode?, type?}], at most VOLUMES_MAX,
-- each mountpoint absolute, without "." or ".." segments, and used once.
local VOLUMES_MAX = 16
local MOUNTPOINT_MAX = 1024
local mounts = {}
local asked_volumes = a.volumes
if asked_volumes == NULL then asked_volumes = nil end
if asked_volumes ~= nil then
  if type(asked_volumes) ~= 'table' then
    return bad('volumes', 'expected a list of {"name", "mountpoint", "mode"?, "type"?}, got ' ..
      cjson.encode(asked_volumes))
  end
  local n = 0
  for k in pairs(asked_volumes) do
    if type(k) ~= 'number' then
      return bad('volumes', 'expected a list of {"name", "mountpoint", "mode"?, "type"?}, ' ..
        'got an object')
    end
    n = n + 1
  end
  if n > VOLUMES_MAX then
    return bad('volumes', 'at most ' .. VOLUMES_MAX .. ' volumes, got ' .. n)
  end
  local at = {}
  for i, m in ipairs(asked_volumes) do
    local p = 'volumes[' .. (i - 1) .. ']'
    if type(m) ~= 'table' or m[1] ~= nil then
      return bad(p, 'expected {"name", "mountpoint", "mode"?, "type"?}, got ' .. cjson.encode(m))
    end
    for k in pairs(m) do
      if k ~= 'name' and k ~= 'mountpoint' and k ~= 'mode' and k ~= 'type' then
        return bad(p .. '.' .. tostring(k), 'unknown key (expected name, mountpoint, mode, type)')
      end
    end
    local fault = volume_name_fault(m.name)
    if fault then return bad(p .. '.name', fault) end
    local mp = m.mountpoint
    if type(mp) ~= 'string' then
      return bad(p .. '.mountpoint', 'required: an absolute path such as "/data", got ' ..
        cjson.encode(mp))
    end
    if #mp > MOUNTPOINT_MAX then
      return bad(p .. '.mountpoint', 'at most ' .. MOUNTPOINT_MAX .. ' characters, got ' .. #mp)
    end
    if string.sub(mp, 1, 1) ~= '/' or mp == '/' then
      return bad(p .. '.mountpoint', cjson.encode(mp) .. ' is not an absolute path below "/"')
    end
    if string.find(mp, '[%z\1-\31\127]') then
      return bad(p .. '.mountpoint', cjson.encode(mp) .. ' holds a control character')
    end
    -- A trailing "/" names the same directory: it is dropped, so "/d/" and "/d" clash.
    if #mp > 1 and string.sub(mp, -1) == '/' then mp = string.sub(mp, 1, -2) end
    for seg in string.gmatch(string.sub(mp, 2) .. '/', '([^/]*)/') do
      if seg == '' or seg == '.' or seg == '..' then
        return bad(p .. '.mountpoint', cjson.encode(m.mountpoint) .. ' has an empty, "." or ' ..
          '".." segment: a mountpoint names one directory, written plainly')
      end
    end
    if at[mp] then
      return bad(p .. '.mountpoint', mp .. ' is also the mountpoint of volumes[' .. (at[mp] - 1) ..
        ']: a directory holds one mount')
    end
    at[mp] = i
    for j, o in ipairs(mounts) do
      local inner, outer = mp, o.mountpoint
      if #inner < #outer then inner, outer = outer, inner end
      if string.sub(inner, 1, #outer + 1) == outer .. '/' then
        return bad(p .. '.mountpoint', mp .. ' overlaps the mountpoint ' .. o.mountpoint ..
          ' of volumes[' .. (j - 1) .. ']: a mount never lies inside another')
      end
    end
    local mode = m.mode
    if mode == nil or mode == NULL then mode = 'rw' end
    if mode ~= 'rw' and mode ~= 'ro' then
      return bad(p .. '.mode', 'expected "rw" or "ro", got ' .. cjson.encode(m.mode))
    end
    local vtype = m.type
    if vtype == nil or vtype == NULL then vtype = 'tritonnfs' end
    if vtype ~= 'tritonnfs' then
      return bad(p .. '.type', 'volume type ' .. cjson.encode(m.type) .. ' is not supported ' ..
        '(only "tritonnfs")')
    end
    mounts[i] = {name = m.name, mountpoint = mp, mode = mode, type = vtype}
  end
end

-- A disk layout's shape, which needs no package or image: a list of 1 to 8 objects
-- whose one member is "size" (a positive integer of MiB or "remaining", at most once),
-- which only the first (the boot disk) may leave out. A refusal, or nil.
local function is_list(t)
  local n = 0
  for k in pairs(t) do
    if type(k) ~= 'number' then return false end
    n = n + 1
  end
  return n == #t
end
local function layout_refusal(list, path)
  if type(list) ~= 'table' or not is_list(list) or #list == 0 then
    return bad(path, 'expected a list of 1 to ' .. DISKS_MAX .. ' of {}, {"size": MiB} or ' ..
      '{"size": "remaining"}, got ' .. cjson.encode(list))
  end
  if #list > DISKS_MAX then
    return bad(path, 'at most ' .. DISKS_MAX .. ' disks (PCI functions 0:4:0 to 0:4:7), got ' .. #list)
  end
  local rem
  for i, d in ipairs(list) do
    local p = path .. '[' .. (i - 1) .. ']'
    if type(d) ~= 'table' then return bad(p, 'expected an object, got ' .. cjson.encode(d)) end
    for k in pairs(d) do
      if type(k) ~= 'string' then return bad(p, 'expected an object, got a list') end
      if k ~= 'size' then return bad(p .. '.' .. k, 'unknown key: a disk asked for has only "size"') end
    end
    local size = d.size
    if size == nil or size == NULL then
      if i > 1 then
        return bad(p .. '.size', 'required for a disk other than the first (the boot disk, ' ..
          'which may take its image\'s size)')
      end
    elseif size == 'remaining' then
      if rem then
        return bad(p .. '.size', '"remaining" is also the size of ' .. path .. '[' .. (rem - 1) ..
          ']: at most one disk takes what the others leave')
      end
      rem = i
    elseif type(size) ~= 'number' or size ~= math.floor(size) or size < 1 then
      return bad(p .. '.size', 'expected a positive integer of MiB or "remaining", got ' ..
        cjson.encode(size))
    elseif size > DISK_SIZE_MAX then
      return bad(p .. '.size', string.format('%d', size) .. ' MiB is more than a disk file holds ' ..
        '(at most ' .. DISK_SIZE_MAX .. ' MiB, 64 TiB)')
    end
  end
  return nil
end
local asked_disks = a.disks
if asked_disks == NULL then asked_disks = nil end
if asked_disks ~= nil then
  local r = layout_refusal(asked_disks, 'disks')
  if r then return r end
end

-- What the names refer to.
local pkg_uuid = a.package
if redis.call('EXISTS', P .. 'package:' .. pkg_uuid) == 0 then
  pkg_uuid = redis.call('HGET', P .. 'package_names', a.package)
end
local pkg = pkg_uuid and get_json('package:' .. pkg_uuid)
if not pkg then return refuse(404, 'ResourceNotFound', 'package ' .. a.package .. ' does not exist') end
local img = get_json('image:' .. a.image_uuid)
if not img then return refuse(404, 'ResourceNotFound', 'image ' .. a.image_uuid .. ' does not exist') end
if server and redis.call('EXISTS', P .. 'server:' .. server) == 0 then
  return refuse(404, 'ResourceNotFound', 'server ' .. server .. ' does not exist')
end
if img.brand and img.brand ~= NULL and img.brand ~= pkg.brand then
  return bad('image_uuid', 'image ' .. img.name .. ' ' .. img.version .. ' is for brand ' ..
    img.brand .. ', package ' .. pkg.name .. ' is ' .. pkg.brand)
end
if #mounts > 0 and pkg.brand == 'kvm' then
  return bad('volumes', 'kvm instances cannot mount volumes (package ' .. pkg.name .. ' is kvm)')
end
local vm = get_json('vm:' .. a.vm_uuid)
if vm then
  return refuse(409, 'VmAlreadyExists', 'vm ' .. a.vm_uuid .. ' already exists (state ' .. vm.state .. ')')
end

-- As VMAPI: an alias names one live VM of an owner (a failed one does not count).
if alias ~= nil then
  for _, u in ipairs(redis.call('ZRANGE', P .. 'vms:alias:' .. alias, 0, 99)) do
    local other = get_json('vm:' .. u)
    if other and other.owner_uuid == a.owner_uuid and other.state ~= 'failed' then
      return refuse(409, 'DuplicateAlias', 'alias: ' .. alias .. ' already names vm ' .. u ..
        ' of owner ' .. a.owner_uuid)
    end
  end
end

local nets, asked = {}, {}
for i, n in ipairs(a.networks) do
  local path = 'networks[' .. (i - 1) .. ']'
  local nk = P .. 'network:' .. n.uuid
  local name = redis.call('HGET', nk, 'name')
  if not name then return refuse(404, 'ResourceNotFound', path .. ': network ' .. n.uuid .. ' does not exist') end
  local out = {uuid = n.uuid, primary = (n.primary == true) or (primaries == 0 and i == 1)}
  asked[n.uuid] = (asked[n.uuid] or 0) + 1
  if n.ip and n.ip ~= NULL then
    if not redis.call('ZSCORE', nk .. ':free', ip_int(n.ip)) then
      local state = redis.call('HGET', P .. 'ip:' .. n.uuid .. ':' .. n.ip, 'state')
      return refuse(409, 'IpTaken', path .. '.ip: ' .. n.ip .. (state and (' is ' .. state) or
        ' is outside the provision range') .. ' on network ' .. name .. ' (' .. n.uuid .. ')')
    end
    out.ip = n.ip
  elseif redis.call('ZCARD', nk .. ':free') < asked[n.uuid] then
    return refuse(409, 'SubnetFull', path .. ': network ' .. name .. ' (' .. n.uuid ..
      ') has no free address left in its provision range')
  end
  nets[i] = out
end

-- Each volume, read only (the volumes step decides again, atomically): one of this
-- owner's that exists must be usable and reachable on the VM's networks; one that
-- does not will be made (Docker semantics) on the VM's fabric networks of the owner.
local vm_nets = {}
for i, n in ipairs(nets) do vm_nets[i] = n.uuid end
for i, m in ipairs(mounts) do
  local p = 'volumes[' .. (i - 1) .. ']'
  local v = volume_get(volume_uuid_by_name(a.owner_uuid, m.name))
  if v then
    if v.state == 'deleting' or v.state == 'failed' then
      return refuse(409, 'VolumeNotReady', p .. ': volume ' .. m.name .. ' (' .. v.uuid .. ') is ' ..
        v.state)
    end
    if not volume_reachable(v, vm_nets) then
      return refuse(409, 'VolumeNotReachable', p .. ': volume ' .. m.name .. ' (' .. v.uuid ..
        ') is reachable on networks ' .. table.concat(v.networks or {}, ', ') ..
        ', none of which the vm is on')
    end
  elseif #fabric_networks_of(a.owner_uuid, vm_nets) == 0 then
    return refuse(409, 'VolumeNotReachable', p .. ': volume ' .. m.name .. ' does not exist ' ..
      'and would be created on the vm\'s fabric networks of owner ' .. a.owner_uuid ..
      ', but the vm is on none')
  end
end

-- The disks (docs/DATACENTER.md "Disks"). A flexible package's disk_mib is the space of
-- all disks together; an inflexible one's instances get the traditional layout.
local function space(code_path, msg) return refuse(409, 'InsufficientSpace', code_path .. ': ' .. msg) end
local image_name = 'image ' .. img.name .. ' ' .. img.version .. ' (' .. img.size_mib .. ' MiB)'
local flexible = pkg.flexible_disk == true
local disks, quota, reservation, flexible_disk_size
if not flexible then
  if asked_disks ~= nil then
    return bad('disks', 'package ' .. pkg.name .. ' is not a flexible_disk package: its instances ' ..
      'have the traditional layout, a boot disk at the image\'s size and a data disk of ' ..
      pkg.disk_mib .. ' MiB')
  end
  disks = {{boot = true, size = img.size_mib, image = img.uuid}, {boot = false, size = pkg.disk_mib}}
  quota = pkg.disk_mib
  reservation = img.size_mib + pkg.disk_mib
  flexible_disk_size = NULL
else
  local fds = pkg.disk_mib
  if img.size_mib > fds then
    return space('image_uuid', image_name .. ' does not fit the ' .. fds ..
      ' MiB of flexible disk space of package ' .. pkg.name)
  end
  local layout, path = asked_disks, 'disks'
  if layout == nil and pkg.disks ~= nil and pkg.disks ~= NULL then
    layout, path = pkg.disks, 'package ' .. pkg.name .. ' disks'
    -- The description's checks made it; a record written another way is checked too.
    local r = layout_refusal(layout, path)
    if r then return r end
  end
  if layout == nil then
    -- The default: the boot disk at the image's size, a data disk of the rest.
    layout = {{}}
    if fds > img.size_mib then layout[2] = {size = fds - img.size_mib} end
  end
  disks = {}
  local given, rem, terms = 0, nil, {}
  for i, d in ipairs(layout) do
    local size = d.size
    if size == NULL then size = nil end
    if i == 1 and size == nil then size = img.size_mib end
    if i == 1 and type(size) == 'number' and size < img.size_mib then
      return bad(path .. '[0].size', size .. ' MiB is smaller than ' .. image_name ..
        ': a disk is never made smaller than its image')
    end
    if size == 'remaining' then
      rem = i
      terms[i] = 'remaining'
    else
      given = given + size
      terms[i] = tostring(size)
    end
    disks[i] = {boot = i == 1, size = size}
  end
  disks[1].image = img.uuid
  local sum = table.concat(terms, ' + ')
  if rem then
    local left = fds - given
    if left <= 0 or (rem == 1 and left < img.size_mib) then
      return space(path .. '[' .. (rem - 1) .. '].size', '"remaining" comes to ' .. left ..
        ' MiB (' .. fds .. ' MiB of flexible disk space of package ' .. pkg.name .. ' less ' ..
        given .. ' MiB of the other disks' .. (rem == 1 and (', and the boot disk needs the ' ..
        image_name .. ')') or ')'))
    end
    disks[rem].size = left
  elseif given > fds then
    return space(path, 'the disks come to ' .. given .. ' MiB (' .. sum .. '), more than the ' ..
      fds .. ' MiB of flexible disk space of package ' .. pkg.name)
  end
  quota = tonumber(pkg.quota_mib) or 0
  reservation = quota + fds
  flexible_disk_size = fds
end

return ok({package = pkg, image = img, networks = nets, server_uuid = server or NULL,
  brand = pkg.brand, ram = pkg.ram_mib, vcpus = pkg.vcpus, disks = disks, flexible = flexible,
  flexible_disk_size = flexible_disk_size, quota = quota, reservation = reservation,
  volumes = mounts})
