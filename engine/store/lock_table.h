/*
 * lock_table.h -- the locks of unfinished jobs as a process last read them, and the
 * check of one target against them in slices.
 *
 * job_create.lua and job_redrive.lua keep the locks of unfinished jobs in one hash and
 * a version that changes with it; a caller checks a target against its copy and sends
 * the version it checked, and the script answers with the current table when that
 * version is stale (ops/job_checks.c). A copy is an immutable snapshot: a refresh makes a new
 * one (each lock compiled once: a lock the old snapshot held is shared, not compiled
 * again), and a check in progress keeps the snapshot it started on, so a refresh that
 * arrives meanwhile frees nothing it uses.
 *
 * Ownership: snapshots and their locks are reference-counted; lock_table_get and
 * lock_table_put take and drop a reference. A lock_check_t holds one on its snapshot
 * from lock_check_begin to lock_check_dispose.
 */
#ifndef TERN_LOCK_TABLE_H
#define TERN_LOCK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "model/lock_pattern.h"

typedef struct lock_entry {
    int refs; /* one per snapshot holding it */
    char *job;
    char *pattern;
    lock_pattern_t *re; /* NULL: refused here (stored by another version), never matches */
} lock_entry_t;

typedef struct lock_table {
    int refs;
    char version[32]; /* the version of the hash this snapshot is a copy of */
    bool stale;       /* a check found it out of date: send a version that never matches */
    lock_entry_t **locks;
    size_t n_locks;
} lock_table_t;

/* An empty snapshot of version "0", with one reference for the caller. */
lock_table_t *lock_table_new(void);

/* The snapshot of a LOCKS answer ({'LOCKS', version, job, pattern, ...}), with one
 * reference for the caller; locks `old` (borrowed, may be NULL) holds with the same job
 * and pattern are shared, the others compiled (a pattern this version refuses is
 * logged once and locks nothing). */
lock_table_t *lock_table_from_reply(const lock_table_t *old, const redisReply *reply);

lock_table_t *lock_table_get(lock_table_t *t);
void lock_table_put(lock_table_t *t); /* NULL is fine */

/* The version a caller sends after checking a target against `t`. */
const char *lock_table_version(const lock_table_t *t);

/* A check of one target against a snapshot's locks, which runs in slices. */
typedef struct lock_check {
    lock_table_t *table; /* a reference held */
    const char *target;  /* borrowed; NULL: nothing to check */
    size_t len;
    const char *self; /* borrowed; the job whose own lock is skipped, or NULL */
    size_t next;      /* the lock being tested, an index into table->locks */
    lock_match_t *m;  /* the memory of its test (NULL until the first) */
    bool testing;     /* m holds the test of lock `next`, not decided yet */
} lock_check_t;

/* Begins a check of `target` (borrowed; NULL checks nothing) against `table` (a
 * reference is taken), skipping the lock of job `self` (borrowed, may be NULL). */
void lock_check_begin(lock_check_t *c, lock_table_t *table, const char *target, const char *self);

/* Runs the check on for about `*budget` steps (lock_match_run): LOCK_MATCH_NO (no lock
 * matches), LOCK_MATCH_YES (lock_check_match says which) or LOCK_MATCH_MORE (run
 * again); the steps spent are subtracted from *budget. */
int lock_check_run(lock_check_t *c, uint64_t *budget);

/* The lock that matched, after lock_check_run answered LOCK_MATCH_YES (borrowed from
 * the check's snapshot). */
const lock_entry_t *lock_check_match(const lock_check_t *c);

/* Drops the check's reference and test (a zeroed or disposed check is fine). */
void lock_check_dispose(lock_check_t *c);

#endif /* TERN_LOCK_TABLE_H */
