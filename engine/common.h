/*
 * common.h -- what every engine file needs: error codes, allocation that aborts only
 * on out-of-memory, clocks, and small string helpers.
 *
 * Errors. Functions return 0 on success or a negative TERN_E* code, and write a
 * message naming the problem into a caller's (err, errlen) buffer when they have one,
 * the way jansson fills json_error_t. Bad input, a Redis error or a failing plugin is
 * never fatal; only a programmer error (assert) or exhausted memory aborts.
 *
 * json_t ownership in engine headers follows include/tern/task.h: parameters are
 * borrowed unless the comment says "steals"; results are new references unless the
 * function name ends in _peek or _get.
 */
#ifndef TERN_COMMON_H
#define TERN_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TERN_OK       0
#define TERN_EINVAL   (-EINVAL) /* bad input: the message says which part */
#define TERN_ENOENT   (-ENOENT) /* no such workflow, job, task or file */
#define TERN_EEXIST   (-EEXIST) /* conflict: duplicate job, active lock, same version */
#define TERN_ENOMEM   (-ENOMEM)
#define TERN_EIO      (-EIO)      /* Redis or system failure; the outcome may be unknown */
#define TERN_E2BIG    (-E2BIG)    /* over a configured size limit */
#define TERN_ENOTCONN (-ENOTCONN) /* Redis is not reachable right now */
#define TERN_ESTALE   (-ESTALE)   /* this runner no longer owns the job (lease lost) */
#define TERN_EBUSY    (-EBUSY) /* state does not allow the operation (e.g. cancel a finished job) */
#define TERN_EAGAIN   (-EAGAIN) /* over a capacity all jobs share: try again once some end */
#define TERN_EPERM    (-EPERM)  /* refused on principle (plugin outside its directory) */
/* A write reached Redis and its answer was lost: it may or may not have happened. */
#define TERN_EUNKNOWN (-ECONNABORTED)

#define TERN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The queue of a workflow that names none, and the one a runner serves unless told
 * otherwise (jobs of this queue store no queue field: job_create.lua). */
#define TERN_DEFAULT_QUEUE "default"

/* Allocation: abort with a message on out-of-memory, never return NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Returns a malloc'd formatted string (caller frees). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes a formatted message into err (if err is not NULL) and returns code. */
int tern_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Wall clock in milliseconds since the epoch (what is stored in Redis). */
uint64_t tern_now_ms(void);
/* Monotonic clock in milliseconds, for durations. */
uint64_t tern_mono_ms(void);
/* Formats ms since the epoch as ISO 8601 UTC with milliseconds: 24 chars + NUL. */
void tern_iso_time(uint64_t ms, char out[32]);
/* Writes a fresh random (version 4) UUID in canonical lowercase form: 36 chars + NUL.
 * Returns true when its bits came from the kernel's random source, false when
 * getrandom failed and a clock mix stood in (unique enough for a name, not to be
 * trusted as never made before: see job_ops.c). */
bool tern_uuid_v4(char out[37]);
/* The decimal digits of v, written at the end of buf and NUL-terminated there; returns
 * where they start (buf + TERN_U64_DIGITS - their count). For numbers written many
 * times per job, where a printf format costs more than the rest of the work. */
#define TERN_U64_DIGITS 20
char *tern_u64_text(uint64_t v, char buf[TERN_U64_DIGITS + 1]);
/* True when s is a canonical lowercase or uppercase UUID. */
bool tern_uuid_valid(const char *s);
/* A uniformly random 64-bit value (not for secrets). */
uint64_t tern_random_u64(void);

#endif /* TERN_COMMON_H */
