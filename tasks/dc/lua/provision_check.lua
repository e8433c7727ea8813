-- dc.provision_check: the admission check of a provision. Reads only. ARGV[1]: the
-- provision's fields ({"vm_uuid", "owner_uuid", "alias"?, "package", "image_uuid",
-- "networks", "server_uuid"?, "autoboot"?, "customer_metadata"?, "target"}). Each fault
-- refuses with the code the docs give (docs/DATACENTER.md "Refusals"), naming it.
local a = cjson.decode(ARGV[1])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'

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
if img.size_mib > pkg.disk_mib then
  return bad('image_uuid', 'image ' .. img.name .. ' ' .. img.version .. ' (' .. img.size_mib ..
    ' MiB) does not fit the disk of package ' .. pkg.name .. ' (' .. pkg.disk_mib .. ' MiB)')
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

local disks = {{boot = true, size = img.size_mib, image_uuid = img.uuid}}
if pkg.disk_mib > img.size_mib then disks[2] = {size = pkg.disk_mib - img.size_mib} end
return ok({package = pkg, image = img, networks = nets, server_uuid = server or NULL,
  brand = pkg.brand, ram = pkg.ram_mib, quota = pkg.disk_mib, vcpus = pkg.vcpus,
  disks = disks})
