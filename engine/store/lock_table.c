/*
 * lock_table.c -- snapshots of the locks of unfinished jobs and sliced checks of a target
 * against them; see lock_table.h.
 */
#include "store/lock_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str_map.h"
#include "store/store.h"

static void entry_put(lock_entry_t *e)
{
    if (e == NULL || --e->refs > 0)
        return;
    free(e->job);
    free(e->pattern);
    lock_pattern_free(e->re);
    free(e);
}

lock_table_t *lock_table_new(void)
{
    lock_table_t *t = xcalloc(1, sizeof *t);
    t->refs = 1;
    snprintf(t->version, sizeof t->version, "0");
    return t;
}

lock_table_t *lock_table_get(lock_table_t *t)
{
    t->refs++;
    return t;
}

void lock_table_put(lock_table_t *t)
{
    if (t == NULL || --t->refs > 0)
        return;
    for (size_t i = 0; i < t->n_locks; i++)
        entry_put(t->locks[i]);
    free(t->locks);
    free(t);
}

const char *lock_table_version(const lock_table_t *t)
{
    return t->stale ? "stale" : t->version;
}

/* A new lock of job `job` (taken) with pattern `pat`, compiled. */
static lock_entry_t *entry_new(char *job, const redisReply *pat)
{
    lock_entry_t *e = xcalloc(1, sizeof *e);
    e->refs = 1;
    e->job = job;
    e->pattern = xstrndup(pat->str, pat->len);
    /* Patterns were checked when their jobs were created; one that this version refuses
     * (stored by an earlier one, which took any POSIX extended regular expression)
     * locks nothing rather than blocking every create. Later snapshots share the entry,
     * so the warning is written once. */
    char err[256];
    if (strlen(e->pattern) != pat->len ||
        lock_pattern_compile(e->pattern, &e->re, err, sizeof err) != 0) {
        if (strlen(e->pattern) != pat->len)
            snprintf(err, sizeof err, "holds a NUL byte");
        json_t *fields = json_pack("{s:s, s:s%}", "job", e->job, "locks", pat->str,
                                   (size_t)(pat->len > 200 ? 200 : pat->len));
        log_msg(TERN_LOG_WARN, "jobs", fields,
                "the locks of job %s are not accepted by this version and lock nothing: %s", e->job,
                err);
        json_decref(fields);
    }
    return e;
}

lock_table_t *lock_table_from_reply(const lock_table_t *old, const redisReply *reply)
{
    str_map_t by_job;
    str_map_init(&by_job);
    for (size_t i = 0; old != NULL && i < old->n_locks; i++)
        str_map_put(&by_job, old->locks[i]->job, old->locks[i]);
    lock_table_t *t = lock_table_new();
    const redisReply *ver = store_reply_at(reply, 1);
    snprintf(t->version, sizeof t->version, "%.*s", ver != NULL ? (int)ver->len : 1,
             ver != NULL ? ver->str : "0");
    size_t n = reply->elements > 2 ? (reply->elements - 2) / 2 : 0;
    t->locks = xcalloc(n ? n : 1, sizeof *t->locks);
    for (size_t i = 0; i < n; i++) {
        const redisReply *job = reply->element[2 + 2 * i], *pat = reply->element[3 + 2 * i];
        if (job->type != REDIS_REPLY_STRING || pat->type != REDIS_REPLY_STRING)
            continue;
        char *name = xstrndup(job->str, job->len);
        lock_entry_t *was = str_map_get(&by_job, name);
        if (was != NULL && strlen(was->pattern) == pat->len &&
            memcmp(was->pattern, pat->str, pat->len) == 0) {
            free(name);
            was->refs++;
            t->locks[t->n_locks++] = was;
            continue;
        }
        t->locks[t->n_locks++] = entry_new(name, pat);
    }
    str_map_free(&by_job);
    return t;
}

void lock_check_begin(lock_check_t *c, lock_table_t *table, const char *target, const char *self)
{
    memset(c, 0, sizeof *c);
    c->table = lock_table_get(table);
    c->target = target;
    c->len = target != NULL ? strlen(target) : 0;
    c->self = self;
}

int lock_check_run(lock_check_t *c, uint64_t *budget)
{
    if (c->target == NULL)
        return LOCK_MATCH_NO;
    for (; c->next < c->table->n_locks; c->next++) {
        const lock_entry_t *e = c->table->locks[c->next];
        if (e->re == NULL || (c->self != NULL && strcmp(e->job, c->self) == 0))
            continue;
        if (!c->testing) {
            if (*budget == 0)
                return LOCK_MATCH_MORE;
            if (c->m == NULL)
                c->m = lock_match_new(e->re, c->target, c->len);
            else
                lock_match_reset(c->m, e->re, c->target, c->len);
            c->testing = true;
            /* Starting a test costs a pass over the program (lock_match_reset): a
             * table of many small locks is sliced too. */
            size_t cost = lock_pattern_size(e->re);
            *budget = *budget > cost ? *budget - cost : 0;
        }
        int r = lock_match_run(c->m, budget);
        if (r == LOCK_MATCH_MORE)
            return r;
        c->testing = false;
        if (r == LOCK_MATCH_YES)
            return r;
    }
    return LOCK_MATCH_NO;
}

const lock_entry_t *lock_check_match(const lock_check_t *c)
{
    return c->next < c->table->n_locks ? c->table->locks[c->next] : NULL;
}

void lock_check_dispose(lock_check_t *c)
{
    lock_match_free(c->m);
    lock_table_put(c->table);
    memset(c, 0, sizeof *c);
}
