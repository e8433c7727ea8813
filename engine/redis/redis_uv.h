/*
 * redis_uv.h -- attaches a hiredis 0.14 async context to a libuv loop.
 *
 * hiredis ships an adapter for libuv, but its poll callback ignores an error status:
 * libuv reports POLLERR (a refused connect, a reset) as a negative status with no
 * events and stops the handle, so the error never reaches hiredis and the context
 * hangs forever. This adapter hands an error status to hiredis as the events it was
 * waiting for, so hiredis reads or writes, sees the socket error and tears down
 * through its normal callbacks.
 */
#ifndef TERN_REDIS_UV_H
#define TERN_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches `ac` to `loop`. Attach before setting the connect callback (hiredis asks
 * the adapter for a write event when the callback is set). Returns 0, or a negative
 * libuv error (the context is then left unattached and the caller frees it). */
int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif /* TERN_REDIS_UV_H */
