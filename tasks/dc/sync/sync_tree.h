/*
 * sync_tree.h -- a storage instance's directory trees as a migration moves them: the
 * volume's data <instance>/export/ and its snapshots <instance>/snapshots/ (tree_copy.h
 * makes those), listed as sorted entries, and one digest over a listing that both
 * sides compute alike and compare before a switch.
 *
 * An entry is a directory, a regular file or a symlink, named by its path relative to
 * the instance's directory ("export", "export/a/b"). What an entry carries, and so
 * what a transfer keeps and the digest covers: its kind, its permission bits and the
 * sticky bit (SYNC_TREE_MODE_BITS), a file's size and content hash, a link's target. A file's hash
 * is sync_disk_digest's (sync_digest.h) at the pass's block size: equal for equal contents whatever
 * the holes. Not kept, not compared: owners, xattrs and ACLs, hard links (each name is a file of
 * its own), a directory's times; sockets, fifos and devices are skipped. A file's mtime is carried
 * by the transfer but is not part of the digest.
 *
 * Thread-safe: only the caller's listing and files.
 */
#ifndef DC_SYNC_TREE_H
#define DC_SYNC_TREE_H

/* The mode bits a tree keeps: rwx for all and the sticky bit. Setuid and setgid are
 * dropped on both sides (and so from the digest): the target's agent writes every file
 * as its own user, so a consumer's setuid file would arrive as a setuid file of the
 * agent's (root, on a real server). */
#define SYNC_TREE_MODE_BITS 01777u

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sync_tree_kind { SYNC_KIND_DIR = 1, SYNC_KIND_FILE = 2, SYNC_KIND_LINK = 3 };

typedef struct sync_tree_entry {
    char *path; /* relative to the instance's directory (owned) */
    uint8_t kind;
    uint32_t mode;   /* permission bits */
    uint64_t size;   /* a file's bytes; 0 for the others */
    char hash[65];   /* a file: its content digest; "" for the others */
    char *link;      /* a link's target (owned); NULL for the others */
    int64_t mtime_s; /* a file's modification time, as listed */
    uint32_t mtime_ns;
} sync_tree_entry_t;

/* Entries sorted by path (strcmp: a directory comes before what it holds). */
typedef struct sync_tree {
    sync_tree_entry_t *e;
    size_t n, cap;
} sync_tree_t;

/* The top directories a storage instance's transfer carries, under its directory. */
extern const char *const sync_tree_tops[2];

/* The name export/ takes while it is fenced (sync_tree_fence): the storage instance's
 * share is stopped for a switch and its consumers' mounts, links to export/, find
 * nothing, as NFS clients of a stopped server do; listings read it as export/. */
#define SYNC_TREE_FENCED "export.fenced"

/* True when `dir` (an instance's directory) holds export/ (or its fenced name): a
 * storage instance, whose trees a pass carries. */
bool sync_tree_present(const char *dir);

/* Fences (on: export/ renamed SYNC_TREE_FENCED) or unfences (the other way) the
 * storage instance's export in `dir`, the directory synced after. Already so, or no
 * export at all: nothing to do. Both names present (never made by this code): -EEXIST,
 * nothing changed. 0 or -errno with err. */
int sync_tree_fence(const char *dir, bool on, char *err, size_t errlen);

/* Lists export/ (read from its fenced name while fenced) and snapshots/ under the
 * instance directory `dir` (either may be absent), hashing every regular file at block_size. A name
 * that vanishes while the tree is walked is skipped. *stop (may be NULL) is read before each file:
 * -ECANCELED. 0, or -errno with err naming the path. out is emptied first; the caller
 * frees it with sync_tree_free. */
int sync_tree_list(const char *dir, uint32_t block_size, const atomic_bool *stop, sync_tree_t *out,
                   char *err, size_t errlen);

/* The file of listed path `rel` under `dir`: <dir>/<rel>, or under SYNC_TREE_FENCED
 * while export/ is fenced. */
void sync_tree_file_path(const char *dir, const char *rel, char *out, size_t outlen);

/* Opens the file of listed path `rel` under `dir` (as sync_tree_file_path names it)
 * read-only, following no symlink on the way: each directory is opened with
 * O_NOFOLLOW from the one before, so a directory replaced by a link since the listing
 * (a consumer's rename racing the pass) cannot lead the read outside the trees. An fd,
 * or -errno: -ENOENT gone, -ELOOP or -ENOTDIR a link or a non-directory on the way. */
int sync_tree_open_file(const char *dir, const char *rel);

/* Appends an entry (path and link copied). */
void sync_tree_add(sync_tree_t *t, const char *path, uint8_t kind, uint32_t mode, uint64_t size,
                   const char *hash, const char *link);
/* Sorts the entries by path. */
void sync_tree_sort(sync_tree_t *t);
void sync_tree_free(sync_tree_t *t);

/* SHA-256 (64 hex digits) over every entry in order: u16 path length, path, u8 kind,
 * u32 mode, u64 size, then the file's hash or the link's target (u16 length first).
 * Equal listings, equal digests; any path, kind, mode, size, content or target
 * changed: another. */
void sync_tree_digest(const sync_tree_t *t, char hex[65]);

/* Lists `dir`'s trees and digests the listing: what the verify compares. *entries (may
 * be NULL) gets the number of entries. 0 or -errno with err. */
int sync_tree_dir_digest(const char *dir, uint32_t block_size, char hex[65], uint64_t *entries,
                         char *err, size_t errlen);

/* A path a peer may name: "export" or "snapshots", or one of them followed by
 * "/"-separated components, none empty, "." or "..", at most PATH_MAX - 256 bytes. */
bool sync_tree_path_ok(const char *rel);

#endif
