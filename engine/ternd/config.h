/*
 * config.h -- ternd's configuration: a JSON file (--config FILE) and command-line
 * flags, flags winning. Every setting, its default and its flag:
 *
 *   "role": "both"               --role api|runner|both
 *   "listen": "127.0.0.1:8080"   --listen HOST:PORT      (api role)
 *   "redis": null                --redis URL             (null: embedded private Redis)
 *   "data_dir": "./tern-data"    --data-dir DIR          (embedded Redis lives here)
 *   "plugin_dir": <built-in>     --plugin-dir DIR
 *   "workflows": null            --workflows DIR         (*.json loaded at start)
 *   "concurrency": 1000          --concurrency N         (jobs in flight per runner)
 *   "runner_id": <host>-<pid>    --runner-id ID
 *   "queues": ["default"]        --queues a,b
 *   "lease_ms": 10000            --lease-ms N      (a silent runner loses its jobs after)
 *   "heartbeat_ms": 2000         --heartbeat-ms N
 *   "shutdown_grace_ms": 30000   --shutdown-grace-ms N
 *   "log_level": "info"          --log-level LEVEL
 *   "redis_server": "redis-server" --redis-server PATH (binary for the embedded default)
 *   "redis_health_timeout_ms": 2000  --redis-health-timeout-ms N  (Redis is reported
 *                                down, and calls are refused, while a call has waited
 *                                longer; an idle connection is probed with a PING)
 *   "redis_command_timeout_ms": 5000 --redis-command-timeout-ms N (calls waiting longer
 *                                are answered 503 and the connection is made again)
 *   "admission_timeout_ms": 2000 --admission-timeout-ms N (the bound of an admission
 *                                check that names no timeout of its own)
 *   "event_stream_max": 1000     (events kept per job)
 *   "global_event_stream_max": 100000
 *   "max_params_bytes": 262144
 *   "max_lock_instructions": 500000 (compiled locks of all unfinished jobs, together)
 *   "plugins": {"<name>": {...}} (each plugin's init configuration; its member
 *                                "allow_networks" is the engine's: plugin_loader.h)
 *   "api_token_file": null       --api-token-file FILE  (or $TERN_API_TOKEN)
 *   "tls_cert": null, "tls_key": null  --tls-cert FILE --tls-key FILE
 *   "max_body_bytes": 1048576    --max-body-bytes N
 *   "event_heartbeat_ms": 15000  (keep-alive of idle GET /jobs/:uuid/events streams)
 *   "list_max_bytes": 4194304    (GET /jobs: a page ends once its jobs pass this size)
 *   "view_timeout_ms": 2000      --view-timeout-ms N  (a plugin's view script's bound)
 *   "postback_initial_ms": 1000  (post-backs: delay after the first failed attempt,
 *   "postback_max_ms": 300000     doubling up to this,
 *   "postback_max_attempts": 10   attempts per URL before giving up,
 *   "postback_timeout_ms": 10000  and the time one POST may take)
 *   "postback_allow_networks": null  (CIDR blocks post-backs may connect to; null: any)
 *   "retention_days": 30         --retention-days N  (finished jobs, with all their keys,
 *                                are deleted N days after they end; 0 keeps them forever)
 *   "retention_ms": 0            (for tests only: when > 0, the retention in ms instead
 *                                of retention_days; file only, not in the usage text)
 *   "success_events_s": 60       --success-events-s N  (a job that succeeded keeps its
 *                                event stream N s after it ends: its record tells the
 *                                rest; failed and canceled jobs keep theirs as long as
 *                                the job; 0 keeps every stream as long as its job)
 *   "allowed_hosts": []          --allowed-hosts A,B  (names accepted as Host besides IP
 *                                literals and localhost)
 *   "allowed_origins": []        --allowed-origins O,P  (web origins allowed to call)
 *   "max_connections": 16384     --max-connections N  (API connections open at once)
 *   "fd_reserve": 0              (descriptors kept from API connections; 0: 256 + 3 per
 *                                runner slot)
 *   "header_timeout_ms": 10000   (a request head must arrive within)
 *   "body_timeout_ms": 30000     (then its body within)
 *   "idle_timeout_ms": 60000     (a kept-alive connection without a request)
 *   "io_timeout_ms": 30000       (a write to a client making no progress)
 *   "direct_start": 1            --direct-start 0|1  (with both roles, a job created
 *                                through this ternd starts at once on its runner when it
 *                                has a free slot and the job's queue is empty:
 *                                docs/WORKFLOWS.md, "Direct start"; 0: every job goes
 *                                through its queue)
 *
 * Unknown keys in the file and unknown flags are refused with a message naming them.
 */
