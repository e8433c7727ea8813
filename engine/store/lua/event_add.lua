-- include: prelude events
-- event_add.lua: appends an event C built that the job's record does not tell (a
-- task's progress) to the job's stream, started if need be, and to the global one.
-- ARGV: 3 uuid, 4 event JSON
-- Returns 1 | 0 (no such job: the event went to the global stream only)
event_raw(ARGV[3], ARGV[4])
return STREAMS[ARGV[3]] and 1 or 0
