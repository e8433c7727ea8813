/*
 * inventory_script.h -- runs one of the dc plugin's Lua scripts (tasks/dc/lua/) for a
 * task and reports its answer. Every script takes the plugin's namespace as KEYS[1],
 * the task's arguments as JSON in ARGV[1], the time now (ISO 8601, UTC) in ARGV[2] and
 * DC_SCRIPT_UUIDS fresh UUIDs (a JSON array, for the records a script creates) in
 * ARGV[3] and the time now to the millisecond (2026-11-26T18:40:13.834Z) in ARGV[4],
 * and answers {"ok": result} or {"error": {"status", "code", "message"}}.
 */
#ifndef DC_INVENTORY_SCRIPT_H
#define DC_INVENTORY_SCRIPT_H

#include <stdbool.h>

#include <tern/task.h>

/* How many fresh UUIDs each script is given: a VM's disks at most. */
#define DC_SCRIPT_UUIDS 8

/* Called with the script's "ok" result (borrowed) before the task is reported done;
 * it may set job state. Returns the result to report (a new reference), or NULL when
 * it reports the outcome itself (at once, or later from work it started). */
typedef json_t *(*dc_script_ok_fn)(tern_ctx *ctx, const json_t *result);

/* Runs `script` with `args` (borrowed). The outcome is reported on ctx: done with the
 * result (through `on_ok` when not NULL), or, for an error answer, refused with its
 * status when `admission` and the status is not 0, else failed with its code. */
void dc_script_run(tern_ctx *ctx, const char *script, const json_t *args, bool admission,
                   dc_script_ok_fn on_ok);

/* The answer of a script a task calls on its way (not its outcome): `ok` (borrowed)
 * the result, or NULL with `code` and `message` (borrowed) saying why. */
typedef void (*dc_script_answer_fn)(tern_ctx *ctx, const json_t *ok, const char *code,
                                    const char *message, void *data);

/* Runs `script` as dc_script_run does, but hands the answer to `cb` and leaves the
 * attempt running. `data` stays the caller's; cb never runs after the attempt was
 * cancelled or reported. 0, or -1 with nothing called (Redis unreachable, no memory,
 * no randomness). */
int dc_script_call(tern_ctx *ctx, const char *script, const json_t *args, dc_script_answer_fn cb,
                   void *data);

#endif
