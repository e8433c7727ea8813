/*
 * log.c -- the engine's structured log: one bunyan-shaped JSON object per line.
 *
 * This file owns the process-wide log settings (name, hostname, lowest level, file
 * descriptor) and the encoding of a line. It does not own the file descriptor it
 * writes to (the caller opened it and closes it) and it keeps no buffer between
 * calls: every line is built in memory private to the call (a stack buffer that
 * moves to the heap when the line outgrows it) and handed to the kernel with a
 * single write(2), retried only for the part a partial write left over. The settings
 * are read under a mutex, so threads of the libuv pool may log concurrently with the
 * loop thread and with a later log_init(), and the write is serialised by another, so
 * the lines of one process never interleave even when a long line needs two writes.
 *
 * The line's fields, in order: name, hostname, pid, level, component (when given),
 * the members of `fields` (skipping any that would repeat a core field), msg, time,
 * v. The message is formatted with printf, cut at LOG_MSG_MAX bytes (on a UTF-8
 * character boundary) with a marker saying how long it was, and escaped so that the
 * line is valid JSON whatever bytes it holds: control characters become \uXXXX
 * escapes and invalid UTF-8 becomes U+FFFD.
 */
#include "base/log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/iso8601.h"
#include "base/json_text.h"

/* Longest message kept, in bytes, before the truncation marker. */
#define LOG_MSG_MAX (64u * 1024u)
/* Longest wait for a non-blocking descriptor to drain, per line. */
#define LOG_WRITE_WAIT_MS 1000

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;   /* the settings below */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER; /* one line at a time */
static char log_name[64] = "ternd";
static char log_hostname[256];
static int log_min_level = TERN_LOG_INFO;
static int log_fd = 2;
/* The process id, read once (getpid is a system call, made for every line before); a
 * forked child reads its own (see log_forked). */
static long log_pid;
static pthread_once_t log_pid_once = PTHREAD_ONCE_INIT;

static void log_forked(void)
{
    log_pid = (long)getpid();
}

static void log_pid_init(void)
{
    log_pid = (long)getpid();
    if (pthread_atfork(NULL, NULL, log_forked) != 0)
        log_pid = 0; /* read per line then */
}

/* ---- a growable byte buffer private to one call ---------------------------------- */

typedef struct linebuf {
    char *p;
    size_t len, cap;
    bool heap; /* p was malloc'd (the caller's stack buffer was outgrown) */
} linebuf_t;

static void lb_reserve(linebuf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap * 2;
    while (cap < b->len + more)
        cap *= 2;
    if (b->heap) {
        b->p = xrealloc(b->p, cap);
    } else {
        char *p = xmalloc(cap);
        memcpy(p, b->p, b->len);
        b->p = p;
        b->heap = true;
    }
    b->cap = cap;
}

static void lb_add(linebuf_t *b, const char *s, size_t n)
{
    lb_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void lb_str(linebuf_t *b, const char *s)
{
    lb_add(b, s, strlen(s));
}

static void lb_fmt(linebuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lb_fmt(linebuf_t *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        n = 0; /* only used for numbers, which always fit */
    lb_add(b, tmp, (size_t)n);
}

/* Appends a real as jansson's encoder writes it (17 significant digits, ".0" when
 * that reads as an integer, no '+' or leading zeros in the exponent), so that a line
 * of log_line reads as the same line of log_msg. */
static void lb_real(linebuf_t *b, double v)
{
    char tmp[40];
    int n = snprintf(tmp, sizeof tmp, "%.17g", v);
    if (n < 0 || (size_t)n >= sizeof tmp - 3)
        return;
    if (strchr(tmp, '.') == NULL && strchr(tmp, 'e') == NULL) {
        memcpy(tmp + n, ".0", 3);
        n += 2;
    }
    char *e = strchr(tmp, 'e');
    if (e != NULL) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)(tmp + n + 1 - end));
            n -= (int)(end - start);
        }
    }
    lb_add(b, tmp, (size_t)n);
}

/* Appends s[0..n) as a JSON string, quotes included; bytes that are not UTF-8 become
 * \ufffd (json_escape). */
static void lb_json_str(linebuf_t *b, const char *s, size_t n)
{
    lb_reserve(b, JSON_ESCAPE_MAX(n));
    b->len += json_escape(b->p + b->len, s, n, true);
}

/* Appends `"key":` for a member name. */
static void lb_key(linebuf_t *b, const char *key)
{
    lb_add(b, ",", 1);
    lb_json_str(b, key, strlen(key));
    lb_add(b, ":", 1);
}

/* ---- settings ------------------------------------------------------------------- */

static void fill_hostname_locked(void)
{
    if (log_hostname[0] != '\0')
        return;
    if (gethostname(log_hostname, sizeof log_hostname - 1) != 0)
        snprintf(log_hostname, sizeof log_hostname, "unknown");
    log_hostname[sizeof log_hostname - 1] = '\0';
}

