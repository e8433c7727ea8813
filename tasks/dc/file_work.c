/*
 * file_work.c -- file jobs on the thread pool (file_work.h). The registry owns every
 * job from file_job_start until done has run (or, for a cancelled job, until it is
 * seen finished); a job owns its key and its argument.
 */
#include "file_work.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_LEN 1024

typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_FINISHED } job_phase_t;

typedef struct file_job file_job_t;

struct file_job {
    file_work_t *work;
    tern_ctx *ctx; /* the attempt waiting for done; cleared when it is cancelled */
    char *key;
    file_job_fn fn;
    void *arg;
    void (*arg_free)(void *);
    file_job_done done;
    atomic_bool stop;
    job_phase_t phase; /* under work->lock */
    bool cancelled;    /* under work->lock: nobody waits for the outcome */
    int rc;
    char err[ERR_LEN];
    file_job_t *next;
};

struct file_work {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job finished */
    file_job_t *jobs;
};

file_work_t *file_work_new(void)
{
    file_work_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->changed, NULL);
    return w;
}

static void job_free(file_job_t *j)
{
    if (j->arg_free != NULL)
        j->arg_free(j->arg);
    free(j->key);
    free(j);
}

/* Unlinks j from the registry; under the lock. */
static void job_unlink(file_work_t *w, file_job_t *j)
{
    for (file_job_t **p = &w->jobs; *p != NULL; p = &(*p)->next) {
        if (*p == j) {
            *p = j->next;
            return;
        }
    }
}

/* Frees the cancelled jobs that have finished; under the lock. A cancelled job still
 * queued may yet be picked up by a pool thread, so it waits for file_work_free. */
static void sweep(file_work_t *w)
{
    for (file_job_t **p = &w->jobs; *p != NULL;) {
        file_job_t *j = *p;
        if (j->cancelled && j->phase == JOB_FINISHED) {
            *p = j->next;
            job_free(j);
        } else {
            p = &j->next;
        }
    }
}

void file_work_free(file_work_t *w)
{
    if (w == NULL)
        return;
    while (w->jobs != NULL) {
        file_job_t *j = w->jobs;
        w->jobs = j->next;
        job_free(j);
    }
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static bool key_busy(const file_work_t *w, const file_job_t *self)
{
    for (const file_job_t *j = w->jobs; j != NULL; j = j->next)
        if (j != self && j->phase == JOB_RUNNING && strcmp(j->key, self->key) == 0)
            return true;
    return false;
}

static void on_work(void *data)
{
    file_job_t *j = data;
    file_work_t *w = j->work;
    pthread_mutex_lock(&w->lock);
    while (!j->cancelled && key_busy(w, j))
        pthread_cond_wait(&w->changed, &w->lock);
    if (j->cancelled) {
        j->rc = -ECANCELED;
        j->phase = JOB_FINISHED;
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->lock);
        return;
    }
    j->phase = JOB_RUNNING;
    pthread_mutex_unlock(&w->lock);

    j->err[0] = '\0';
    int rc = j->fn(j->arg, &j->stop, j->err, sizeof j->err);

    pthread_mutex_lock(&w->lock);
    j->rc = rc;
    j->phase = JOB_FINISHED;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

static void on_after(tern_ctx *ctx, void *data, int status)
{
    file_job_t *j = data;
    file_work_t *w = j->work;
    pthread_mutex_lock(&w->lock);
    job_unlink(w, j);
    pthread_mutex_unlock(&w->lock);
    if (status != 0 && j->rc == 0) {
        j->rc = status;
        snprintf(j->err, sizeof j->err, "the thread pool did not run the job on %s", j->key);
    }
    j->done(ctx, j->arg, j->rc, j->err);
    job_free(j);
}

int file_job_start(tern_ctx *ctx, file_work_t *w, const char *key, file_job_fn fn, void *arg,
                   void (*arg_free)(void *), file_job_done done)
{
    file_job_t *j = calloc(1, sizeof *j);
    char *k = strdup(key);
    if (j == NULL || k == NULL) {
        free(j);
        free(k);
        if (arg_free != NULL)
            arg_free(arg);
        return -ENOMEM;
    }
    *j = (file_job_t){
        .work = w, .ctx = ctx, .key = k, .fn = fn, .arg = arg, .arg_free = arg_free, .done = done};
    atomic_init(&j->stop, false);
    pthread_mutex_lock(&w->lock);
    sweep(w);
    j->next = w->jobs;
    w->jobs = j;
    pthread_mutex_unlock(&w->lock);
    int rc = tern_work(ctx, on_work, on_after, j);
    if (rc != 0) {
        pthread_mutex_lock(&w->lock);
        job_unlink(w, j);
        pthread_mutex_unlock(&w->lock);
        job_free(j);
        return rc;
    }
    return 0;
}

void file_work_cancel(file_work_t *w, tern_ctx *ctx)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    for (file_job_t *j = w->jobs; j != NULL; j = j->next) {
        if (j->ctx == ctx && !j->cancelled) {
            j->cancelled = true;
            j->ctx = NULL;
            atomic_store(&j->stop, true);
        }
    }
    /* A job waiting for its key wakes up and finishes at once. */
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}
