/*
 * sync_wire.c -- frames on a stream socket and the fields inside them (sync_wire.h).
 */
#include "sync_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void buf_reserve(sync_buf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        abort(); /* out of memory: the house's one fatal case */
    b->p = p;
    b->cap = cap;
}

void sync_buf_reset(sync_buf_t *b)
{
    b->len = 0;
}

void sync_buf_free(sync_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void sync_buf_put(sync_buf_t *b, const void *data, size_t n)
{
    buf_reserve(b, n);
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
}

void sync_buf_u8(sync_buf_t *b, uint8_t v)
{
    sync_buf_put(b, &v, 1);
}

void sync_buf_u32(sync_buf_t *b, uint32_t v)
{
    uint8_t x[4];
    sync_le32(x, v);
    sync_buf_put(b, x, 4);
}

void sync_buf_u64(sync_buf_t *b, uint64_t v)
{
    uint8_t x[8];
    sync_le64(x, v);
    sync_buf_put(b, x, 8);
}

void sync_buf_str(sync_buf_t *b, const char *s)
{
    size_t n = strlen(s);
    if (n > 65535)
        n = 65535;
    uint8_t x[2] = {(uint8_t)(n & 0xff), (uint8_t)(n >> 8)};
    sync_buf_put(b, x, 2);
    sync_buf_put(b, s, n);
}

void sync_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void sync_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t sync_get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t sync_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static const uint8_t *cur_take(sync_cur_t *c, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}

uint8_t sync_cur_u8(sync_cur_t *c)
{
    const uint8_t *p = cur_take(c, 1);
    return p ? p[0] : 0;
}

uint32_t sync_cur_u32(sync_cur_t *c)
{
    const uint8_t *p = cur_take(c, 4);
    return p ? sync_get_le32(p) : 0;
}

uint64_t sync_cur_u64(sync_cur_t *c)
{
    const uint8_t *p = cur_take(c, 8);
    return p ? sync_get_le64(p) : 0;
}

void sync_cur_bytes(sync_cur_t *c, void *out, size_t n)
{
    const uint8_t *p = cur_take(c, n);
    if (p)
        memcpy(out, p, n);
    else
        memset(out, 0, n);
}

void sync_cur_str(sync_cur_t *c, char *out, size_t cap)
{
    out[0] = '\0';
    const uint8_t *l = cur_take(c, 2);
    if (!l)
        return;
    size_t n = (size_t)l[0] | ((size_t)l[1] << 8);
    if (n >= cap) {
        c->bad = 1;
        return;
    }
    const uint8_t *p = cur_take(c, n);
    if (!p)
        return;
    memcpy(out, p, n);
    out[n] = '\0';
    if (memchr(out, '\0', n))
        c->bad = 1; /* an embedded NUL would make two names of one */
}

int sync_frame_writev(int fd, uint32_t type, const struct iovec *iov, int iovcnt,
                      atomic_uint_fast64_t *wire)
{
    struct iovec v[8];
    uint8_t hdr[SYNC_HEADER_LEN];
    size_t len = 0;
    if (iovcnt > 7)
        return -EINVAL;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > UINT32_MAX)
        return -EMSGSIZE;
    sync_le32(hdr, type);
    sync_le32(hdr + 4, (uint32_t)len);
    v[0].iov_base = hdr;
    v[0].iov_len = sizeof hdr;
    for (int i = 0; i < iovcnt; i++)
        v[i + 1] = iov[i];
    int n = iovcnt + 1, at = 0;
    while (at < n) {
        /* sendmsg for MSG_NOSIGNAL: a peer gone is an error to report, not a SIGPIPE
         * that would end the agent. */
        struct msghdr mh = {.msg_iov = v + at, .msg_iovlen = (size_t)(n - at)};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? -ETIMEDOUT : -errno;
        }
        if (wire)
            atomic_fetch_add(wire, (uint64_t)w);
        size_t left = (size_t)w;
        while (at < n && left >= v[at].iov_len) {
            left -= v[at].iov_len;
            at++;
        }
        if (at < n) {
            v[at].iov_base = (uint8_t *)v[at].iov_base + left;
            v[at].iov_len -= left;
        }
    }
    return 0;
}

int sync_frame_write(int fd, uint32_t type, const void *payload, size_t len,
                     atomic_uint_fast64_t *wire)
{
    struct iovec v = {.iov_base = (void *)payload, .iov_len = len};
    return sync_frame_writev(fd, type, &v, len ? 1 : 0, wire);
}

int sync_read_full(int fd, void *p, size_t n)
{
    uint8_t *q = p;
    while (n) {
        ssize_t r = read(fd, q, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? -ETIMEDOUT : -errno;
        }
        if (r == 0)
            return -ECONNRESET;
        q += r;
        n -= (size_t)r;
    }
    return 0;
}

int sync_frame_read(int fd, uint32_t *type, sync_buf_t *b, size_t max, atomic_uint_fast64_t *wire)
{
    uint8_t hdr[SYNC_HEADER_LEN];
    int rc = sync_read_full(fd, hdr, sizeof hdr);
    if (rc < 0)
        return rc;
    *type = sync_get_le32(hdr);
    uint32_t len = sync_get_le32(hdr + 4);
    if (len > max)
        return -EMSGSIZE;
    sync_buf_reset(b);
    buf_reserve(b, len);
    rc = sync_read_full(fd, b->p, len);
    if (rc < 0)
        return rc;
    b->len = len;
    if (wire)
        atomic_fetch_add(wire, (uint64_t)len + sizeof hdr);
    return 0;
}
