-- GET /volumesizes[?type]: the sizes a volume may have, ascending: [{size (MiB),
-- type}]. type is tritonnfs (the default) or refused.
if Q.type and Q.type ~= 'tritonnfs' then
  return redis.error_reply('REFUSED 409 InvalidArgument type: Volume type: ' .. cjson.encode(Q.type) ..
    ' is not supported (only tritonnfs)')
end
local out = {}
for i, s in ipairs(VOLUME_SIZES) do out[i] = {size = s, type = 'tritonnfs'} end
return cjson.encode(out)
