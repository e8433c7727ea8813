/*
 * stream_entry.h -- the events held by one entry of an event stream.
 *
 * An entry's field "e" is one event (a JSON object); a field "a" is a JSON array of
 * events, in order: scripts that write many jobs' events in one call append them to
 * the global stream as one entry (see GATHER in engine/store/lua/lib/gather.lua), which
 * costs Redis one small write instead of one per event. Readers take both.
 */
#ifndef TERN_STREAM_ENTRY_H
#define TERN_STREAM_ENTRY_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

/* The longest stream id taken from a client or a script. */
#define STREAM_ID_MAX 40

/* Whether id is a stream id as clients give it back: "<ms>" or "<ms>-<seq>" (so "0"
 * too), decimal, at most STREAM_ID_MAX bytes. */
bool stream_id_valid(const char *id);

/* Called for each event of an entry, in order; `ev` is borrowed for the call. Returns
 * false to stop. */
typedef bool (*stream_entry_cb)(void *data, const json_t *ev);

/* Calls cb for each event in `fields` (an entry's [field, value, ...] array). A value
 * that is not JSON is skipped. Returns false when cb stopped the walk, else true. */
bool stream_entry_each(const redisReply *fields, stream_entry_cb cb, void *data);

#endif
