/*
 * lab_dir.h -- the lab directory the unit tests of the dc plugin's agent tasks run in:
 * their arguments (the built plugin, and the workload binary where they start
 * instances), a fresh directory under /tmp with one server's data root, its
 * description, its image files, and its removal at the end; the agent of cn1 on it; and
 * whether a process the agent started still runs.
 */
#ifndef TEST_LAB_DIR_H
#define TEST_LAB_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "task_harness.h"

typedef struct test_lab {
    const char *plugin_path; /* argv[1]: the built dc plugin */
    char *workload_bin;      /* realpath of argv[2] when the test names it, else NULL */
    char dir[512];           /* the lab directory: /tmp/NAME.XXXXXX */
    char root[1024];         /* cn1's data root: <dir>/servers/cn1 */
} test_lab_t;

/* Reads the arguments named by usage (space-separated names: the first is the plugin,
 * the second, when there is one, the workload binary) and makes the lab directory
 * /tmp/NAME.XXXXXX. Returns 0, or the status main() returns after saying why on stderr.
 * test_lab_close undoes it. */
int test_lab_open(test_lab_t *lab, const char *name, int argc, char **argv, const char *usage);

/* Removes the lab directory and frees workload_bin. */
void test_lab_close(test_lab_t *lab);

/* Writes description (JSON text) to <dir>/dc.json and makes the data root; a failure
 * fails the running cmocka test. */
void test_lab_write_description(const test_lab_t *lab, const char *description);

/* The image file at <dir>/<file> (relative to the lab directory, as the description
 * says), made as dc.image_ensure would: size_mib long, data_mib of it written. */
void test_lab_ensure_image(const test_lab_t *lab, const char *uuid, uint64_t size_mib,
                           uint64_t data_mib, const char *file);

/* The dc plugin's configuration of the agent of server_uuid, whose data root is
 * servers/cn1: the description, the lab directory, and workload_bin when the test has
 * one. A new reference. */
json_t *test_lab_agent_config(const test_lab_t *lab, const char *server_uuid);

/* A fresh plugin instance with that configuration, as an agent that (re)starts has. */
task_harness_t *test_lab_agent(const test_lab_t *lab, const char *server_uuid);

/* true while process pid exists and is neither a zombie nor dead (a killed workload
 * its parent has not reaped yet is gone). */
bool test_lab_pid_alive(long pid);

#endif
