/*
 * http_stream_out.c -- the output side of a streaming response: see http_stream_out.h.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "http/http_stream_out.h"

/* See http_stream_out.h. */
void stream_buf_add(stream_buf_t *b, const char *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
}

/* See http_stream_out.h. */
void stream_buf_adds(stream_buf_t *b, const char *s)
{
    stream_buf_add(b, s, strlen(s));
}

/* See http_stream_out.h. */
void http_stream_out_start(h2o_req_t *req, h2o_generator_t *gen, const char *content_type)
{
    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type,
                   strlen(content_type));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-cache"));
    /* Reverse proxies (nginx) must not hold lines back to fill their buffers. */
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL,
                          H2O_STRLIT("no"));
    h2o_start_response(req, gen);
}

/* See http_stream_out.h. */
bool http_stream_out_send(http_stream_out_t *o, h2o_req_t *req)
{
    if (o->pending.len == 0)
        return false;
    stream_buf_t t = o->inflight;
    o->inflight = o->pending;
    o->pending = t;
    o->pending.len = 0;
    o->sending = true;
    o->wrote = true;
    h2o_iovec_t iov = h2o_iovec_init(o->inflight.s, o->inflight.len);
    h2o_send(req, &iov, 1, H2O_SEND_STATE_IN_PROGRESS);
    return true;
}

/* See http_stream_out.h. */
void http_stream_out_proceeded(http_stream_out_t *o)
{
    o->sending = false;
    o->inflight.len = 0;
}

/* See http_stream_out.h. */
void http_stream_out_free(http_stream_out_t *o)
{
    free(o->pending.s);
    free(o->inflight.s);
    o->pending = (stream_buf_t){0};
    o->inflight = (stream_buf_t){0};
}
