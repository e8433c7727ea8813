/*
 * child_process.c -- one child process on the loop, from spawn to its last byte.
 *
 * This file owns a child_process_t: the uv_process_t, the pipes to the child's stdin,
 * stdout and stderr, one timer (timeout, then the SIGKILL deadline, then the grace
 * period for pipes held open by grandchildren), copies of everything in the spawn
 * options, and two tails that keep only the last `tail_bytes` of each output stream.
 * It does not own what the caller does with the outcome: the callback gets a
 * tern_spawn_res that points into this object and is valid only while it runs.
 *
 * The program is executed directly by libuv (execvp: argv[0] is looked up in the PATH
 * of the child's environment); no shell is ever involved. The child is started in a
 * session of its own (UV_PROCESS_DETACHED, i.e. setsid) so that a timeout or a cancel
 * signals the whole process group, including whatever a script started, and no stray
 * grandchild keeps running with our pipes open.
 *
 * Life of the object: spawn -> (exit, EOF on stdout, EOF on stderr, in any order) ->
 * callback -> every handle closed -> freed. child_process_cancel() skips the callback:
 * it signals the group, stops reading, and frees the object when the child has been
 * reaped and every handle is closed. Writing to a child that exits without reading
 * its stdin fails with EPIPE, which is ignored; like the rest of the engine, this
 * assumes the process ignores SIGPIPE (ternd does at start-up).
 */
#include "run/child_process.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/fd_inherit.h"

#define KILL_GRACE_MS  2000u       /* SIGTERM, then SIGKILL this much later */
#define DRAIN_GRACE_MS 2000u       /* after exit, wait this long for EOF on the pipes */
#define DEFAULT_TAIL   4096u       /* tern_spawn_opts.tail_bytes == 0 */
#define MAX_TAIL       (64u << 20) /* larger requests are clamped */
#define READ_BUF_BYTES 65536u

/* The last `cap` bytes written to a stream. Until `cap` bytes have arrived the buffer
 * is linear and grows on demand (most commands print little); after that it is a ring
 * of exactly `cap` bytes whose oldest byte is at `head`. */
typedef struct tail {
    char *buf;
    size_t cap;   /* bytes kept at most */
    size_t alloc; /* bytes allocated in buf */
    size_t len;   /* bytes held, <= cap */
    size_t head;  /* once len == cap: index of the oldest byte, where the next one goes */
} tail_t;

typedef struct child_pipe {
    uv_pipe_t pipe;
    struct child_process *cp;
    tail_t tail;
    bool reading; /* not yet at EOF (or error), not stopped */
} child_pipe_t;

/* What the single timer is waiting for. */
typedef enum timer_stage {
    TIMER_IDLE,
    TIMER_TIMEOUT,       /* the caller's timeout_ms */
    TIMER_KILL_DEADLINE, /* SIGTERM was sent; SIGKILL when this fires */
    TIMER_DRAIN,         /* the child exited; its pipes are still open */
} timer_stage_t;

struct child_process {
    uv_loop_t *loop;
    uv_process_t proc;
    uv_pipe_t in;
    uv_write_t in_req;
    child_pipe_t out, err;
    uv_timer_t timer;
    timer_stage_t stage;

    child_process_cb cb;
    void *data;

    /* Owned copies of the options. */
    char **argv;
    char **env;
    char *cwd;
    char *stdin_data;
    size_t stdin_len;
    uint64_t timeout_ms;

    uint64_t start_ns;
    int open_handles; /* initialised handles whose close callback has not run */
    bool has_stdin;
    bool exited;
    bool timed_out;
    bool canceled;
    bool finished; /* callback ran (or cancel): only teardown remains */
    int64_t exit_status;
    int term_signal;

    /* stdout line by line (child_process_on_stdout_line): the partial line so far. */
    child_process_line_cb line_cb;
    void *line_data;
    char *line;
    size_t line_len, line_cap;
    bool line_too_long; /* the current line passed CHILD_LINE_MAX: skip to its end */

    char read_buf[READ_BUF_BYTES]; /* shared: libuv reads one stream at a time */
};

/* ---- tails -------------------------------------------------------------------- */

