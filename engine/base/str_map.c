/* str_map.c -- see str_map.h. */
#include "base/str_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* FNV-1a, 64 bits: keys here are short (uuids), and their bytes are well spread. */
static uint64_t hash_of(const char *key)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

void str_map_init(str_map_t *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->n = 0;
}

void str_map_free(str_map_t *m)
{
    free(m->slots);
    str_map_init(m);
}

/* The slot holding `key`, or the free slot where it would go (cap > 0). */
static size_t slot_of(const str_map_t *m, const char *key)
{
    size_t mask = m->cap - 1, i = (size_t)hash_of(key) & mask;
    while (m->slots[i].key != NULL && strcmp(m->slots[i].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

void *str_map_get(const str_map_t *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    size_t i = slot_of(m, key);
    return m->slots[i].key != NULL ? m->slots[i].value : NULL;
}

/* At most half full: probes stay a slot or two long. */
static void grow(str_map_t *m)
{
    str_map_t bigger = {.cap = m->cap != 0 ? 2 * m->cap : 16};
    bigger.slots = xcalloc(bigger.cap, sizeof *bigger.slots);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key != NULL) {
            bigger.slots[slot_of(&bigger, m->slots[i].key)] = m->slots[i];
            bigger.n++;
        }
    }
    free(m->slots);
    *m = bigger;
}

void str_map_put(str_map_t *m, const char *key, void *value)
{
    if (2 * (m->n + 1) > m->cap)
        grow(m);
    size_t i = slot_of(m, key);
    if (m->slots[i].key == NULL)
        m->n++;
    m->slots[i].key = key;
    m->slots[i].value = value;
}

void *str_map_del(str_map_t *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    size_t mask = m->cap - 1, i = slot_of(m, key);
    if (m->slots[i].key == NULL)
        return NULL;
    void *value = m->slots[i].value;
    /* Backward shift: each later entry of the run that the hole now separates from its
     * home slot moves into the hole, so no lookup stops early at it. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = (size_t)hash_of(m->slots[j].key) & mask;
        /* j may move to the hole when its home is not in the cyclic range (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = NULL;
    m->slots[hole].value = NULL;
    m->n--;
    return value;
}
