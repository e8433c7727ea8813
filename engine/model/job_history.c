/*
 * job_history.c -- a job's events told from its record; see job_history.h.
 *
 * Ownership: every JSON value built here belongs to the returned array.
 */
#include "model/job_history.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/iso8601.h"

/* A time of the view: ISO text, or ms as an integer ("started"). 0 when absent. */
static uint64_t view_ms(const json_t *t)
{
    uint64_t ms = 0;
    if (json_is_integer(t))
        return (uint64_t)json_integer_value(t);
    if (json_is_string(t) && iso8601_parse_ms(json_string_value(t), &ms) == 0)
        return ms;
    return 0;
}

/* Appends `ev` (taken) at time `ms` with the next id. Times come from two clocks
 * (Redis's for the job's own times, the runner's for its steps): an id never goes
 * below the one before it, so that ids keep the events' order for resuming. */
static void add(json_t *out, json_t *ev, uint64_t ms, uint64_t *last)
{
    if (ms < *last)
        ms = *last;
    *last = ms;
    char id[48];
    snprintf(id, sizeof id, "%llu-%zu", (unsigned long long)ms, json_array_size(out) + 1);
    json_object_set_new(ev, "time", json_integer((json_int_t)ms));
    json_object_set_new(ev, "from_record", json_true());
    json_array_append_new(out, json_pack("{s:s, s:o}", "id", id, "event", ev));
}

json_t *job_history_from_view(const json_t *view)
{
    json_t *out = json_array();
    uint64_t last = 0;
    const json_t *uuid = json_object_get(view, "uuid");
    uint64_t created = view_ms(json_object_get(view, "created_at"));
    add(out,
        json_pack("{s:s, s:O, s:O}", "type", "created", "job", uuid, "workflow",
                  json_object_get(view, "name")),
        created, &last);
    uint64_t started = view_ms(json_object_get(view, "started"));
    if (started > 0)
        add(out, json_pack("{s:s, s:O}", "type", "running", "job", uuid), started, &last);
    static const char *const lists[][2] = {{"chain_results", "chain"},
                                           {"onerror_results", "onerror"},
                                           {"oncancel_results", "oncancel"}};
    for (size_t p = 0; p < sizeof lists / sizeof lists[0]; p++) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(view, lists[p][0]), i, r)
        {
            json_t *error = json_object_get(r, "error");
            bool failed = error != NULL && !json_is_null(error);
            json_t *ev = json_pack("{s:s, s:O, s:s, s:s, s:I}", "type", "step", "job", uuid,
                                   "status", failed ? "failed" : "succeeded", "phase", lists[p][1],
                                   "index", (json_int_t)i);
            static const char *const copied[] = {"name", "task", "attempts", "runner"};
            for (size_t k = 0; k < sizeof copied / sizeof copied[0]; k++) {
                json_t *v = json_object_get(r, copied[k]);
                if (v != NULL)
                    json_object_set(ev, strcmp(copied[k], "attempts") == 0 ? "attempt" : copied[k],
                                    v);
            }
            if (failed)
                json_object_set(ev, "error", error);
            uint64_t begun = view_ms(json_object_get(r, "started_at")),
                     done = view_ms(json_object_get(r, "finished_at"));
            if (begun > 0 && done >= begun)
                json_object_set_new(ev, "duration_ms", json_integer((json_int_t)(done - begun)));
            add(out, ev, done, &last);
        }
    }
    uint64_t finished = view_ms(json_object_get(view, "finished_at"));
    if (finished > 0)
        add(out,
            json_pack("{s:s, s:O, s:O}", "type", "finished", "job", uuid, "execution",
                      json_object_get(view, "execution")),
            finished, &last);
    return out;
}
