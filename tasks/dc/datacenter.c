/*
 * datacenter.c -- reading and checking a datacenter description (datacenter.h).
 *
 * One pass over the document collects every fault instead of stopping at the first:
 * each section is read entry by entry into the structs, a field that is wrong is
 * recorded and skipped, and the checks that look across entries (duplicates,
 * overlapping provision ranges, nested data roots) run after, on the fields that read
 * well. The description is returned only when no fault was found.
 */
#include "datacenter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sizes: at most 2^40 MiB, so a size in bytes always fits in 63 bits. */
#define SIZE_MIB_MAX (1ull << 40)
#define VLAN_ID_MAX  4094
#define MTU_MIN      576
#define MTU_MAX      9000
#define PREFIX_MIN   8
#define PREFIX_MAX   30 /* a /31 or /32 has no room for a gateway and a range */
#define NAME_MAX_LEN 64
#define PATH_TEXT    512 /* room for a JSON path in a message */

static const char *const brands[] = {"bhyve", "kvm", "joyent", "joyent-minimal", "lx", NULL};

/* ---- faults ---------------------------------------------------------------------- */

static char *xvasprintf(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort(); /* out of memory: the one failure not carried as a value */
    return s;
}

static char *xstrdup_(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        abort();
    return d;
}

static void *xcalloc_(size_t n, size_t size)
{
    void *p = calloc(n == 0 ? 1 : n, size);
    if (p == NULL)
        abort();
    return p;
}

void dc_faults_add(dc_faults_t *f, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    char **items = realloc(f->items, (f->n + 1) * sizeof *items);
    if (items == NULL)
        abort();
    f->items = items;
    if (asprintf(&f->items[f->n], "%s: %s", path[0] != '\0' ? path : "datacenter", msg) < 0)
        abort();
    f->n++;
    free(msg);
}

char *dc_faults_join(const dc_faults_t *f)
{
    size_t len = 1;
    for (size_t i = 0; i < f->n; i++)
        len += strlen(f->items[i]) + 1;
    char *s = xcalloc_(len, 1);
    char *p = s;
    for (size_t i = 0; i < f->n; i++) {
        size_t n = strlen(f->items[i]);
        memcpy(p, f->items[i], n);
        p[n] = '\n';
        p += n + 1;
    }
    *p = '\0';
    return s;
}

void dc_faults_dispose(dc_faults_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->items[i]);
    free(f->items);
    f->items = NULL;
    f->n = 0;
}

/* ---- paths ------------------------------------------------------------------------- */

/* Drops the last component of the absolute path p (never past "/"). */
static void pop_component(char *p)
{
    char *slash = strrchr(p, '/');
    if (slash == p)
        p[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
}

char *datacenter_resolve_path(const char *base, const char *path)
{
    char *joined;
    if (path[0] == '/') {
        joined = xstrdup_(path);
    } else {
        char *b = NULL;
        if (base == NULL || base[0] != '/') {
            char cwd[PATH_MAX];
            if (getcwd(cwd, sizeof cwd) == NULL)
                return NULL;
            if (base == NULL)
                b = xstrdup_(cwd);
            else if (asprintf(&b, "%s/%s", cwd, base) < 0)
                abort();
        } else {
            b = xstrdup_(base);
        }
        if (asprintf(&joined, "%s/%s", b, path) < 0)
            abort();
        free(b);
    }
    /* Walk the components. While each exists, the prefix is made real (symlinks
     * followed) so that a `..` after it climbs from where the link led; once one does
     * not exist nothing below it can be a link, and the rest is applied as text. */
    size_t cap = strlen(joined) + PATH_MAX + 2;
    char *cur = xcalloc_(cap, 1);
    strcpy(cur, "/");
    int exists = 1;
    char *save = NULL;
    for (char *comp = strtok_r(joined, "/", &save); comp != NULL;
         comp = strtok_r(NULL, "/", &save)) {
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            pop_component(cur);
            continue;
        }
        size_t len = strlen(cur);
        if (len + 1 + strlen(comp) + 1 > cap) {
            free(cur);
            free(joined);
            errno = ENAMETOOLONG;
            return NULL;
        }
        if (len > 1)
            cur[len++] = '/';
        strcpy(cur + len, comp);
        if (!exists)
            continue;
        struct stat st;
        if (lstat(cur, &st) != 0) {
            exists = 0;
            continue;
        }
        char *real = realpath(cur, NULL);
        if (real == NULL) {
            /* A dangling link: where it leads does not exist, so it stays as text. */
            exists = 0;
            continue;
        }
        if (strlen(real) + 1 > cap) {
            free(real);
            free(cur);
            free(joined);
            errno = ENAMETOOLONG;
            return NULL;
        }
        strcpy(cur, real);
        free(real);
    }
    free(joined);
    return cur;
}

/* true when `inner` is `outer` itself or below it. */
static int path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    if (strcmp(outer, "/") == 0)
        return 1;
    return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

/* ---- reading fields ---------------------------------------------------------------- */

typedef struct reader {
    dc_faults_t *faults;
    const char *lab_dir;
} reader_t;

static const char *kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

/* Writes "<base>.<name>" into buf. */
static const char *field_path(char *buf, size_t len, const char *base, const char *name)
{
    /* A path longer than the buffer is cut short; the message still names its start. */
    if (snprintf(buf, len, "%s%s%s", base, base[0] != '\0' ? "." : "", name) >= (int)len)
        buf[len - 1] = '\0';
    return buf;
}

