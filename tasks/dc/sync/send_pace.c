/*
 * send_pace.c -- when a pass's progress is reported (send_pace.h).
 */
#include "send_pace.h"

void send_pace_start(send_pace_t *p, uint64_t keepalive_ms, uint64_t now_ms)
{
    p->keepalive_ms = keepalive_ms ? keepalive_ms : 1;
    p->last_ms = now_ms;
    p->last_sent = 0;
    p->last_walked = 0;
}

bool send_pace_due(const send_pace_t *p, uint64_t now_ms, uint64_t sent, uint64_t walked)
{
    if (sent != p->last_sent || walked != p->last_walked)
        return true;
    /* A clock read before the last report (never on a monotonic clock, but the caller
     * owns it) is not a wrap-around of 2^64 ms. */
    return now_ms >= p->last_ms && now_ms - p->last_ms >= p->keepalive_ms;
}

void send_pace_reported(send_pace_t *p, uint64_t now_ms, uint64_t sent, uint64_t walked)
{
    p->last_ms = now_ms;
    p->last_sent = sent;
    p->last_walked = walked;
}