static void tail_append(tail_t *t, const char *p, size_t n)
{
    if (n == 0)
        return;
    if (n >= t->cap) {
        if (t->alloc < t->cap) {
            t->buf = xrealloc(t->buf, t->cap);
            t->alloc = t->cap;
        }
        memcpy(t->buf, p + (n - t->cap), t->cap);
        t->len = t->cap;
        t->head = 0;
        return;
    }
    if (t->len < t->cap) {
        /* Linear phase: grow to what is needed, doubling, never beyond cap. */
        size_t k = t->cap - t->len < n ? t->cap - t->len : n;
        if (t->len + k > t->alloc) {
            size_t want = t->alloc ? t->alloc * 2 : 256;
            if (want < t->len + k)
                want = t->len + k;
            if (want > t->cap)
                want = t->cap;
            t->buf = xrealloc(t->buf, want);
            t->alloc = want;
        }
        memcpy(t->buf + t->len, p, k);
        t->len += k;
        p += k;
        n -= k;
        t->head = 0; /* once full, the oldest byte is at 0 */
    }
    while (n > 0) {
        size_t k = t->cap - t->head < n ? t->cap - t->head : n;
        memcpy(t->buf + t->head, p, k);
        t->head = (t->head + k) % t->cap;
        p += k;
        n -= k;
    }
}

/* Returns a malloc'd, NUL-terminated copy of the tail in order (caller frees). */
static char *tail_linearize(const tail_t *t)
{
    char *s = xmalloc(t->len + 1);
    if (t->len < t->cap) {
        if (t->len > 0)
            memcpy(s, t->buf, t->len);
    } else {
        size_t first = t->cap - t->head;
        memcpy(s, t->buf + t->head, first);
        memcpy(s + first, t->buf, t->head);
    }
    s[t->len] = '\0';
    return s;
}

/* ---- teardown ------------------------------------------------------------------ */

static char **strv_copy(const char *const *v)
{
    if (v == NULL)
        return NULL;
    size_t n = 0;
    while (v[n] != NULL)
        n++;
    char **c = xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = xstrdup(v[i]);
    return c;
}

static void strv_free(char **v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

static void child_free(child_process_t *cp)
{
    strv_free(cp->argv);
    strv_free(cp->env);
    free(cp->cwd);
    free(cp->stdin_data);
    free(cp->out.tail.buf);
    free(cp->err.tail.buf);
    free(cp->line);
    free(cp);
}

static void on_handle_closed(uv_handle_t *h)
{
    child_process_t *cp = h->data;
    if (--cp->open_handles == 0)
        child_free(cp);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, on_handle_closed);
}

static void stop_pipe(child_pipe_t *p)
{
    if (p->reading) {
        uv_read_stop((uv_stream_t *)&p->pipe);
        p->reading = false;
    }
    close_handle((uv_handle_t *)&p->pipe);
}

/* Closes everything that is not needed any more. The process handle stays open until
 * the child has been reaped, so that its exit is still noticed (and its exit callback
 * can close it); the timer stays open while a SIGKILL deadline is pending. */
static void close_what_is_done(child_process_t *cp)
{
    if (cp->has_stdin)
        close_handle((uv_handle_t *)&cp->in);
    stop_pipe(&cp->out);
    stop_pipe(&cp->err);
    if (cp->exited) {
        close_handle((uv_handle_t *)&cp->proc);
        close_handle((uv_handle_t *)&cp->timer);
    }
}

/* ---- signals and timer --------------------------------------------------------- */

/* Signals the child's process group (it leads one, see the top of the file), or the
 * child alone if that fails. */
static void signal_child(child_process_t *cp, int signum)
{
    if (cp->exited)
        return;
    if (uv_kill(-cp->proc.pid, signum) != 0)
        uv_process_kill(&cp->proc, signum);
}

static void on_timer_fire(uv_timer_t *t);

static void arm_timer(child_process_t *cp, timer_stage_t stage, uint64_t ms)
{
    cp->stage = stage;
    uv_timer_start(&cp->timer, on_timer_fire, ms, 0);
}