/* Refuses every member of `obj` that is not in `known` (NULL-terminated). */
static void check_known(reader_t *r, const json_t *obj, const char *path, const char *const *known)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        int found = 0;
        for (size_t i = 0; known[i] != NULL && !found; i++)
            found = strcmp(key, known[i]) == 0;
        if (found)
            continue;
        char p[PATH_TEXT], list[PATH_TEXT] = "";
        size_t used = 0;
        for (size_t i = 0; known[i] != NULL && used < sizeof list; i++)
            used +=
                (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
        dc_faults_add(r->faults, field_path(p, sizeof p, path, key),
                      "unknown field (expected one of %s)", list);
    }
}

/* A required (or, with `optional`, possibly absent) string member. Returns the value
 * borrowed from obj, or NULL (absent, or a fault recorded). */
static const char *get_string(reader_t *r, const json_t *obj, const char *path, const char *name,
                              int optional)
{
    char p[PATH_TEXT];
    const json_t *v = json_object_get(obj, name);
    if (v == NULL) {
        if (!optional)
            dc_faults_add(r->faults, field_path(p, sizeof p, path, name), "missing");
        return NULL;
    }
    if (!json_is_string(v)) {
        dc_faults_add(r->faults, field_path(p, sizeof p, path, name), "expected a string, got %s",
                      kind(v));
        return NULL;
    }
    if (json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v)) {
        dc_faults_add(r->faults, field_path(p, sizeof p, path, name),
                      "expected a non-empty string without NUL bytes");
        return NULL;
    }
    return json_string_value(v);
}

/* A required integer member in [min, max]. Returns 0 and *out, or -1 (fault recorded). */
static int get_uint(reader_t *r, const json_t *obj, const char *path, const char *name,
                    uint64_t min, uint64_t max, uint64_t *out)
{
    char p[PATH_TEXT];
    const json_t *v = json_object_get(obj, name);
    field_path(p, sizeof p, path, name);
    if (v == NULL) {
        dc_faults_add(r->faults, p, "missing");
        return -1;
    }
    if (!json_is_integer(v)) {
        dc_faults_add(r->faults, p, "expected an integer from %llu to %llu, got %s",
                      (unsigned long long)min, (unsigned long long)max, kind(v));
        return -1;
    }
    json_int_t n = json_integer_value(v);
    if (n < 0 || (uint64_t)n < min || (uint64_t)n > max) {
        dc_faults_add(r->faults, p, "expected an integer from %llu to %llu, got %lld",
                      (unsigned long long)min, (unsigned long long)max, (long long)n);
        return -1;
    }
    *out = (uint64_t)n;
    return 0;
}

/* An optional boolean member (default `dflt`). */
static int get_bool(reader_t *r, const json_t *obj, const char *path, const char *name, bool dflt,
                    bool *out)
{
    char p[PATH_TEXT];
    const json_t *v = json_object_get(obj, name);
    *out = dflt;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v)) {
        dc_faults_add(r->faults, field_path(p, sizeof p, path, name), "expected a boolean, got %s",
                      kind(v));
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int is_uuid(const char *s)
{
    static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (strlen(s) != DC_UUID_LEN)
        return 0;
    for (size_t i = 0; i < DC_UUID_LEN; i++) {
        char c = s[i];
        if (shape[i] == '-' ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

static void get_uuid(reader_t *r, const json_t *obj, const char *path, char *out)
{
    const char *s = get_string(r, obj, path, "uuid", 0);
    out[0] = '\0';
    if (s == NULL)
        return;
    if (!is_uuid(s)) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, "uuid"),
                      "expected a UUID (8-4-4-4-12 lowercase hex digits), got \"%.64s\"", s);
        return;
    }
    memcpy(out, s, DC_UUID_LEN + 1);
}

/* A name: 1..NAME_MAX_LEN of [A-Za-z0-9._-], starting with a letter or digit. */
static char *get_name(reader_t *r, const json_t *obj, const char *path, const char *name,
                      int optional)
{
    const char *s = get_string(r, obj, path, name, optional);
    if (s == NULL)
        return NULL;
    size_t n = strlen(s);
    int ok = n <= NAME_MAX_LEN;
    for (size_t i = 0; ok && i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        ok = alnum || (i > 0 && (c == '.' || c == '_' || c == '-'));
    }
    if (!ok) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, name),
                      "expected 1 to %d of A-Z, a-z, 0-9, '.', '_' or '-' (starting with a "
                      "letter or digit), got \"%.80s\"",
                      NAME_MAX_LEN, s);
        return NULL;
    }
    return xstrdup_(s);
}

static char *get_brand(reader_t *r, const json_t *obj, const char *path, int optional)
{
    const char *s = get_string(r, obj, path, "brand", optional);
    if (s == NULL)
        return NULL;
    for (size_t i = 0; brands[i] != NULL; i++)
        if (strcmp(s, brands[i]) == 0)
            return xstrdup_(s);
    char p[PATH_TEXT];
    dc_faults_add(r->faults, field_path(p, sizeof p, path, "brand"),
                  "expected bhyve, kvm, joyent, joyent-minimal or lx, got \"%.64s\"", s);
    return NULL;
}

/* An IPv4 address member; returns 0 and *out (host order) or -1. */
static int get_ipv4(reader_t *r, const json_t *obj, const char *path, const char *name,
                    uint32_t *out, char **text)
{
    const char *s = get_string(r, obj, path, name, 0);
    if (s == NULL)
        return -1;
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, name),
                      "expected an IPv4 address, got \"%.64s\"", s);
        return -1;
    }
    *out = ntohl(a.s_addr);
    *text = xstrdup_(s);
    return 0;
}

