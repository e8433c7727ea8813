/*
 * redis_addr.c -- parsing and printing of Redis addresses.
 *
 * Accepted forms:
 *   redis://HOST                      port 6379, database 0
 *   redis://HOST:PORT[/DB]            HOST a name, an IPv4 address or [IPv6]
 *   redis://[USER]:PASSWORD@HOST...   USER and PASSWORD percent-decoded
 *   unix:///PATH[?db=N]
 *   unix://[USER]:PASSWORD@/PATH[?db=N]   PATH percent-decoded too
 *
 * This file owns the strings of a redis_addr_t (each malloc'd, freed by
 * redis_addr_dispose) and nothing else: it does not resolve names or connect.
 *
 * Choices an operator may trip on, refused with a message rather than guessed:
 * "rediss://" (hiredis 0.14 has no TLS), userinfo without a colon (redis-cli reads
 * "redis://secret@h" as a password, other clients as a user name), query parameters on
 * redis:// (the database goes in the path), and a relative unix socket path. Every
 * message quotes the URL with its password replaced by "***", because error messages
 * end up in logs.
 */
#include "redis/redis_addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "base/alloc.h"
#include "base/error.h"

#define REDIS_DEFAULT_PORT 6379
#define REDIS_HOST_MAX     253 /* longest DNS name */

/* The raw URL with the password (or a colon-less userinfo, which may be one) replaced
 * by "***". Malloc'd. Works on anything, even text that does not parse. */
static char *redact_raw(const char *url)
{
    const char *auth = strstr(url, "://");
    auth = auth != NULL ? auth + 3 : url;
    size_t authlen = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + authlen; p++)
        if (*p == '@')
            at = p;
    if (at == NULL)
        return xstrdup(url);
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    const char *secret = colon != NULL ? colon + 1 : auth;
    return xasprintf("%.*s***%s", (int)(secret - url), url, at);
}

