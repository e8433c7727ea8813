/*
 * child_process.h -- a child process on the loop, never through a shell: argv, env,
 * cwd, optional stdin data, a timeout (SIGTERM, then SIGKILL 2 s later), and the last
 * bytes of stdout and stderr kept for the result.
 */
#ifndef TERN_CHILD_PROCESS_H
#define TERN_CHILD_PROCESS_H

#include <stddef.h>

#include <tern/task.h>
#include <uv.h>

typedef struct child_process child_process_t;

/* `res` is valid only during the callback. */
typedef void (*child_process_cb)(void *data, const tern_spawn_res *res);

/* Starts the child. Everything in `opts` is copied. Returns the process object, or
 * NULL with "spawn \"/bin/nope\": no such file or directory" in err. The callback
 * runs once, after the process has exited and both pipes reached EOF; the object is
 * freed by the engine after the callback returns. */
child_process_t *child_process_spawn(uv_loop_t *loop, const tern_spawn_opts *opts,
                                     child_process_cb cb, void *data, char *err, size_t errlen);

/* Called with each complete line the child writes to stdout (without its newline;
 * `line` is valid only during the call), as it arrives. */
typedef void (*child_process_line_cb)(void *data, const char *line, size_t len);

/* Most bytes of one stdout line delivered to a line callback: a longer line is not
 * delivered (the stdout tail still keeps it). */
#define CHILD_LINE_MAX (1u << 20)

/* Asks for stdout line by line as well (see child_process_line_cb); call it right
 * after child_process_spawn, before the loop runs again. Lines stop after cancel and
 * never come after the exit callback. */
void child_process_on_stdout_line(child_process_t *cp, child_process_line_cb cb, void *data);

/* Kills the child (SIGTERM, SIGKILL after 2 s) and frees everything once it is gone;
 * the callback never runs. Safe to call at most once, before the callback ran. */
void child_process_cancel(child_process_t *cp);

#endif /* TERN_CHILD_PROCESS_H */
