/*
 * term.h -- what the standard output can show: a terminal or not, colours, the
 * clear-line escape, its width. Colour needs a terminal whose TERM is set and not
 * "dumb", and no NO_COLOR in the environment (https://no-color.org: any non-empty
 * value). Piped output gets plain lines and no escape code at all.
 */
#ifndef TERN_CLI_TERM_H
#define TERN_CLI_TERM_H

#include <stdbool.h>

typedef struct term_caps {
    bool tty;   /* a terminal: live lines are redrawn in place with '\r' */
    bool ansi;  /* a terminal that understands ANSI escapes (clear line, colours) */
    bool color; /* ansi, and colours not refused by NO_COLOR */
    int width;  /* columns */
} term_caps_t;

/* Works out the capabilities from the facts given: whether the output is a terminal,
 * TERM, NO_COLOR, the window width reported by the terminal (0: unknown) and COLUMNS
 * (NULL: unset). Pure, for tests. */
term_caps_t term_caps_from(bool isatty, const char *term, const char *no_color, int win_cols,
                           const char *columns_env);

/* The capabilities of file descriptor `fd` in this process's environment. */
term_caps_t term_probe(int fd);

#endif /* TERN_CLI_TERM_H */
