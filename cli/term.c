/*
 * term.c -- terminal capabilities of the standard output; see term.h.
 */
#include "term.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define DEFAULT_WIDTH 80

term_caps_t term_caps_from(bool isatty, const char *term, const char *no_color, int win_cols,
                           const char *columns_env)
{
    term_caps_t t = {.tty = isatty, .width = DEFAULT_WIDTH};
    t.ansi = isatty && term != NULL && term[0] != '\0' && strcmp(term, "dumb") != 0;
    t.color = t.ansi && (no_color == NULL || no_color[0] == '\0');
    if (win_cols > 0) {
        t.width = win_cols;
    } else if (columns_env != NULL) {
        int c = atoi(columns_env);
        if (c > 0)
            t.width = c;
    }
    if (t.width < 20)
        t.width = 20;
    if (t.width > 1000)
        t.width = 1000;
    return t;
}

term_caps_t term_probe(int fd)
{
    bool tty = isatty(fd) == 1;
    int cols = 0;
    struct winsize ws;
    if (tty && ioctl(fd, TIOCGWINSZ, &ws) == 0)
        cols = ws.ws_col;
    return term_caps_from(tty, getenv("TERM"), getenv("NO_COLOR"), cols, getenv("COLUMNS"));
}
