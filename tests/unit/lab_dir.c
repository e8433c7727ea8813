/*
 * lab_dir.c -- see lab_dir.h.
 */
#include "lab_dir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image_file.h"

static int count_words(const char *s)
{
    int n = 0;
    bool in_word = false;
    for (; *s != '\0'; s++) {
        bool space = *s == ' ';
        if (!space && !in_word)
            n++;
        in_word = !space;
    }
    return n;
}

int test_lab_open(test_lab_t *lab, const char *name, int argc, char **argv, const char *usage)
{
    memset(lab, 0, sizeof *lab);
    int nargs = count_words(usage);
    if (argc < nargs + 1) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    lab->plugin_path = argv[1];
    if (nargs >= 2) {
        lab->workload_bin = realpath(argv[2], NULL);
        if (lab->workload_bin == NULL) {
            fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
            return 2;
        }
    }
    snprintf(lab->dir, sizeof lab->dir, "/tmp/%s.XXXXXX", name);
    if (mkdtemp(lab->dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", lab->dir, strerror(errno));
        free(lab->workload_bin);
        lab->workload_bin = NULL;
        return 1;
    }
    snprintf(lab->root, sizeof lab->root, "%s/servers/cn1", lab->dir);
    return 0;
}

void test_lab_close(test_lab_t *lab)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", lab->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", lab->dir);
    free(lab->workload_bin);
    lab->workload_bin = NULL;
}

void test_lab_write_description(const test_lab_t *lab, const char *description)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/dc.json", lab->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    assert_true(fputs(description, f) >= 0);
    assert_int_equal(fclose(f), 0);
    snprintf(path, sizeof path, "%s/servers", lab->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(lab->root, 0755), 0);
}

void test_lab_ensure_image(const test_lab_t *lab, const char *uuid, uint64_t size_mib,
                           uint64_t data_mib, const char *file)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", lab->dir, file);
    dc_image_t img = {.size_mib = size_mib, .data_mib = data_mib, .file = path};
    snprintf(img.uuid, sizeof img.uuid, "%s", uuid);
    bool made = false;
    char err[512];
    if (dc_image_ensure(&img, &made, err, sizeof err) != 0)
        fail_msg("%s", err);
}

json_t *test_lab_agent_config(const test_lab_t *lab, const char *server_uuid)
{
    char desc[PATH_MAX];
    snprintf(desc, sizeof desc, "%s/dc.json", lab->dir);
    json_t *conf = json_pack("{s:s, s:s, s:s, s:s}", "datacenter", desc, "lab_dir", lab->dir,
                             "server_uuid", server_uuid, "data_root", "servers/cn1");
    assert_non_null(conf);
    if (lab->workload_bin != NULL)
        assert_int_equal(json_object_set_new(conf, "workload_bin", json_string(lab->workload_bin)),
                         0);
    return conf;
}

task_harness_t *test_lab_agent(const test_lab_t *lab, const char *server_uuid)
{
    json_t *conf = test_lab_agent_config(lab, server_uuid);
    task_harness_t *h = task_harness_new(lab->plugin_path, conf);
    json_decref(conf);
    return h;
}

bool test_lab_pid_alive(long pid)
{
    if (kill((pid_t)pid, 0) != 0)
        return false;
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(stat, sizeof stat, f) != NULL;
    fclose(f);
    const char *close = strrchr(stat, ')');
    return ok && close != NULL && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}
