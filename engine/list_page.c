/*
 * list_page.c -- paging markers; see list_page.h.
 */
#include "list_page.h"

#include <stdio.h>
#include <string.h>

#include "common.h"

void list_page_marker_format(const char *time_ms, size_t time_len, const char *uuid,
                             size_t uuid_len, char out[LIST_PAGE_MARKER_MAX])
{
    snprintf(out, LIST_PAGE_MARKER_MAX, "%.*s-%.*s", (int)time_len, time_ms, (int)uuid_len, uuid);
}

int list_page_marker_parse(const char *marker, char time_ms[24], char uuid[40], char *err,
                           size_t errlen)
{
    size_t n = strspn(marker, "0123456789");
    if (n == 0 || n > 20 || marker[n] != '-' || !tern_uuid_valid(marker + n + 1))
        return tern_seterr(err, errlen, TERN_EINVAL,
                           "marker: \"%.80s\" is not a marker of this API (take it from the "
                           "x-tern-next-marker header of the previous page)",
                           marker);
    snprintf(time_ms, 24, "%.*s", (int)n, marker);
    snprintf(uuid, 40, "%s", marker + n + 1);
    return 0;
}
