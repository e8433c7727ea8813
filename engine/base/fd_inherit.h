/*
 * fd_inherit.h -- what a child inherits of ternd: its standard streams and nothing
 * else. hiredis, libcurl and libh2o open some descriptors without close-on-exec, and a
 * child that outlives ternd (a workload a task daemonized) would keep them: a dead
 * runner's Redis connection kept open that way went on being handed jobs by Redis
 * (test_exec, test_children_inherit_no_descriptor).
 */
#ifndef TERN_FD_INHERIT_H
#define TERN_FD_INHERIT_H

#include <stddef.h>

/* Sets close-on-exec on every open descriptor from 3 up, in this process: called just
 * before a fork that execs. The descriptors stay open here; a child that must inherit
 * one dup2s it onto its number, which clears the flag on the copy. Returns 0, or a
 * negative TERN_E* code with the reason in err. */
int fd_inherit_none(char *err, size_t errlen);

#endif /* TERN_FD_INHERIT_H */
