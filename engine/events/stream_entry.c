/*
 * stream_entry.c -- the events of one stream entry; see stream_entry.h.
 */
#include "events/stream_entry.h"

#include <string.h>

bool stream_entry_each(const redisReply *fields, stream_entry_cb cb, void *data)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return true;
    for (size_t k = 0; k + 1 < fields->elements; k += 2) {
        const redisReply *name = fields->element[k], *value = fields->element[k + 1];
        if (name->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING)
            continue;
        bool one = strcmp(name->str, "e") == 0;
        if (!one && strcmp(name->str, "a") != 0)
            continue;
        json_t *v = json_loadb(value->str, value->len, 0, NULL);
        bool go_on = true;
        if (one && json_is_object(v)) {
            go_on = cb(data, v);
        } else if (!one && json_is_array(v)) {
            size_t i;
            json_t *ev;
            json_array_foreach(v, i, ev)
            {
                if (json_is_object(ev) && !(go_on = cb(data, ev)))
                    break;
            }
        }
        json_decref(v);
        if (!go_on)
            return false;
    }
    return true;
}

/* See stream_entry.h. */
bool stream_id_valid(const char *id)
{
    size_t n = strlen(id), dash = 0;
    if (n == 0 || n > STREAM_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (id[i] == '-' && i > 0 && i + 1 < n && dash++ == 0)
            continue;
        if (id[i] < '0' || id[i] > '9')
            return false;
    }
    return true;
}
