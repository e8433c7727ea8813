/*
 * error.h -- how the engine reports failure: negative TERN_E* codes and messages.
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
#ifndef TERN_ERROR_H
#define TERN_ERROR_H

#include <errno.h>
#include <stddef.h>

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
/* Refused on principle: a plugin outside its directory, a caller an admission check does
 * not allow (HTTP 403). */
#define TERN_EPERM (-EPERM)
/* Refused by a rule the request cannot meet as it is (an admission check of the
 * workflow): HTTP 422. */
#define TERN_EREFUSED (-ENOMSG)
/* A write reached Redis and its answer was lost: it may or may not have happened. */
#define TERN_EUNKNOWN (-ECONNABORTED)
/* No answer within a bound: a plugin's view script (the caller gets 503). */
#define TERN_ETIMEDOUT (-ETIMEDOUT)

/* Writes a formatted message into err (if err is not NULL) and returns code. */
int err_set(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* TERN_ERROR_H */