void log_init(const char *name, int min_level, int fd)
{
    pthread_mutex_lock(&log_lock);
    if (name != NULL)
        snprintf(log_name, sizeof log_name, "%s", name);
    log_min_level = min_level;
    log_fd = fd;
    log_hostname[0] = '\0'; /* read again: the host may have been renamed */
    fill_hostname_locked();
    pthread_mutex_unlock(&log_lock);
}

int log_level_parse(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {
        {"trace", TERN_LOG_TRACE}, {"debug", TERN_LOG_DEBUG}, {"info", TERN_LOG_INFO},
        {"warn", TERN_LOG_WARN},   {"error", TERN_LOG_ERROR}, {"fatal", TERN_LOG_FATAL},
    };
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(levels); i++) {
        char num[8];
        snprintf(num, sizeof num, "%d", levels[i].level);
        if (strcasecmp(s, levels[i].name) == 0 || strcmp(s, num) == 0)
            return levels[i].level;
    }
    return -1;
}

int log_enabled(int level)
{
    pthread_mutex_lock(&log_lock);
    int on = level >= log_min_level;
    pthread_mutex_unlock(&log_lock);
    return on;
}

/* ---- writing -------------------------------------------------------------------- */

/* Writes all of buf to fd: retries on EINTR and after partial writes, and waits (with
 * a bound) when a non-blocking descriptor is full. Gives up silently otherwise: a
 * logger has nowhere to report its own failure. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int r;
            do {
                r = poll(&pfd, 1, LOG_WRITE_WAIT_MS);
            } while (r < 0 && errno == EINTR);
            if (r > 0)
                continue;
        }
        return;
    }
}

/* Formats the message into *out (malloc'd when it does not fit `small`), cut at
 * LOG_MSG_MAX bytes with a marker. Returns its length. */
static size_t format_msg(char *small, size_t smallcap, char **out, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, smallcap, fmt, ap2);
    va_end(ap2);
    *out = small;
    if (n < 0) {
        snprintf(small, smallcap, "(log format error: \"%s\")", fmt);
        return strlen(small);
    }
    if ((size_t)n < smallcap)
        return (size_t)n;

    size_t full = (size_t)n;
    size_t keep = full > LOG_MSG_MAX ? LOG_MSG_MAX : full;
    char marker[80] = "";
    if (full > LOG_MSG_MAX)
        snprintf(marker, sizeof marker, "...[truncated: message was %zu bytes]", full);
    size_t mlen = strlen(marker);
    char *big = xmalloc(full > LOG_MSG_MAX ? LOG_MSG_MAX + 1 + mlen : full + 1);
    va_copy(ap2, ap);
    vsnprintf(big, keep + 1, fmt, ap2);
    va_end(ap2);
    if (full > LOG_MSG_MAX) {
        /* If the cut falls inside a UTF-8 character, drop that character's head so
         * the cut itself makes no invalid byte. */
        size_t start = keep;
        while (start > 0 && keep - start < 4 && ((unsigned char)big[start - 1] & 0xc0) == 0x80)
            start--;
        if (start > 0) {
            unsigned lead = (unsigned char)big[start - 1];
            size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
            if (want > keep - (start - 1))
                keep = start - 1;
        }
        memcpy(big + keep, marker, mlen + 1);
        keep += mlen;
    }
    *out = big;
    return keep;
}

/* True when a member named `key` may not be written: it would repeat a core field of
 * the line (or the component, when one is given). */
static bool core_key(const char *key, const char *component)
{
    static const char *const core[] = {"name", "hostname", "pid", "level", "msg", "time", "v"};
    if (component != NULL && strcmp(key, "component") == 0)
        return true;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(core); i++)
        if (strcmp(key, core[i]) == 0)
            return true;
    return false;
}

/* Appends the members of `fields` (a jansson object) that are not core fields. */
static void add_json_fields(linebuf_t *b, const char *component, const json_t *fields)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)fields, key, value)
    {
        if (core_key(key, component))
            continue;
        /* Plain values written here: an encoder run and an allocation per field cost
         * a tenth of ternd's CPU in its access log at full speed. */
        if (json_is_string(value)) {
            lb_key(b, key);
            lb_json_str(b, json_string_value(value), json_string_length(value));
            continue;
        }
        if (json_is_integer(value)) {
            lb_key(b, key);
            lb_fmt(b, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
            continue;
        }
        if (json_is_real(value)) {
            lb_key(b, key);
            lb_real(b, json_real_value(value));
            continue;
        }
        char *enc = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (enc == NULL)
            continue;
        lb_key(b, key);
        lb_str(b, enc);
        free(enc); /* json_dumps' result is ours */
    }
}

