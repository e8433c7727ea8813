-- GET /migrations/:uuid[?owner_uuid]: one migration by its uuid, or a VM's latest
-- migration by the VM's uuid (the CLI takes either). Another owner's is answered as
-- absent. Never shows `secret`.
local m = mig_find_viewed(Q.uuid, Q.owner_uuid)
if not m then
  return redis.error_reply('REFUSED 404 MigrationNotFound no migration ' .. tostring(Q.uuid) ..
    ' (nor a migration of a vm of that uuid)')
end
return mig_enc(mig_public(m))