static void terminate(child_process_t *cp)
{
    signal_child(cp, SIGTERM);
    arm_timer(cp, TIMER_KILL_DEADLINE, KILL_GRACE_MS);
}

static void maybe_finish(child_process_t *cp);

static void on_timer_fire(uv_timer_t *t)
{
    child_process_t *cp = t->data;
    timer_stage_t stage = cp->stage;
    cp->stage = TIMER_IDLE;
    switch (stage) {
    case TIMER_TIMEOUT:
        cp->timed_out = true;
        terminate(cp);
        break;
    case TIMER_KILL_DEADLINE:
        signal_child(cp, SIGKILL);
        break;
    case TIMER_DRAIN:
        /* Something the child started still holds a pipe: report what we have. */
        if (cp->out.reading) {
            uv_read_stop((uv_stream_t *)&cp->out.pipe);
            cp->out.reading = false;
        }
        if (cp->err.reading) {
            uv_read_stop((uv_stream_t *)&cp->err.pipe);
            cp->err.reading = false;
        }
        maybe_finish(cp);
        break;
    case TIMER_IDLE:
        break;
    }
}

/* ---- completion ---------------------------------------------------------------- */

static void maybe_finish(child_process_t *cp)
{
    if (cp->finished || !cp->exited || cp->out.reading || cp->err.reading)
        return;
    cp->finished = true;
    uv_timer_stop(&cp->timer);

    char *out = tail_linearize(&cp->out.tail);
    char *err = tail_linearize(&cp->err.tail);
    tern_spawn_res res = {
        .exit_status = cp->exit_status,
        .term_signal = cp->term_signal,
        .timed_out = cp->timed_out ? 1 : 0,
        .error = NULL,
        .stdout_tail = out,
        .stdout_len = cp->out.tail.len,
        .stderr_tail = err,
        .stderr_len = cp->err.tail.len,
        .elapsed_ms = (uv_hrtime() - cp->start_ns) / 1000000u,
    };
    cp->cb(cp->data, &res);
    free(out);
    free(err);
    close_what_is_done(cp);
}

static void on_child_exit(uv_process_t *proc, int64_t exit_status, int term_signal)
{
    child_process_t *cp = proc->data;
    cp->exited = true;
    cp->term_signal = term_signal;
    cp->exit_status = term_signal != 0 ? -1 : exit_status;
    uv_timer_stop(&cp->timer);
    cp->stage = TIMER_IDLE;

    if (cp->canceled) {
        close_what_is_done(cp);
        return;
    }
    if (cp->out.reading || cp->err.reading)
        arm_timer(cp, TIMER_DRAIN, DRAIN_GRACE_MS);
    maybe_finish(cp);
}

static void on_output_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    child_process_t *cp = h->data;
    *buf = uv_buf_init(cp->read_buf, sizeof cp->read_buf);
}

/* Splits what stdout brought into lines for the line callback. */
static void lines_feed(child_process_t *cp, const char *p, size_t n)
{
    while (n > 0 && !cp->canceled && !cp->finished) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl != NULL ? (size_t)(nl - p) : n;
        if (!cp->line_too_long) {
            if (cp->line_len + k > CHILD_LINE_MAX) {
                cp->line_too_long = true;
                cp->line_len = 0;
            } else {
                if (cp->line_len + k > cp->line_cap) {
                    cp->line_cap = (cp->line_len + k) * 2;
                    cp->line = xrealloc(cp->line, cp->line_cap);
                }
                memcpy(cp->line + cp->line_len, p, k);
                cp->line_len += k;
            }
        }
        if (nl == NULL)
            return;
        if (!cp->line_too_long)
            cp->line_cb(cp->line_data, cp->line, cp->line_len);
        cp->line_len = 0;
        cp->line_too_long = false;
        p += k + 1;
        n -= k + 1;
    }
}

static void on_output_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    child_pipe_t *p = (child_pipe_t *)(void *)s;
    child_process_t *cp = p->cp;
    if (n > 0) {
        tail_append(&p->tail, buf->base, (size_t)n);
        if (p == &cp->out && cp->line_cb != NULL)
            lines_feed(cp, buf->base, (size_t)n);
        return;
    }
    if (n == 0)
        return; /* EAGAIN */
    /* UV_EOF, or a read error: either way this stream is over. */
    uv_read_stop(s);
    p->reading = false;
    maybe_finish(cp);
}

