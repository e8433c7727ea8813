/*
 * dc_schedules.c -- the lab's schedules and start reconciles (dc_schedules.h), made
 * through the control's API with probe.h's requests.
 */
#include "dc_schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "probe.h"

#define API_MS 5000 /* each request answers within */

/* The schedules a server gets: its name's prefix, workflow, and interval. */
typedef struct wanted {
    const char *prefix;   /* "net-reconcile" -> net-reconcile@<hostname> */
    const char *workflow; /* also the target's prefix: /<workflow>-<server_uuid> */
    uint64_t every_s;
} wanted_t;

/* The definition of one server's schedule: a new reference. */
static json_t *schedule_doc(const wanted_t *w, const dc_server_t *s)
{
    char name[256], every[32], target[128];
    snprintf(name, sizeof name, "%s@%s", w->prefix, s->hostname);
    snprintf(every, sizeof every, "%llus", (unsigned long long)w->every_s);
    snprintf(target, sizeof target, "/%s-%s", w->workflow, s->uuid);
    return json_pack("{s:s, s:s, s:s, s:{s:s}, s:s, s:s}", "name", name, "workflow", w->workflow,
                     "every", every, "params", "server_uuid", s->uuid, "target", target, "overlap",
                     "skip");
}

/* true when the stored schedule `have` is the definition `want`. */
static bool same_schedule(const json_t *have, const json_t *want)
{
    static const char *const fields[] = {"workflow", "every", "params", "target", "overlap"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const json_t *a = json_object_get(have, fields[i]), *b = json_object_get(want, fields[i]);
        if (a == NULL || !json_equal(a, b))
            return false;
    }
    return true; /* paused or not: an operator's pause is kept */
}

/* true when the control stores a workflow of that name (any version). */
static int workflow_stored(const lab_api_t *api, const char *name, bool *stored)
{
    char path[160];
    snprintf(path, sizeof path, "/workflows/%s", name);
    char *body = NULL;
    int status = probe_http_get(api->port, path, api->token, API_MS, &body);
    free(body);
    if (status != 200 && status != 404) {
        fprintf(stderr, "tern-lab: GET %s: status %d\n", path, status);
        return -1;
    }
    *stored = status == 200;
    return 0;
}

/* Makes sure the one schedule `want` exists: the stored ones of its name (in
 * `stored`, GET /schedules) are kept when equal (the first), else deleted. */
static int install_one(const lab_api_t *api, const json_t *stored, const json_t *want)
{
    const char *name = json_string_value(json_object_get(want, "name"));
    bool kept = false;
    size_t i;
    const json_t *s;
    json_array_foreach(stored, i, s)
    {
        const char *n = json_string_value(json_object_get(s, "name"));
        const char *uuid = json_string_value(json_object_get(s, "uuid"));
        if (n == NULL || uuid == NULL || strcmp(n, name) != 0)
            continue;
        if (!kept && same_schedule(s, want)) {
            kept = true;
            printf("schedule %s kept (%s)\n", name, uuid);
            continue;
        }
        /* No PUT of a schedule: a changed one is deleted and made again. */
        char path[128];
        snprintf(path, sizeof path, "/schedules/%s", uuid);
        char *body = NULL;
        int status = probe_http_send(api->port, "DELETE", path, NULL, api->token, API_MS, &body);
        if (status != 204 && status != 404) {
            fprintf(stderr, "tern-lab: DELETE %s (schedule %s): status %d: %s\n", path, name,
                    status, body != NULL ? body : "no answer");
            free(body);
            return -1;
        }
        free(body);
        printf("schedule %s (%s) deleted: %s\n", name, uuid,
               kept ? "a second one of that name" : "its definition changed");
    }
    if (kept)
        return 0;
    char *text = json_dumps(want, JSON_COMPACT);
    char *body = NULL;
    int status = probe_http_send(api->port, "POST", "/schedules", text, api->token, API_MS, &body);
    free(text);
    json_t *made = status == 201 && body != NULL ? json_loads(body, 0, NULL) : NULL;
    const char *uuid = json_string_value(json_object_get(made, "uuid"));
    if (uuid == NULL) {
        fprintf(stderr, "tern-lab: POST /schedules (%s): status %d: %s\n", name, status,
                body != NULL ? body : "no answer");
        free(body);
        json_decref(made);
        return -1;
    }
    printf("schedule %s made (%s, every %s)\n", name, uuid,
           json_string_value(json_object_get(want, "every")));
    free(body);
    json_decref(made);
    return 0;
}

