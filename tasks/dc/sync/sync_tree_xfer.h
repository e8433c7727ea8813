/*
 * sync_tree_xfer.h -- the part of a pass that carries a storage instance's trees
 * (sync_tree.h) after its disks, on the same authenticated connection (sync_wire.h):
 *
 *   S: TREE_REQ {u32 block_size}
 *   R: TREE_ENTRIES {entry...} (as many frames as needed), TREE_LIST_END {}
 *        entry: str path, u8 kind, u32 mode, u64 size, str hash-or-link-target
 *   S: TREE_REMOVE {str path}   what the target has and the source has not (or has
 *                               as another kind), deepest first
 *      TREE_DIR {str path, u32 mode}            made, or its mode set
 *      TREE_LINK {str path, str target}         made or replaced
 *      TREE_FILE {str path, u32 mode, u64 size, i64 mtime_s, u32 mtime_ns}, then
 *        TREE_DATA {u64 block index, bytes} per block that is not all zero, then
 *        TREE_FILE_END {}                       a file sent whole
 *      ... in path order (a directory before what it holds), then
 *      TREE_DONE {u8 stopped}
 *
 * Change is detected by content: both sides list their trees at the start of the
 * part, hashing every file (the target its own copies, the source its originals), and
 * a file is sent when its hash, size or mode differs. A write racing the pass cannot
 * leave a stale file looking unchanged: the next pass hashes both sides again and
 * sees the difference, whatever the times say; the final pass, made with the share
 * stopped, has nothing racing it, so after it the trees are equal (and the verify's
 * digest, computed by the target from its files, checks it).
 *
 * The target makes each file durable on its own: written into
 * <instance>/.migration/tree.part, fsynced, its mode and mtime set, renamed over its
 * path, the directory fsynced; a link likewise through .migration/tree.link. A pass
 * killed at any point leaves every path either as before or whole, and the next pass
 * lists what the target has. A path a peer names is checked (sync_tree_path_ok) and
 * every directory on the way to it must be a real directory, never a symlink.
 */
#ifndef DC_SYNC_TREE_XFER_H
#define DC_SYNC_TREE_XFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_rate.h"
#include "sync_send.h"
#include "sync_wire.h"

typedef struct sync_tree_result {
    uint64_t entries; /* the source's entries, as walked */
    uint64_t files_sent, dirs_made, links_made, removed;
    char digest[65]; /* the source's listing's digest (sync_tree_digest), as walked */
    bool stopped;
} sync_tree_result_t;

/* The source's side, on a connection past its disks: lists `dir`'s trees, reads the
 * target's listing, sends what differs. Adds the bytes of the files it sends to c's
 * total and sent; paces them by rate (may be NULL). block holds block_size bytes.
 * 0 (r filled; r->stopped when *stop became true between files), or -errno with err. */
int sync_tree_send(int fd, const char *dir, uint32_t block_size, sync_rate_t *rate,
                   sync_counters_t *c, const atomic_bool *stop, sync_buf_t *in, sync_buf_t *out,
                   uint8_t *block, sync_tree_result_t *r, char *err, size_t errlen);

/* The target's side, called with TREE_REQ's payload in `in`: answers the listing of
 * `dir`'s trees and applies what follows, until TREE_DONE. mdir is the instance's
 * .migration/. 0, or -errno with err (the connection is then given up). */
int sync_tree_receive(int fd, const char *dir, const char *mdir, sync_buf_t *in, sync_buf_t *out,
                      char *err, size_t errlen);

#endif