/* Formats the message "redis address \"<redacted url>\": <problem>". */
static int addr_err(char *err, size_t errlen, const char *url, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int addr_err(char *err, size_t errlen, const char *url, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return TERN_EINVAL;
    char problem[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    char *shown = redact_raw(url);
    snprintf(err, errlen, "redis address \"%s\": %s", shown, problem);
    free(shown);
    return TERN_EINVAL;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into a new string in *out. Returns false on a malformed
 * escape or an encoded NUL. */
static bool pct_decode(const char *s, size_t n, char **out)
{
    char *d = xmalloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            d[j++] = s[i];
            continue;
        }
        if (i + 2 >= n) {
            free(d);
            return false;
        }
        int h = hexval((unsigned char)s[i + 1]), l = hexval((unsigned char)s[i + 2]);
        if (h < 0 || l < 0 || (h == 0 && l == 0)) {
            free(d);
            return false;
        }
        d[j++] = (char)(h * 16 + l);
        i += 2;
    }
    d[j] = '\0';
    *out = d;
    return true;
}

/* Parses an unsigned decimal number made of digits only, no sign or spaces. */
static bool parse_uint(const char *s, size_t n, long max, long *out)
{
    if (n == 0 || n > 10)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* Splits "user:password" (the part before '@') into a->user and a->password. */
static int parse_userinfo(const char *url, const char *ui, size_t n, redis_addr_t *a, char *err,
                          size_t errlen)
{
    const char *colon = memchr(ui, ':', n);
    if (colon == NULL)
        return addr_err(err, errlen, url,
                        "credentials need a colon: write [USER]:PASSWORD@ (\":PASSWORD@\" for "
                        "a password alone)");
    size_t ulen = (size_t)(colon - ui);
    if (ulen > 0 && !pct_decode(ui, ulen, &a->user))
        return addr_err(err, errlen, url, "bad percent-encoding in the user name");
    if (!pct_decode(colon + 1, n - ulen - 1, &a->password))
        return addr_err(err, errlen, url, "bad percent-encoding in the password");
    if (a->password[0] == '\0')
        return addr_err(err, errlen, url,
                        "empty password (leave out \"USER:@\" when there is no password)");
    return 0;
}

static bool host_char_ok(int c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_';
}

/* Parses HOST[:PORT][/DB] of a redis:// URL. */
static int parse_tcp(const char *url, const char *s, redis_addr_t *a, char *err, size_t errlen)
{
    const char *p = s;
    const char *host;
    size_t hostlen;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (close == NULL)
            return addr_err(err, errlen, url, "IPv6 address lacks its closing ']'");
        host = p + 1;
        hostlen = (size_t)(close - host);
        char tmp[INET6_ADDRSTRLEN + 1];
        struct in6_addr in6;
        if (hostlen == 0 || hostlen >= sizeof tmp)
            return addr_err(err, errlen, url, "bad IPv6 address \"%.*s\"", (int)hostlen, host);
        memcpy(tmp, host, hostlen);
        tmp[hostlen] = '\0';
        if (inet_pton(AF_INET6, tmp, &in6) != 1)
            return addr_err(err, errlen, url, "bad IPv6 address \"%s\"", tmp);
        p = close + 1;
        if (*p != '\0' && *p != ':' && *p != '/')
            return addr_err(err, errlen, url, "unexpected \"%s\" after the IPv6 address", p);
    } else {
        host = p;
        hostlen = strcspn(p, ":/");
        if (hostlen == 0)
            return addr_err(err, errlen, url, "host is missing");
        for (size_t i = 0; i < hostlen; i++)
            if (!host_char_ok((unsigned char)host[i]))
                return addr_err(err, errlen, url, "bad character '%c' in host \"%.*s\"", host[i],
                                (int)hostlen, host);
        if (hostlen > REDIS_HOST_MAX)
            return addr_err(err, errlen, url, "host is longer than %d characters", REDIS_HOST_MAX);
        /* All digits and dots: it must be a real IPv4 address, not a name. */
        if (strspn(host, "0123456789.") >= hostlen) {
            char tmp[16];
            struct in_addr in4;
            bool ok = hostlen < sizeof tmp;
            if (ok) {
                memcpy(tmp, host, hostlen);
                tmp[hostlen] = '\0';
                ok = inet_pton(AF_INET, tmp, &in4) == 1;
            }
            if (!ok)
                return addr_err(err, errlen, url, "bad IPv4 address \"%.*s\"", (int)hostlen, host);
        }
        p = host + hostlen;
    }
    a->host = xstrndup(host, hostlen);
    a->port = REDIS_DEFAULT_PORT;

    if (*p == ':') {
        p++;
        size_t plen = strcspn(p, "/");
        long port;
        if (plen == 0)
            return addr_err(err, errlen, url, "port is empty");
        if (!parse_uint(p, plen, LONG_MAX, &port) || port < 1 || port > 65535)
            return addr_err(err, errlen, url, "port must be 1-65535");
        a->port = (int)port;
        p += plen;
    }
    if (*p == '/') {
        p++;
        size_t dlen = strlen(p);
        long db;
        if (dlen > 0) {
            if (!parse_uint(p, dlen, INT_MAX, &db))
                return addr_err(err, errlen, url, "database must be a number 0-%d, got \"%s\"",
                                INT_MAX, p);
            a->db = (int)db;
        }
    }
    return 0;
}

/* Parses /PATH[?db=N] of a unix:// URL. */
static int parse_unix(const char *url, const char *s, redis_addr_t *a, char *err, size_t errlen)
{
    if (*s != '/')
        return addr_err(err, errlen, url,
                        "socket path must be absolute (unix:///PATH, three slashes)");
    size_t plen = strcspn(s, "?");
    /* A path with a space, '?', '#' or '%' in it (a data directory named by a user)
     * can only be written percent-encoded: redis_addr_unix_url does that. */
    if (!pct_decode(s, plen, &a->path))
        return addr_err(err, errlen, url, "bad percent-encoding in the socket path");
    if (strlen(a->path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return addr_err(err, errlen, url, "socket path is longer than %zu bytes",
                        sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    const char *q = s + plen;
    if (*q == '?') {
        q++;
        if (strncmp(q, "db=", 3) != 0)
            return addr_err(err, errlen, url, "unknown query \"%s\" (only db=N)", q);
        long db;
        if (!parse_uint(q + 3, strlen(q + 3), INT_MAX, &db))
            return addr_err(err, errlen, url, "database must be a number 0-%d, got \"%s\"", INT_MAX,
                            q + 3);
        a->db = (int)db;
    }
    return 0;
}

int redis_addr_parse(const char *url, redis_addr_t *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (url == NULL)
        url = "";
    const char *sep = strstr(url, "://");
    size_t schemelen = sep != NULL ? (size_t)(sep - url) : 0;
    bool is_unix = false;
    int rc;

    if (sep == NULL) {
        rc = addr_err(err, errlen, url, "expected redis://HOST[:PORT][/DB] or unix:///PATH");
        goto Error;
    }
    if (schemelen == 5 && strncasecmp(url, "redis", 5) == 0) {
        is_unix = false;
    } else if (schemelen == 4 && strncasecmp(url, "unix", 4) == 0) {
        is_unix = true;
    } else if (schemelen == 6 && strncasecmp(url, "rediss", 6) == 0) {
        rc = addr_err(err, errlen, url,
                      "TLS (rediss://) is not supported; use a unix socket or a private network");
        goto Error;
    } else {
        rc = addr_err(err, errlen, url, "unknown scheme \"%.*s\" (redis:// or unix://)",
                      (int)schemelen, url);
        goto Error;
    }

    const char *rest = sep + 3;
    for (const char *c = rest; *c != '\0'; c++) {
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
            rc = addr_err(err, errlen, url, "contains a space or control character");
            goto Error;
        }
    }
    if (strchr(rest, '#') != NULL) {
        rc = addr_err(err, errlen, url, "unexpected '#' fragment");
        goto Error;
    }
    if (!is_unix && strchr(rest, '?') != NULL) {
        rc = addr_err(err, errlen, url,
                      "query parameters are not supported (the database goes in the path: /DB)");
        goto Error;
    }

    /* Credentials: the last '@' before the first '/' (an unencoded '@' in a password
     * is tolerated; an unencoded '/' is not). */
    size_t authlen = strcspn(rest, "/?");
    const char *at = NULL;
    for (const char *c = rest; c < rest + authlen; c++)
        if (*c == '@')
            at = c;
    if (at != NULL) {
        rc = parse_userinfo(url, rest, (size_t)(at - rest), a, err, errlen);
        if (rc != 0)
            goto Error;
        rest = at + 1;
    }

    if (is_unix) {
        if (rest[0] != '/' && strcspn(rest, "/?") > 0) {
            rc = addr_err(err, errlen, url,
                          "a unix socket URL has no host: write unix:///PATH (three slashes)");
            goto Error;
        }
        rc = parse_unix(url, rest, a, err, errlen);
    } else {
        if (*rest == '\0' || *rest == '/') {
            rc = addr_err(err, errlen, url, "host is missing");
            goto Error;
        }
        rc = parse_tcp(url, rest, a, err, errlen);
    }
    if (rc != 0)
        goto Error;
    return 0;

Error:
    redis_addr_dispose(a);
    return rc;
}

void redis_addr_dispose(redis_addr_t *a)
{
    if (a == NULL)
        return;
    free(a->host);
    free(a->path);
    free(a->user);
    if (a->password != NULL) {
        /* Do not leave the secret in freed memory. */
        volatile char *p = a->password;
        while (*p != '\0')
            *p++ = '\0';
        free(a->password);
    }
    memset(a, 0, sizeof *a);
}

/* Appends s percent-encoded (everything but RFC 3986 unreserved characters). */
static void append_encoded(char *buf, size_t cap, size_t *len, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s != '\0' && *len + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            buf[(*len)++] = (char)c;
        } else {
            buf[(*len)++] = '%';
            buf[(*len)++] = hex[c >> 4];
            buf[(*len)++] = hex[c & 0xf];
        }
    }
    buf[*len] = '\0';
}

/* s percent-encoded but for '/' and RFC 3986 unreserved characters: a path as a URL
 * writes it. Malloc'd. */
static char *path_encoded(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = xmalloc(3 * strlen(s) + 1), *o = out;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 0xf];
        }
    }
    *o = '\0';
    return out;
}

