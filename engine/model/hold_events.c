/*
 * hold_events.c -- a job's hold event streams, expanded; see hold_events.h.
 */
#include "model/hold_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

int hold_events_expand(const json_t *streams, const template_scope_t *scope, char **out, char *err,
                       size_t errlen)
{
    size_t cap = 256, len = 0;
    char *text = xmalloc(cap);
    text[0] = '\0';
    *out = NULL;
    size_t i;
    const json_t *item;
    json_array_foreach(streams, i, item)
    {
        char path[48];
        snprintf(path, sizeof path, "hold_events[%zu]", i);
        char *s = template_expand_string(json_string_value(item), path, scope, err, errlen);
        if (s == NULL) {
            free(text);
            return TERN_EINVAL;
        }
        /* The plugin's name is literal (workflow.c checks it), so the first ':' ends it. */
        char *key = strchr(s, ':') + 1;
        size_t klen = strlen(key);
        const char *why = klen == 0                    ? "gave an empty key"
                          : klen > HOLD_EVENTS_KEY_MAX ? "gave a key over 512 bytes"
                          : strchr(key, '\n') != NULL  ? "gave a key with a newline"
                                                       : NULL;
        if (why != NULL) {
            int rc = err_set(err, errlen, TERN_EINVAL, "%s: \"%s\" %s", path,
                             json_string_value(item), why);
            free(s);
            free(text);
            return rc;
        }
        size_t need = len + strlen("tern:p:") + strlen(s) + 2;
        if (need > cap) {
            cap = need * 2;
            text = xrealloc(text, cap);
        }
        len += (size_t)snprintf(text + len, cap - len, "tern:p:%s\n", s);
        free(s);
    }
    *out = text;
    return 0;
}
