/*
 * json_text.c -- JSON text in jansson's compact encoding, written without a tree; see
 * json_text.h.
 */
#include "base/json_text.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/decimal.h"
#include "base/error.h"

void json_text_init(json_text_t *t, size_t cap)
{
    t->cap = cap > 16 ? cap : 16;
    t->p = xmalloc(t->cap);
    t->p[0] = '\0';
    t->len = 0;
}

void json_text_dispose(json_text_t *t)
{
    free(t->p);
    *t = (json_text_t){0};
}

/* Room for `more` bytes and the NUL after them. */
static void reserve(json_text_t *t, size_t more)
{
    if (t->len + more < t->cap)
        return;
    size_t cap = t->cap > 0 ? t->cap * 2 : 64;
    while (cap <= t->len + more)
        cap *= 2;
    t->p = xrealloc(t->p, cap);
    t->cap = cap;
}

void json_text_raw(json_text_t *t, const char *s, size_t n)
{
    reserve(t, n);
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes available), or 0
 * when the bytes there are not one (bad lead byte, bad continuation, overlong form,
 * surrogate, beyond U+10FFFF, or cut short). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t json_escape(char *out, const char *s, size_t n, bool repair)
{
    static const char hex[] = "0123456789ABCDEF"; /* jansson writes \u001F, not \u001f */
    const unsigned char *u = (const unsigned char *)s;
    char *o = out;
    *o++ = '"';
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c >= 0x80 && repair) {
            size_t len = utf8_seq_len(u + i, n - i);
            if (len == 0) {
                memcpy(o, "\\ufffd", 6); /* one replacement per invalid byte */
                o += 6;
                i++;
            } else {
                memcpy(o, s + i, len);
                o += len;
                i += len;
            }
            continue;
        }
        i++;
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"':
        case '\\':
            *o++ = (char)c;
            break;
        case '\b':
            *o++ = 'b';
            break;
        case '\f':
            *o++ = 'f';
            break;
        case '\n':
            *o++ = 'n';
            break;
        case '\r':
            *o++ = 'r';
            break;
        case '\t':
            *o++ = 't';
            break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 0xf];
        }
    }
    *o++ = '"';
    return (size_t)(o - out);
}

void json_text_str(json_text_t *t, const char *s, size_t n)
{
    reserve(t, JSON_ESCAPE_MAX(n));
    t->len += json_escape(t->p + t->len, s, n, false);
    t->p[t->len] = '\0';
}

void json_text_int(json_text_t *t, long long v)
{
    /* Digits of the magnitude, computed unsigned so that LLONG_MIN has one too. */
    uint64_t m = v < 0 ? 0ull - (uint64_t)v : (uint64_t)v;
    char buf[U64_TEXT_DIGITS + 1];
    const char *digits = u64_text(m, buf);
    size_t n = (size_t)(buf + U64_TEXT_DIGITS - digits);
    reserve(t, n + 1);
    if (v < 0)
        t->p[t->len++] = '-';
    memcpy(t->p + t->len, digits, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static int append_cb(const char *buffer, size_t size, void *data)
{
    json_text_raw(data, buffer, size);
    return 0;
}

int json_text_value(json_text_t *t, const json_t *v)
{
    size_t start = t->len;
    if (v == NULL || json_dump_callback(v, append_cb, t, JSON_COMPACT | JSON_ENCODE_ANY) != 0) {
        t->len = start; /* what a failed encoding wrote before it failed */
        t->p[start] = '\0';
        return TERN_EINVAL;
    }
    return 0;
}