/* "a.b.c.d/n": returns 0 with the network address and prefix, or -1. */
static int get_subnet(reader_t *r, const json_t *obj, const char *path, dc_network_t *n)
{
    char p[PATH_TEXT];
    const char *s = get_string(r, obj, path, "subnet", 0);
    if (s == NULL)
        return -1;
    field_path(p, sizeof p, path, "subnet");
    const char *slash = strchr(s, '/');
    char addr[INET_ADDRSTRLEN];
    struct in_addr a;
    char *end = NULL;
    long prefix = -1;
    if (slash != NULL && (size_t)(slash - s) < sizeof addr) {
        memcpy(addr, s, (size_t)(slash - s));
        addr[slash - s] = '\0';
        errno = 0;
        if (slash[1] >= '0' && slash[1] <= '9')
            prefix = strtol(slash + 1, &end, 10);
    }
    if (slash == NULL || prefix < 0 || end == NULL || *end != '\0' || errno != 0 ||
        inet_pton(AF_INET, addr, &a) != 1) {
        dc_faults_add(r->faults, p,
                      "expected an IPv4 subnet in CIDR form (\"10.0.0.0/24\"), "
                      "got \"%.64s\"",
                      s);
        return -1;
    }
    if (prefix < PREFIX_MIN || prefix > PREFIX_MAX) {
        dc_faults_add(r->faults, p, "prefix length /%ld is out of range /%d../%d", prefix,
                      PREFIX_MIN, PREFIX_MAX);
        return -1;
    }
    uint32_t ip = ntohl(a.s_addr);
    uint32_t mask = 0xffffffffu << (32 - prefix);
    if ((ip & ~mask) != 0) {
        char net[INET_ADDRSTRLEN];
        struct in_addr na = {.s_addr = htonl(ip & mask)};
        inet_ntop(AF_INET, &na, net, sizeof net);
        dc_faults_add(r->faults, p, "\"%s\" has host bits set; the network is %s/%ld", s, net,
                      prefix);
        return -1;
    }
    n->subnet = xstrdup_(s);
    n->subnet_addr = ip;
    n->prefix_len = (unsigned)prefix;
    return 0;
}

/* Reads the array `name` of the document: returns it (borrowed) or NULL with a fault. */
static const json_t *get_array(reader_t *r, const json_t *doc, const char *name)
{
    const json_t *v = json_object_get(doc, name);
    if (v == NULL) {
        dc_faults_add(r->faults, name, "missing (an array, possibly empty)");
        return NULL;
    }
    if (!json_is_array(v)) {
        dc_faults_add(r->faults, name, "expected an array, got %s", kind(v));
        return NULL;
    }
    return v;
}

/* Checks that entry i of section `name` is an object; writes its path. */
static int entry_object(reader_t *r, const json_t *e, const char *name, size_t i, char *path,
                        size_t len)
{
    snprintf(path, len, "%s[%zu]", name, i);
    if (!json_is_object(e)) {
        dc_faults_add(r->faults, path, "expected an object, got %s", kind(e));
        return -1;
    }
    return 0;
}

/* ---- sections ---------------------------------------------------------------------- */

