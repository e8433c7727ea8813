/* TEMPORARY stand-in of the block transfer's sender API (tasks/dc/sync/sync_send.h),
 * so the agent's migration tasks build before the transfer is merged. Remove this
 * directory when tasks/dc/sync/ is in the tree. */
#ifndef DC_SYNC_SEND_H
#define DC_SYNC_SEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sync_counters {
    atomic_uint_fast64_t total, sent, wire, blocks, holes;
} sync_counters_t;

typedef struct sync_send_opts {
    const char *instance_dir;
    const char *vm_uuid, *migration_uuid, *secret, *addr;
    uint64_t rate_bytes_s;
    uint32_t block_size, window_blocks;
    uint32_t connect_timeout_ms;
} sync_send_opts_t;

typedef struct sync_pass_result {
    uint64_t total, sent, wire, blocks, holes, truncates, duration_ms;
    bool stopped;
} sync_pass_result_t;

int sync_send_pass(const sync_send_opts_t *o, sync_counters_t *c, const atomic_bool *stop,
                   sync_pass_result_t *r, char *err, size_t errlen);

#endif
