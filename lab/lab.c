/*
 * lab.c -- tern-lab, a datacenter on this machine (docs/LAB.md):
 *
 *   tern-lab up    [--datacenter FILE] [--dir DIR] [--port N] [...]
 *   tern-lab down  [--dir DIR] [--grace-ms N]
 *   tern-lab restart-agent HOSTNAME|UUID [--dir DIR]
 *   tern-lab restart-control [--dir DIR] [--grace-ms N]
 *   tern-lab check [--datacenter FILE] [--dir DIR]
 *
 * `up` checks the description (the dc plugin's own parser: every fault with its JSON
 * path), makes the lab directory, the servers' data roots and the missing image
 * files, then starts one redis-server (unix socket in the lab directory, no TCP
 * port), one control-plane ternd (API and runner, on 127.0.0.1) and one agent per
 * server: a ternd runner serving the queue "server:<uuid>" as runner
 * "agent-<hostname>", whose dc configuration names its server and data root and a
 * free 127.0.0.1 port for the migrations into it (migration_listen; restart-agent
 * keeps the one the agent's ternd.json holds). It
 * records each pid in DIR/run/, waits (bounded) until Redis answers, the API answers
 * /ping and every agent is alive on its queue in GET /runners, runs a job of the
 * workflow dc-inventory-load (stored first when ternd does not have it) that loads the
 * description into the inventory in Redis, installs the datacenter's schedules
 * (net-reconcile@<hostname>, share-watch@<hostname>: dc_schedules.h), makes each
 * agent's start reconcile (a net-reconcile job due after a random delay), and prints
 * TERN_URL=http://127.0.0.1:PORT as its last line. On any failure it stops what it
 * started and says why. `restart-agent` makes the restarted agent's start reconcile.
 *
 * `down` stops, by pid, the agents, the control ternd, the instance workloads whose
 * pid files are in the servers' data roots (each <data root>/<instance>/NAME.pid) and
 * Redis, in that order: SIGTERM, then SIGKILL after the grace period.
 *
 * The lab directory (default ./lab-run):
 *   datacenter.json    the description the lab runs (a copy; paths relative to DIR)
 *   lab.env            TERN_URL=...
 *   run/NAME.pid       redis, control, agent-<hostname>
 *   redis/             redis.conf, redis.sock, redis.log, the append-only files
 *   control/, agents/<hostname>/   each ternd's ternd.json and ternd.log
 *   <data roots>, <image files>    as the description says
 *
 * Only this file exits; the helpers return errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "datacenter.h"
#include "dc_schedules.h"
#include "image_file.h"
#include "lab_default_datacenter.h"
#include "lab_inventory_workflow.h"
#include "lab_reconcile_workflow.h"
#include "probe.h"
#include "proc_check.h"
#include "procs.h"

#define DEFAULT_DIR        "lab-run"
#define DEFAULT_TIMEOUT_MS 30000 /* up: everything ready within */
#define DEFAULT_GRACE_MS   15000 /* down: SIGTERM to SIGKILL */
#define TERND_GRACE_MS     5000  /* a lab ternd's own shutdown grace */
#define PROBE_MS           1000
#define POLL_MS            50
#define MIB                (1024ull * 1024ull)
#define CONTROL_RUNNER_ID  "control"
#define CONTROL_QUEUE      "default" /* ternd's queue when --queues is not given */

typedef struct opts {
    const char *datacenter; /* a file, or NULL: the embedded default */
    char *dir;              /* absolute */
    unsigned port;          /* 0: a free one */
    char *ternd;
    char *plugin_dir;
    char *workload_bin; /* tern-workload, beside tern-lab in a build and installed */
    char *redis_server;
    char *workflows; /* or NULL */
    unsigned timeout_ms;
    unsigned grace_ms;
} opts_t;

/* ---- small helpers ----------------------------------------------------------------- */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    return s;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* mkdir -p, mode 0755. Returns 0 or -1 with errno. */
static int make_dirs(const char *dir)
{
    char *p = strdup(dir);
    if (p == NULL)
        abort();
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = -1;
            break;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    struct stat st;
    if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        errno = ENOTDIR;
        rc = -1;
    }
    return rc;
}

/* Writes text to path through a temporary file and a rename. */
/* Writes `text` to path through a temporary file made with `mode` (so a secret is
 * never readable by others, not even for a moment) and a rename. */