static void read_server(reader_t *r, const json_t *e, const char *path, dc_server_t *s)
{
    static const char *const known[] = {
        "uuid", "hostname", "rack", "ram_mib", "disk_mib", "data_root", "platform_version", NULL};
    check_known(r, e, path, known);
    get_uuid(r, e, path, s->uuid);
    const char *host = get_string(r, e, path, "hostname", 0);
    if (host != NULL) {
        /* A hostname names the agent's runner id, so it keeps to a DNS label's letters. */
        size_t n = strlen(host);
        int ok = n <= 63;
        for (size_t i = 0; ok && i < n; i++) {
            char c = host[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 (i > 0 && (c == '-' || c == '.'));
        }
        if (ok) {
            s->hostname = xstrdup_(host);
        } else {
            char p[PATH_TEXT];
            dc_faults_add(r->faults, field_path(p, sizeof p, path, "hostname"),
                          "expected 1 to 63 of A-Z, a-z, 0-9, '-' or '.' (starting with a "
                          "letter or digit), got \"%.80s\"",
                          host);
        }
    }
    s->rack = get_name(r, e, path, "rack", 0);
    get_uint(r, e, path, "ram_mib", 1, SIZE_MIB_MAX, &s->ram_mib);
    get_uint(r, e, path, "disk_mib", 1, SIZE_MIB_MAX, &s->disk_mib);
    const char *pv = get_string(r, e, path, "platform_version", 1);
    if (pv != NULL)
        s->platform_version = xstrdup_(pv);
    const char *root = get_string(r, e, path, "data_root", 0);
    if (root == NULL)
        return;
    char p[PATH_TEXT];
    field_path(p, sizeof p, path, "data_root");
    char *resolved = datacenter_resolve_path(r->lab_dir, root);
    if (resolved == NULL) {
        dc_faults_add(r->faults, p, "cannot resolve \"%.200s\": %s", root, strerror(errno));
        return;
    }
    if (!path_within(resolved, r->lab_dir) || strcmp(resolved, r->lab_dir) == 0) {
        dc_faults_add(r->faults, p,
                      "\"%.200s\" leads to %.200s, which is not inside the lab directory "
                      "%.200s",
                      root, resolved, r->lab_dir);
        free(resolved);
        return;
    }
    s->data_root = resolved;
}

/* "owner_uuids": the owners a network is for (NAPI's owner_uuids); absent or empty,
 * any owner. A fabric network belongs to its owners: only they put volumes on it. */
static void read_network_owners(reader_t *r, const json_t *e, const char *path, dc_network_t *n)
{
    char p[PATH_TEXT];
    const json_t *v = json_object_get(e, "owner_uuids");
    field_path(p, sizeof p, path, "owner_uuids");
    if (v == NULL)
        return;
    if (!json_is_array(v)) {
        dc_faults_add(r->faults, p, "expected an array of owner uuids, got %s", kind(v));
        return;
    }
    if (json_array_size(v) == 0)
        return;
    n->owner_uuids = calloc(json_array_size(v) + 1, sizeof *n->owner_uuids);
    if (n->owner_uuids == NULL) {
        dc_faults_add(r->faults, p, "out of memory");
        return;
    }
    size_t i;
    const json_t *u;
    json_array_foreach(v, i, u)
    {
        const char *s = json_string_value(u);
        if (s == NULL || !is_uuid(s)) {
            char q[PATH_TEXT + 24];
            snprintf(q, sizeof q, "%s[%zu]", p, i);
            dc_faults_add(r->faults, q, "expected a lowercase uuid, got %s",
                          s != NULL ? s : kind(u));
            continue;
        }
        char *copy = strdup(s);
        if (copy == NULL) {
            dc_faults_add(r->faults, p, "out of memory");
            return;
        }
        n->owner_uuids[n->n_owner_uuids++] = copy;
    }
}

static void read_network(reader_t *r, const json_t *e, const char *path, dc_network_t *n)
{
    static const char *const known[] = {"uuid",
                                        "name",
                                        "subnet",
                                        "gateway",
                                        "provision_start_ip",
                                        "provision_end_ip",
                                        "vlan_id",
                                        "mtu",
                                        "fabric",
                                        "owner_uuids",
                                        NULL};
    check_known(r, e, path, known);
    get_uuid(r, e, path, n->uuid);
    n->name = get_name(r, e, path, "name", 0);
    get_bool(r, e, path, "fabric", false, &n->fabric);
    read_network_owners(r, e, path, n);
    int subnet_ok = get_subnet(r, e, path, n) == 0;
    int gw_ok = get_ipv4(r, e, path, "gateway", &n->gateway, &n->gateway_text) == 0;
    int start_ok = get_ipv4(r, e, path, "provision_start_ip", &n->start_ip, &n->start_text) == 0;
    int end_ok = get_ipv4(r, e, path, "provision_end_ip", &n->end_ip, &n->end_text) == 0;
    uint64_t v = 0;
    if (get_uint(r, e, path, "vlan_id", 0, VLAN_ID_MAX, &v) == 0)
        n->vlan_id = (unsigned)v;
    if (get_uint(r, e, path, "mtu", MTU_MIN, MTU_MAX, &v) == 0)
        n->mtu = (unsigned)v;
    if (!subnet_ok)
        return;
    uint32_t mask = 0xffffffffu << (32 - n->prefix_len);
    uint32_t first = n->subnet_addr, last = n->subnet_addr | ~mask;
    struct {
        int ok;
        const char *name;
        uint32_t ip;
        const char *text;
    } addrs[] = {{gw_ok, "gateway", n->gateway, n->gateway_text},
                 {start_ok, "provision_start_ip", n->start_ip, n->start_text},
                 {end_ok, "provision_end_ip", n->end_ip, n->end_text}};
    for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
        if (!addrs[i].ok)
            continue;
        char p[PATH_TEXT];
        field_path(p, sizeof p, path, addrs[i].name);
        if ((addrs[i].ip & mask) != n->subnet_addr) {
            dc_faults_add(r->faults, p, "%s is outside the subnet %s", addrs[i].text, n->subnet);
            addrs[i].ok = 0;
        } else if (addrs[i].ip == first || addrs[i].ip == last) {
            dc_faults_add(r->faults, p, "%s is the %s address of the subnet %s", addrs[i].text,
                          addrs[i].ip == first ? "network" : "broadcast", n->subnet);
            addrs[i].ok = 0;
        }
    }
    if (addrs[1].ok && addrs[2].ok && n->start_ip > n->end_ip) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, "provision_start_ip"),
                      "%s comes after provision_end_ip %s", n->start_text, n->end_text);
        addrs[1].ok = 0;
    }
    if (!addrs[1].ok || !addrs[2].ok)
        n->start_ip = n->end_ip = 0; /* no range to compare with the other networks' */
}

/* A flexible package's default disk layout ("disks", datacenter.h). The checks that
 * need no image: what a provision with this package and any image that fits it would
 * otherwise refuse every time. */
