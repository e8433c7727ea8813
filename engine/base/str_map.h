/* str_map.h -- a map from NUL-terminated strings to pointers (open addressing, linear
 * probing, deletion by backward shift: no tombstones, so lookups stay short however
 * many entries come and go). For indexes of objects that carry their own key, such as
 * a runner's jobs by uuid: the map borrows each key, which must stay valid and
 * unchanged while its entry is in the map, and never owns a value. Not thread-safe. */
#ifndef TERN_STR_MAP_H
#define TERN_STR_MAP_H

#include <stddef.h>

typedef struct str_map_slot {
    const char *key; /* NULL: free */
    void *value;
} str_map_slot_t;

typedef struct str_map {
    str_map_slot_t *slots; /* cap slots, cap a power of two (0 before the first put) */
    size_t cap;
    size_t n;
} str_map_t;

/* An empty map (no allocation until the first put). */
void str_map_init(str_map_t *m);

/* Frees the map's table (not the keys or values); the map is empty again. */
void str_map_free(str_map_t *m);

/* The value of `key`, or NULL. */
void *str_map_get(const str_map_t *m, const char *key);

/* Sets `key` (borrowed) to `value` (not NULL), replacing an entry with an equal key. */
void str_map_put(str_map_t *m, const char *key, void *value);

/* Removes `key`'s entry; returns its value, or NULL when there was none. */
void *str_map_del(str_map_t *m, const char *key);

#endif
