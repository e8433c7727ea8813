/*
 * hold_events.h -- the plugin streams a job tells of its waits for its holds: a
 * workflow's `hold_events` ("<plugin>:<key template>") expanded when a job is created
 * into the Redis keys lib/holds.lua appends to (docs/WORKFLOWS.md, "Telling a plugin
 * of waits for holds").
 */
#ifndef TERN_HOLD_EVENTS_H
#define TERN_HOLD_EVENTS_H

#include <stddef.h>

#include <jansson.h>

#include "model/template.h"

#define HOLD_EVENTS_KEY_MAX 512 /* bytes of a key after "<plugin>:", as a view's follow */

/* Expands `streams` (the workflow's normalized hold_events: an array of strings) against
 * `scope`. Returns 0 and *out the malloc'd lines "tern:p:<plugin>:<key>\n" (caller
 * frees); TERN_EINVAL with "hold_events[1]: ..." in err when a template names nothing,
 * or the key it gives is empty, over HOLD_EVENTS_KEY_MAX bytes or holds a newline. */
int hold_events_expand(const json_t *streams, const template_scope_t *scope, char **out, char *err,
                       size_t errlen);

#endif /* TERN_HOLD_EVENTS_H */
