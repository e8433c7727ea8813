/*
 * sync_manifest.h -- what the target of a migration has: the receiver's durable record
 * of its disks, `<root>/<vm>/.migration/manifest`. Per disk (disk<N>.img, N < 64): its
 * size, the generation of the source disk it was made from, and for each block that
 * holds data the SHA-256 of the block as written; a block without an entry is a hole
 * (all zero on the target).
 *
 * The one rule: the manifest never claims a block the file lacks. Entries are changed
 * only in this order: a block about to be written or punched is first marked unknown
 * (sync_hash_unknown) and that is made durable; then the data is written and synced;
 * then its entry is set and the manifest synced again. A kill -9 at any point leaves
 * at most the blocks of the window in flight unknown, which the next pass sends
 * again (or punches). A disk being reset (generation changed, file not described)
 * carries `must_zero` until its file has been emptied.
 *
 * The file is a log: a 16-byte header ("TSYNCMF1", u32 block size, 4 reserved), then
 * records `u32 length, u64 FNV-1a of the payload, payload` appended by
 * sync_manifest_commit and replayed by sync_manifest_open (a torn last record is cut
 * off). sync_manifest_compact rewrites it as one record per disk and entry (temp file,
 * fsync, rename, fsync of the directory) so it does not grow pass after pass. A
 * manifest of another block size is started afresh.
 *
 * One manifest is used by one thread at a time (the receiver holds the instance's lock).
 */
#ifndef DC_SYNC_MANIFEST_H
#define DC_SYNC_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_wire.h"

#define SYNC_DISKS_MAX      64
#define SYNC_GENERATION_MAX 96

typedef struct sync_entry {
    uint64_t idx;
    uint8_t hash[SYNC_HASH_LEN];
} sync_entry_t;

typedef struct sync_mdisk {
    unsigned n; /* disk<n>.img */
    uint64_t size;
    char generation[SYNC_GENERATION_MAX];
    bool must_zero; /* the file may hold data no entry describes: empty it before use */
    /* Open addressing by block index (key idx + 1; 0 empty, UINT64_MAX removed). */
    sync_entry_t *tab;
    size_t cap, count, used;
} sync_mdisk_t;

typedef struct sync_manifest {
    int fd;
    char path[4096];
    char dir[4096];
    uint32_t block_size;
    sync_mdisk_t *disks[SYNC_DISKS_MAX];
    sync_buf_t pending; /* records not yet written */
    uint64_t log_records;
} sync_manifest_t;

/* The N of a disk's file name "disk<N>.img" (N decimal, < SYNC_DISKS_MAX, no leading
 * zero), or -1 for any other name. */
int sync_disk_number(const char *name);

/* Opens (creating dir and the file when missing) the manifest at <dir>/manifest for
 * blocks of block_size. 0 or -errno with err naming the file. Free with
 * sync_manifest_close. */
int sync_manifest_open(const char *dir, uint32_t block_size, sync_manifest_t **out, char *err,
                       size_t errlen);

void sync_manifest_close(sync_manifest_t *m);

/* The disk n, or NULL when the manifest does not describe it. Borrowed. */
sync_mdisk_t *sync_manifest_disk(sync_manifest_t *m, unsigned n);

/* The hash of block idx of d, or NULL for a hole. Borrowed until d changes. */
const uint8_t *sync_mdisk_get(const sync_mdisk_t *d, uint64_t idx);

/* d's entries sorted by index (malloc'd, the caller frees) and their count. */
sync_entry_t *sync_mdisk_sorted(const sync_mdisk_t *d, size_t *n);

/* Changes, applied in memory at once and appended to the pending records; durable
 * only after sync_manifest_commit. */
/* Disk n is described: size and generation; entries at or past the end dropped;
 * must_zero cleared. Creates it when missing. */
void sync_manifest_set_disk(sync_manifest_t *m, unsigned n, uint64_t size, const char *generation);
/* Disk n's entries all dropped and must_zero set (creates it when missing). */
void sync_manifest_reset(sync_manifest_t *m, unsigned n);
void sync_manifest_set_block(sync_manifest_t *m, unsigned n, uint64_t idx,
                             const uint8_t hash[SYNC_HASH_LEN]);
void sync_manifest_drop_block(sync_manifest_t *m, unsigned n, uint64_t idx);
void sync_manifest_remove(sync_manifest_t *m, unsigned n);

/* Writes the pending records and fdatasyncs the file. 0 or -errno. */
int sync_manifest_commit(sync_manifest_t *m, char *err, size_t errlen);

/* Rewrites the file with the current state only (pending records included). 0 or -errno. */
int sync_manifest_compact(sync_manifest_t *m, char *err, size_t errlen);

#endif