static void read_package_disks(reader_t *r, const json_t *e, const char *path, dc_package_t *k,
                               int disk_ok)
{
    char p[PATH_TEXT];
    const json_t *disks = json_object_get(e, "disks");
    field_path(p, sizeof p, path, "disks");
    if (!json_is_array(disks) || json_array_size(disks) < 1 ||
        json_array_size(disks) > DC_DISKS_MAX) {
        if (json_is_array(disks))
            dc_faults_add(r->faults, p,
                          "expected 1 to %d disks (PCI functions 0:4:0 to 0:4:7), got %zu",
                          DC_DISKS_MAX, json_array_size(disks));
        else
            dc_faults_add(r->faults, p,
                          "expected a list of 1 to %d of {}, {\"size\": MiB} or "
                          "{\"size\": \"remaining\"}, got %s",
                          DC_DISKS_MAX, kind(disks));
        return;
    }
    if (!k->flexible_disk)
        dc_faults_add(r->faults, p,
                      "a default disk layout is for flexible_disk packages (this one gives "
                      "every instance a boot disk at its image's size and a data disk of "
                      "disk_mib)");
    static const char *const known[] = {"size", NULL};
    uint64_t given = 0;
    int remaining = -1, layout_ok = 1;
    size_t i;
    const json_t *d;
    json_array_foreach(disks, i, d)
    {
        char dp[PATH_TEXT + 24], sp[PATH_TEXT];
        snprintf(dp, sizeof dp, "%s[%zu]", p, i);
        field_path(sp, sizeof sp, dp, "size");
        if (!json_is_object(d)) {
            dc_faults_add(r->faults, dp, "expected an object, got %s", kind(d));
            layout_ok = 0;
            continue;
        }
        check_known(r, d, dp, known);
        const json_t *size = json_object_get(d, "size");
        dc_package_disk_t *pd = &k->disks[i];
        if (size == NULL) {
            if (i > 0) {
                dc_faults_add(r->faults, sp,
                              "required for a disk other than the first (the boot disk, "
                              "whose size may be the image's)");
                layout_ok = 0;
            }
        } else if (json_is_string(size) && strcmp(json_string_value(size), "remaining") == 0) {
            if (remaining >= 0) {
                dc_faults_add(r->faults, sp,
                              "\"remaining\" is also the size of disks[%d]: at most one "
                              "disk takes what the others leave",
                              remaining);
                layout_ok = 0;
            } else {
                remaining = (int)i;
                pd->remaining = true;
            }
        } else if (!json_is_integer(size)) {
            dc_faults_add(r->faults, sp,
                          "expected a positive integer of MiB or \"remaining\", got %s",
                          kind(size));
            layout_ok = 0;
        } else if (get_uint(r, d, dp, "size", 1, SIZE_MIB_MAX, &pd->size_mib) == 0) {
            given += pd->size_mib;
        } else {
            layout_ok = 0;
        }
    }
    if (layout_ok && disk_ok && (given > k->disk_mib || (remaining >= 0 && given == k->disk_mib))) {
        dc_faults_add(r->faults, p,
                      "the sizes given add up to %llu MiB, %s disk_mib %llu: no instance of "
                      "this package could be made",
                      (unsigned long long)given, given > k->disk_mib ? "more than" : "all of",
                      (unsigned long long)k->disk_mib);
        layout_ok = 0;
    }
    if (layout_ok)
        k->n_disks = json_array_size(disks);
}

static void read_package(reader_t *r, const json_t *e, const char *path, dc_package_t *k)
{
    static const char *const known[] = {"uuid",  "name",     "brand",         "ram_mib",
                                        "vcpus", "disk_mib", "flexible_disk", "quota_mib",
                                        "disks", NULL};
    check_known(r, e, path, known);
    get_uuid(r, e, path, k->uuid);
    k->name = get_name(r, e, path, "name", 0);
    k->brand = get_brand(r, e, path, 0);
    get_uint(r, e, path, "ram_mib", 1, SIZE_MIB_MAX, &k->ram_mib);
    get_uint(r, e, path, "vcpus", 1, 1024, &k->vcpus);
    int disk_ok = get_uint(r, e, path, "disk_mib", 1, SIZE_MIB_MAX, &k->disk_mib) == 0;
    if (get_bool(r, e, path, "flexible_disk", false, &k->flexible_disk) == 0 && k->flexible_disk &&
        k->brand != NULL && strcmp(k->brand, "bhyve") != 0) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, "flexible_disk"),
                      "flexible disk space is for bhyve packages, and this one is %s", k->brand);
    }
    if (json_object_get(e, "quota_mib") != NULL &&
        get_uint(r, e, path, "quota_mib", 0, SIZE_MIB_MAX, &k->quota_mib) == 0 &&
        !k->flexible_disk) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, "quota_mib"),
                      "the zone root's own space is for flexible_disk packages (an inflexible "
                      "package's quota is its disk_mib)");
    }
    if (json_object_get(e, "disks") != NULL)
        read_package_disks(r, e, path, k, disk_ok);
}

static void read_image(reader_t *r, const json_t *e, const char *path, dc_image_t *m)
{
    static const char *const known[] = {"uuid",     "name",  "version", "size_mib", "file",
                                        "data_mib", "brand", "os",      NULL};
    check_known(r, e, path, known);
    get_uuid(r, e, path, m->uuid);
    m->name = get_name(r, e, path, "name", 0);
    m->version = get_name(r, e, path, "version", 0);
    int size_ok = get_uint(r, e, path, "size_mib", 1, SIZE_MIB_MAX, &m->size_mib) == 0;
    m->data_mib = 1;
    if (json_object_get(e, "data_mib") != NULL &&
        get_uint(r, e, path, "data_mib", 1, SIZE_MIB_MAX, &m->data_mib) == 0 && size_ok &&
        m->data_mib > m->size_mib) {
        char p[PATH_TEXT];
        dc_faults_add(r->faults, field_path(p, sizeof p, path, "data_mib"),
                      "%llu MiB of data do not fit in an image of size_mib %llu",
                      (unsigned long long)m->data_mib, (unsigned long long)m->size_mib);
    } else if (size_ok && m->data_mib > m->size_mib) {
        m->data_mib = m->size_mib;
    }
    m->brand = get_brand(r, e, path, 1);
    const char *os = get_string(r, e, path, "os", 1);
    if (os != NULL)
        m->os = xstrdup_(os);
    const char *file = get_string(r, e, path, "file", 0);
    if (file != NULL) {
        m->file = datacenter_resolve_path(r->lab_dir, file);
        if (m->file == NULL) {
            char p[PATH_TEXT];
            dc_faults_add(r->faults, field_path(p, sizeof p, path, "file"),
                          "cannot resolve \"%.200s\": %s", file, strerror(errno));
        }
    }
}

