/*
 * sync_auth.h -- how a receiver knows the sender is the migration's own: the receiver
 * sends a random nonce, the sender answers HMAC-SHA256(secret, nonce || migration_uuid)
 * keyed with the migration's secret (its 64 hex characters as text), and the receiver
 * compares it in constant time with what it computes from the secret the target agent
 * was given (`<root>/<vm>/.migration/session.json`, written by dc.migration_recv_open:
 * {"migration_uuid", "secret"}). A fresh nonce per connection: an answer recorded
 * once is worth nothing later.
 *
 * Thread-safe.
 */
#ifndef DC_SYNC_AUTH_H
#define DC_SYNC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_wire.h"

#define SYNC_UUID_LEN   36
#define SYNC_SECRET_MAX 256

/* true for a lowercase or uppercase 8-4-4-4-12 hex uuid: the only vm_uuid a path is
 * ever built from. */
bool sync_uuid_ok(const char *s);

/* HMAC-SHA256(secret, nonce || migration_uuid) into mac. 0 or -EIO. */
int sync_auth_mac(const char *secret, const uint8_t nonce[SYNC_NONCE_LEN],
                  const char *migration_uuid, uint8_t mac[SYNC_HASH_LEN]);

/* Overwrites a secret's n bytes with zeros in a way the compiler keeps (a volatile
 * write per byte), so a freed buffer does not hold it. OpenSSL_cleanse would do too;
 * this keeps the callers free of OpenSSL's headers. */
void sync_secret_wipe(char *secret, size_t n);

/* Fills nonce with random bytes. 0 or -EIO. */
int sync_auth_nonce(uint8_t nonce[SYNC_NONCE_LEN]);

/* Reads <root>/<vm_uuid>/.migration/session.json: its migration_uuid (37 bytes) and
 * secret (SYNC_SECRET_MAX). 0; -ENOENT when there is none; -EINVAL when it is not the
 * right shape. err says which. */
int sync_session_load(const char *root, const char *vm_uuid, char *migration_uuid, char *secret,
                      char *err, size_t errlen);

/* Whether the sender's mac is right for this session: computed, then compared in
 * constant time. */
bool sync_auth_check(const char *secret, const uint8_t nonce[SYNC_NONCE_LEN],
                     const char *migration_uuid, const uint8_t mac[SYNC_HASH_LEN]);

#endif
