-- GET /nics[?belongs_to_uuid&cn_uuid]: the NICs by MAC.
local walk = 'nics'
if Q.belongs_to_uuid then walk = 'nics:belongs_to:' .. Q.belongs_to_uuid
elseif Q.cn_uuid then walk = 'nics:cn:' .. Q.cn_uuid end
local keep = nil
if Q.belongs_to_uuid and Q.cn_uuid then
  keep = function(n) return n.cn_uuid == Q.cn_uuid end
end
return page(P .. walk, function(m) return get_json('nic:' .. m) end, keep)
