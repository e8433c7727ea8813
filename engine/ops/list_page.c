/*
 * list_page.c -- paging markers; see list_page.h.
 */
#include "ops/list_page.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/ident.h"

json_t *list_page_next_marker(const redisReply *time_ms, const redisReply *uuid)
{
    if (time_ms == NULL || time_ms->type != REDIS_REPLY_STRING || time_ms->len == 0 ||
        uuid == NULL || uuid->type != REDIS_REPLY_STRING)
        return json_null();
    char marker[LIST_PAGE_MARKER_MAX];
    snprintf(marker, sizeof marker, "%.*s-%.*s", (int)time_ms->len, time_ms->str, (int)uuid->len,
             uuid->str);
    return json_string(marker);
}

int list_page_marker_parse(const char *marker, char time_ms[24], char uuid[40], char *err,
                           size_t errlen)
{
    size_t n = strspn(marker, "0123456789");
    if (n == 0 || n > 20 || marker[n] != '-' || !uuid_valid(marker + n + 1))
        return err_set(err, errlen, TERN_EINVAL,
                       "marker: \"%.80s\" is not a marker of this API (take it from the "
                       "x-tern-next-marker header of the previous page)",
                       marker);
    snprintf(time_ms, 24, "%.*s", (int)n, marker);
    snprintf(uuid, 40, "%s", marker + n + 1);
    return 0;
}
