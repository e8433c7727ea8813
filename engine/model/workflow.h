/*
 * workflow.h -- workflow definitions: parsing, validation and the in-memory model.
 *
 * A definition is JSON (see docs/WORKFLOWS.md): a name, a version, an optional
 * timeout (seconds), queue and holds, a non-empty `chain` of steps and optional
 * `onerror` and `oncancel` chains. Each step names a task "family.entry", its `args`
 * (templates allowed, see template.h), and optionally timeout, retry, fallback,
 * idempotent, isolate and holds.
 * An optional `admission` list names checks (a task and its args, an optional timeout
 * and isolate) that run when a job is created, before it is stored; their results are
 * named admission.<check>.result in the templates of later checks and of every step.
 * Optional `schedules` declare recurring schedules of the workflow (model/schedule.h),
 * each with a unique name; storing the workflow installs them (ops/workflow_ops.h).
 *
 * Validation reports the first fault with its JSON path:
 *   "chain[1].retry.initial_ms: expected a positive integer, got -5"
 *   "chain[2].name: duplicate step name \"resize\" (first at chain[0])"
 *   "onerror[0].task: unknown task \"core.lgo\""
 * Nothing is stored unless the whole definition is valid.
 *
 * The parsed workflow keeps the normalized document it was made from (`doc`): that
 * document, not the text the operator wrote, is what is stored and frozen into every
 * job, so a job's copy never depends on defaults changing later.
 */
#ifndef TERN_WORKFLOW_H
#define TERN_WORKFLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "model/retry_policy.h"

/* The queue of a workflow that names none, and the one a runner serves unless told
 * otherwise (jobs of this queue store no queue field: store/lua/job_create.lua). */
#define TERN_DEFAULT_QUEUE "default"

/* The longest queue name. */
#define WORKFLOW_QUEUE_MAX 64

/* True when s[0..n) is a queue name: 1 to WORKFLOW_QUEUE_MAX of a-z, 0-9, '_', '-', ':'
 * and '.' (a workflow's queue, a step's queue once expanded, ternd --queues). ':' and
 * '.' let a step name a queue after what it runs on ("server:cn1.lab"). */
bool workflow_queue_valid(const char *s, size_t n);

/* The rule of workflow_queue_valid in words, for messages. */
#define WORKFLOW_QUEUE_RULE "1 to 64 of a-z, 0-9, '_', '-', ':' or '.'"

/* Limits; a definition over them is refused with a message naming the limit. */
#define WORKFLOW_MAX_BYTES       (1024 * 1024)
#define WORKFLOW_MAX_STEPS       1000 /* per chain */
#define WORKFLOW_MAX_HOLDS       32   /* per workflow or step */
#define WORKFLOW_NAME_MAX        128
#define WORKFLOW_MAX_ADMISSION   16 /* admission checks per workflow */
#define WORKFLOW_ADMISSION_MAX_S 60 /* the longest timeout of an admission check */

/* The three chains of a workflow. The numeric values are stored in job cursors. */
typedef enum wf_phase {
    WF_CHAIN = 0,
    WF_ONERROR = 1,
    WF_ONCANCEL = 2,
} wf_phase_t;
#define WF_NPHASES 3

/* A resource ticket: "vm:${params.vm_uuid}" (capacity 1),
 * {"resource": "migrations:${params.source_server}", "capacity": 5}, or a capacity
 * the job's inputs give: {"resource": "...", "capacity": "${admission.check.result.slots}"},
 * expanded with the resource (holds_expand) to an integer from 1 to
 * WORKFLOW_HOLD_CAPACITY_MAX. */
typedef struct wf_hold {
    const char *resource;          /* a template, borrowed from the workflow's doc */
    uint32_t capacity;             /* >= 1; unused when capacity_template is set */
    const char *capacity_template; /* a template, borrowed from the doc, or NULL */
} wf_hold_t;

#define WORKFLOW_HOLD_CAPACITY_MAX 1000000
#define WORKFLOW_MAX_HOLD_EVENTS   4 /* streams in a workflow's hold_events */