static void on_stdin_written(uv_write_t *req, int status)
{
    child_process_t *cp = req->data;
    (void)status; /* EPIPE when the child does not read its stdin; ECANCELED on cancel */
    free(cp->stdin_data);
    cp->stdin_data = NULL;
    close_handle((uv_handle_t *)&cp->in);
}

/* ---- public -------------------------------------------------------------------- */

/* Reads the options with the size the caller compiled: fields past `size` are zero. */
static void read_opts(const tern_spawn_opts *in, tern_spawn_opts *out)
{
    memset(out, 0, sizeof *out);
    size_t n = in->size < sizeof *out ? in->size : sizeof *out;
    memcpy(out, in, n);
}

static void init_pipe(child_process_t *cp, uv_pipe_t *pipe)
{
    uv_pipe_init(cp->loop, pipe, 0);
    pipe->data = cp;
    cp->open_handles++;
}

/* Handles are initialised; close them all, so that the object is freed once the loop
 * has run their close callbacks. Used when uv_spawn fails. */
static void abandon(child_process_t *cp)
{
    cp->finished = true;
    cp->canceled = true;
    cp->exited = true;
    close_what_is_done(cp);
}

void child_process_on_stdout_line(child_process_t *cp, child_process_line_cb cb, void *data)
{
    cp->line_cb = cb;
    cp->line_data = data;
}

/* libuv's child changes to cwd before it gives up ternd's ids, so a directory the new
 * user could not reach (one below a root-only directory) would be entered with root's
 * rights. This tries the change as that user in a short-lived child, ids dropped as
 * libuv drops them, and returns 0 or the negative errno it met. */
static int cwd_reachable_as(const char *cwd, uid_t uid, gid_t gid)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* Only async-signal-safe calls here: the parent may have threads. setgroups
         * fails unless root, and libuv then goes on without it too. */
        if (setgroups(0, NULL) != 0 && errno != EPERM)
            _exit(errno);
        if (setgid(gid) != 0 || setuid(uid) != 0 || chdir(cwd) != 0)
            _exit(errno > 0 && errno < 256 ? errno : EIO);
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    if (!WIFEXITED(status))
        return -EIO;
    return -WEXITSTATUS(status);
}

