-- GET /migrations/:uuid/watch[?owner_uuid]: what a watch starts from (a streaming
-- view: the engine writes the lines, then follows the stream). By the migration's or
-- its VM's uuid. Answers {"lines": [the history entries, the latest progress event
-- while running, else the end event], "follow": "migration:<uuid>:events" while
-- running, else null, "after": the stream's last id read here}. The record and the
-- stream's last id are read in this one script, so a watcher misses no event written
-- after the history it got, and gets none twice.
--
-- While a job of the migration waits for a migration slot, the lines end with the
-- engine's `hold_wait` event of that wait and the stream is followed even when the
-- migration is not running: its grant (`hold_granted`), then the phase's progress and
-- its end follow there. A begin waiting for its slot, without a record yet, is
-- followed the same way from its wait alone.
local m, w = mig_lookup_viewed(Q.uuid, Q.owner_uuid)
if w then
  local key = mig_events_key(w.uuid)
  local last = redis.call('XREVRANGE', P .. key, '+', '-', 'COUNT', 1)
  local ev = mig_slot_waits_in(key)[1]
  return mig_enc({lines = {ev}, follow = key, after = (#last > 0) and last[1][1] or '0-0'})
end
if not m then
  return redis.error_reply('REFUSED 404 MigrationNotFound no migration ' .. tostring(Q.uuid) ..
    ' (nor a migration of a vm of that uuid)')
end
local key = mig_events_key(m.uuid)
local last = redis.call('XREVRANGE', P .. key, '+', '-', 'COUNT', 1)
local after = (#last > 0) and last[1][1] or '0-0'
local lines = {}
for _, e in ipairs(m.progress_history or {}) do lines[#lines + 1] = e end
local follow = NULL
local wait = mig_wait_of(m, mig_slot_waits(m.vm_uuid))
if wait then
  lines[#lines + 1] = wait
  follow = key
elseif m.state == 'running' then
  -- The live line of the phase running (a progress event of an earlier phase is stale).
  if mig_given(m.progress) and m.progress.type == 'progress' and m.progress.phase == m.phase then
    lines[#lines + 1] = m.progress
  end
  follow = key
else
  -- The end event as written when the migration stopped, else (trimmed away) as the
  -- record says it.
  local ev
  for _, entry in ipairs(redis.call('XREVRANGE', P .. key, '+', '-', 'COUNT', 50)) do
    local f = entry[2]
    for i = 1, #f, 2 do
      if f[i] == 'e' then
        local o = cjson.decode(f[i + 1])
        if o.type == 'end' and o.state == m.state then ev = o end
      end
    end
    if ev then break end
  end
  if not ev then
    ev = {type = 'end', phase = m.phase, state = m.state}
    if m.state == 'failed' and mig_given(m.error) then ev.message = m.error end
  end
  lines[#lines + 1] = ev
end
return mig_enc({lines = lines, follow = follow, after = after})
