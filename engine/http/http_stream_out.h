/*
 * http_stream_out.h -- the output side of a streaming response (GET /jobs/:uuid/events,
 * the streaming views): its headers, and two buffers that bound what it holds.
 *
 * `pending` collects what is formatted but not handed to h2o yet; `inflight` is what
 * was handed to h2o_send, kept untouched until h2o calls proceed (h2o_send is never
 * called again before that). Sending swaps the two, so a response holds at most what
 * its owner lets wait in `pending` plus one chunk in flight. The owner decides when to
 * read more, what its keep-alive is and when to send the final chunk.
 */
#ifndef TERN_HTTP_STREAM_OUT_H
#define TERN_HTTP_STREAM_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include <h2o.h> /* built with -DH2O_USE_LIBUV=1 */

typedef struct stream_buf {
    char *s; /* malloc'd, owned by the buffer */
    size_t len, cap;
} stream_buf_t;

typedef struct http_stream_out {
    stream_buf_t pending, inflight;
    bool wrote;   /* the first h2o_send (which carries the headers) is done */
    bool sending; /* an h2o_send awaits proceed */
} http_stream_out_t;

/* Appends n bytes of p (copied) to b. */
void stream_buf_add(stream_buf_t *b, const char *p, size_t n);

/* Appends the string s (copied) to b. */
void stream_buf_adds(stream_buf_t *b, const char *s);

/* Sets status 200 and the headers of a stream of `content_type` (a string that lives
 * as long as the request: a literal), and registers `gen`, whose proceed and stop
 * the caller has set. Nothing is written yet. */
void http_stream_out_start(h2o_req_t *req, h2o_generator_t *gen, const char *content_type);

/* Hands `pending` to h2o as the next chunk; false (and nothing sent) when it is empty.
 * The caller checks that no send awaits proceed (o->sending). */
bool http_stream_out_send(http_stream_out_t *o, h2o_req_t *req);

/* h2o called proceed: the chunk in flight is done with. */
void http_stream_out_proceeded(http_stream_out_t *o);

/* Frees both buffers (not o itself). */
void http_stream_out_free(http_stream_out_t *o);

#endif
