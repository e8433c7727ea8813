-- include: prelude
-- job_info_get.lua: a job's info list (GET /jobs/:uuid/info), oldest entry first.
-- ARGV: 3 uuid
-- Returns {'OK', {entry JSON, ...}} | {'NOTFOUND'}
local k = jkey(ARGV[3])
if redis.call('EXISTS', k) == 0 then
    return {'NOTFOUND'}
end
return {'OK', redis.call('LRANGE', k .. ':info', 0, -1)}