/* ---- checks across entries ----------------------------------------------------------- */

typedef struct uuid_seen {
    const char *uuid;
    char path[PATH_TEXT];
} uuid_seen_t;

/* Refuses a uuid seen before anywhere in the document. */
static void check_uuid_unique(reader_t *r, uuid_seen_t *seen, size_t *n, const char *uuid,
                              const char *path)
{
    if (uuid[0] == '\0')
        return;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(seen[i].uuid, uuid) == 0) {
            char p[PATH_TEXT];
            dc_faults_add(r->faults, field_path(p, sizeof p, path, "uuid"),
                          "\"%s\" is also the uuid of %s", uuid, seen[i].path);
            return;
        }
    }
    seen[*n].uuid = uuid;
    snprintf(seen[*n].path, sizeof seen[*n].path, "%s", path);
    (*n)++;
}

/* Refuses value i of `section` when an earlier entry has the same value. `get` gives
 * an entry's value (NULL when it did not read). */
static void check_unique(reader_t *r, const char *section, size_t n, const char *field,
                         const char *what, const char *(*get)(const void *all, size_t i),
                         const void *all)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = get(all, i);
        if (v == NULL)
            continue;
        for (size_t j = 0; j < i; j++) {
            const char *w = get(all, j);
            if (w != NULL && strcmp(v, w) == 0) {
                char p[PATH_TEXT];
                snprintf(p, sizeof p, "%s[%zu].%s", section, i, field);
                dc_faults_add(r->faults, p, "%s \"%.200s\" is also that of %s[%zu]", what, v,
                              section, j);
                break;
            }
        }
    }
}

static const char *server_hostname(const void *all, size_t i)
{
    return ((const dc_server_t *)all)[i].hostname;
}

static const char *network_name(const void *all, size_t i)
{
    return ((const dc_network_t *)all)[i].name;
}

static const char *package_name(const void *all, size_t i)
{
    return ((const dc_package_t *)all)[i].name;
}

static const char *image_file(const void *all, size_t i)
{
    return ((const dc_image_t *)all)[i].file;
}

static void check_data_roots(reader_t *r, const datacenter_t *dc)
{
    for (size_t i = 0; i < dc->n_servers; i++) {
        const char *a = dc->servers[i].data_root;
        for (size_t j = 0; a != NULL && j < i; j++) {
            const char *b = dc->servers[j].data_root;
            if (b == NULL || !(path_within(a, b) || path_within(b, a)))
                continue;
            char p[PATH_TEXT];
            snprintf(p, sizeof p, "servers[%zu].data_root", i);
            dc_faults_add(r->faults, p, "%s %s the data root of servers[%zu] (%s)", a,
                          strcmp(a, b) == 0 ? "is" : (path_within(a, b) ? "is inside" : "holds"), j,
                          b);
            break;
        }
    }
}

static void check_ranges(reader_t *r, const datacenter_t *dc)
{
    for (size_t i = 0; i < dc->n_networks; i++) {
        const dc_network_t *a = &dc->networks[i];
        if (a->start_ip == 0)
            continue;
        for (size_t j = 0; j < i; j++) {
            const dc_network_t *b = &dc->networks[j];
            if (b->start_ip == 0 || a->start_ip > b->end_ip || b->start_ip > a->end_ip)
                continue;
            char p[PATH_TEXT];
            snprintf(p, sizeof p, "networks[%zu].provision_start_ip", i);
            dc_faults_add(r->faults, p,
                          "the provision range %s-%s overlaps that of networks[%zu] (%s-%s)",
                          a->start_text, a->end_text, j, b->start_text, b->end_text);
            break;
        }
    }
}

static void check_image_versions(reader_t *r, const datacenter_t *dc)
{
    for (size_t i = 0; i < dc->n_images; i++) {
        const dc_image_t *a = &dc->images[i];
        for (size_t j = 0; a->name != NULL && a->version != NULL && j < i; j++) {
            const dc_image_t *b = &dc->images[j];
            if (b->name == NULL || b->version == NULL || strcmp(a->name, b->name) != 0 ||
                strcmp(a->version, b->version) != 0)
                continue;
            char p[PATH_TEXT];
            snprintf(p, sizeof p, "images[%zu].version", i);
            dc_faults_add(r->faults, p, "image %s version %s is also images[%zu]", a->name,
                          a->version, j);
            break;
        }
    }
}

/* ---- the document ------------------------------------------------------------------ */

/* An optional integer setting in [min, max], or its default. */
static void get_setting(reader_t *r, const json_t *settings, const char *name, uint64_t min,
                        uint64_t max, uint64_t dflt, uint64_t *out)
{
    *out = dflt;
    if (json_object_get(settings, name) != NULL)
        get_uint(r, settings, "settings", name, min, max, out);
}

