/*
 * migration_args.h -- what `tern migration ACTION VM` judges before any request: the
 * action, --at, --limit-mbps and --affinity, and the parameters of the migrate-<action>
 * job built from them (docs/MIGRATION.md: dc.migration_check's params).
 *
 * Pure functions; every refusal writes a message naming the option and its value into
 * err. json_t arguments are borrowed unless said otherwise.
 */
#ifndef TERN_CLI_MIGRATION_ARGS_H
#define TERN_CLI_MIGRATION_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* What an action takes on the command line. */
enum {
    MIGRATION_TAKES_PLACEMENT = 1 << 0,   /* --target, --affinity */
    MIGRATION_TAKES_LIMIT = 1 << 1,       /* --limit-mbps */
    MIGRATION_TAKES_AT = 1 << 2,          /* --at (required) */
    MIGRATION_HAS_PHASE = 1 << 3,         /* its job runs a phase that -w follows */
    MIGRATION_TAKES_TARGET_LOST = 1 << 4, /* --target-lost (abort) */
};

typedef struct migration_action {
    const char *name;   /* "begin": the verb, the workflow "migrate-<name>", the target */
    unsigned takes;     /* MIGRATION_TAKES_* and MIGRATION_HAS_PHASE */
    const char *doing;  /* "Beginning migration of" */
    bool new_migration; /* begin, automatic, schedule: the job's uuid is the migration's */
} migration_action_t;

/* The action named `name`, or NULL for an unknown one. */
const migration_action_t *migration_action_find(const char *name);

/* The actions, ended by an entry whose name is NULL. */
extern const migration_action_t migration_actions[];

/* --at: an ISO 8601 time in UTC ("2026-11-27T03:00:00Z", seconds and a fraction
 * optional, "+00:00" taken as Z) or a time from now ("+30s", "+10m", "+2h", "+1d"),
 * later than `now_ms`. Writes it as "YYYY-MM-DDTHH:MM:SSZ" into iso (at least 21
 * bytes). Returns false with a message in err otherwise. */
bool migration_parse_at(const char *s, uint64_t now_ms, char *iso, size_t isolen, char *err,
                        size_t errlen);

/* --limit-mbps: a positive finite decimal number of megabits per second (at most
 * 1000000). Returns false with a message in err otherwise. */
bool migration_parse_limit(const char *s, double *mbps, char *err, size_t errlen);

/* --affinity RULE[,RULE]...: far=VM, near=VM (each adds VM to that list of `affinity`)
 * or rack=same|other; `affinity` (an object) is modified. A VM is kept as written (a
 * uuid or an alias the command resolves). Returns false with a message in err for an
 * empty rule, an unknown key, an empty VM or a rack other than same or other. */
bool migration_parse_affinity(const char *s, json_t *affinity, char *err, size_t errlen);

#endif /* TERN_CLI_MIGRATION_ARGS_H */
