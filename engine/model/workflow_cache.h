/*
 * workflow_cache.h -- parsed workflow versions, shared by whatever in one process needs
 * a version's workflow_t: the runner, for the jobs it runs, and job creates, for the
 * jobs they store. One document is parsed once, whichever of them met it first.
 *
 * Entries are keyed by the version's uuid. A uuid names one document for good: versions
 * are immutable, and workflow_put.lua refuses a document under a uuid that ever named
 * another (its frozen copy, wfdoc:<uuid>, is never deleted). So an entry never goes
 * stale and is never invalidated. Which uuid a workflow's *name* stands for can change
 * when a new version is stored; that resolution belongs to its user (job_create.c,
 * which job_create.lua corrects at every create), not to this cache.
 *
 * Ownership: the cache owns its entries and everything in them. A user holds an entry
 * through a reference (from workflow_cache_find or workflow_cache_load) and gives it
 * back with workflow_cache_put; while it is held, the entry and its fields stay valid
 * and unchanged. An entry nobody holds is kept, for the next job of its version, among
 * at most `idle_max` such entries; past that, the one unused longest is freed. A held
 * entry is never freed, so the cache holds at most idle_max entries beyond the
 * versions in use.
 *
 * Who makes it: ternd makes one and hands it to its runner and its job operations when
 * it runs both, so that a version a create parsed is the one its job runs on; each of
 * them makes its own when given none (tests make them apart). The cache must outlive
 * every reference taken from it. Not thread-safe: its users share one loop.
 */
#ifndef TERN_WORKFLOW_CACHE_H
#define TERN_WORKFLOW_CACHE_H

#include <stddef.h>

#include "model/workflow.h"

/* Entries nobody holds that a cache keeps by default. */
#define WORKFLOW_CACHE_IDLE_DEFAULT 64

typedef struct workflow_cache workflow_cache_t;

/* One workflow version, as its users read it. Every field is the cache's, valid while
 * the reader holds its reference. */
typedef struct workflow_cache_entry {
    const char *uuid;     /* the version's uuid ("" for an entry of no uuid: see _load) */
    const workflow_t *wf; /* the document parsed */
    const char *doc;      /* the document as it was stored, NUL-terminated */
    size_t doc_len;
} workflow_cache_entry_t;

/* A new, empty cache that keeps up to `idle_max` entries nobody holds (0: the default,
 * WORKFLOW_CACHE_IDLE_DEFAULT). Never NULL. */
workflow_cache_t *workflow_cache_new(size_t idle_max);

/* Frees the cache and every entry in it (NULL: nothing). No reference taken from it
 * may be used, or given back, after this. */
void workflow_cache_free(workflow_cache_t *c);

/* The entry of the version `uuid` (`uuid_len` bytes) with a reference for the caller,
 * or NULL when the cache does not hold it. */
const workflow_cache_entry_t *workflow_cache_find(workflow_cache_t *c, const char *uuid,
                                                  size_t uuid_len);

/* The entry of the version `uuid` with a reference for the caller: the one the cache
 * holds, else one made by parsing `doc` (`doc_len` bytes, borrowed; the document as
 * stored, whose text the entry keeps) with workflow_parse_text. NULL when the cache
 * does not hold it and `doc` is NULL or does not parse; the reason is then written
 * into err. A NULL `uuid` (a job that names no version) parses `doc` into an entry
 * kept for the caller alone, freed when its reference is given back. */
const workflow_cache_entry_t *workflow_cache_load(workflow_cache_t *c, const char *uuid,
                                                  size_t uuid_len, const char *doc, size_t doc_len,
                                                  char *err, size_t errlen);

/* Gives back a reference from workflow_cache_find or workflow_cache_load (NULL:
 * nothing). The entry stays cached for the next user while there is room (see above). */
void workflow_cache_put(workflow_cache_t *c, const workflow_cache_entry_t *e);

/* The number of entries the cache holds, held by some user or idle (for tests and
 * logs). */
size_t workflow_cache_count(const workflow_cache_t *c);

/* The number of those entries that nobody holds. */
size_t workflow_cache_idle(const workflow_cache_t *c);

/* The number of documents the cache has parsed since it was made, for entries of no
 * uuid too (for tests and logs: each hit is a parse saved). */
size_t workflow_cache_parses(const workflow_cache_t *c);

#endif /* TERN_WORKFLOW_CACHE_H */
