/*
 * sync_send.h -- one pass of a migration's block transfer, run on the source agent:
 * connect to the target agent's listener (sync_listener.h), prove the migration's
 * secret, ask for the target's manifest, walk every source disk
 * (<instance_dir>/disks/disk<N>.img) by its data extents, and send only the blocks
 * whose SHA-256 differs from the target's entry; punch the blocks the source now has
 * as holes (an all-zero block is a hole), resize, create and remove disks; send the
 * instance's vm.json; end with pass-end, answered once the target made it durable.
 *
 * The walk comes first, so `total` is known before the first block goes. A window is
 * window_blocks blocks (data or punched) of one disk; the target makes each window
 * durable as a whole, so a pass killed at any point leaves at most one window to send
 * again. `*stop` is read between windows: a stopped pass makes what it sent durable
 * and returns 0 with result.stopped.
 *
 * A disk's generation is "<st_ino>-<id>" (the file's inode and the disk's `id` in
 * vm.json): when the target's manifest was made against another generation (the
 * instance was reprovisioned between passes), the disk is sent whole from an emptied
 * file: stale blocks are never mixed in.
 *
 * Thread-safe: a pass touches nothing but its options, its counters and its own
 * socket and files; several passes (of different instances) may run at once.
 */
#ifndef DC_SYNC_SEND_H
#define DC_SYNC_SEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_manifest.h" /* SYNC_DISKS_MAX */

/* The walk reads `*stop` before every this many source data blocks it compares, so
 * after a stop it reads and hashes at most this many blocks: as many as the default
 * window (migration_window_blocks 16), so a stop during the walk waits no longer than
 * one during the sending, 16 MiB at the default 1 MiB blocks. The check costs one
 * atomic load per this many block reads and SHA-256s: nothing next to them. */
#define SYNC_WALK_STOP_BLOCKS 16u

/* What a pass has done so far, updated as it goes: another thread (the task's timer)
 * may read them at any time. total: bytes of data blocks the pass sends (known once
 * the walk is done, before the first block goes; lowered when a block the target
 * lacks turns out all zero as it is sent); sent: of those, sent so far; wire: every
 * byte on the socket, both ways (frames, manifest, vm.json); blocks: data blocks
 * sent; holes: blocks punched; walked: source data blocks the walk compared with the
 * target's manifest so far (it grows while no byte moves: send_pace.h). */
typedef struct sync_counters {
    atomic_uint_fast64_t total, sent, wire, blocks, holes, walked;
} sync_counters_t;

typedef struct sync_send_opts {
    const char *instance_dir;                             /* <source root>/<vm uuid> */
    const char *vm_uuid, *migration_uuid, *secret, *addr; /* addr: "127.0.0.1:PORT" */
    uint64_t rate_bytes_s;                                /* 0: unlimited */
    uint32_t block_size, window_blocks;
    uint32_t connect_timeout_ms; /* retry connecting (a target agent restarting) this long */
    /* An image pass (sync_image.h) instead of the instance's disks: the source's copy
     * of the image (its data blocks sent, its digest announced) and its uuid, the name
     * of the target's <root>/images/<uuid>.img. instance_dir is then not read. */
    const char *image_path, *image_uuid;
    /* Also compute each disk's digest (sync_digest.h) from the block hashes the pass
     * takes anyway, so a final pass need not read the disks again: r->digests. */
    bool digests;
} sync_send_opts_t;

typedef struct sync_pass_result {
    uint64_t total, sent, wire, blocks, holes, truncates, duration_ms;
    bool stopped; /* *stop became true: ended at a window boundary or during the walk */
    /* Disks the pass made new on the target, removed from it, and sent whole because
     * their generation changed. */
    uint32_t disks_created, disks_removed, disks_reset;
    bool image_present; /* an image pass: the target had the image already, nothing sent */
    /* With o->digests and a pass not stopped: disk n's digest and size, as
     * sync_disk_digest computes them from the file, when digested[n]. */
    bool digested[SYNC_DISKS_MAX];
    char digest[SYNC_DISKS_MAX][65];
    uint64_t digest_size[SYNC_DISKS_MAX];
    /* A storage instance (its export/ present, sync_tree.h): its trees went after the
     * disks. tree_digest is the source's listing's digest as this pass walked it:
     * with the share stopped (a final pass), the digest the verify compares. */
    bool tree;
    uint64_t tree_entries, tree_files_sent, tree_removed;
    char tree_digest[65];
} sync_pass_result_t;

/* Runs one pass. c (may be NULL) is zeroed first and updated as the pass goes; stop
 * may be NULL. Returns 0 (r filled, r->stopped when stopped), or a negative errno with
 * err naming the problem: -EACCES "TransferRefused: ..." when the target refused the
 * sender's proof (a wrong secret, no session for the instance), -ECONNREFUSED /
 * -ETIMEDOUT when no listener answered within connect_timeout_ms, -EINVAL for bad
 * options, -EIO with the target's own message when it failed. */
int sync_send_pass(const sync_send_opts_t *o, sync_counters_t *c, const atomic_bool *stop,
                   sync_pass_result_t *r, char *err, size_t errlen);

#endif
