-- GET /nics[?belongs_to_uuid&cn_uuid]: the NICs by MAC. A VM's NICs are read from its
-- record (a VM has few; no index of its own costs a key per VM).
local keep = nil
if Q.cn_uuid then keep = function(n) return n.cn_uuid == Q.cn_uuid end end
if Q.belongs_to_uuid then
  local vm = get_json('vm:' .. Q.belongs_to_uuid)
  local nics = {}
  for _, n in ipairs(vm and vm.nics or {}) do
    if (keep == nil or keep(n)) and (MARKER == '' or n.mac > MARKER) then nics[#nics + 1] = n end
  end
  table.sort(nics, function(x, y) return x.mac < y.mac end)
  local out = {}
  for i = (MARKER == '' and OFFSET or 0) + 1, #nics do
    if #out == LIMIT then return {enc(out), out[#out].mac} end
    out[#out + 1] = nics[i]
  end
  return {#out == 0 and '[]' or enc(out), false}
end
local walk = Q.cn_uuid and 'nics:cn:' .. Q.cn_uuid or 'nics'
return page(P .. walk, function(m) return get_json('nic:' .. m) end, nil)
