/*
 * proc_check.c -- pid files and /proc (proc_check.h). Closes what it opens before it
 * returns.
 */
#include "proc_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CMDLINE_MAX 8192 /* bytes of a cmdline read; a workload's is far shorter */

pid_t dc_pidfile_read(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long pid = 0;
    char nl = 0;
    int got = fscanf(f, "%ld%c", &pid, &nl);
    fclose(f);
    return got == 2 && nl == '\n' && pid > 0 && pid <= INT32_MAX ? (pid_t)pid : 0;
}

/* Reads a /proc stat file: its state letter into *state and whether its comm is
 * `comm`. false when the file cannot be read or parsed (the task is gone). */
static bool read_stat(const char *path, const char *comm, char *state, bool *same_comm)
{
    char stat[512] = "";
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(stat, sizeof stat, f) != NULL;
    fclose(f);
    /* "<pid> (<comm>) <state> ...": comm may hold anything, so its end is the last ')'. */
    char *open_paren = strchr(stat, '(');
    char *close_paren = strrchr(stat, ')');
    if (!ok || open_paren == NULL || close_paren == NULL || close_paren[1] != ' ')
        return false;
    *state = close_paren[2];
    size_t len = (size_t)(close_paren - open_paren - 1);
    *same_comm = strlen(comm) == len && strncmp(open_paren + 1, comm, len) == 0;
    return true;
}

static bool exited(char state)
{
    return state == 'Z' || state == 'X' || state == 'x';
}

bool dc_proc_alive(pid_t pid, const char *comm)
{
    if (pid <= 0)
        return false;
    char path[64], state;
    bool same;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    return read_stat(path, comm, &state, &same) && !exited(state) && same;
}

bool dc_proc_gone(pid_t pid, const char *comm)
{
    if (pid <= 0)
        return true;
    char path[96], state;
    bool same;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (!read_stat(path, comm, &state, &same) || !same)
        return true;
    snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return true;
    bool gone = true;
    struct dirent *t;
    while (gone && (t = readdir(d)) != NULL) {
        if (t->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%ld/task/%.16s/stat", (long)pid, t->d_name);
        bool thread_same;
        gone = !read_stat(path, comm, &state, &thread_same) || exited(state);
    }
    closedir(d);
    return gone;
}

bool dc_proc_runs_with(pid_t pid, const char *comm, const char *arg)
{
    if (!dc_proc_alive(pid, comm))
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[CMDLINE_MAX + 1];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, CMDLINE_MAX - len);
        if (r <= 0 || (len += (size_t)r) == CMDLINE_MAX)
            break;
    }
    close(fd);
    buf[len] = '\0';
    /* NUL-separated arguments; the first is the program. */
    size_t at = strnlen(buf, len) + 1;
    while (at < len) {
        size_t n = strnlen(buf + at, len - at);
        if (strcmp(buf + at, arg) == 0)
            return true;
        at += n + 1;
    }
    return false;
}
