-- include: prelude
-- lib/schedules.lua: the keys of recurring schedules (engine/store/store.h) and the
-- wake-up of the processes that fire them. A schedule's next tick is computed in C
-- (cron and time zones are read there): scripts store the times they are given, and
-- refuse to move a schedule back to a tick it has fired.

local SCHED_DUE, SCHED_ALL, SCHED_NAMES = P .. 'sched:due', P .. 'sched:all', P .. 'sched:names'

local function skey(uuid)
    return P .. 'sched:' .. uuid
end

-- Every firer arms its timer to the earliest due time it heard of: tell them when
-- `uuid`, due at `due`, is now the earliest.
local function sched_wake_if_first(uuid, due)
    local first = redis.call('ZRANGE', SCHED_DUE, 0, 0)
    if first[1] == uuid then
        redis.call('PUBLISH', P .. 'sched:wake', time_text(due))
    end
end
