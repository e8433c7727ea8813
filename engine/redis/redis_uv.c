/*
 * redis_uv.c -- tern's libuv adapter for hiredis async contexts. See redis_uv.h for
 * why it exists. It owns one uv_poll_t per context; hiredis owns the context and calls
 * the cleanup hook when it frees it, after which the poll handle is closed and the
 * adapter's memory released in the close callback.
 */
#include "redis/redis_uv.h"

#include <stdlib.h>

#include "base/alloc.h"

typedef struct redis_uv {
    redisAsyncContext *ac; /* NULL once hiredis has cleaned up */
    uv_poll_t poll;
    int events; /* UV_READABLE | UV_WRITABLE currently wanted by hiredis */
} redis_uv_t;

static void on_poll(uv_poll_t *handle, int status, int events)
{
    redis_uv_t *a = handle->data;
    if (status < 0) {
        /* POLLERR or similar: let hiredis perform the I/O it waits for, so that it
         * reads the socket error and reports it through its callbacks. */
        events = a->events;
    }
    /* Each call may free the context (and run cleanup), so re-check between them. */
    if (a->ac != NULL && (events & UV_READABLE))
        redisAsyncHandleRead(a->ac);
    if (a->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(a->ac);
}

static void update_poll(redis_uv_t *a, int events)
{
    if (events == a->events)
        return;
    a->events = events;
    if (events == 0)
        uv_poll_stop(&a->poll);
    else
        uv_poll_start(&a->poll, events, on_poll);
}

static void add_read(void *privdata)
{
    redis_uv_t *a = privdata;
    update_poll(a, a->events | UV_READABLE);
}

static void del_read(void *privdata)
{
    redis_uv_t *a = privdata;
    update_poll(a, a->events & ~UV_READABLE);
}

static void add_write(void *privdata)
{
    redis_uv_t *a = privdata;
    update_poll(a, a->events | UV_WRITABLE);
}

static void del_write(void *privdata)
{
    redis_uv_t *a = privdata;
    update_poll(a, a->events & ~UV_WRITABLE);
}

static void on_poll_closed(uv_handle_t *handle)
{
    free(handle->data);
}

static void cleanup(void *privdata)
{
    redis_uv_t *a = privdata;
    a->ac = NULL;
    a->events = 0;
    uv_close((uv_handle_t *)&a->poll, on_poll_closed);
}

int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (ac->ev.data != NULL)
        return UV_EBUSY;
    redis_uv_t *a = xcalloc(1, sizeof *a);
    int rc = uv_poll_init_socket(loop, &a->poll, ac->c.fd);
    if (rc != 0) {
        free(a);
        return rc;
    }
    a->ac = ac;
    a->poll.data = a;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    ac->ev.data = a;
    return 0;
}
