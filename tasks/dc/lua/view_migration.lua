-- GET /migrations/:uuid[?owner_uuid]: one migration by its uuid, or a VM's latest
-- migration by the VM's uuid (the CLI takes either). Another owner's is answered as
-- absent. Never shows `secret`. While a job of the migration waits for a migration
-- slot, `waiting_for_slot` says so (and its `progress`); a begin waiting for its slot
-- has no record yet: it is answered from its wait (mig_waiting_begin), by its uuid or
-- as the VM's newest migration.
local m, w = mig_lookup_viewed(Q.uuid, Q.owner_uuid)
if w then return mig_enc(w) end
if not m then
  return redis.error_reply('REFUSED 404 MigrationNotFound no migration ' .. tostring(Q.uuid) ..
    ' (nor a migration of a vm of that uuid)')
end
return mig_enc(mig_public_waiting(m))