int dc_schedules_install(const lab_api_t *api, const datacenter_t *dc)
{
    const wanted_t wanted[] = {
        {"net-reconcile", "net-reconcile", dc->set.net_reconcile_every_s},
        {"share-watch", "volume-share-watch", dc->set.share_watch_every_s},
    };
    char *body = NULL;
    /* At most 1000 are listed: two per server, and a lab has a handful of servers. */
    int status = probe_http_get(api->port, "/schedules?limit=1000", api->token, API_MS, &body);
    json_t *stored = status == 200 && body != NULL ? json_loads(body, 0, NULL) : NULL;
    if (!json_is_array(stored)) {
        fprintf(stderr, "tern-lab: GET /schedules: status %d: %s\n", status,
                body != NULL ? body : "no answer");
        free(body);
        json_decref(stored);
        return -1;
    }
    free(body);
    int rc = 0;
    for (size_t w = 0; w < sizeof wanted / sizeof wanted[0] && rc == 0; w++) {
        bool have = false;
        if (workflow_stored(api, wanted[w].workflow, &have) != 0) {
            rc = -1;
            break;
        }
        if (!have) {
            printf("schedules %s@<hostname> not made: the control stores no workflow %s\n",
                   wanted[w].prefix, wanted[w].workflow);
            continue;
        }
        for (size_t i = 0; i < dc->n_servers && rc == 0; i++) {
            json_t *want = schedule_doc(&wanted[w], &dc->servers[i]);
            rc = want != NULL ? install_one(api, stored, want) : -1;
            json_decref(want);
        }
    }
    json_decref(stored);
    return rc;
}

int dc_start_reconcile(const lab_api_t *api, const datacenter_t *dc, const dc_server_t *server,
                       start_delay_rand_fn rand, void *rand_arg)
{
    uint64_t delay_ms = start_delay_draw_ms(dc->set.net_reconcile_delay_min_s,
                                            dc->set.net_reconcile_delay_max_s, rand, rand_arg);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t due = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + delay_ms;
    char target[128];
    snprintf(target, sizeof target, "/net-reconcile-%s", server->uuid);
    /* "reason" sets it apart from an operator's reconcile of the server, which would
     * otherwise be refused (same target and params) until this one has run. */
    json_t *req = json_pack("{s:s, s:s, s:{s:s, s:s}, s:I}", "workflow", "net-reconcile", "target",
                            target, "params", "server_uuid", server->uuid, "reason", "agent-start",
                            "exec_after", (json_int_t)due);
    char *text = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (text == NULL) {
        fprintf(stderr, "tern-lab: out of memory\n");
        return -1;
    }
    char *body = NULL;
    int status = probe_http_send(api->port, "POST", "/jobs", text, api->token, API_MS, &body);
    free(text);
    json_t *job = body != NULL ? json_loads(body, 0, NULL) : NULL;
    int rc = 0;
    if (status == 201) {
        printf("net-reconcile of %s in %llu.%03llu s (job %s)\n", server->hostname,
               (unsigned long long)(delay_ms / 1000), (unsigned long long)(delay_ms % 1000),
               json_string_value(json_object_get(job, "uuid")));
    } else if (status == 409 && json_is_string(json_object_get(job, "code")) &&
               strcmp(json_string_value(json_object_get(job, "code")), "Conflict") == 0) {
        /* A start reconcile of this server waits already (an agent restarted twice). */
        printf("net-reconcile of %s: one is pending already, kept\n", server->hostname);
    } else {
        fprintf(stderr, "tern-lab: POST /jobs (net-reconcile of %s): status %d: %s\n",
                server->hostname, status, body != NULL ? body : "no answer");
        rc = -1;
    }
    free(body);
    json_decref(job);
    return rc;
}
