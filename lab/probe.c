/*
 * probe.c -- Redis and HTTP probes (probe.h). Owns the socket of each call.
 */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define HTTP_MAX (8u << 20) /* the largest answer read (GET /runners of a big lab) */

static void set_timeouts(int fd, unsigned timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int probe_redis_ping(const char *path, unsigned timeout_ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return 0;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    set_timeouts(fd, timeout_ms);
    char reply[64] = "";
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && send_all(fd, "PING\r\n", 6) == 0) {
        ssize_t n = recv(fd, reply, sizeof reply - 1, 0);
        ok = n >= 7 && strncmp(reply, "+PONG\r\n", 7) == 0;
    }
    close(fd);
    return ok;
}

int probe_http_get(unsigned port, const char *path, const char *token, unsigned timeout_ms,
                   char **body)
{
    return probe_http_send(port, "GET", path, NULL, token, timeout_ms, body);
}

int probe_http_send(unsigned port, const char *method, const char *path, const char *json,
                    const char *token, unsigned timeout_ms, char **body)
{
    *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    set_timeouts(fd, timeout_ms);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[1024], length[96] = "";
    if (json != NULL)
        snprintf(length, sizeof length, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                 strlen(json));
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%u\r\nAccept: application/json\r\n"
                     "%s%s%s%sConnection: close\r\n\r\n",
                     method, path, port, length, token != NULL ? "Authorization: Bearer " : "",
                     token != NULL ? token : "", token != NULL ? "\r\n" : "");
    if (n <= 0 || (size_t)n >= sizeof req || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        send_all(fd, req, (size_t)n) != 0 ||
        (json != NULL && send_all(fd, json, strlen(json)) != 0)) {
        close(fd);
        return 0;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        abort();
    for (;;) {
        if (len + 1 == cap) {
            if (cap >= HTTP_MAX)
                break;
            cap *= 2;
            buf = realloc(buf, cap);
            if (buf == NULL)
                abort();
        }
        ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    int status = 0;
    char *head_end = strstr(buf, "\r\n\r\n");
    if (head_end == NULL || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        free(buf);
        return 0;
    }
    size_t body_len = len - (size_t)(head_end + 4 - buf);
    memmove(buf, head_end + 4, body_len + 1);
    *body = buf;
    return status;
}
