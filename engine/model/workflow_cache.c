/*
 * workflow_cache.c -- parsed workflow versions by uuid; see workflow_cache.h.
 *
 * Each entry is one cached_t, indexed by its uuid in `by_uuid` (which borrows the
 * entry's own copy of the uuid). Entries nobody holds are also on the idle list, most
 * recently given back first; an entry taken again leaves it, and the list's tail is
 * freed when the list grows past idle_max. An entry of no uuid is in neither: it
 * belongs to its one holder.
 */
#include "model/workflow_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/str_map.h"

/* The longest uuid the index holds (a uuid has 36 characters): longer keys, or keys
 * holding a NUL, cannot be looked up, so an entry of one is its holder's alone. */
#define KEY_MAX 63

typedef struct cached {
    workflow_cache_entry_t pub; /* first: what users hold points here */
    char *uuid;
    workflow_t *wf;
    char *doc;
    size_t refs;
    bool indexed;                         /* in by_uuid (it has a uuid) */
    struct cached *idle_prev, *idle_next; /* on the idle list while refs is 0 */
} cached_t;

struct workflow_cache {
    str_map_t by_uuid; /* uuid -> cached_t */
    cached_t *idle_head, *idle_tail;
    size_t idle_n, idle_max;
    size_t parses;
};

static void cached_free(cached_t *e)
{
    workflow_free(e->wf);
    free(e->uuid);
    free(e->doc);
    free(e);
}

static void idle_unlink(workflow_cache_t *c, cached_t *e)
{
    if (e->idle_prev != NULL)
        e->idle_prev->idle_next = e->idle_next;
    else
        c->idle_head = e->idle_next;
    if (e->idle_next != NULL)
        e->idle_next->idle_prev = e->idle_prev;
    else
        c->idle_tail = e->idle_prev;
    e->idle_prev = e->idle_next = NULL;
    c->idle_n--;
}

workflow_cache_t *workflow_cache_new(size_t idle_max)
{
    workflow_cache_t *c = xcalloc(1, sizeof *c);
    str_map_init(&c->by_uuid);
    c->idle_max = idle_max > 0 ? idle_max : WORKFLOW_CACHE_IDLE_DEFAULT;
    return c;
}

void workflow_cache_free(workflow_cache_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->by_uuid.cap; i++)
        if (c->by_uuid.slots[i].key != NULL)
            cached_free(c->by_uuid.slots[i].value);
    str_map_free(&c->by_uuid);
    free(c);
}

/* The entry of `uuid` (`len` bytes), or NULL; the map's keys are NUL-terminated, and a
 * uuid from a reply need not be. */
static cached_t *lookup(const workflow_cache_t *c, const char *uuid, size_t len)
{
    char key[KEY_MAX + 1];
    if (len > KEY_MAX || memchr(uuid, '\0', len) != NULL)
        return NULL;
    memcpy(key, uuid, len);
    key[len] = '\0';
    return str_map_get(&c->by_uuid, key);
}

static const workflow_cache_entry_t *take(workflow_cache_t *c, cached_t *e)
{
    if (e->refs++ == 0 && e->indexed)
        idle_unlink(c, e);
    return &e->pub;
}

const workflow_cache_entry_t *workflow_cache_find(workflow_cache_t *c, const char *uuid,
                                                  size_t uuid_len)
{
    cached_t *e = uuid != NULL ? lookup(c, uuid, uuid_len) : NULL;
    return e != NULL ? take(c, e) : NULL;
}

const workflow_cache_entry_t *workflow_cache_load(workflow_cache_t *c, const char *uuid,
                                                  size_t uuid_len, const char *doc, size_t doc_len,
                                                  char *err, size_t errlen)
{
    const workflow_cache_entry_t *found = workflow_cache_find(c, uuid, uuid_len);
    if (found != NULL)
        return found;
    if (doc == NULL) {
        err_set(err, errlen, TERN_EINVAL, "missing workflow document");
        return NULL;
    }
    workflow_t *wf = NULL;
    c->parses++;
    if (workflow_parse_text(doc, doc_len, NULL, NULL, &wf, err, errlen) != 0)
        return NULL;
    cached_t *e = xcalloc(1, sizeof *e);
    e->uuid = uuid != NULL ? xstrndup(uuid, uuid_len) : xstrdup("");
    e->wf = wf;
    e->doc = xstrndup(doc, doc_len);
    e->pub.uuid = e->uuid;
    e->pub.wf = e->wf;
    e->pub.doc = e->doc;
    e->pub.doc_len = doc_len;
    e->refs = 1;
    e->indexed = uuid != NULL && uuid_len <= KEY_MAX && strlen(e->uuid) == uuid_len;
    if (e->indexed)
        str_map_put(&c->by_uuid, e->uuid, e);
    return &e->pub;
}

void workflow_cache_put(workflow_cache_t *c, const workflow_cache_entry_t *pub)
{
    if (pub == NULL)
        return;
    cached_t *e = (cached_t *)pub;
    if (--e->refs > 0)
        return;
    if (!e->indexed) {
        cached_free(e);
        return;
    }
    e->idle_next = c->idle_head;
    if (c->idle_head != NULL)
        c->idle_head->idle_prev = e;
    else
        c->idle_tail = e;
    c->idle_head = e;
    c->idle_n++;
    while (c->idle_n > c->idle_max) {
        cached_t *old = c->idle_tail;
        idle_unlink(c, old);
        str_map_del(&c->by_uuid, old->uuid);
        cached_free(old);
    }
}

size_t workflow_cache_count(const workflow_cache_t *c)
{
    return c->by_uuid.n;
}

size_t workflow_cache_idle(const workflow_cache_t *c)
{
    return c->idle_n;
}

size_t workflow_cache_parses(const workflow_cache_t *c)
{
    return c->parses;
}