/* The settings the datacenter's plugin and lab read (datacenter.h), each checked, an
 * unknown one refused: a misspelt setting would otherwise be silently its default. */
static void read_settings(reader_t *r, const json_t *settings, dc_settings_t *set)
{
    static const char *const known[] = {"share_health_ms",
                                        "share_watch_every_s",
                                        "writer_records_per_s",
                                        "net_reconcile_every_s",
                                        "net_reconcile_start_delay_s",
                                        "reservation_max_age_s",
                                        "max_snapshots_per_volume",
                                        "max_running_migrations_per_cn",
                                        "migration_send_mbps_limit",
                                        "migration_block_kib",
                                        "migration_window_blocks",
                                        "migration_converge_max_mib",
                                        "migration_converge_max_passes",
                                        "migration_converge_stall_passes",
                                        "migration_converge_min_reduction_pct",
                                        "allow_user_migrations",
                                        "migration_scheduler",
                                        NULL};
    check_known(r, settings, "settings", known);
    get_setting(r, settings, "share_health_ms", 50, 600000, 5000, &set->share_health_ms);
    get_setting(r, settings, "share_watch_every_s", 1, 3600, 5, &set->share_watch_every_s);
    /* tern-workload's own bounds (its --rate): 2048 is 1 MiB/s, the downtime bench's load. */
    get_setting(r, settings, "writer_records_per_s", 1, 100000, 10, &set->writer_records_per_s);
    get_setting(r, settings, "net_reconcile_every_s", 1, 86400, 300, &set->net_reconcile_every_s);
    get_setting(r, settings, "reservation_max_age_s", 1, 86400, 900, &set->reservation_max_age_s);
    get_setting(r, settings, "max_snapshots_per_volume", 1, 1024, 16,
                &set->max_snapshots_per_volume);
    get_setting(r, settings, "max_running_migrations_per_cn", 1, 1000, 5,
                &set->max_running_migrations_per_cn);
    get_setting(r, settings, "migration_send_mbps_limit", 1, 1000000, 500,
                &set->migration_send_mbps_limit);
    get_setting(r, settings, "migration_block_kib", 4, 65536, 1024, &set->migration_block_kib);
    get_setting(r, settings, "migration_window_blocks", 1, 4096, 16, &set->migration_window_blocks);
    get_setting(r, settings, "migration_converge_max_mib", 0, 1048576, 50,
                &set->migration_converge_max_mib);
    get_setting(r, settings, "migration_converge_max_passes", 1, 1000, 10,
                &set->migration_converge_max_passes);
    get_setting(r, settings, "migration_converge_stall_passes", 1, 1000, 3,
                &set->migration_converge_stall_passes);
    get_setting(r, settings, "migration_converge_min_reduction_pct", 0, 100, 10,
                &set->migration_converge_min_reduction_pct);
    get_bool(r, settings, "settings", "allow_user_migrations", false, &set->allow_user_migrations);
    get_bool(r, settings, "settings", "migration_scheduler", true, &set->migration_scheduler);
    set->net_reconcile_delay_min_s = 120;
    set->net_reconcile_delay_max_s = 600;
    const json_t *d = json_object_get(settings, "net_reconcile_start_delay_s");
    if (d == NULL)
        return;
    json_int_t lo = json_integer_value(json_array_get(d, 0));
    json_int_t hi = json_integer_value(json_array_get(d, 1));
    if (!json_is_array(d) || json_array_size(d) != 2 || !json_is_integer(json_array_get(d, 0)) ||
        !json_is_integer(json_array_get(d, 1)) || lo < 0 || hi > 86400 || lo > hi) {
        dc_faults_add(r->faults, "settings.net_reconcile_start_delay_s",
                      "expected [min, max]: two integers of seconds, 0 <= min <= max <= 86400");
        return;
    }
    set->net_reconcile_delay_min_s = (uint64_t)lo;
    set->net_reconcile_delay_max_s = (uint64_t)hi;
}

