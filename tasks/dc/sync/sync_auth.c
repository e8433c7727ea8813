/*
 * sync_auth.c -- the sender's proof that it holds the migration's secret (sync_auth.h).
 */
#include "sync_auth.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

bool sync_uuid_ok(const char *s)
{
    if (!s || strlen(s) != SYNC_UUID_LEN)
        return false;
    for (int i = 0; i < SYNC_UUID_LEN; i++) {
        char c = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-'
                 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

int sync_auth_mac(const char *secret, const uint8_t nonce[SYNC_NONCE_LEN],
                  const char *migration_uuid, uint8_t mac[SYNC_HASH_LEN])
{
    uint8_t msg[SYNC_NONCE_LEN + 256];
    size_t ulen = strlen(migration_uuid);
    if (ulen > 256)
        return -EINVAL;
    memcpy(msg, nonce, SYNC_NONCE_LEN);
    memcpy(msg + SYNC_NONCE_LEN, migration_uuid, ulen);
    unsigned int n = SYNC_HASH_LEN;
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, SYNC_NONCE_LEN + ulen, mac, &n))
        return -EIO;
    return 0;
}

int sync_auth_nonce(uint8_t nonce[SYNC_NONCE_LEN])
{
    return RAND_bytes(nonce, SYNC_NONCE_LEN) == 1 ? 0 : -EIO;
}

bool sync_auth_check(const char *secret, const uint8_t nonce[SYNC_NONCE_LEN],
                     const char *migration_uuid, const uint8_t mac[SYNC_HASH_LEN])
{
    uint8_t want[SYNC_HASH_LEN];
    if (sync_auth_mac(secret, nonce, migration_uuid, want) < 0)
        return false;
    return CRYPTO_memcmp(want, mac, SYNC_HASH_LEN) == 0;
}

int sync_session_load(const char *root, const char *vm_uuid, char *migration_uuid, char *secret,
                      char *err, size_t errlen)
{
    char path[PATH_MAX];
    json_error_t jerr;
    if (snprintf(path, sizeof path, "%s/%s/.migration/session.json", root, vm_uuid) >=
        (int)sizeof path) {
        snprintf(err, errlen, "session path too long");
        return -ENAMETOOLONG;
    }
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        snprintf(err, errlen, "no migration session for vm %s (%s)", vm_uuid, jerr.text);
        return -ENOENT;
    }
    const char *m = json_string_value(json_object_get(doc, "migration_uuid"));
    const char *s = json_string_value(json_object_get(doc, "secret"));
    int rc = 0;
    if (!m || !sync_uuid_ok(m) || !s || !*s || strlen(s) >= SYNC_SECRET_MAX) {
        snprintf(err, errlen, "%s: expected {\"migration_uuid\": uuid, \"secret\": text}", path);
        rc = -EINVAL;
    } else {
        snprintf(migration_uuid, SYNC_UUID_LEN + 1, "%s", m);
        snprintf(secret, SYNC_SECRET_MAX, "%s", s);
    }
    json_decref(doc);
    return rc;
}

void sync_secret_wipe(char *secret, size_t n)
{
    volatile char *v = secret;
    for (size_t i = 0; i < n; i++)
        v[i] = '\0';
}
