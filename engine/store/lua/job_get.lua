-- include: prelude snapshot
-- job_get.lua: one consistent snapshot of a job.
-- ARGV: 3 uuid
-- Returns {} when missing, else {fields (HGETALL), chain results, onerror results,
--         oncancel results, state (HGETALL), history, server now}
return job_snapshot(ARGV[3], now_ms()) or {}
