/*
 * shell.c -- the script of a "shell": true step: the author's text with each
 * template replaced by a reference to a positional parameter, the quoting of the
 * text followed so that each reference stays one word. The values never enter the
 * script. Owns the script while it is built; argv owns it after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Where a shell reads the text that comes next. */
enum shell_quote { SQ_NONE, SQ_SINGLE, SQ_DOUBLE };

#define SHELL_NEST_MAX 16

/* The quoting of literal script text as the shell will read it, so that each
 * template's reference is written in the form that keeps its value one word there.
 * A command substitution ($(...) or `...`) starts a new unquoted level inside the
 * quotes around it, as in the shell; comments are skipped. Whatever the lexer
 * concludes, the values are not in the script, but a mistake here would leave a
 * reference unquoted, where the shell splits its value into words (options among
 * them). So where the text is beyond what the lexer follows (here-documents, a case
 * pattern's ")" inside parentheses, backslashes inside backquotes, $'...', levels
 * deeper than SHELL_NEST_MAX) it records why in `unsure`, and no template may come
 * after that point. */
typedef struct shell_lexer {
    struct {
        enum shell_quote q;
        int parens;    /* open "(" at this level */
        bool backtick; /* this level was opened by "`" */
        bool arith;    /* this level is an arithmetic expansion, $((...)) */
    } lv[SHELL_NEST_MAX];
    int depth;
    bool escaped;
    bool word_start;    /* the next character would begin a word (a "#" there is a comment) */
    bool comment;       /* inside a comment, up to the end of the line */
    const char *unsure; /* what the lexer does not follow, once met; NULL while it follows */
} shell_lexer_t;

static void lexer_push(shell_lexer_t *lx, bool backtick, bool arith)
{
    if (lx->depth + 1 >= SHELL_NEST_MAX) {
        lx->unsure = "command substitutions nested more than 15 deep";
        return;
    }
    lx->depth++;
    lx->lv[lx->depth].q = SQ_NONE;
    lx->lv[lx->depth].parens = 0;
    lx->lv[lx->depth].backtick = backtick;
    lx->lv[lx->depth].arith = arith;
}

/* True when the text that comes next is inside an arithmetic expansion at any level. */
static bool lexer_in_arith(const shell_lexer_t *lx)
{
    for (int d = 0; d <= lx->depth; d++)
        if (lx->lv[d].arith)
            return true;
    return false;
}

/* True when the depth-th level or one around it was opened by a backquote. */
static bool lexer_in_backticks(const shell_lexer_t *lx)
{
    for (int d = 0; d <= lx->depth; d++)
        if (lx->lv[d].backtick)
            return true;
    return false;
}

/* Notes in lx->unsure what, starting at s[i] (unquoted, not escaped, beginning a word
 * when word_start), the lexer does not follow. */
static void lexer_check_unfollowed(shell_lexer_t *lx, const char *s, size_t n, size_t i,
                                   bool word_start)
{
    char c = s[i];
    if (lx->unsure != NULL || lexer_in_arith(lx))
        return;
    if (c == '<' && i + 1 < n && s[i + 1] == '<')
        lx->unsure = "a here-document (<<)";
    else if (c == '$' && i + 1 < n && s[i + 1] == '\'')
        lx->unsure = "$'...' (bash reads it as one quoted string, dash as \"$\" and a string)";
    else if (c == 'c' && word_start && n - i >= 5 && memcmp(s + i, "case", 4) == 0 &&
             strchr(" \t\n", s[i + 4]) != NULL && (lx->depth > 0 || lx->lv[lx->depth].parens > 0))
        lx->unsure = "a case statement inside parentheses or $(...) (its patterns end with \")\")";
}

static void follow_quotes(shell_lexer_t *lx, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        enum shell_quote *q = &lx->lv[lx->depth].q;
        bool word_start = lx->word_start, was_escaped = lx->escaped;
        lx->word_start = false;
        if (lx->comment) {
            if (c == '\n') {
                lx->comment = false;
                lx->word_start = true;
            }
        } else if (*q == SQ_SINGLE) {
            if (c == '\'')
                *q = SQ_NONE;
        } else if (lx->escaped) {
            lx->escaped = false;
        } else if (c == '\\') {
            lx->escaped = true;
            if (lexer_in_backticks(lx) && lx->unsure == NULL)
                lx->unsure = "a backslash inside backquotes (use $(...) instead)";
        } else if (*q == SQ_NONE && c == '#' && word_start) {
            lx->comment = true;
        } else if (c == '$' && i + 2 < n && s[i + 1] == '(' && s[i + 2] == '(') {
            lexer_push(lx, false, true);
            i += 2;
        } else if (c == '$' && i + 1 < n && s[i + 1] == '(') {
            lexer_push(lx, false, false);
            i++;
        } else if (c == '`') {
            if (lx->depth > 0 && lx->lv[lx->depth].backtick && *q == SQ_NONE)
                lx->depth--;
            else
                lexer_push(lx, true, false);
        } else if (c == '"') {
            *q = *q == SQ_DOUBLE ? SQ_NONE : SQ_DOUBLE;
        } else if (*q == SQ_NONE && c == '\'') {
            *q = SQ_SINGLE;
        } else if (*q == SQ_NONE && c == '(') {
            lx->lv[lx->depth].parens++;
        } else if (*q == SQ_NONE && c == ')') {
            if (lx->lv[lx->depth].parens > 0) {
                lx->lv[lx->depth].parens--;
            } else if (lx->depth > 0 && !lx->lv[lx->depth].backtick) {
                if (lx->lv[lx->depth].arith && i + 1 < n && s[i + 1] == ')')
                    i++; /* the second ")" of "))" */
                lx->depth--;
            }
        }
        if (!lx->comment && lx->lv[lx->depth].q == SQ_NONE && !was_escaped && !lx->escaped) {
            if (c != '\'' && c != '"')
                lexer_check_unfollowed(lx, s, n, i, word_start);
            /* After a blank or an operator a new word begins, as after "$(" and "`". */
            lx->word_start = s[i] != '\0' && strchr(" \t\n;&|()<>`", s[i]) != NULL;
        }
    }
}