/* Appends the members of log_line's `fields` that are not core fields. */
static void add_typed_fields(linebuf_t *b, const char *component, const log_field_t *fields,
                             size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const log_field_t *fl = &fields[i];
        if (core_key(fl->key, component))
            continue;
        lb_key(b, fl->key);
        switch (fl->type) {
        case LOG_FIELD_STR:
            if (fl->str != NULL)
                lb_json_str(b, fl->str, strlen(fl->str));
            else
                lb_str(b, "null");
            break;
        case LOG_FIELD_INT:
            lb_fmt(b, "%lld", fl->num);
            break;
        case LOG_FIELD_REAL:
            lb_real(b, fl->real);
            break;
        }
    }
}

/* The settings a line is written with, read together. */
typedef struct line_settings {
    char name[sizeof log_name], hostname[sizeof log_hostname];
    int fd;
} line_settings_t;

/* Reads the settings into *ls; false when lines of `level` are not written. */
static bool line_settings(int level, line_settings_t *ls)
{
    pthread_mutex_lock(&log_lock);
    if (level < log_min_level) {
        pthread_mutex_unlock(&log_lock);
        return false;
    }
    fill_hostname_locked();
    memcpy(ls->name, log_name, sizeof ls->name);
    memcpy(ls->hostname, log_hostname, sizeof ls->hostname);
    ls->fd = log_fd;
    pthread_mutex_unlock(&log_lock);
    return true;
}

/* Writes one line: the core fields, the members of `json_fields` (an object, or NULL)
 * or of `fields[0..n)`, and the message `msg` (msglen bytes, already cut). */
static void write_line(const line_settings_t *ls, int level, const char *component,
                       const json_t *json_fields, const log_field_t *fields, size_t n,
                       const char *msg, size_t msglen)
{
    const char *name = ls->name, *hostname = ls->hostname;
    char stack[4096];
    linebuf_t b = {.p = stack, .len = 0, .cap = sizeof stack, .heap = false};

    lb_str(&b, "{\"name\":");
    lb_json_str(&b, name, strlen(name));
    lb_key(&b, "hostname");
    lb_json_str(&b, hostname, strlen(hostname));
    lb_key(&b, "pid");
    pthread_once(&log_pid_once, log_pid_init);
    lb_fmt(&b, "%ld", log_pid != 0 ? log_pid : (long)getpid());
    lb_key(&b, "level");
    lb_fmt(&b, "%d", level);
    if (component != NULL) {
        lb_key(&b, "component");
        lb_json_str(&b, component, strlen(component));
    }
    if (json_is_object(json_fields))
        add_json_fields(&b, component, json_fields);
    add_typed_fields(&b, component, fields, n);
    lb_key(&b, "msg");
    lb_json_str(&b, msg, msglen);
    char when[32];
    iso8601_format(clock_wall_ms(), when);
    lb_key(&b, "time");
    lb_json_str(&b, when, strlen(when));
    lb_str(&b, ",\"v\":0}\n");

    /* The kernel keeps a single write whole only up to PIPE_BUF on a pipe; a partial
     * write finished by a second call must not let another thread's line in between. */
    pthread_mutex_lock(&write_lock);
    write_all(ls->fd, b.p, b.len);
    pthread_mutex_unlock(&write_lock);

    if (b.heap)
        free(b.p);
}

void log_vmsg(int level, const char *component, const json_t *fields, const char *fmt, va_list ap)
{
    line_settings_t ls;
    if (!line_settings(level, &ls))
        return;
    char msgsmall[1024];
    char *msg;
    size_t msglen = format_msg(msgsmall, sizeof msgsmall, &msg, fmt, ap);
    write_line(&ls, level, component, fields, NULL, 0, msg, msglen);
    if (msg != msgsmall)
        free(msg);
}

/* format_msg with the arguments given here. */
static size_t cut_msg(char *small, size_t smallcap, char **out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t cut_msg(char *small, size_t smallcap, char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = format_msg(small, smallcap, out, fmt, ap);
    va_end(ap);
    return n;
}

void log_line(int level, const char *component, const log_field_t *fields, size_t n,
              const char *msg, size_t msglen)
{
    line_settings_t ls;
    if (!line_settings(level, &ls))
        return;
    if (msglen <= LOG_MSG_MAX) {
        write_line(&ls, level, component, NULL, fields, n, msg, msglen);
        return;
    }
    /* A long message is cut as log_msg cuts one (rare: messages here are short). */
    char msgsmall[1024];
    char *cut;
    size_t cutlen = cut_msg(msgsmall, sizeof msgsmall, &cut, "%.*s",
                            msglen < INT_MAX ? (int)msglen : INT_MAX, msg);
    write_line(&ls, level, component, NULL, fields, n, cut, cutlen);
    if (cut != msgsmall)
        free(cut);
}

void log_msg(int level, const char *component, const json_t *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, component, fields, fmt, ap);
    va_end(ap);
}