static int write_file_mode(const char *path, const char *text, mode_t mode)
{
    char *tmp = xasprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int rc = -1;
    if (f == NULL && fd >= 0)
        close(fd);
    if (f != NULL) {
        bool ok = fputs(text, f) >= 0;
        ok = fflush(f) == 0 && ok;
        ok = fsync(fileno(f)) == 0 && ok;
        ok = fclose(f) == 0 && ok;
        rc = ok && rename(tmp, path) == 0 ? 0 : -1;
    }
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

static int write_file(const char *path, const char *text)
{
    return write_file_mode(path, text, 0644);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        abort();
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (buf == NULL)
                abort();
        }
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* Finds `name` in PATH unless it holds a '/'. Returns a malloc'd path or NULL. */
static char *find_program(const char *name)
{
    if (strchr(name, '/') != NULL)
        return access(name, X_OK) == 0 ? realpath(name, NULL) : NULL;
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        size_t n = strcspn(p, ":");
        if (n > 0) {
            char *cand = xasprintf("%.*s/%s", (int)n, p, name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
                return cand;
            free(cand);
        }
        if (p[n] == '\0')
            return NULL;
        p += n + 1;
    }
}

/* A redis:// URL of a unix socket: unix:///PATH, percent-encoded. */
static char *unix_url(const char *path)
{
    size_t n = strlen(path);
    char *out = malloc(3 * n + 16);
    if (out == NULL)
        abort();
    char *o = out + sprintf(out, "unix://");
    for (const unsigned char *p = (const unsigned char *)path; *p != '\0'; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._-~", *p) != NULL)
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = '\0';
    return out;
}

/* A port on 127.0.0.1 that nothing listens on right now. */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* ---- the description ----------------------------------------------------------------- */

/* Reads and checks the description for the lab in o->dir: *text is its text (for the
 * lab's copy). Prints every fault and returns -1 when it is refused. */
static int load_description(const opts_t *o, char **text, datacenter_t **dc)
{
    const char *name = o->datacenter != NULL ? o->datacenter : "(the embedded default)";
    *text = o->datacenter != NULL ? read_file(o->datacenter) : strdup(lab_default_datacenter);
    if (*text == NULL) {
        fprintf(stderr, "tern-lab: datacenter %s: %s\n", name, strerror(errno));
        return -1;
    }
    dc_faults_t faults = {0};
    json_error_t jerr;
    json_t *doc = json_loads(*text, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        dc_faults_add(&faults, "", "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    else
        datacenter_parse(doc, o->dir, dc, &faults);
    /* The lab's own directories are not a server's to fill with instances. Read from
     * the document, so this fault shows beside the parser's. */
    static const char *const own[] = {"run", "redis", "control", "agents", NULL};
    size_t si;
    const json_t *server;
    json_array_foreach(json_object_get(doc, "servers"), si, server)
    {
        const char *text_root = json_string_value(json_object_get(server, "data_root"));
        char *root = text_root != NULL ? datacenter_resolve_path(o->dir, text_root) : NULL;
        for (size_t k = 0; root != NULL && own[k] != NULL; k++) {
            char *mine = xasprintf("%s/%s", o->dir, own[k]);
            size_t n = strlen(mine);
            if (strncmp(root, mine, n) == 0 && (root[n] == '\0' || root[n] == '/')) {
                char path[64];
                snprintf(path, sizeof path, "servers[%zu].data_root", si);
                dc_faults_add(&faults, path,
                              "\"%s\" leads into %s, where the lab keeps its own files", text_root,
                              mine);
            }
            free(mine);
        }
        free(root);
    }
    json_decref(doc);
    if (faults.n > 0) {
        datacenter_free(*dc);
        *dc = NULL;
        fprintf(stderr, "tern-lab: datacenter %s is refused (%zu fault%s):\n", name, faults.n,
                faults.n == 1 ? "" : "s");
        for (size_t i = 0; i < faults.n; i++)
            fprintf(stderr, "  %s\n", faults.items[i]);
        dc_faults_dispose(&faults);
        free(*text);
        *text = NULL;
        return -1;
    }
    return 0;
}

/* ---- the processes of a lab --------------------------------------------------------------- */

typedef struct entries {
    proc_entry_t *v;
    size_t n;
} entries_t;

static void entries_add(entries_t *e, char *name, char *pidfile, const char *comm, pid_t pid)
{
    e->v = realloc(e->v, (e->n + 1) * sizeof *e->v);
    if (e->v == NULL)
        abort();
    e->v[e->n++] =
        (proc_entry_t){.name = name, .pidfile = pidfile, .comm = strdup(comm), .pid = pid};
}

static void entries_dispose(entries_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i].name);
        free(e->v[i].pidfile);
        free(e->v[i].comm);
    }
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

/* The processes DIR/run/ names, in the order they are stopped: agents, control,
 * redis last (a `which` of "agents", "control" or "redis"). */
static void collect_run(const char *dir, const char *which, entries_t *out)
{
    char *run = xasprintf("%s/run", dir);
    DIR *d = opendir(run);
    if (d == NULL) {
        free(run);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".pid") != 0)
            continue;
        bool agent = strncmp(de->d_name, "agent-", 6) == 0;
        bool redis = strcmp(de->d_name, "redis.pid") == 0;
        bool control = strcmp(de->d_name, "control.pid") == 0;
        if (!((agent && strcmp(which, "agents") == 0) ||
              (control && strcmp(which, "control") == 0) || (redis && strcmp(which, "redis") == 0)))
            continue;
        char *pidfile = xasprintf("%s/%s", run, de->d_name);
        entries_add(out, xasprintf("%.*s", (int)(n - 4), de->d_name), pidfile,
                    redis ? "redis-server" : "ternd", dc_pidfile_read(pidfile));
    }
    closedir(d);
    free(run);
}

