/*
 * list_page.h -- the paging markers of GET /jobs and GET /workflows.
 *
 * Listings are newest first from a sorted set scored by creation time (ms). A marker
 * names the last entry a page examined, as its time and uuid: the next page starts
 * right after it, so entries created meanwhile never shift a page the way an offset
 * would. Clients treat markers as opaque; the text is "<ms>-<uuid>".
 */
#ifndef TERN_LIST_PAGE_H
#define TERN_LIST_PAGE_H

#include <stddef.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#define LIST_PAGE_MARKER_MAX 64     /* bytes of a marker, NUL included */
#define LIST_PAGE_BUDGET     5000   /* entries a filtered page may examine */
#define LIST_PAGE_OFFSET_MAX 100000 /* node-workflow's offset, for old clients */

/* The "next_marker" of a page from the marker's time and uuid as a listing script
 * returned them: a new JSON string, or JSON null when the time is empty or either
 * reply is not a string (the last page). */
json_t *list_page_next_marker(const redisReply *time_ms, const redisReply *uuid);

/* Splits a marker into its time (decimal text) and uuid. Returns 0, or TERN_EINVAL
 * with "marker: \"x\" is not a marker of this API" in err. */
int list_page_marker_parse(const char *marker, char time_ms[24], char uuid[40], char *err,
                           size_t errlen);

#endif /* TERN_LIST_PAGE_H */
