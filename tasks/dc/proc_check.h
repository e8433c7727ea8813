/*
 * proc_check.h -- is the process a pid file names still the one it was written for?
 * A pid is trusted only while /proc says that process is alive (not a zombie) and
 * runs the expected program (its comm), and, when asked, was started with a given
 * argument (its cmdline), so a stale pid file whose pid was reused by something else
 * never gets that something signalled. Shared by the lab tool (lab/procs.c) and the
 * dc plugin's agent (the instances' workloads).
 *
 * Part of dc_model: the C library only. Nothing is owned past a call.
 */
#ifndef DC_PROC_CHECK_H
#define DC_PROC_CHECK_H

#include <stdbool.h>
#include <sys/types.h>

/* The pid in the file ("<pid>\n"), or 0 when it is missing or does not hold one. */
pid_t dc_pidfile_read(const char *path);

/* true when pid is a live (not zombie) process whose comm is `comm`. */
bool dc_proc_alive(pid_t pid, const char *comm);

/* true when nothing of the process `comm` at pid runs any more: /proc has no such
 * pid, the pid now runs another program (reused), or every thread of it has exited.
 * Not the same as !dc_proc_alive: a process killed -9 whose main thread is already a
 * zombie can keep a thread alive for seconds (one finishing a system call), and with
 * it its descriptors, such as its Redis connections. Whoever starts a successor
 * waits for this. */
bool dc_proc_gone(pid_t pid, const char *comm);

/* true when pid is alive as dc_proc_alive says and one of its arguments (argv[1] on,
 * from /proc/<pid>/cmdline) equals `arg`. */
bool dc_proc_runs_with(pid_t pid, const char *comm, const char *arg);

#endif
