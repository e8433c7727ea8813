/*
 * decimal.h -- unsigned integers as decimal text without printf, for the hot paths
 * that write numbers into Redis arguments and JSON text.
 */
#ifndef TERN_DECIMAL_H
#define TERN_DECIMAL_H

#include <stdint.h>

#define U64_TEXT_DIGITS 20
/* The decimal digits of v, written at the end of buf and NUL-terminated there; returns
 * where they start (buf + U64_TEXT_DIGITS - their count). For numbers written many
 * times per job, where a printf format costs more than the rest of the work. */
char *u64_text(uint64_t v, char buf[U64_TEXT_DIGITS + 1]);

#endif /* TERN_DECIMAL_H */
