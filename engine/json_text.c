/*
 * json_text.c -- JSON text in jansson's compact encoding, written without a tree; see
 * json_text.h.
 */
#include "json_text.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

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

void json_text_str(json_text_t *t, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF"; /* jansson writes \u001F, not \u001f */
    const unsigned char *u = (const unsigned char *)s;
    /* The longest an escaped string can be: 6 bytes (\u00XX) per byte, and quotes. */
    reserve(t, n * 6 + 2);
    char *o = t->p + t->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned c = u[i];
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
    t->len = (size_t)(o - t->p);
    t->p[t->len] = '\0';
}

void json_text_int(json_text_t *t, long long v)
{
    char digits[24];
    size_t n = 0;
    /* Digits of the magnitude, computed unsigned so that LLONG_MIN has one too. */
    unsigned long long m = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + m % 10);
        m /= 10;
    } while (m > 0);
    reserve(t, n + 1);
    if (v < 0)
        t->p[t->len++] = '-';
    while (n > 0)
        t->p[t->len++] = digits[--n];
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
