/* lock_pattern.h -- the regular expressions of job locks, matched in bounded time.
 *
 * A job's `locks` is a regular expression; a new job whose target it matches is refused
 * while the job is unfinished (node-workflow's rule, where it was a JavaScript RegExp and
 * the check was `re.test(target)`). Locks are checked on the event loop for every create,
 * against every unfinished job's lock, so their cost must be bounded whatever a client
 * writes: a pattern is compiled once into a small program and matched by simulating all
 * of its states at once over the target (Thompson's construction, Pike's VM without
 * captures). Nothing backtracks, so a test costs at most (target code points + 1) x
 * program size steps, and the program size is capped when the pattern is compiled
 * (counted repetitions are expanded, so a{1,1000}{1,1000} is refused there, before any
 * program is allocated). The question answered is only "does the pattern match
 * somewhere in the target".
 *
 * Syntax (POSIX extended regular expressions, which earlier versions stored, and the
 * JavaScript spellings node-workflow's users wrote): literals; `.`; bracket expressions
 * with ranges, `^` negation, `[:alpha:]`-style classes and escapes; `^` and `$` (start
 * and end of the target); groups `(...)`, `(?:...)` and `(?<name>...)`; `|`; the
 * quantifiers `* + ? {n} {n,} {n,m}` and their lazy forms (which match the same
 * targets); `\d \w \s \D \W \S \b \B`; `\t \n \r \f \v \0 \xHH \uHHHH`; a backslash
 * before any other ASCII punctuation is that character. Refused with the offset of the
 * construct: back-references, lookaround, `{,m}` (POSIX reads {0,m}, JavaScript the
 * literal text), other escapes, collating elements `[= =]` `[. .]`, a quantifier with
 * nothing to repeat, unbalanced parentheses and brackets.
 *
 * Matching is case-sensitive and works on code points of UTF-8: `.` and a negated
 * bracket expression match one whole code point (except that `.` does not match the
 * line terminators \n \r U+2028 U+2029, as in JavaScript); classes like \w, \d, \b and
 * [:alpha:] are ASCII. A byte of the target that is not valid UTF-8 is one code point
 * of its own that only `.` and negated sets match. Stacked quantifiers read as in
 * POSIX (a** is (a*)*), except that a '?' right after a quantifier makes it lazy, as in
 * JavaScript: x+? needs one x, where POSIX reads (x+)?.
 */
#ifndef TERN_LOCK_PATTERN_H
#define TERN_LOCK_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest lock accepted, in bytes: a lock naming a few dozen uuids
 * ("^(uuid1|uuid2|...)$", 37 bytes each) fits. */
#define LOCK_PATTERN_MAX_BYTES 2048

/* The largest compiled program accepted, in instructions (one per literal code point,
 * about two per alternative or quantifier, counted repetitions expanded), the tables of
 * its bracket expressions and classes counted as the instructions of their memory. A
 * test costs at most this many steps per code point of the target. */
#define LOCK_PATTERN_MAX_PROGRAM 2500

/* Groups nested deeper than this are refused (the parser recurses once per group). */
#define LOCK_PATTERN_MAX_DEPTH 100

typedef struct lock_pattern lock_pattern_t;

/* Compiles `text` (NUL-terminated, at most LOCK_PATTERN_MAX_BYTES bytes). On success
 * returns 0 and sets *out to a new pattern the caller frees with lock_pattern_free. On
 * failure returns TERN_EINVAL (bad or unsupported syntax) or TERN_E2BIG (a limit), sets
 * *out to NULL and writes a message naming the construct and its byte offset, or the
 * limit, into err (e.g. "back-reference \1 at offset 12 is not supported"). */
int lock_pattern_compile(const char *text, lock_pattern_t **out, char *err, size_t errlen);

/* Whether the pattern matches somewhere in `target` (`len` bytes, UTF-8; no NUL
 * needed): JavaScript's RegExp.prototype.test. Allocates nothing for a program of up to
 * 256 instructions, 16 bytes per instruction for a larger one (freed before it returns). */
bool lock_pattern_test(const lock_pattern_t *p, const char *target, size_t len);

/* A test of one pattern against one target that runs in slices, so that a caller on an
 * event loop can bound the time each turn spends: lock_pattern_test is one run with no
 * budget. */
typedef struct lock_match lock_match_t;

#define LOCK_MATCH_NO   0 /* the pattern matches nowhere in the target */
#define LOCK_MATCH_YES  1 /* it matches somewhere */
#define LOCK_MATCH_MORE 2 /* not decided yet: run again */

/* Begins a test of `p` against `target` (`len` bytes); both are borrowed and must live
 * until lock_match_free. Allocates about 4 KiB, plus 16 bytes per instruction for a
 * program over 256 instructions. Never NULL. */
lock_match_t *lock_match_new(const lock_pattern_t *p, const char *target, size_t len);

/* Begins a test of another pattern or target in `m`, as lock_match_new does, keeping
 * its memory (grown when `p` needs more). */
void lock_match_reset(lock_match_t *m, const lock_pattern_t *p, const char *target, size_t len);

/* Runs the test on until it is decided or about `*budget` steps were spent (a step is
 * one instruction visited; the test stops between two code points of the target, so it
 * may spend up to 3 x lock_pattern_size more than asked). Subtracts the steps spent
 * from *budget (down to 0) and returns LOCK_MATCH_NO, LOCK_MATCH_YES or
 * LOCK_MATCH_MORE; once decided, it returns the same answer at no cost. */
int lock_match_run(lock_match_t *m, uint64_t *budget);

/* Frees `m` (NULL is fine). */
void lock_match_free(lock_match_t *m);

/* The size of the compiled pattern, in instructions: those of its program plus its
 * tables of bracket expressions and classes as the instructions of the same memory, so
 * that it holds about 16 bytes per unit (the cap on all unfinished jobs' locks bounds
 * memory). */
size_t lock_pattern_size(const lock_pattern_t *p);

/* Frees `p` (NULL is fine). */
void lock_pattern_free(lock_pattern_t *p);

#endif
