-- include: prelude events
-- job_events_open.lua: makes sure a job has its own event stream before a watcher
-- reads it (GET /jobs/:uuid/events, `ternd run`): a job whose record still tells its
-- whole story has none (see job_stream_open in lib/events.lua), so one is started from
-- the record, under the ids job_history.c gives the same events.
-- ARGV: 3 uuid
-- Returns 1 (the job exists and has its stream) | 0 (no such job)
return job_stream_open(ARGV[3]) and 1 or 0