/* The instance workloads: every *.pid in a directory of a data root. */
static void collect_instances(const datacenter_t *dc, entries_t *out)
{
    for (size_t i = 0; dc != NULL && i < dc->n_servers; i++) {
        DIR *root = opendir(dc->servers[i].data_root);
        if (root == NULL)
            continue;
        struct dirent *de;
        while ((de = readdir(root)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *inst = xasprintf("%s/%s", dc->servers[i].data_root, de->d_name);
            DIR *d = opendir(inst);
            struct dirent *pe;
            while (d != NULL && (pe = readdir(d)) != NULL) {
                size_t n = strlen(pe->d_name);
                if (n < 5 || strcmp(pe->d_name + n - 4, ".pid") != 0)
                    continue;
                char *pidfile = xasprintf("%s/%s", inst, pe->d_name);
                entries_add(out,
                            xasprintf("instance %s on %s (%s)", de->d_name, dc->servers[i].hostname,
                                      pe->d_name),
                            pidfile, "tern-workload", dc_pidfile_read(pidfile));
            }
            if (d != NULL)
                closedir(d);
            free(inst);
        }
        closedir(root);
    }
}

/* The description the lab in dir runs (its copy), or NULL. */
static datacenter_t *lab_description(const char *dir)
{
    char *path = xasprintf("%s/datacenter.json", dir);
    datacenter_t *dc = NULL;
    dc_faults_t faults = {0};
    if (access(path, F_OK) == 0 && datacenter_load(path, dir, &dc, &faults) != 0) {
        fprintf(stderr, "tern-lab: %s no longer reads (instances are not looked for):\n", path);
        for (size_t i = 0; i < faults.n; i++)
            fprintf(stderr, "  %s\n", faults.items[i]);
    }
    dc_faults_dispose(&faults);
    free(path);
    return dc;
}

/* Every process of the lab in dir, in stopping order. */
static void collect_all(const char *dir, entries_t *out, size_t *phase_end)
{
    datacenter_t *dc = lab_description(dir);
    collect_run(dir, "agents", out);
    phase_end[0] = out->n;
    collect_run(dir, "control", out);
    phase_end[1] = out->n;
    collect_instances(dc, out);
    phase_end[2] = out->n;
    collect_run(dir, "redis", out);
    phase_end[3] = out->n;
    datacenter_free(dc);
}

/* ---- up ------------------------------------------------------------------------------------ */

typedef struct lab {
    const opts_t *o;
    datacenter_t *dc;
    entries_t started; /* what this `up` started, in stopping order once reversed */
    char *redis_sock;
    char *redis_url;
    unsigned port;
    const char *token;            /* $TERN_API_TOKEN, which the ternds read too */
    char since[32];               /* when this command began, as GET /runners writes times */
    const dc_server_t *only;      /* restart-agent: the one agent to wait for */
    bool control_only;            /* restart-control: wait for the control runner alone */
    unsigned migration_ports[64]; /* the agents' migration_listen ports this `up` chose */
    size_t n_migration_ports;
} lab_t;

/* Now as ISO 8601 UTC with milliseconds, the form of the API's times, so the two
 * compare as strings. */
static void iso_now(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%03uZ", base, (unsigned)(ts.tv_nsec / 1000000L) % 1000u);
}

/* Starts one process and records its pid file; says so. */
static int start(lab_t *lab, const char *name, const char *comm, char *const argv[],
                 const char *cwd, const char *log)
{
    char err[512];
    pid_t pid = 0;
    if (procs_spawn_detached(argv, cwd, log, &pid, err, sizeof err) != 0) {
        fprintf(stderr, "tern-lab: cannot start %s: %s\n", name, err);
        return -1;
    }
    char *pidfile = xasprintf("%s/run/%s.pid", lab->o->dir, name);
    entries_add(&lab->started, strdup(name), pidfile, comm, pid);
    if (procs_pidfile_write(pidfile, pid) != 0) {
        fprintf(stderr, "tern-lab: cannot write %s: %s\n", pidfile, strerror(errno));
        return -1;
    }
    printf("started %s (pid %ld, log %s)\n", name, (long)pid, log);
    return 0;
}

/* Fails when one of the started processes is gone, naming it with its log's end. */
static int check_alive(lab_t *lab)
{
    for (size_t i = 0; i < lab->started.n; i++) {
        proc_entry_t *e = &lab->started.v[i];
        if (dc_proc_alive(e->pid, e->comm))
            continue;
        char *log = strcmp(e->name, "redis") == 0
                        ? xasprintf("%s/redis/redis.log", lab->o->dir)
                        : (strcmp(e->name, "control") == 0
                               ? xasprintf("%s/control/ternd.log", lab->o->dir)
                               : xasprintf("%s/agents/%s/ternd.log", lab->o->dir, e->name + 6));
        fprintf(stderr, "tern-lab: %s (pid %ld) exited; the end of %s:\n%s\n", e->name,
                (long)e->pid, log, procs_log_tail(log));
        free(log);
        return -1;
    }
    return 0;
}

static int start_redis(lab_t *lab)
{
    const opts_t *o = lab->o;
    char *dir = xasprintf("%s/redis", o->dir);
    char *conf = xasprintf("%s/redis.conf", dir);
    char *log = xasprintf("%s/redis.log", dir);
    lab->redis_sock = xasprintf("%s/redis.sock", dir);
    int rc = -1;
    if (strlen(lab->redis_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr,
                "tern-lab: the Redis socket %s would be longer than a unix socket path may "
                "be (%zu bytes); use a shorter --dir\n",
                lab->redis_sock, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        goto Done;
    }
    if (make_dirs(dir) != 0) {
        fprintf(stderr, "tern-lab: cannot create %s: %s\n", dir, strerror(errno));
        goto Done;
    }
    /* The paths are the lab's own (checked to hold no quote or newline below). */
    if (strpbrk(o->dir, "\"\\\n\r") != NULL) {
        fprintf(stderr, "tern-lab: the lab directory %s holds a quote, backslash or newline\n",
                o->dir);
        goto Done;
    }
    char *text = xasprintf("# Written by tern-lab up; edits are lost at the next up.\n"
                           "# A unix socket only (port 0: no TCP listener), append-only.\n"
                           "port 0\nunixsocket \"%s\"\nunixsocketperm 700\ndir \"%s\"\n"
                           "appendonly yes\nappendfsync everysec\nsave \"\"\n"
                           "daemonize no\nlogfile \"%s\"\n",
                           lab->redis_sock, dir, log);
    int w = write_file(conf, text);
    free(text);
    if (w != 0) {
        fprintf(stderr, "tern-lab: cannot write %s: %s\n", conf, strerror(errno));
        goto Done;
    }
    if (probe_redis_ping(lab->redis_sock, PROBE_MS)) {
        fprintf(stderr, "tern-lab: %s already answers PING: a Redis this lab did not start\n",
                lab->redis_sock);
        goto Done;
    }
    unlink(lab->redis_sock); /* a leftover of a Redis that died: nothing answers on it */
    char *argv[] = {o->redis_server, conf, NULL};
    if (start(lab, "redis", "redis-server", argv, dir, log) != 0)
        goto Done;
    lab->redis_url = unix_url(lab->redis_sock);
    uint64_t deadline = now_ms() + o->timeout_ms;
    while (!probe_redis_ping(lab->redis_sock, PROBE_MS)) {
        if (check_alive(lab) != 0)
            goto Done;
        if (now_ms() >= deadline) {
            fprintf(stderr, "tern-lab: Redis did not answer on %s within %u ms\n", lab->redis_sock,
                    o->timeout_ms);
            goto Done;
        }
        sleep_ms(POLL_MS);
    }
    rc = 0;
Done:
    free(dir);
    free(conf);
    free(log);
    return rc;
}

/* Writes DIR/<sub>/ternd.json with the dc plugin's section and starts ternd there. */
/* The agent's "migration_listen" (a new string): at restart-agent the one its
 * configuration file already holds, so a migration's target keeps the address the
 * control handed to its source; at `up` a free port on 127.0.0.1 that is neither the
 * API's nor another agent's. NULL when none is free. */
static char *migration_listen_for(lab_t *lab, const char *config)
{
    if (lab->only != NULL) {
        json_t *old = json_load_file(config, 0, NULL);
        const char *v = json_string_value(json_object_get(
            json_object_get(json_object_get(old, "plugins"), "dc"), "migration_listen"));
        unsigned port = 0;
        char *kept = v != NULL && sscanf(v, "127.0.0.1:%u", &port) == 1 && port > 0 && port <= 65535
                         ? strdup(v)
                         : NULL;
        json_decref(old);
        if (kept != NULL)
            return kept;
    }
    /* Bounded: the kernel hands out ephemeral ports in turn, so a repeat is rare. */
    for (int tries = 0; tries < 32; tries++) {
        unsigned port = free_port();
        bool taken = port == 0 || port == lab->port;
        for (size_t i = 0; i < lab->n_migration_ports && !taken; i++)
            taken = lab->migration_ports[i] == port;
        if (taken)
            continue;
        if (lab->n_migration_ports < sizeof lab->migration_ports / sizeof lab->migration_ports[0])
            lab->migration_ports[lab->n_migration_ports++] = port;
        return xasprintf("127.0.0.1:%u", port);
    }
    return NULL;
}

static int start_ternd(lab_t *lab, const char *name, const char *sub, const dc_server_t *server)
{
    const opts_t *o = lab->o;
    char *dir = xasprintf("%s/%s", o->dir, sub);
    char *config = xasprintf("%s/ternd.json", dir);
    char *log = xasprintf("%s/ternd.log", dir);
    char *dc_file = xasprintf("%s/datacenter.json", o->dir);
    char *listen = NULL, *runner_id = NULL, *queue = NULL;
    int rc = -1;
    if (make_dirs(dir) != 0) {
        fprintf(stderr, "tern-lab: cannot create %s: %s\n", dir, strerror(errno));
        goto Done;
    }
    json_t *dc_conf = json_pack("{s:s, s:s}", "datacenter", dc_file, "lab_dir", o->dir);
    if (server == NULL) {
        /* The control's own API, for tasks that make jobs (a provision's volumes). */
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u", lab->port);
        json_object_set_new(dc_conf, "api_url", json_string(url));
        /* ternd takes $TERN_API_TOKEN out of its environment before plugins load, so
         * the plugin reads the token from a file only its user can read. */
        if (lab->token != NULL) {
            char *token_file = xasprintf("%s/api_token", dir);
            char *line = xasprintf("%s\n", lab->token);
            int t = write_file_mode(token_file, line, 0600);
            free(line);
            if (t != 0) {
                fprintf(stderr, "tern-lab: cannot write %s: %s\n", token_file, strerror(errno));
                free(token_file);
                json_decref(dc_conf);
                goto Done;
            }
            json_object_set_new(dc_conf, "api_token_file", json_string(token_file));
            free(token_file);
        }
    } else {
        json_object_set_new(dc_conf, "server_uuid", json_string(server->uuid));
        json_object_set_new(dc_conf, "data_root", json_string(server->data_root));
        if (o->workload_bin != NULL)
            json_object_set_new(dc_conf, "workload_bin", json_string(o->workload_bin));
        char *migration_listen = migration_listen_for(lab, config);
        if (migration_listen == NULL) {
            fprintf(stderr, "tern-lab: no free port on 127.0.0.1 for %s's migration_listen\n",
                    server->hostname);
            json_decref(dc_conf);
            goto Done;
        }
        json_object_set_new(dc_conf, "migration_listen", json_string(migration_listen));
        free(migration_listen);
    }
    json_t *conf = json_pack("{s:{s:o}}", "plugins", "dc", dc_conf);
    /* In the file, not on the command line, so that restart-control finds it there
     * even when the control it replaces was killed. */
    if (server == NULL && o->workflows != NULL)
        json_object_set_new(conf, "workflows", json_string(o->workflows));
    char *text = json_dumps(conf, JSON_INDENT(2));
    json_decref(conf);
    int w = write_file(config, text);
    free(text);
    if (w != 0) {
        fprintf(stderr, "tern-lab: cannot write %s: %s\n", config, strerror(errno));
        goto Done;
    }
    char grace[16], name_buf[128];
    snprintf(grace, sizeof grace, "%u", TERND_GRACE_MS);
    const char *argv[32];
    size_t n = 0;
    argv[n++] = o->ternd;
    argv[n++] = "--config";
    argv[n++] = config;
    argv[n++] = "--redis";
    argv[n++] = lab->redis_url;
    argv[n++] = "--data-dir";
    argv[n++] = dir;
    argv[n++] = "--plugin-dir";
    argv[n++] = o->plugin_dir;
    argv[n++] = "--shutdown-grace-ms";
    argv[n++] = grace;
    argv[n++] = "--runner-id";
    if (server == NULL) {
        listen = xasprintf("127.0.0.1:%u", lab->port);
        argv[n++] = CONTROL_RUNNER_ID;
        argv[n++] = "--role";
        argv[n++] = "both";
        argv[n++] = "--listen";
        argv[n++] = listen;
    } else {
        runner_id = strdup(datacenter_server_runner_id(server, name_buf, sizeof name_buf));
        queue = strdup(datacenter_server_queue(server, name_buf, sizeof name_buf));
        argv[n++] = runner_id;
        argv[n++] = "--role";
        argv[n++] = "runner";
        argv[n++] = "--queues";
        argv[n++] = queue;
    }
    argv[n] = NULL;
    rc = start(lab, name, "ternd", (char *const *)argv, dir, log);
Done:
    free(dir);
    free(config);
    free(log);
    free(dc_file);
    free(listen);
    free(runner_id);
    free(queue);
    return rc;
}

/* true when the runners of GET /runners (`list`) hold `id`, alive on `queue` and seen
 * since `since` (a runner killed a moment ago keeps a live lease under the same id for
 * a while, so only a heartbeat of the process started since counts). */
static bool runner_serves(const json_t *list, const char *id, const char *queue, const char *since)
{
    size_t j;
    const json_t *r;
    json_array_foreach(list, j, r)
    {
        const char *rid = json_string_value(json_object_get(r, "id"));
        const char *seen = json_string_value(json_object_get(r, "last_seen_at"));
        if (rid == NULL || strcmp(rid, id) != 0 || !json_is_true(json_object_get(r, "alive")) ||
            seen == NULL || strcmp(seen, since) < 0)
            continue;
        size_t k;
        const json_t *q;
        json_array_foreach(json_object_get(json_object_get(r, "info"), "queues"), k, q)
        {
            if (json_is_string(q) && strcmp(json_string_value(q), queue) == 0)
                return true;
        }
    }
    return false;
}

/* true when GET /runners shows every agent (or only `only`) serving its queue since
 * this command began, and, for restart-control, the control runner on its queue; else
 * names one that is not in *missing. */
static bool agents_ready(lab_t *lab, const dc_server_t *only, const char **missing)
{
    static char what[300];
    char *body = NULL;
    int status = probe_http_get(lab->port, "/runners", lab->token, PROBE_MS, &body);
    json_t *doc = status == 200 && body != NULL ? json_loads(body, 0, NULL) : NULL;
    free(body);
    const json_t *list = json_is_array(doc) ? doc : json_object_get(doc, "runners");
    bool all = true;
    if (lab->control_only) {
        all = runner_serves(list, CONTROL_RUNNER_ID, CONTROL_QUEUE, lab->since);
        if (!all)
            snprintf(what, sizeof what, "%s on queue %s", CONTROL_RUNNER_ID, CONTROL_QUEUE);
    }
    for (size_t i = 0; i < lab->dc->n_servers && all && !lab->control_only; i++) {
        const dc_server_t *s = &lab->dc->servers[i];
        if (only != NULL && s != only)
            continue;
        char id[128], queue[128];
        datacenter_server_runner_id(s, id, sizeof id);
        datacenter_server_queue(s, queue, sizeof queue);
        if (!runner_serves(list, id, queue, lab->since)) {
            snprintf(what, sizeof what, "%s on queue %s", id, queue);
            all = false;
        }
    }
    json_decref(doc);
    *missing = what;
    return all;
}

/* Waits until the API answers /ping and every agent shows in /runners. */
static int wait_ready(lab_t *lab)
{
    uint64_t deadline = now_ms() + lab->o->timeout_ms;
    bool api = false;
    const char *missing = "the API";
    for (;;) {
        if (check_alive(lab) != 0)
            return -1;
        if (!api) {
            char *body = NULL;
            api = probe_http_get(lab->port, "/ping", lab->token, PROBE_MS, &body) == 200;
            free(body);
        }
        if (api && agents_ready(lab, lab->only, &missing))
            return 0;
        if (now_ms() >= deadline) {
            fprintf(stderr, "tern-lab: not ready within %u ms: waiting for %s\n",
                    lab->o->timeout_ms, api ? missing : "GET /ping to answer 200");
            return -1;
        }
        sleep_ms(POLL_MS);
    }
}

/* Stores a workflow the lab embeds (`name`, its text): a version already stored (from
 * --workflows) is kept. */
static int store_workflow(lab_t *lab, const char *name, const char *text)
{
    char *body = NULL;
    int status =
        probe_http_send(lab->port, "POST", "/workflows", text, lab->token, PROBE_MS * 5, &body);
    if (status != 200 && status != 201 && status != 409) {
        fprintf(stderr, "tern-lab: POST /workflows (%s): status %d: %s\n", name, status,
                body != NULL ? body : "no answer");
        free(body);
        return -1;
    }
    free(body);
    return 0;
}

/* Runs a dc-inventory-load job to its end (bounded by the lab's timeout): the
 * inventory in Redis then holds the description's servers, networks, packages and
 * images. The workflow is stored first; a version already stored (from --workflows)
 * is kept. */
static int load_inventory(lab_t *lab)
{
    if (store_workflow(lab, "dc-inventory-load", lab_inventory_workflow) != 0)
        return -1;
    char *body = NULL;
    int status =
        probe_http_send(lab->port, "POST", "/jobs",
                        "{\"workflow\": \"dc-inventory-load\", \"target\": \"/dc-inventory-load\"}",
                        lab->token, PROBE_MS * 5, &body);
    json_t *job = status == 201 && body != NULL ? json_loads(body, 0, NULL) : NULL;
    const char *uuid = json_string_value(json_object_get(job, "uuid"));
    if (uuid == NULL) {
        fprintf(stderr, "tern-lab: POST /jobs (dc-inventory-load): status %d: %s\n", status,
                body != NULL ? body : "no answer");
        free(body);
        json_decref(job);
        return -1;
    }
    free(body);
    char *path = xasprintf("/jobs/%s", uuid);
    uint64_t deadline = now_ms() + lab->o->timeout_ms;
    int rc = -1;
    for (;;) {
        body = NULL;
        status = probe_http_get(lab->port, path, lab->token, PROBE_MS, &body);
        json_t *now = status == 200 && body != NULL ? json_loads(body, 0, NULL) : NULL;
        free(body);
        const char *ex = json_string_value(json_object_get(now, "execution"));
        if (ex != NULL && strcmp(ex, "succeeded") == 0) {
            printf("inventory loaded (job %s)\n", uuid);
            rc = 0;
        } else if (ex != NULL && (strcmp(ex, "failed") == 0 || strcmp(ex, "canceled") == 0)) {
            char *why = json_dumps(json_object_get(now, "error"), JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(stderr, "tern-lab: the inventory load (job %s) %s: %s\n", uuid, ex,
                    why != NULL ? why : "no error recorded");
            free(why);
        } else if (now_ms() >= deadline) {
            fprintf(stderr, "tern-lab: the inventory load (job %s) did not end within %u ms\n",
                    uuid, lab->o->timeout_ms);
        } else {
            json_decref(now);
            sleep_ms(POLL_MS);
            continue;
        }
        json_decref(now);
        break;
    }
    free(path);
    json_decref(job);
    return rc;
}

/* The datacenter's recurring work (dc_schedules.h): for `up` (only NULL), the
 * net-reconcile workflow stored and every server's schedules installed, then a start
 * reconcile for each agent started (every server, or `only`). */
static int start_reconciles(lab_t *lab, const dc_server_t *only)
{
    lab_api_t api = {.port = lab->port, .token = lab->token};
    if (only == NULL && (store_workflow(lab, "net-reconcile", lab_reconcile_workflow) != 0 ||
                         dc_schedules_install(&api, lab->dc) != 0))
        return -1;
    for (size_t i = 0; i < lab->dc->n_servers; i++) {
        const dc_server_t *s = &lab->dc->servers[i];
        if ((only == NULL || s == only) &&
            dc_start_reconcile(&api, lab->dc, s, start_delay_os_random, NULL) != 0)
            return -1;
    }
    return 0;
}

/* Refuses a directory where a process of a lab still runs; removes stale pid files. */
static int refuse_live_lab(const opts_t *o)
{
    entries_t e = {0};
    size_t phases[4];
    collect_all(o->dir, &e, phases);
    int live = 0;
    for (size_t i = 0; i < e.n; i++) {
        if (dc_proc_alive(e.v[i].pid, e.v[i].comm)) {
            if (live++ == 0)
                fprintf(stderr,
                        "tern-lab: a lab is running in %s (%s, pid %ld); stop it first: "
                        "tools/lab down --dir %s\n",
                        o->dir, e.v[i].name, (long)e.v[i].pid, o->dir);
        } else if (unlink(e.v[i].pidfile) == 0) {
            printf("removed stale pid file %s\n", e.v[i].pidfile);
        }
    }
    entries_dispose(&e);
    return live > 0 ? -1 : 0;
}

static int cmd_up(const opts_t *o)
{
    lab_t lab = {.o = o, .token = getenv("TERN_API_TOKEN")};
    char *text = NULL;
    int rc = 1;
    iso_now(lab.since, sizeof lab.since);
    if (lab.token != NULL && lab.token[0] == '\0')
        lab.token = NULL;
    if (make_dirs(o->dir) != 0) {
        fprintf(stderr, "tern-lab: cannot create the lab directory %s: %s\n", o->dir,
                strerror(errno));
        return 1;
    }
    if (refuse_live_lab(o) != 0)
        return 1;
    if (load_description(o, &text, &lab.dc) != 0)
        return 1;
    char *copy = xasprintf("%s/datacenter.json", o->dir);
    char *run = xasprintf("%s/run", o->dir);
    if (write_file(copy, text) != 0 || make_dirs(run) != 0) {
        fprintf(stderr, "tern-lab: cannot write %s or create %s: %s\n", copy, run, strerror(errno));
        goto Done;
    }
    for (size_t i = 0; i < lab.dc->n_servers; i++) {
        if (make_dirs(lab.dc->servers[i].data_root) != 0) {
            fprintf(stderr, "tern-lab: servers[%zu].data_root %s: %s\n", i,
                    lab.dc->servers[i].data_root, strerror(errno));
            goto Done;
        }
    }
    for (size_t i = 0; i < lab.dc->n_images; i++) {
        const dc_image_t *m = &lab.dc->images[i];
        char err[1024];
        bool made = false;
        if (dc_image_ensure(m, &made, err, sizeof err) != 0) {
            fprintf(stderr, "tern-lab: images[%zu]: %s\n", i, err);
            goto Done;
        }
        printf("image %s %s: %s %s (%llu MiB%s)\n", m->name, m->version, made ? "made" : "found",
               m->file, (unsigned long long)m->size_mib, made ? ", sparse" : "");
    }
    lab.port = o->port != 0 ? o->port : free_port();
    if (lab.port == 0) {
        fprintf(stderr, "tern-lab: no free port on 127.0.0.1\n");
        goto Done;
    }
    if (start_redis(&lab) != 0 || start_ternd(&lab, "control", "control", NULL) != 0)
        goto Done;
    for (size_t i = 0; i < lab.dc->n_servers; i++) {
        const dc_server_t *s = &lab.dc->servers[i];
        char name[128], sub[160];
        datacenter_server_runner_id(s, name, sizeof name);
        snprintf(sub, sizeof sub, "agents/%s", s->hostname);
        if (start_ternd(&lab, name, sub, s) != 0)
            goto Done;
    }
    if (wait_ready(&lab) != 0 || load_inventory(&lab) != 0 || start_reconciles(&lab, NULL) != 0)
        goto Done;
    char *env = xasprintf("TERN_URL=http://127.0.0.1:%u\n", lab.port);
    char *env_file = xasprintf("%s/lab.env", o->dir);
    if (write_file(env_file, env) != 0)
        fprintf(stderr, "tern-lab: cannot write %s (the lab runs)\n", env_file);
    free(env_file);
    printf("lab ready in %s: %zu servers, their agents on queues server:<uuid>\n", o->dir,
           lab.dc->n_servers);
    printf("%s", env);
    free(env);
    rc = 0;
Done:
    if (rc != 0 && lab.started.n > 0) {
        fprintf(stderr, "tern-lab: stopping what was started\n");
        /* Stop in the reverse order of starting: agents, control, then Redis. */
        for (size_t i = 0; i < lab.started.n / 2; i++) {
            proc_entry_t t = lab.started.v[i];
            lab.started.v[i] = lab.started.v[lab.started.n - 1 - i];
            lab.started.v[lab.started.n - 1 - i] = t;
        }
        procs_stop(lab.started.v, lab.started.n, o->grace_ms);
    }
    entries_dispose(&lab.started);
    datacenter_free(lab.dc);
    free(lab.redis_sock);
    free(lab.redis_url);
    free(copy);
    free(run);
    free(text);
    return rc;
}

/* ---- down and check
 * ------------------------------------------------------------------------------ */

static int cmd_down(const opts_t *o)
{
    struct stat st;
    if (stat(o->dir, &st) != 0) {
        printf("no lab in %s: nothing to stop\n", o->dir);
        return 0;
    }
    entries_t e = {0};
    size_t phases[4];
    collect_all(o->dir, &e, phases);
    if (e.n == 0) {
        printf("no process of a lab in %s: nothing to stop\n", o->dir);
        return 0;
    }
    int left = 0;
    size_t from = 0;
    for (size_t p = 0; p < 4; p++) {
        left += procs_stop(e.v + from, phases[p] - from, o->grace_ms);
        from = phases[p];
    }
    entries_dispose(&e);
    if (left > 0) {
        fprintf(stderr, "tern-lab: %d process(es) of the lab in %s still run\n", left, o->dir);
        return 1;
    }
    char *env = xasprintf("%s/lab.env", o->dir);
    unlink(env); /* may be absent */
    free(env);
    printf("lab in %s stopped\n", o->dir);
    return 0;
}

/* Reads the lab's API port from DIR/lab.env and checks that its Redis answers: what a
 * restart needs of a lab that is up. Says why not and returns -1. */
static int lab_running(lab_t *lab, char **env)
{
    const opts_t *o = lab->o;
    char *env_file = xasprintf("%s/lab.env", o->dir);
    int rc = -1;
    *env = read_file(env_file);
    if (*env == NULL || sscanf(*env, "TERN_URL=http://127.0.0.1:%u", &lab->port) != 1) {
        fprintf(stderr, "tern-lab: %s does not say where the lab's API is; is the lab up?\n",
                env_file);
        goto Done;
    }
    lab->redis_sock = xasprintf("%s/redis/redis.sock", o->dir);
    if (!probe_redis_ping(lab->redis_sock, PROBE_MS)) {
        fprintf(stderr, "tern-lab: the lab's Redis does not answer on %s; is the lab up?\n",
                lab->redis_sock);
        goto Done;
    }
    lab->redis_url = unix_url(lab->redis_sock);
    rc = 0;
Done:
    free(env_file);
    return rc;
}

/* The workflows directory the control ternd was started with (its ternd.json's
 * "workflows"), or NULL. Returns a string to free. */
static char *control_workflows(const char *dir)
{
    char *path = xasprintf("%s/control/ternd.json", dir);
    json_t *conf = json_load_file(path, 0, NULL);
    free(path);
    const char *w = json_string_value(json_object_get(conf, "workflows"));
    char *out = w != NULL ? strdup(w) : NULL;
    json_decref(conf);
    return out;
}

/* Stops a server's agent if it runs, starts it again with its configuration, and
 * waits until it serves its queue: what an operator does after an agent crashed, and
 * how tests show that instances outlive their agent. */
static int cmd_restart_agent(const opts_t *o, const char *which)
{
    lab_t lab = {.o = o, .token = getenv("TERN_API_TOKEN")};
    iso_now(lab.since, sizeof lab.since);
    if (lab.token != NULL && lab.token[0] == '\0')
        lab.token = NULL;
    int rc = 1;
    char *env = NULL, *pidfile = NULL;
    lab.dc = lab_description(o->dir);
    if (lab.dc == NULL) {
        fprintf(stderr, "tern-lab: no lab in %s (no datacenter.json)\n", o->dir);
        goto Done;
    }
    const dc_server_t *server = NULL;
    for (size_t i = 0; i < lab.dc->n_servers && server == NULL; i++)
        if (strcmp(lab.dc->servers[i].hostname, which) == 0 ||
            strcmp(lab.dc->servers[i].uuid, which) == 0)
            server = &lab.dc->servers[i];
    if (server == NULL) {
        fprintf(stderr, "tern-lab: no server \"%s\" in the lab in %s (a hostname or uuid)\n", which,
                o->dir);
        goto Done;
    }
    if (lab_running(&lab, &env) != 0)
        goto Done;
    char name[128], sub[160];
    datacenter_server_runner_id(server, name, sizeof name);
    snprintf(sub, sizeof sub, "agents/%s", server->hostname);
    pidfile = xasprintf("%s/run/%s.pid", o->dir, name);
    proc_entry_t old = {
        .name = name, .pidfile = pidfile, .comm = "ternd", .pid = dc_pidfile_read(pidfile)};
    if (procs_stop(&old, 1, o->grace_ms) != 0)
        goto Done;
    lab.only = server;
    if (start_ternd(&lab, name, sub, server) != 0 || wait_ready(&lab) != 0)
        goto Done;
    printf("%s serves queue server:%s again\n", name, server->uuid);
    /* The agent runs: a failure to make its start reconcile is said, not undone. */
    entries_dispose(&lab.started);
    if (start_reconciles(&lab, server) != 0)
        goto Done;
    rc = 0;
Done:
    if (rc != 0 && lab.started.n > 0)
        procs_stop(lab.started.v, lab.started.n, o->grace_ms);
    entries_dispose(&lab.started);
    datacenter_free(lab.dc);
    free(lab.redis_sock);
    free(lab.redis_url);
    free(env);
    free(pidfile);
    return rc;
}

/* Stops the control ternd if it runs and starts it again as `up` did, on the same
 * port (lab.env stays true: clients keep working), then waits until the API answers
 * and the control runner serves its queue: what an operator does after the control
 * plane crashed, and how tests show that jobs outlive it. */
static int cmd_restart_control(const opts_t *given)
{
    opts_t o = *given;
    lab_t lab = {.o = &o, .token = getenv("TERN_API_TOKEN"), .control_only = true};
    iso_now(lab.since, sizeof lab.since);
    if (lab.token != NULL && lab.token[0] == '\0')
        lab.token = NULL;
    int rc = 1;
    char *env = NULL, *pidfile = NULL, *workflows = NULL;
    lab.dc = lab_description(o.dir);
    if (lab.dc == NULL) {
        fprintf(stderr, "tern-lab: no lab in %s (no datacenter.json)\n", o.dir);
        goto Done;
    }
    if (lab_running(&lab, &env) != 0)
        goto Done;
    o.workflows = workflows = control_workflows(o.dir);
    pidfile = xasprintf("%s/run/control.pid", o.dir);
    proc_entry_t old = {
        .name = "control", .pidfile = pidfile, .comm = "ternd", .pid = dc_pidfile_read(pidfile)};
    if (procs_stop(&old, 1, o.grace_ms) != 0)
        goto Done;
    if (start_ternd(&lab, "control", "control", NULL) != 0 || wait_ready(&lab) != 0)
        goto Done;
    printf("control serves the API on 127.0.0.1:%u and queue %s again\n", lab.port, CONTROL_QUEUE);
    rc = 0;
Done:
    if (rc != 0 && lab.started.n > 0)
        procs_stop(lab.started.v, lab.started.n, o.grace_ms);
    entries_dispose(&lab.started);
    datacenter_free(lab.dc);
    free(lab.redis_sock);
    free(lab.redis_url);
    free(env);
    free(pidfile);
    free(workflows);
    return rc;
}

static int cmd_check(const opts_t *o)
{
    char *text = NULL;
    datacenter_t *dc = NULL;
    if (load_description(o, &text, &dc) != 0)
        return 1;
    printf("datacenter %s: %zu servers, %zu networks, %zu packages, %zu images (lab directory "
           "%s)\n",
           o->datacenter != NULL ? o->datacenter : "(the embedded default)", dc->n_servers,
           dc->n_networks, dc->n_packages, dc->n_images, o->dir);
    datacenter_free(dc);
    free(text);
    return 0;
}

/* ---- arguments
 * ------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: tern-lab up [--datacenter FILE] [--dir DIR] [--port N] [--workflows DIR]\n"
          "                   [--timeout-ms N] [--ternd PATH] [--plugin-dir DIR]\n"
          "                   [--redis-server PATH]\n"
          "       tern-lab down [--dir DIR] [--grace-ms N]\n"
          "       tern-lab restart-agent HOSTNAME|UUID [--dir DIR] [--grace-ms N]\n"
          "       tern-lab restart-control [--dir DIR] [--grace-ms N]\n"
          "       tern-lab check [--datacenter FILE] [--dir DIR]\n"
          "\n"
          "  --datacenter FILE  the datacenter description (default: the embedded one,\n"
          "                     examples/lab/datacenter.json)\n"
          "  --dir DIR          the lab directory (default ./" DEFAULT_DIR ")\n"
          "  --port N           the API's port on 127.0.0.1 (default: a free one)\n"
          "  --workflows DIR    workflows the control ternd loads at start\n"
          "  --timeout-ms N     up and restarts: everything ready within (default 30000)\n"
          "  --grace-ms N       SIGTERM to SIGKILL (default 15000)\n"
          "  --ternd PATH, --plugin-dir DIR   default: the build's or the installed ones\n"
          "  --redis-server PATH              default: redis-server in PATH\n",
          f);
}

static bool parse_uint(const char *s, unsigned max, unsigned *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v > max || s[0] == '-')
        return false;
    *out = (unsigned)v;
    return true;
}

/* Takes DIR/lab.lock for the length of an up, down or restart, so two of them
 * never start or stop one lab's processes at once (two Redis on one append-only
 * file). `create` makes DIR first (up). Returns the descriptor (close-on-exec, so no
 * started process holds it), -1 when there is no lab directory to lock, or -2 after
 * saying why it cannot be taken. */
static int lock_lab(const char *dir, bool create)
{
    if (create && make_dirs(dir) != 0) {
        fprintf(stderr, "tern-lab: cannot create the lab directory %s: %s\n", dir, strerror(errno));
        return -2;
    }
    char *path = xasprintf("%s/lab.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && !create) {
        free(path);
        return -1;
    }
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "tern-lab: %s: %s\n", path,
                fd >= 0 && errno == EWOULDBLOCK ? "another tern-lab is at work on this lab"
                                                : strerror(errno));
        if (fd >= 0)
            close(fd);
        free(path);
        return -2;
    }
    free(path);
    return fd;
}

/* Where ternd and the plugins are: beside tern-lab in a build tree (build/lab/tern-lab,
 * build/engine/ternd, build/tasks), else installed beside it (TERN_PLUGIN_DIR). */
static void default_paths(opts_t *o)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    char *workload = xasprintf("%s/tern-workload", self);
    if (o->workload_bin == NULL && access(workload, X_OK) == 0)
        o->workload_bin = realpath(workload, NULL);
    free(workload);
    char *built = xasprintf("%s/../engine/ternd", self);
    if (access(built, X_OK) == 0) {
        if (o->ternd == NULL)
            o->ternd = realpath(built, NULL);
        if (o->plugin_dir == NULL) {
            char *tasks = xasprintf("%s/../tasks", self);
            o->plugin_dir = realpath(tasks, NULL);
            free(tasks);
        }
    }
    free(built);
    if (o->ternd == NULL)
        o->ternd = xasprintf("%s/ternd", self);
    if (o->plugin_dir == NULL)
        o->plugin_dir = strdup(TERN_PLUGIN_DIR);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "up") != 0 && strcmp(cmd, "down") != 0 && strcmp(cmd, "check") != 0 &&
        strcmp(cmd, "restart-agent") != 0 && strcmp(cmd, "restart-control") != 0) {
        fprintf(stderr,
                "tern-lab: unknown command \"%s\" (up, down, restart-agent, restart-control or "
                "check)\n",
                cmd);
        return 2;
    }
    const char *agent = NULL;
    int first = 2;
    if (strcmp(cmd, "restart-agent") == 0) {
        if (argc < 3 || argv[2][0] == '-') {
            fprintf(stderr, "tern-lab restart-agent: which agent? (a server's hostname or uuid)\n");
            return 2;
        }
        agent = argv[2];
        first = 3;
    }
    opts_t o = {.timeout_ms = DEFAULT_TIMEOUT_MS, .grace_ms = DEFAULT_GRACE_MS};
    const char *dir = DEFAULT_DIR, *redis_server = "redis-server";
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        if (ok && strcmp(a, "--dir") == 0)
            dir = v;
        else if (ok && strcmp(a, "--datacenter") == 0 &&
                 (strcmp(cmd, "up") == 0 || strcmp(cmd, "check") == 0))
            o.datacenter = v;
        else if (ok && strcmp(a, "--port") == 0 && strcmp(cmd, "up") == 0)
            ok = parse_uint(v, 65535, &o.port) && o.port > 0;
        else if (ok && strcmp(a, "--timeout-ms") == 0 && strcmp(cmd, "down") != 0 &&
                 strcmp(cmd, "check") != 0)
            ok = parse_uint(v, 3600000, &o.timeout_ms) && o.timeout_ms > 0;
        else if (ok && strcmp(a, "--grace-ms") == 0 && strcmp(cmd, "check") != 0)
            ok = parse_uint(v, 3600000, &o.grace_ms);
        else if (ok && strcmp(a, "--workflows") == 0 && strcmp(cmd, "up") == 0)
            ok = (o.workflows = realpath(v, NULL)) != NULL;
        else if (ok && strcmp(a, "--ternd") == 0 && strcmp(cmd, "down") != 0 &&
                 strcmp(cmd, "check") != 0)
            ok = (o.ternd = realpath(v, NULL)) != NULL;
        else if (ok && strcmp(a, "--plugin-dir") == 0 && strcmp(cmd, "down") != 0 &&
                 strcmp(cmd, "check") != 0)
            ok = (o.plugin_dir = realpath(v, NULL)) != NULL;
        else if (ok && strcmp(a, "--redis-server") == 0 && strcmp(cmd, "up") == 0)
            redis_server = v;
        else {
            fprintf(stderr, "tern-lab %s: %s: %s\n", cmd, a,
                    v == NULL ? "unknown option or missing value" : "unknown option or bad value");
            usage(stderr);
            return 2;
        }
        i++;
    }
    o.dir = datacenter_resolve_path(NULL, dir);
    if (o.dir == NULL) {
        fprintf(stderr, "tern-lab: --dir %s: %s\n", dir, strerror(errno));
        return 2;
    }
    int rc, lock = -1;
    if (strcmp(cmd, "check") != 0 && (lock = lock_lab(o.dir, strcmp(cmd, "up") == 0)) == -2) {
        rc = 1;
    } else if (strcmp(cmd, "check") == 0) {
        rc = cmd_check(&o);
    } else if (strcmp(cmd, "down") == 0) {
        rc = cmd_down(&o);
    } else {
        default_paths(&o);
        o.redis_server = find_program(redis_server);
        if (o.redis_server == NULL) {
            fprintf(stderr,
                    "tern-lab: %s not found (install the redis-server package or pass "
                    "--redis-server)\n",
                    redis_server);
            rc = 1;
        } else if (access(o.ternd, X_OK) != 0) {
            fprintf(stderr, "tern-lab: ternd %s: %s (pass --ternd)\n", o.ternd, strerror(errno));
            rc = 1;
        } else {
            rc = agent != NULL                         ? cmd_restart_agent(&o, agent)
                 : strcmp(cmd, "restart-control") == 0 ? cmd_restart_control(&o)
                                                       : cmd_up(&o);
        }
    }
    if (lock >= 0)
        close(lock);
    free(o.dir);
    free(o.ternd);
    free(o.workload_bin);
    free(o.plugin_dir);
    free(o.workflows);
    free(o.redis_server);
    fflush(stdout);
    return rc;
}
