/*
 * sync_image.h -- the target's side of an image pass: a migration whose image the
 * image store no longer has gets it from the source server's own copy over the
 * migration's authenticated stream (sync_wire.h "An image pass"). The file is
 * <root>/images/<image uuid>.img, written as "<file>.part" (data blocks at their
 * offsets, holes left as holes), synced, its digest (sync_digest.h) compared with the
 * one the source announced, then renamed: a file that is there is whole and checked.
 * A target whose file already has that digest receives nothing.
 *
 * Thread-safe: only the caller's descriptor and buffers.
 */
#ifndef DC_SYNC_IMAGE_H
#define DC_SYNC_IMAGE_H

#include <stddef.h>

#include "sync_wire.h"

/* Runs an image pass on fd once its IMAGE frame's payload is in `in` (the caller
 * read it; in is the caller's buffer, reused for the frames that follow). 0 once
 * PASS_DONE is sent, or a negative errno with err naming the problem (the caller
 * tells the sender). */
int sync_image_receive(int fd, const char *root, sync_buf_t *in, char *err, size_t errlen);

#endif
