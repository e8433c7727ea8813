/*
 * sync_digest.c -- a disk's content digest (sync_digest.h).
 */
#include "sync_digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sync_block.h"

int sync_disk_digest(const char *path, uint32_t block_size, char hex[65], uint64_t *size, char *err,
                     size_t errlen)
{
    int rc = 0;
    uint8_t *buf = NULL;
    EVP_MD_CTX *md = NULL;
    int fd = -1;
    if (block_size < SYNC_BLOCK_MIN || block_size > SYNC_BLOCK_MAX || block_size % SYNC_BLOCK_MIN) {
        snprintf(err, errlen, "digest of %s: block size %u is not a multiple of %u up to %u", path,
                 block_size, SYNC_BLOCK_MIN, SYNC_BLOCK_MAX);
        return -EINVAL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "digest of %s: %s", path, strerror(errno));
        goto out;
    }
    uint64_t sz = (uint64_t)st.st_size;
    buf = malloc(block_size);
    md = EVP_MD_CTX_new();
    if (!buf || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        rc = -ENOMEM;
        snprintf(err, errlen, "digest of %s: out of memory", path);
        goto out;
    }
    uint64_t idx = 0;
    for (;;) {
        rc = sync_block_next_data(fd, sz, block_size, &idx);
        if (rc == 0)
            break;
        if (rc < 0 || (rc = sync_block_read(fd, sz, block_size, idx, buf)) < 0) {
            snprintf(err, errlen, "digest of %s: block %llu: %s", path, (unsigned long long)idx,
                     strerror(-rc));
            goto out;
        }
        uint32_t len = sync_block_len(sz, block_size, idx);
        if (!sync_block_is_zero(buf, len)) {
            uint8_t rec[8 + SYNC_HASH_LEN];
            sync_le64(rec, idx);
            sync_block_sha256(buf, len, rec + 8);
            EVP_DigestUpdate(md, rec, sizeof rec);
        }
        idx++;
    }
    uint8_t tail[8], out[SYNC_HASH_LEN];
    unsigned int n = sizeof out;
    sync_le64(tail, sz);
    EVP_DigestUpdate(md, tail, sizeof tail);
    EVP_DigestFinal_ex(md, out, &n);
    for (int i = 0; i < SYNC_HASH_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", out[i]);
    *size = sz;
    rc = 0;
out:
    EVP_MD_CTX_free(md);
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}