char *redis_addr_unix_url(const char *path)
{
    char *encoded = path_encoded(path);
    char *url = xasprintf("unix://%s", encoded);
    free(encoded);
    return url;
}

char *redis_addr_redacted(const redis_addr_t *a)
{
    char creds[3 * 256 + 8] = "";
    if (a->user != NULL || a->password != NULL) {
        size_t len = 0;
        if (a->user != NULL)
            append_encoded(creds, sizeof creds - 8, &len, a->user);
        snprintf(creds + len, sizeof creds - len, "%s@", a->password != NULL ? ":***" : "");
    }
    if (a->path != NULL) {
        char *path = path_encoded(a->path), *url;
        if (a->db != 0)
            url = xasprintf("unix://%s%s?db=%d", creds, path, a->db);
        else
            url = xasprintf("unix://%s%s", creds, path);
        free(path);
        return url;
    }
    const char *host = a->host != NULL ? a->host : "";
    bool v6 = strchr(host, ':') != NULL;
    char dbpart[16] = "";
    if (a->db != 0)
        snprintf(dbpart, sizeof dbpart, "/%d", a->db);
    return xasprintf("redis://%s%s%s%s:%d%s", creds, v6 ? "[" : "", host, v6 ? "]" : "", a->port,
                     dbpart);
}
