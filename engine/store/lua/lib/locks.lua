-- include: prelude
-- lib/locks.lua: the table of unfinished jobs' locks (target patterns) and the size
-- their compiled forms take.

-- {'LOCKS', version, job1, pattern1, ...}, the table of locks of unfinished jobs, when
-- the caller's copy (version `seen`) is stale; nil when it is current. A create or a
-- retry answers with it instead of storing: the caller matches its target again.
local function locks_if_stale(seen)
    local version = redis.call('GET', P .. 'locks:version') or '0'
    if version == seen then
        return nil
    end
    local out = {'LOCKS', version}
    local all = redis.call('HGETALL', P .. 'locks')
    for i = 1, #all do
        out[#out + 1] = all[i]
    end
    return out
end

-- The size of the locks of unfinished jobs: locks:sizes maps each job of the locks hash
-- that has a size to the instructions of its compiled lock (what a process keeps in
-- memory and matches every create against), and locks:size is their sum. Only the
-- scripts that write the locks hash change them, in the same call (job_create.lua and
-- job_redrive.lua add, finish drops), so they move together; a lock stored by an earlier
-- version has no size and counts 0.

-- The instructions held now when a lock of `size` would take them past `cap`; nil when
-- it fits. With no lock held, a sum left over (by an earlier version's writes) is
-- cleared first.
local function locks_size_fits(size, cap)
    if redis.call('HLEN', P .. 'locks') == 0 then
        redis.call('DEL', P .. 'locks:size', P .. 'locks:sizes')
    end
    local held = tonumber(redis.call('GET', P .. 'locks:size') or '0')
    if held + size > cap then
        return held
    end
    return nil
end

-- Counts the lock of `uuid`, of `size` instructions (replacing a size it had).
local function locks_size_add(uuid, size)
    local was = tonumber(redis.call('HGET', P .. 'locks:sizes', uuid) or '0')
    redis.call('HSET', P .. 'locks:sizes', uuid, size)
    redis.call('INCRBY', P .. 'locks:size', size - was)
end

-- Stops counting the lock of `uuid` (it was taken out of the locks hash).
local function locks_size_drop(uuid)
    local size = redis.call('HGET', P .. 'locks:sizes', uuid)
    if size then
        redis.call('HDEL', P .. 'locks:sizes', uuid)
        redis.call('DECRBY', P .. 'locks:size', size)
    end
end
