/*
 * procs.h -- the processes of a lab: started detached, known by pid files, stopped by
 * pid.
 *
 * A lab's processes outlive the `tern-lab up` that starts them, and none is ever the
 * child of another of them (an agent's death never takes anything with it): each is
 * started with fork, setsid, fork again and exec, so it is adopted by init (or a
 * subreaper) at once. A pid file holds the pid and a newline, written as a temporary
 * file and renamed. A pid is trusted only while /proc says that process is alive (not
 * a zombie) and runs the program the file is for (its comm), so a stale file whose
 * pid was reused by something else never gets that something killed.
 */
#ifndef LAB_PROCS_H
#define LAB_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Starts argv[0] (a path) detached, in `cwd`, with stdin from /dev/null and stdout
 * and stderr appended to `log_path`. Returns 0 and the pid once exec succeeded, or -1
 * with the reason in err. */
int procs_spawn_detached(char *const argv[], const char *cwd, const char *log_path, pid_t *pid,
                         char *err, size_t errlen);

/* Writes "<pid>\n" to path atomically. Returns 0 or -1 with errno. */
int procs_pidfile_write(const char *path, pid_t pid);

/* One process to stop. */
typedef struct proc_entry {
    char *name;    /* how messages call it: "agent-cn1", "instance 1234.../workload" */
    char *pidfile; /* removed once the process is gone */
    char *comm;    /* the program it must be */
    pid_t pid;
} proc_entry_t;

/* Stops the entries: SIGTERM to those alive, a wait of at most grace_ms for all, then
 * SIGKILL to any left and a wait of at most 5 s more. Says on stdout what it did to
 * each, and removes the pid files of those gone (stale ones too). Returns the number
 * still alive at the end (0: all stopped). */
int procs_stop(proc_entry_t *entries, size_t n, unsigned grace_ms);

/* The last lines of a log, for a message (a static buffer). */
const char *procs_log_tail(const char *path);

#endif
