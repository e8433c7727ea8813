/*
 * sync_block.h -- a disk seen as blocks: which blocks hold data (SEEK_DATA), a block's
 * bytes, its SHA-256, and whether it is all zero (a hole, whatever the file system
 * has allocated). Block i covers bytes [i * block_size, min((i + 1) * block_size,
 * size)): the last block of a disk may be short, and its hash is over its real length.
 *
 * Thread-safe: only the caller's descriptors and buffers.
 */
#ifndef DC_SYNC_BLOCK_H
#define DC_SYNC_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_wire.h"

/* Bounds on block_size (bytes) both sides accept: a multiple of 4 KiB, at most 64 MiB. */
#define SYNC_BLOCK_MIN 4096u
#define SYNC_BLOCK_MAX (64u << 20)

/* Number of blocks of a disk of `size` bytes. */
uint64_t sync_block_count(uint64_t size, uint32_t block_size);

/* Length in bytes of block idx of a disk of `size` bytes (0 past the end). */
uint32_t sync_block_len(uint64_t size, uint32_t block_size, uint64_t idx);

/* The first block index >= *idx that holds file data by SEEK_DATA, into *idx. Returns 1
 * when found, 0 when none remains before `size`, or -errno. */
int sync_block_next_data(int fd, uint64_t size, uint32_t block_size, uint64_t *idx);

/* Reads block idx (its whole length) into buf. 0 or -errno (-EIO when short). */
int sync_block_read(int fd, uint64_t size, uint32_t block_size, uint64_t idx, uint8_t *buf);

bool sync_block_is_zero(const uint8_t *buf, size_t len);

void sync_block_sha256(const uint8_t *buf, size_t len, uint8_t out[SYNC_HASH_LEN]);

/* The hash a manifest entry holds for a block whose content is not known (written in
 * part when the receiver stopped): it equals no block's SHA-256 the sender computes,
 * so the block is sent again, or punched if the source has a hole there. */
extern const uint8_t sync_hash_unknown[SYNC_HASH_LEN];

#endif