int datacenter_parse(const json_t *doc, const char *lab_dir, datacenter_t **out,
                     dc_faults_t *faults)
{
    *out = NULL;
    size_t before = faults->n;
    if (!json_is_object(doc)) {
        dc_faults_add(faults, "", "expected an object, got %s", kind(doc));
        return -EINVAL;
    }
    datacenter_t *dc = xcalloc_(1, sizeof *dc);
    dc->lab_dir = datacenter_resolve_path(NULL, lab_dir != NULL ? lab_dir : ".");
    if (dc->lab_dir == NULL) {
        dc_faults_add(faults, "", "cannot resolve the lab directory %s: %s", lab_dir,
                      strerror(errno));
        datacenter_free(dc);
        return -EINVAL;
    }
    reader_t r = {.faults = faults, .lab_dir = dc->lab_dir};
    static const char *const known[] = {"servers", "networks", "packages",
                                        "images",  "settings", NULL};
    check_known(&r, doc, "", known);

    const json_t *servers = get_array(&r, doc, "servers");
    const json_t *networks = get_array(&r, doc, "networks");
    const json_t *packages = get_array(&r, doc, "packages");
    const json_t *images = get_array(&r, doc, "images");
    if (servers != NULL && json_array_size(servers) == 0)
        dc_faults_add(faults, "servers", "a datacenter needs at least one server");

    size_t total = json_array_size(servers) + json_array_size(networks) +
                   json_array_size(packages) + json_array_size(images);
    uuid_seen_t *seen = xcalloc_(total, sizeof *seen);
    size_t n_seen = 0;
    char path[PATH_TEXT];
    size_t i;
    const json_t *e;

    dc->servers = xcalloc_(json_array_size(servers), sizeof *dc->servers);
    dc->n_servers = json_array_size(servers);
    json_array_foreach(servers, i, e)
    {
        if (entry_object(&r, e, "servers", i, path, sizeof path) != 0)
            continue;
        read_server(&r, e, path, &dc->servers[i]);
        check_uuid_unique(&r, seen, &n_seen, dc->servers[i].uuid, path);
    }
    dc->networks = xcalloc_(json_array_size(networks), sizeof *dc->networks);
    dc->n_networks = json_array_size(networks);
    json_array_foreach(networks, i, e)
    {
        if (entry_object(&r, e, "networks", i, path, sizeof path) != 0)
            continue;
        read_network(&r, e, path, &dc->networks[i]);
        check_uuid_unique(&r, seen, &n_seen, dc->networks[i].uuid, path);
    }
    dc->packages = xcalloc_(json_array_size(packages), sizeof *dc->packages);
    dc->n_packages = json_array_size(packages);
    json_array_foreach(packages, i, e)
    {
        if (entry_object(&r, e, "packages", i, path, sizeof path) != 0)
            continue;
        read_package(&r, e, path, &dc->packages[i]);
        check_uuid_unique(&r, seen, &n_seen, dc->packages[i].uuid, path);
    }
    dc->images = xcalloc_(json_array_size(images), sizeof *dc->images);
    dc->n_images = json_array_size(images);
    json_array_foreach(images, i, e)
    {
        if (entry_object(&r, e, "images", i, path, sizeof path) != 0)
            continue;
        read_image(&r, e, path, &dc->images[i]);
        check_uuid_unique(&r, seen, &n_seen, dc->images[i].uuid, path);
    }
    free(seen);

    /* An entry that was not an object stays zeroed at its index (no uuid, no names,
     * no range), so the checks below skip it and name the others by their index. */
    check_unique(&r, "servers", dc->n_servers, "hostname", "hostname", server_hostname,
                 dc->servers);
    check_unique(&r, "networks", dc->n_networks, "name", "name", network_name, dc->networks);
    check_unique(&r, "packages", dc->n_packages, "name", "name", package_name, dc->packages);
    check_unique(&r, "images", dc->n_images, "file", "file", image_file, dc->images);
    check_image_versions(&r, dc);
    check_data_roots(&r, dc);
    check_ranges(&r, dc);

    const json_t *settings = json_object_get(doc, "settings");
    if (settings != NULL && !json_is_object(settings))
        dc_faults_add(faults, "settings", "expected an object, got %s", kind(settings));
    dc->settings = json_is_object(settings) ? json_deep_copy(settings) : json_object();
    read_settings(&r, dc->settings, &dc->set);

    if (faults->n > before) {
        datacenter_free(dc);
        return -EINVAL;
    }
    *out = dc;
    return 0;
}

int datacenter_load(const char *path, const char *lab_dir, datacenter_t **out, dc_faults_t *faults)
{
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL) {
        char where[PATH_TEXT];
        snprintf(where, sizeof where, "%s", path);
        if (jerr.line > 0)
            dc_faults_add(faults, where, "line %d, column %d: %s", jerr.line, jerr.column,
                          jerr.text);
        else
            dc_faults_add(faults, where, "%s", jerr.text);
        return -EINVAL;
    }
    int rc = datacenter_parse(doc, lab_dir, out, faults);
    json_decref(doc);
    return rc;
}

void datacenter_free(datacenter_t *dc)
{
    if (dc == NULL)
        return;
    for (size_t i = 0; i < dc->n_servers; i++) {
        dc_server_t *s = &dc->servers[i];
        free(s->hostname);
        free(s->rack);
        free(s->data_root);
        free(s->platform_version);
    }
    for (size_t i = 0; i < dc->n_networks; i++) {
        dc_network_t *n = &dc->networks[i];
        free(n->name);
        free(n->subnet);
        free(n->gateway_text);
        free(n->start_text);
        free(n->end_text);
        for (size_t j = 0; j < n->n_owner_uuids; j++)
            free(n->owner_uuids[j]);
        free(n->owner_uuids);
    }
    for (size_t i = 0; i < dc->n_packages; i++) {
        free(dc->packages[i].name);
        free(dc->packages[i].brand);
    }
    for (size_t i = 0; i < dc->n_images; i++) {
        dc_image_t *m = &dc->images[i];
        free(m->name);
        free(m->version);
        free(m->file);
        free(m->brand);
        free(m->os);
    }
    free(dc->servers);
    free(dc->networks);
    free(dc->packages);
    free(dc->images);
    json_decref(dc->settings);
    free(dc->lab_dir);
    free(dc);
}

const dc_server_t *datacenter_server_find(const datacenter_t *dc, const char *uuid)
{
    for (size_t i = 0; i < dc->n_servers; i++)
        if (strcmp(dc->servers[i].uuid, uuid) == 0)
            return &dc->servers[i];
    return NULL;
}

char *datacenter_server_queue(const dc_server_t *s, char *out, size_t outlen)
{
    snprintf(out, outlen, "server:%s", s->uuid);
    return out;
}

char *datacenter_server_runner_id(const dc_server_t *s, char *out, size_t outlen)
{
    snprintf(out, outlen, "agent-%s", s->hostname);
    return out;
}