/* /bin/sh -c SCRIPT sh VALUE1 VALUE2 ...: the script is the author's text with each
 * template replaced by a reference to a positional parameter, and the values travel
 * as those parameters, so no value is ever part of the code the shell parses.
 * Unquoted, a reference is written "${N}" (one word, no globbing); inside double
 * quotes ${N}; inside single quotes '"${N}"' (the quotes are closed around it); the
 * same inside a command substitution, by the quoting within it. */
const char *build_shell(const json_t *a, task_strv_t *argv, char *msg, size_t msglen)
{
    const json_t *strings = json_object_get(a, "strings");
    const json_t *values = json_object_get(a, "values");
    char *script = NULL;
    size_t len = 0;
    shell_lexer_t lx = {.word_start = true};

    for (size_t i = 0; i < json_array_size(strings); i++) {
        const json_t *s = json_array_get(strings, i);
        if (append_text(&script, &len, json_string_value(s), json_string_length(s)) != 0)
            goto NoMemory;
        follow_quotes(&lx, json_string_value(s), json_string_length(s));
        enum shell_quote q = lx.lv[lx.depth].q;
        if (i + 1 == json_array_size(strings))
            break;
        if (lexer_in_arith(&lx)) {
            snprintf(msg, msglen,
                     "argv: template %zu is inside $((...)), where the shell reads a value as an "
                     "expression (bash runs the command substitutions in one); check the value "
                     "in the script before any arithmetic",
                     i + 1);
            free(script);
            return msg;
        }
        if (lx.unsure != NULL) {
            snprintf(msg, msglen,
                     "argv: template %zu comes after %s, whose quoting is not followed here, so "
                     "the form that keeps its value one word is not known; give the value to a "
                     "variable before that point and use \"$x\" after it",
                     i + 1, lx.unsure);
            free(script);
            return msg;
        }
        if (lx.escaped) {
            snprintf(msg, msglen,
                     "argv: template %zu follows a backslash, which would quote the shell "
                     "syntax around its value; remove the backslash",
                     i + 1);
            free(script);
            return msg;
        }
        char ref[48];
        snprintf(ref, sizeof ref,
                 q == SQ_NONE     ? "\"${%zu}\""
                 : q == SQ_DOUBLE ? "${%zu}"
                                  : "'\"${%zu}\"'",
                 i + 1);
        if (append_text(&script, &len, ref, strlen(ref)) != 0)
            goto NoMemory;
        lx.word_start = false; /* what follows is glued to the reference: "${1}"#x */
    }
    if (script == NULL || script[0] == '\0' || strlen(script) != len) {
        snprintf(msg, msglen,
                 "argv: with \"shell\": true, expected one non-empty string without "
                 "NUL bytes (the script for /bin/sh -c)");
        free(script);
        return msg;
    }
    if (task_strv_push(argv, SHELL_PATH, NULL) != 0 || task_strv_push(argv, "-c", NULL) != 0 ||
        task_strv_push(argv, NULL, script) != 0) {
        free(script);
        goto NoMemory;
    }
    if (task_strv_push(argv, "sh", NULL) != 0) /* $0 */
        goto NoMemory;
    for (size_t i = 0; i < json_array_size(values); i++) {
        char *v = NULL;
        size_t vlen = 0;
        if (append_value(&v, &vlen, json_array_get(values, i)) != 0 ||
            (v == NULL && append_text(&v, &vlen, "", 0) != 0)) {
            free(v);
            snprintf(msg, msglen, "argv: the value of template %zu contains a NUL byte", i + 1);
            return msg;
        }
        if (task_strv_push(argv, NULL, v) != 0) {
            free(v);
            goto NoMemory;
        }
    }
    return NULL;
NoMemory:
    snprintf(msg, msglen, "out of memory building argv");
    return msg;
}