/* See child_process.h. */
child_process_t *child_process_spawn(uv_loop_t *loop, const tern_spawn_opts *opts_in,
                                     child_process_cb cb, void *data, char *err, size_t errlen)
{
    tern_spawn_opts opts;
    read_opts(opts_in, &opts);
    if (opts.argv == NULL || opts.argv[0] == NULL || opts.argv[0][0] == '\0') {
        err_set(err, errlen, TERN_EINVAL, "spawn: empty argv");
        return NULL;
    }
    if (opts.stdin_data != NULL && opts.stdin_len > UINT32_MAX) {
        err_set(err, errlen, TERN_E2BIG, "spawn \"%s\": %zu bytes of stdin, at most %u",
                opts.argv[0], opts.stdin_len, UINT32_MAX);
        return NULL;
    }

    if ((opts.flags & TERN_SPAWN_SET_IDS) && opts.cwd != NULL) {
        int rc = cwd_reachable_as(opts.cwd, (uid_t)opts.uid, (gid_t)opts.gid);
        if (rc != 0) {
            err_set(err, errlen, rc, "spawn \"%s\": cwd \"%s\": %s (as uid %u)", opts.argv[0],
                    opts.cwd, uv_strerror(rc), (unsigned)opts.uid);
            return NULL;
        }
    }

    /* The child gets its three streams and nothing else of ternd (base/fd_inherit.h). */
    char why[256];
    int frc = fd_inherit_none(why, sizeof why);
    if (frc != 0) {
        err_set(err, errlen, frc, "spawn \"%s\": %s", opts.argv[0], why);
        return NULL;
    }

    child_process_t *cp = xcalloc(1, sizeof *cp);
    cp->loop = loop;
    cp->cb = cb;
    cp->data = data;
    cp->argv = strv_copy(opts.argv);
    cp->env = strv_copy(opts.env);
    cp->cwd = opts.cwd != NULL ? xstrdup(opts.cwd) : NULL;
    cp->timeout_ms = opts.timeout_ms;
    size_t tail = opts.tail_bytes == 0 ? DEFAULT_TAIL : opts.tail_bytes;
    if (tail > MAX_TAIL)
        tail = MAX_TAIL;
    cp->out.tail.cap = tail;
    cp->err.tail.cap = tail;
    cp->out.cp = cp;
    cp->err.cp = cp;
    cp->has_stdin = opts.stdin_data != NULL;
    if (cp->has_stdin) {
        cp->stdin_len = opts.stdin_len;
        cp->stdin_data = xmalloc(opts.stdin_len);
        memcpy(cp->stdin_data, opts.stdin_data, opts.stdin_len);
        init_pipe(cp, &cp->in);
    }
    init_pipe(cp, &cp->out.pipe);
    init_pipe(cp, &cp->err.pipe);
    uv_timer_init(loop, &cp->timer);
    cp->timer.data = cp;
    cp->open_handles++;
    cp->proc.data = cp;
    cp->open_handles++; /* uv_spawn initialises the process handle even when it fails */

    uv_stdio_container_t stdio[3];
    if (cp->has_stdin) {
        stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
        stdio[0].data.stream = (uv_stream_t *)&cp->in;
    } else {
        stdio[0].flags = UV_IGNORE; /* /dev/null */
    }
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&cp->out.pipe;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&cp->err.pipe;

    uv_process_options_t po = {
        .exit_cb = on_child_exit,
        .file = cp->argv[0],
        .args = cp->argv,
        .env = cp->env,
        .cwd = cp->cwd,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    if (opts.flags & TERN_SPAWN_SET_IDS) {
        /* With either flag libuv's child calls setgroups(0, NULL) before setgid and
         * setuid, so no supplementary group of ternd (root's, typically) survives. */
        po.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
        po.uid = (uv_uid_t)opts.uid;
        po.gid = (uv_gid_t)opts.gid;
    }
    cp->start_ns = uv_hrtime();
    int rc = uv_spawn(loop, &cp->proc, &po);
    cp->proc.data = cp; /* uv_spawn re-initialises the handle */
    if (rc != 0) {
        if (rc == UV_ENOENT && cp->cwd != NULL && access(cp->cwd, X_OK) != 0)
            err_set(err, errlen, rc, "spawn \"%s\": cwd \"%s\": %s", cp->argv[0], cp->cwd,
                    uv_strerror(rc));
        else
            err_set(err, errlen, rc, "spawn \"%s\": %s", cp->argv[0], uv_strerror(rc));
        abandon(cp);
        return NULL;
    }

    cp->out.reading = true;
    cp->err.reading = true;
    uv_read_start((uv_stream_t *)&cp->out.pipe, on_output_alloc, on_output_read);
    uv_read_start((uv_stream_t *)&cp->err.pipe, on_output_alloc, on_output_read);
    if (cp->has_stdin) {
        if (cp->stdin_len > 0) {
            uv_buf_t b = uv_buf_init(cp->stdin_data, (unsigned)cp->stdin_len);
            cp->in_req.data = cp;
            if (uv_write(&cp->in_req, (uv_stream_t *)&cp->in, &b, 1, on_stdin_written) != 0)
                close_handle((uv_handle_t *)&cp->in);
        } else {
            close_handle((uv_handle_t *)&cp->in);
        }
    }
    if (cp->timeout_ms > 0)
        arm_timer(cp, TIMER_TIMEOUT, cp->timeout_ms);
    return cp;
}

/* See child_process.h. */
void child_process_cancel(child_process_t *cp)
{
    if (cp == NULL || cp->canceled)
        return;
    cp->canceled = true;
    if (cp->finished)
        return; /* the callback ran: teardown is already under way */
    cp->finished = true;
    if (!cp->exited) {
        /* Keep the process handle and the timer until the child has been reaped. */
        uv_timer_stop(&cp->timer);
        terminate(cp);
    }
    close_what_is_done(cp);
}
