/*
 * sync_block.c -- blocks of a disk file (sync_block.h).
 */
#include "sync_block.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

const uint8_t sync_hash_unknown[SYNC_HASH_LEN] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

uint64_t sync_block_count(uint64_t size, uint32_t block_size)
{
    return (size + block_size - 1) / block_size;
}

uint32_t sync_block_len(uint64_t size, uint32_t block_size, uint64_t idx)
{
    uint64_t at = idx * block_size;
    if (at >= size)
        return 0;
    uint64_t left = size - at;
    return left < block_size ? (uint32_t)left : block_size;
}

int sync_block_next_data(int fd, uint64_t size, uint32_t block_size, uint64_t *idx)
{
    uint64_t from = *idx * block_size;
    if (from >= size)
        return 0;
    off_t d = lseek(fd, (off_t)from, SEEK_DATA);
    if (d < 0)
        return errno == ENXIO ? 0 : -errno;
    if ((uint64_t)d >= size)
        return 0;
    *idx = (uint64_t)d / block_size;
    return 1;
}

int sync_block_read(int fd, uint64_t size, uint32_t block_size, uint64_t idx, uint8_t *buf)
{
    uint32_t len = sync_block_len(size, block_size, idx);
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)(idx * block_size + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0) {
            /* The file is shorter than it was when its size was read: the rest reads
             * as zeros, as it will once the size is set again. */
            memset(buf + got, 0, len - got);
            return 0;
        }
        got += (size_t)r;
    }
    return 0;
}

bool sync_block_is_zero(const uint8_t *buf, size_t len)
{
    /* Word at a time; the first non-zero word of a data block is usually early. */
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, buf + i, 8);
        if (w)
            return false;
    }
    for (; i < len; i++)
        if (buf[i])
            return false;
    return true;
}

void sync_block_sha256(const uint8_t *buf, size_t len, uint8_t out[SYNC_HASH_LEN])
{
    unsigned int n = SYNC_HASH_LEN;
    /* EVP_Digest never fails for SHA-256 on valid arguments short of allocation. */
    if (!EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL))
        memcpy(out, sync_hash_unknown, SYNC_HASH_LEN);
}
