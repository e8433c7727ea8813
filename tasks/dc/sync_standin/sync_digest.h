/* TEMPORARY stand-in of the disk digest API (tasks/dc/sync/sync_digest.h). Remove this
 * directory when tasks/dc/sync/ is in the tree. */
#ifndef DC_SYNC_DIGEST_H
#define DC_SYNC_DIGEST_H

#include <stddef.h>
#include <stdint.h>

int sync_disk_digest(const char *path, uint32_t block_size, char hex[65], uint64_t *size, char *err,
                     size_t errlen);

#endif
