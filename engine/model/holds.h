/*
 * holds.h -- turning a workflow's or a step's holds (resource tickets) into what the
 * Lua scripts take: lines "<capacity> <resource>", templates expanded.
 *
 * The lines are sorted by resource name. Scripts take tickets in the order given and
 * a job keeps the tickets it got while it waits for the next one, so two jobs asking
 * for the same resources in different orders could otherwise wait for each other for
 * ever; one global order makes that impossible.
 */
#ifndef TERN_HOLDS_H
#define TERN_HOLDS_H

#include <stddef.h>

#include "model/template.h"
#include "model/workflow.h"

/* Expands `n` holds against `scope`: their resources and their templated capacities.
 * Returns 0 and *out the malloc'd lines (caller frees; "" for none); TERN_EINVAL with
 * "holds[1]: ..." in err when a template names nothing or a resource contains a
 * newline; TERN_EREFUSED with "holds[1].capacity: \"${...}\" gave \"0\", expected an
 * integer from 1 to 1000000" when a templated capacity expands to anything else. */
int holds_expand(const wf_hold_t *holds, size_t n, const template_scope_t *scope, char **out,
                 char *err, size_t errlen);

#endif /* TERN_HOLDS_H */