#ifndef TERN_CONFIG_H
#define TERN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/net_allow.h"

enum config_role {
    CONFIG_ROLE_API = 1u << 0,
    CONFIG_ROLE_RUNNER = 1u << 1,
    CONFIG_ROLE_BOTH = CONFIG_ROLE_API | CONFIG_ROLE_RUNNER,
};

typedef struct ternd_config {
    unsigned roles;  /* enum config_role bits */
    char *listen;    /* "127.0.0.1:8080" */
    char *redis_url; /* NULL: embedded default */
    char *data_dir;
    char *plugin_dir;
    char *workflows_dir; /* or NULL */
    uint32_t concurrency;
    char *runner_id;
    char **queues; /* NULL-terminated */
    size_t n_queues;
    uint32_t lease_ms;
    uint32_t heartbeat_ms;
    uint32_t shutdown_grace_ms;
    int log_level;      /* bunyan number */
    char *redis_server; /* path or name of redis-server */
    uint32_t redis_health_timeout_ms;
    uint32_t redis_command_timeout_ms;
    uint32_t admission_timeout_ms;
    uint32_t event_stream_max;
    uint32_t global_event_stream_max;
    uint32_t max_params_bytes;
    uint32_t max_lock_instructions;
    json_t *plugins;         /* owned object: plugin name -> config */
    char *api_token_file;    /* or NULL; the token itself is read by ternd */
    char *tls_cert;          /* or NULL */
    char *tls_key;           /* or NULL */
    uint32_t max_body_bytes; /* API request bodies */
    uint32_t event_heartbeat_ms;
    uint32_t list_max_bytes;  /* GET /jobs: a page ends past this size */
    uint32_t view_timeout_ms; /* plugins' views: 503 and SCRIPT KILL past it */
    uint32_t postback_initial_ms;
    uint32_t postback_max_ms;
    uint32_t postback_max_attempts;
    uint32_t postback_timeout_ms;
    net_allow_t *postback_allow_networks; /* owned; NULL: any address */
    uint32_t retention_days;              /* 0: finished jobs are kept forever */
    uint32_t retention_ms;                /* for tests: when > 0, overrides retention_days */
    uint32_t success_events_s;            /* 0: a succeeded job's events live as long as the job */
    uint32_t direct_start;                /* 1: creates may start jobs on this ternd's runner */
    char **allowed_hosts;                 /* NULL-terminated, or NULL */
    char **allowed_origins;               /* NULL-terminated, or NULL */
    uint32_t max_connections;
    uint32_t fd_reserve; /* 0: 256 + 3 per runner slot */
    uint32_t header_timeout_ms;
    uint32_t body_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t io_timeout_ms;
    char *config_file; /* or NULL */
} ternd_config_t;

/* Fills *c with defaults, then the file named by --config (if any), then the flags.
 * `default_plugin_dir` is the build's plugin directory. Returns 0; 1 when --help or
 * --version printed something and ternd should exit 0; or TERN_EINVAL with
 * "--concurrency: expected a positive integer, got \"x\"" or
 * "config /etc/tern.json: unknown key \"rol\"" in err. */
int config_load(ternd_config_t *c, int argc, char **argv, const char *default_plugin_dir, char *err,
                size_t errlen);

void config_dispose(ternd_config_t *c);

/* The usage text (for --help and errors). */
const char *config_usage(void);

/* How long finished jobs are kept, in ms (0: forever): retention_ms when set, else
 * retention_days. */
uint64_t config_retention_ms(const ternd_config_t *c);

#endif /* TERN_CONFIG_H */
