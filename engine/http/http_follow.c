/*
 * http_follow.c -- the life of a streaming response that follows a Redis stream
 * (http_follow.h).
 */
#include "http/http_follow.h"

#include "base/metrics.h"

static void maybe_free(http_follow_t *f)
{
    if (!f->done || f->timer_open || f->reading)
        return;
    http_stream_out_free(&f->out);
    f->ops->free(f);
}

static void on_timer_closed(uv_handle_t *h)
{
    http_follow_t *f = h->data;
    f->timer_open = false;
    metrics_streams_add(-1);
    maybe_free(f);
}

/* Ends the response's own resources; h2o is not touched here (the caller has sent the
 * final chunk, or h2o has stopped the response). */
static void follow_close(http_follow_t *f, const char *why)
{
    if (f->done)
        return;
    f->done = true;
    f->req = NULL;
    f->why = why;
    event_hub_unwatch(f->watch);
    f->watch = NULL;
    f->ops->log_end(f, why);
    uv_timer_stop(&f->heartbeat);
    uv_close((uv_handle_t *)&f->heartbeat, on_timer_closed);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    http_follow_t *f = (http_follow_t *)gen;
    http_stream_out_proceeded(&f->out);
    f->ops->pump(f);
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    http_follow_t *f = (http_follow_t *)gen;
    f->out.sending = false;
    follow_close(f, "client gone");
}

static void on_heartbeat(uv_timer_t *t)
{
    http_follow_t *f = t->data;
    if (f->done)
        return;
    /* A stream that is already writing learns from that write that a client is gone. */
    if (!f->out.sending && f->out.pending.len == 0)
        stream_buf_adds(&f->out.pending, f->ops->keepalive);
    /* A read that finds nothing new costs one short XRANGE. */
    f->read_wanted = true;
    f->ops->pump(f);
}

void http_follow_start(http_follow_t *f, h2o_req_t *req, uv_loop_t *loop, const char *content_type,
                       uint32_t heartbeat_ms)
{
    f->req = req;
    f->gen.proceed = on_proceed;
    f->gen.stop = on_stop;
    http_stream_out_start(req, &f->gen, content_type);
    metrics_streams_add(1);
    uv_timer_init(loop, &f->heartbeat);
    f->heartbeat.data = f;
    f->timer_open = true;
    uv_timer_start(&f->heartbeat, on_heartbeat, heartbeat_ms, heartbeat_ms);
}

void http_follow_on_note(void *data, event_hub_note_t note)
{
    http_follow_t *f = data;
    if (note == EVENT_HUB_SHUTDOWN) {
        event_hub_unwatch(f->watch);
        f->watch = NULL;
        f->hub = NULL;
        f->ending = true;
        f->why = "server shutting down";
    } else {
        f->read_wanted = true;
    }
    f->ops->pump(f);
}

void http_follow_flush(http_follow_t *f)
{
    if (f->done || f->out.sending || f->req == NULL || (f->ops->ready != NULL && !f->ops->ready(f)))
        return;
    if (!f->out.wrote && f->out.pending.len == 0 && !f->ending)
        stream_buf_adds(&f->out.pending, f->ops->first_chunk);
    if (!http_stream_out_send(&f->out, f->req) && f->ending) {
        h2o_req_t *req = f->req;
        follow_close(f, f->why != NULL ? f->why : f->ops->ended_why);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
    }
}

bool http_follow_read_done(http_follow_t *f)
{
    f->reading = false;
    if (f->done) {
        maybe_free(f);
        return false;
    }
    return true;
}