typedef struct wf_step {
    const char *name;    /* borrowed from doc; a fallback is named "<step>.fallback" */
    const char *task;    /* "family.entry", borrowed from doc */
    const json_t *args;  /* templates, borrowed from doc; an empty object if absent */
    uint64_t timeout_ms; /* 0 = none */
    retry_policy_t retry;
    bool idempotent;   /* false: a runner death mid-step fails the job (StepInterrupted) */
    bool isolate;      /* run the task in a helper process */
    const char *queue; /* a template naming the queue the step runs on, borrowed from doc;
                        * NULL: the workflow's queue. A fallback has its step's. */
    wf_hold_t *holds;  /* owned array; held for the step only */
    size_t n_holds;
    struct wf_step *fallback; /* owned; NULL when the step has none */
} wf_step_t;

/* An admission check: a task run when a job is created, before anything is stored
 * (docs/WORKFLOWS.md, "Admission checks"). */
typedef struct wf_admission {
    const char *name;    /* borrowed from doc */
    const char *task;    /* "family.entry", borrowed from doc */
    const json_t *args;  /* templates of params, job and earlier checks; borrowed from doc */
    uint64_t timeout_ms; /* 0: the engine's default (ternd's admission_timeout_ms) */
    bool isolate;        /* run the task in a helper process */
} wf_admission_t;

typedef struct workflow {
    json_t *doc;         /* owned: the normalized definition */
    const char *name;    /* borrowed from doc */
    const char *version; /* borrowed from doc; default "1.0.0" */
    const char *queue;   /* borrowed from doc; default "default" */
    /* borrowed from doc, or NULL: the chain step a retry of a job that failed at or
     * after it restarts at, because onerror undid what the steps from it took */
    const char *retry_from;
    uint64_t timeout_ms; /* whole job; 0 = none */
    wf_hold_t *holds;    /* owned array; held for the whole job */
    size_t n_holds;
    /* borrowed from doc, or NULL: an array of 1 to WORKFLOW_MAX_HOLD_EVENTS strings
     * "<plugin>:<key template>", the plugin streams told of the job's waits for its
     * holds (model/hold_events.h) */
    const json_t *hold_events;
    wf_step_t *steps[WF_NPHASES]; /* owned arrays */
    size_t n_steps[WF_NPHASES];
    wf_admission_t *admission; /* owned array, in the order the checks run; NULL if none */
    size_t n_admission;
} workflow_t;

/* Checks that a task exists (and, if it describes its arguments, that `args` fit).
 * `path` is the step's ("chain[1]", "chain[1].fallback"); the message names the fault
 * below it ("chain[1].task: ...", "chain[1].args.msg: ...", as plugin_registry_check_task
 * does). Returns 0, or TERN_ENOENT/TERN_EINVAL with the message in err. A NULL checker
 * accepts every well-formed "family.entry". */
typedef int (*workflow_task_check_fn)(void *data, const char *task, const json_t *args,
                                      const char *path, char *err, size_t errlen);

/* Validates `doc` and builds the model. `doc` is borrowed (the model keeps a
 * normalized deep copy). Returns 0 and *out (free with workflow_free), or TERN_EINVAL,
 * TERN_ENOENT or TERN_E2BIG with the JSON path of the fault in err. */
int workflow_parse(const json_t *doc, workflow_task_check_fn check, void *check_data,
                   workflow_t **out, char *err, size_t errlen);

/* Like workflow_parse, from JSON text (duplicate keys refused, at most
 * WORKFLOW_MAX_BYTES). Syntax errors read "line 3, column 7: unexpected token". */
int workflow_parse_text(const char *buf, size_t len, workflow_task_check_fn check, void *check_data,
                        workflow_t **out, char *err, size_t errlen);

void workflow_free(workflow_t *wf);

/* The step at `index` of `phase`, or NULL past the end. Borrowed from wf. */
const wf_step_t *workflow_step_get(const workflow_t *wf, wf_phase_t phase, size_t index);

/* "chain", "onerror", "oncancel". */
const char *workflow_phase_name(wf_phase_t phase);

#endif /* TERN_WORKFLOW_H */
