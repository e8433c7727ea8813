/*
 * file_work.h -- the agent's long file work (sparse copies of images, making an
 * instance's files) on libuv's thread pool through tern_work, so the agent's loop
 * keeps serving while a 10 GiB image is copied.
 *
 * Two things tern_work leaves to the plugin are done here:
 *   - a cancelled attempt: its job is told to stop (an atomic flag its function checks
 *     between MiB) and cleans up what it made; the engine then never calls back, so
 *     the job is kept in this registry until it is seen finished and freed (by the
 *     next job started, or at fini);
 *   - two jobs on one file: jobs with the same key (the file or directory they make)
 *     run one after the other, so a retry never writes beside a cancelled attempt
 *     still winding down, and two provisions of one image on a server copy it once.
 *
 * Thread safety: file_work_t locks for itself. A job's function runs on a pool thread
 * and touches only its own argument; its `done` callback runs on the loop.
 */
#ifndef DC_FILE_WORK_H
#define DC_FILE_WORK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <tern/task.h>

typedef struct file_work file_work_t;

/* The work, on a pool thread: returns 0 or a negative errno with a message in err.
 * It gives up with -ECANCELED when *stop becomes true, leaving nothing half-made. */
typedef int (*file_job_fn)(void *arg, const atomic_bool *stop, char *err, size_t errlen);

/* On the loop, once the work ended (never after a cancel): rc and err as fn left
 * them. `arg` stays the job's: it is freed with arg_free after this returns. */
typedef void (*file_job_done)(tern_ctx *ctx, void *arg, int rc, const char *err);

file_work_t *file_work_new(void);

/* Frees the registry and every job left in it. Called at fini, once the engine runs
 * no attempt of the plugin any more (no job's function is running). */
void file_work_free(file_work_t *w);

/* Queues fn(arg) for the attempt ctx under `key` (copied). Takes arg (freed with
 * arg_free, which may be NULL) whatever happens. Returns 0, or a negative errno (done
 * will not run). */
int file_job_start(tern_ctx *ctx, file_work_t *w, const char *key, file_job_fn fn, void *arg,
                   void (*arg_free)(void *), file_job_done done);

/* From a task's cancel hook: tells the jobs of the attempt ctx to stop. */
void file_work_cancel(file_work_t *w, tern_ctx *ctx);

#endif
