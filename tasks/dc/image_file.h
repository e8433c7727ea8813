/*
 * image_file.h -- the lab's image files, made on the spot so nothing is downloaded:
 * a sparse file of the image's size_mib whose first data_mib MiB hold deterministic
 * bytes derived from the image's uuid (the same uuid gives the same bytes on every
 * machine) and whose rest is one hole. The bytes are never zero for a whole block, so
 * every block of the data is a data extent of the file, as a real image's would be.
 *
 * Part of dc_model. Errors are negative errno values with a message in err.
 */
#ifndef DC_IMAGE_FILE_H
#define DC_IMAGE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "datacenter.h"

/* Makes img->file unless it exists (its missing parent directories too, mode 0755).
 * The file is written as "<file>.part", synced and renamed, so a file that exists is
 * whole. An existing file whose size is not size_mib MiB is refused (-EEXIST), since
 * the datacenter would then describe an image it does not have. Returns 0 and sets
 * *made (true: made now; false: was there), or a negative errno with err naming the
 * file. */
int dc_image_ensure(const dc_image_t *img, bool *made, char *err, size_t errlen);

/* Writes into buf the image content of the image `uuid` for bytes
 * [offset, offset + len) of its data; offset and len multiples of 8. */
void dc_image_content(const char *uuid, uint64_t offset, void *buf, size_t len);

#endif
