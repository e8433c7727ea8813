/* TEMPORARY stand-in of the block transfer (tasks/dc/sync/): the listener binds its
 * address and serves nothing, a pass and a digest fail ENOSYS saying the transfer is
 * not built in. Remove this directory when tasks/dc/sync/ is in the tree. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "converge.h"
#include "sync_digest.h"
#include "sync_listener.h"
#include "sync_send.h"

struct sync_listener {
    int fd;
    unsigned port;
};

int sync_listener_start(const char *listen_addr, const char *data_root, sync_listener_t **out,
                        char *err, size_t errlen)
{
    (void)data_root;
    char host[64];
    unsigned port = 0;
    const char *colon = strrchr(listen_addr, ':');
    if (colon == NULL || (size_t)(colon - listen_addr) >= sizeof host) {
        snprintf(err, errlen, "expected HOST:PORT");
        return -EINVAL;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen_addr), listen_addr);
    port = (unsigned)atoi(colon + 1);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "%s: not an IPv4 address", host);
        return -EINVAL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s", strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    sync_listener_t *l = calloc(1, sizeof *l);
    if (l == NULL) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    l->fd = fd;
    l->port = ntohs(sa.sin_port);
    *out = l;
    return 0;
}

unsigned sync_listener_port(const sync_listener_t *l)
{
    return l->port;
}

void sync_listener_stop(sync_listener_t *l)
{
    if (l == NULL)
        return;
    close(l->fd);
    free(l);
}

int sync_send_pass(const sync_send_opts_t *o, sync_counters_t *c, const atomic_bool *stop,
                   sync_pass_result_t *r, char *err, size_t errlen)
{
    (void)o;
    (void)c;
    (void)stop;
    memset(r, 0, sizeof *r);
    snprintf(err, errlen, "the block transfer is not built into this agent");
    return -ENOSYS;
}

int sync_disk_digest(const char *path, uint32_t block_size, char hex[65], uint64_t *size, char *err,
                     size_t errlen)
{
    (void)block_size;
    hex[0] = '\0';
    *size = 0;
    snprintf(err, errlen, "%s: the disk digest is not built into this agent", path);
    return -ENOSYS;
}

const char *converge_decide(const converge_rule_t *r, const uint64_t *pass_bytes, size_t n)
{
    if (n > 0 && pass_bytes[n - 1] <= r->max_bytes)
        return "size";
    if (n >= r->max_passes)
        return "max_passes";
    return NULL;
}
