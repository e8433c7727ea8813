/*
 * test_log.c -- engine/base/log.c: the lines an operator's `bunyan` tool reads.
 *
 * Every test logs into the write end of a pipe (enlarged to 1 MiB so one long line
 * fits without a reader) and reads the lines back from the read end, then parses them
 * with jansson: a line that is not valid JSON, or that repeats a key, fails the test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/iso8601.h"
#include "base/log.h"

typedef struct fixture {
    int rd, wr;
} fixture_t;

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    int p[2];
    if (f == NULL || pipe2(p, O_CLOEXEC) != 0)
        return -1;
    if (fcntl(p[1], F_SETPIPE_SZ, 1024 * 1024) < 0)
        return -1;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    f->rd = p[0];
    f->wr = p[1];
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    log_init("ternd", TERN_LOG_INFO, 2);
    close(f->rd);
    close(f->wr);
    free(f);
    return 0;
}

static int setup(void **state)
{
    fixture_t *f = *state;
    log_init("ternd-test", TERN_LOG_TRACE, f->wr);
    return 0;
}

/* Everything written so far (malloc'd, NUL-terminated; "" when nothing). */
static char *drain(fixture_t *f, size_t *len_out)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(f->rd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (len_out != NULL)
        *len_out = len;
    return buf;
}

/* Reads exactly one line and parses it, rejecting duplicate keys. New reference. */
static json_t *one_line(fixture_t *f)
{
    size_t len;
    char *buf = drain(f, &len);
    assert_true(len > 0);
    assert_int_equal(buf[len - 1], '\n');
    assert_ptr_equal(memchr(buf, '\n', len), buf + len - 1); /* exactly one line */
    json_error_t jerr;
    json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        fail_msg("line is not valid JSON (%s): %.200s", jerr.text, buf);
    free(buf);
    assert_true(json_is_object(doc));
    return doc;
}

static void test_core_fields(void **state)
{
    fixture_t *f = *state;
    log_msg(TERN_LOG_INFO, NULL, NULL, "ready on %s:%d", "127.0.0.1", 8080);
    json_t *doc = one_line(f);

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    assert_string_equal(json_string_value(json_object_get(doc, "name")), "ternd-test");
    assert_string_equal(json_string_value(json_object_get(doc, "hostname")), host);
    assert_true(json_is_integer(json_object_get(doc, "pid")));
    assert_int_equal(json_integer_value(json_object_get(doc, "pid")), getpid());
    assert_true(json_is_integer(json_object_get(doc, "level")));
    assert_int_equal(json_integer_value(json_object_get(doc, "level")), 30);
    assert_string_equal(json_string_value(json_object_get(doc, "msg")), "ready on 127.0.0.1:8080");
    assert_true(json_is_integer(json_object_get(doc, "v")));
    assert_int_equal(json_integer_value(json_object_get(doc, "v")), 0);
    assert_null(json_object_get(doc, "component"));

    const char *t = json_string_value(json_object_get(doc, "time"));
    assert_non_null(t);
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    assert_int_equal(regexec(&re, t, 0, NULL, 0), 0);
    regfree(&re);
    /* And it is today's date, not some fixed one. */
    char now[32];
    iso8601_format(clock_wall_ms(), now);
    assert_memory_equal(t, now, 10);
    json_decref(doc);
}

static void test_component_and_order(void **state)
{
    fixture_t *f = *state;
    log_msg(TERN_LOG_WARN, "runner", NULL, "lease lost");
    size_t len;
    char *line = drain(f, &len);
    /* bunyan's order: name first, v last, component before msg. */
    assert_true(strncmp(line, "{\"name\":\"ternd-test\",\"hostname\":", 32) == 0);
    assert_non_null(strstr(line, ",\"level\":40,\"component\":\"runner\",\"msg\":\"lease lost\""));
    assert_string_equal(line + len - 8, ",\"v\":0}\n");
    free(line);
}

static void test_level_filtering(void **state)
{
    fixture_t *f = *state;
    log_init("ternd-test", TERN_LOG_WARN, f->wr);
    assert_false(log_enabled(TERN_LOG_INFO));
    assert_true(log_enabled(TERN_LOG_WARN));
    assert_true(log_enabled(TERN_LOG_FATAL));

    log_msg(TERN_LOG_DEBUG, NULL, NULL, "hidden debug");
    log_msg(TERN_LOG_INFO, NULL, NULL, "hidden info");
    char *none = drain(f, NULL);
    assert_string_equal(none, "");
    free(none);

    log_msg(TERN_LOG_ERROR, NULL, NULL, "shown");
    json_t *doc = one_line(f);
    assert_int_equal(json_integer_value(json_object_get(doc, "level")), 50);
    assert_string_equal(json_string_value(json_object_get(doc, "msg")), "shown");
    json_decref(doc);

    /* Calling log_init again takes effect at once. */
    log_init("ternd-test", TERN_LOG_TRACE, f->wr);
    log_msg(TERN_LOG_TRACE, NULL, NULL, "now shown");
    doc = one_line(f);
    assert_int_equal(json_integer_value(json_object_get(doc, "level")), 10);
    json_decref(doc);
}

static void test_fields_merged(void **state)
{
    fixture_t *f = *state;
    json_t *fields = json_pack("{s:s, s:s, s:i, s:{s:[i,b]}, s:n}", "job",
                               "4f1c2d3e-0000-4000-8000-000000000000", "step", "resize", "attempt",
                               3, "extra", "list", 1, 1, "nothing");
    log_msg(TERN_LOG_INFO, "runner", fields, "timeout after %d s", 300);
    json_decref(fields);

    json_t *doc = one_line(f);
    assert_string_equal(json_string_value(json_object_get(doc, "job")),
                        "4f1c2d3e-0000-4000-8000-000000000000");
    assert_string_equal(json_string_value(json_object_get(doc, "step")), "resize");
    assert_int_equal(json_integer_value(json_object_get(doc, "attempt")), 3);
    json_t *list = json_object_get(json_object_get(doc, "extra"), "list");
    assert_int_equal(json_array_size(list), 2);
    assert_true(json_is_true(json_array_get(list, 1)));
    assert_true(json_is_null(json_object_get(doc, "nothing")));
    assert_string_equal(json_string_value(json_object_get(doc, "msg")), "timeout after 300 s");
    assert_string_equal(json_string_value(json_object_get(doc, "component")), "runner");
    json_decref(doc);
}

static void test_core_fields_not_overridable(void **state)
{
    fixture_t *f = *state;
    json_t *fields = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:i, s:s, s:s}", "name", "evil",
                               "hostname", "elsewhere", "pid", "1", "level", 60, "msg", "forged",
                               "time", "1970-01-01T00:00:00.000Z", "v", 7, "component",
                               "forged-component", "job", "kept");
    log_msg(TERN_LOG_INFO, "api", fields, "real");
    json_t *doc = one_line(f); /* also asserts no key appears twice */
    assert_string_equal(json_string_value(json_object_get(doc, "name")), "ternd-test");
    assert_int_equal(json_integer_value(json_object_get(doc, "pid")), getpid());
    assert_int_equal(json_integer_value(json_object_get(doc, "level")), 30);
    assert_string_equal(json_string_value(json_object_get(doc, "msg")), "real");
    assert_string_not_equal(json_string_value(json_object_get(doc, "time")),
                            "1970-01-01T00:00:00.000Z");
    assert_int_equal(json_integer_value(json_object_get(doc, "v")), 0);
    assert_string_equal(json_string_value(json_object_get(doc, "component")), "api");
    assert_string_equal(json_string_value(json_object_get(doc, "job")), "kept");
    assert_string_not_equal(json_string_value(json_object_get(doc, "hostname")), "elsewhere");
    json_decref(doc);

    /* Without a component argument, a "component" field is an ordinary field. */
    log_msg(TERN_LOG_INFO, NULL, fields, "real");
    doc = one_line(f);
    assert_string_equal(json_string_value(json_object_get(doc, "component")), "forged-component");
    json_decref(doc);
    json_decref(fields);
}

/* The line without its "time" member's value, which differs between two lines. */
static void drop_time(char *line)
{
    char *t = strstr(line, "\"time\":\"");
    assert_non_null(t);
    char *end = strchr(t + 8, '"');
    assert_non_null(end);
    memmove(t + 8, end, strlen(end) + 1);
}

/* log_line writes the line log_msg writes for an object of the same members, byte for
 * byte: the access log went from one to the other, and its readers must not notice. */
static void test_typed_fields_same_line(void **state)
{
    fixture_t *f = *state;
    static const double reals[] = {0.1, 12.0, 1e-7, 123456789012345678.0, 0.843123, 2.5e21};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(reals); i++) {
        json_t *fields = json_pack("{s:s, s:s, s:s, s:i, s:f, s:s}", "method", "POST", "url",
                                   "/jobs/\"x\"\n\xc3\xa9", "route", "", "status", 201,
                                   "latency_ms", reals[i], "msg", "core: skipped");
        log_msg(TERN_LOG_INFO, "api", fields, "%s %s %d", "POST", "/jobs/\"x\"\n\xc3\xa9", 201);
        json_decref(fields);
        char *want = drain(f, NULL);
        const log_field_t typed[] = {
            {.key = "method", .type = LOG_FIELD_STR, .str = "POST"},
            {.key = "url", .type = LOG_FIELD_STR, .str = "/jobs/\"x\"\n\xc3\xa9"},
            {.key = "route", .type = LOG_FIELD_STR, .str = ""},
            {.key = "status", .type = LOG_FIELD_INT, .num = 201},
            {.key = "latency_ms", .type = LOG_FIELD_REAL, .real = reals[i]},
            {.key = "msg", .type = LOG_FIELD_STR, .str = "core: skipped"},
        };
        static const char msg[] = "POST /jobs/\"x\"\n\xc3\xa9 201";
        log_line(TERN_LOG_INFO, "api", typed, TERN_ARRAY_SIZE(typed), msg, sizeof msg - 1);
        char *got = drain(f, NULL);
        drop_time(want);
        drop_time(got);
        assert_string_equal(got, want);
        /* log_msg's reals go through the same writer now: hold both to jansson's. */
        json_t *real = json_real(reals[i]);
        char *jansson = json_dumps(real, JSON_ENCODE_ANY);
        json_decref(real);
        assert_non_null(jansson);
        const char *at = strstr(got, "\"latency_ms\":");
        assert_non_null(at);
        at += strlen("\"latency_ms\":");
        assert_int_equal(strcspn(at, ","), strlen(jansson));
        assert_memory_equal(at, jansson, strlen(jansson));
        free(jansson);
        free(want);
        free(got);
    }
    /* Below the level, nothing. */
    log_init("ternd-test", TERN_LOG_WARN, f->wr);
    log_line(TERN_LOG_INFO, "api", NULL, 0, "quiet", 5);
    char *none = drain(f, NULL);
    assert_string_equal(none, "");
    free(none);
}

static void test_escaping(void **state)
{
    fixture_t *f = *state;
    /* Quotes, backslash, newline, tab, CR, control chars, DEL, valid multi-byte
     * characters, then invalid UTF-8: a stray continuation byte, a lone 0xff, an
     * overlong '/', a UTF-16 surrogate, and a sequence cut short by the end. */
    const char *msg = "say \"hi\" \\ back\nline2\tTab\r\x01\x1f\x7f"
                      " caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"
                      " |\x80|\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82";
    log_msg(TERN_LOG_INFO, NULL, NULL, "%s", msg);
    size_t len;
    char *line = drain(f, &len);
    /* No raw control character may reach the line, apart from its final newline. */
    for (size_t i = 0; i + 1 < len; i++)
        assert_true((unsigned char)line[i] >= 0x20);
    json_error_t jerr;
    json_t *doc = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        fail_msg("not valid JSON (%s): %s", jerr.text, line);
    const char *expect = "say \"hi\" \\ back\nline2\tTab\r\x01\x1f\x7f"
                         " caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"
                         " |\xef\xbf\xbd|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
                         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd";
    assert_string_equal(json_string_value(json_object_get(doc, "msg")), expect);
    json_decref(doc);
    free(line);

    /* Component strings and field keys are escaped too. */
    json_t *fields = json_pack("{s:s}", "we\"ird\nkey", "v\"al");
    log_msg(TERN_LOG_INFO, "comp\"onent", fields, "x");
    json_decref(fields);
    doc = one_line(f);
    assert_string_equal(json_string_value(json_object_get(doc, "component")), "comp\"onent");
    assert_string_equal(json_string_value(json_object_get(doc, "we\"ird\nkey")), "v\"al");
    json_decref(doc);
}

static void test_truncation(void **state)
{
    fixture_t *f = *state;
    size_t big = 100000;
    char *msg = malloc(big + 1);
    memset(msg, 'a', big);
    msg[big] = '\0';
    log_msg(TERN_LOG_INFO, NULL, NULL, "%s", msg);
    json_t *doc = one_line(f);
    const char *got = json_string_value(json_object_get(doc, "msg"));
    size_t glen = strlen(got);
    assert_true(glen < 65536 + 100);
    assert_true(glen > 65536);
    assert_memory_equal(got, msg, 65536);
    assert_string_equal(got + 65536, "...[truncated: message was 100000 bytes]");
    json_decref(doc);

    /* A 3-byte character straddling the cut is dropped whole, not split. */
    memset(msg, 'b', big);
    memcpy(msg + 65534, "\xe2\x82\xac", 3); /* bytes 65534..65536 */
    log_msg(TERN_LOG_INFO, NULL, NULL, "%s", msg);
    doc = one_line(f);
    got = json_string_value(json_object_get(doc, "msg"));
    assert_int_equal(strspn(got, "b"), 65534);
    assert_string_equal(got + 65534, "...[truncated: message was 100000 bytes]");
    json_decref(doc);

    /* Exactly at the limit: nothing cut, no marker. */
    msg[65536] = '\0';
    memset(msg, 'c', 65536);
    log_msg(TERN_LOG_INFO, NULL, NULL, "%s", msg);
    doc = one_line(f);
    assert_int_equal(strlen(json_string_value(json_object_get(doc, "msg"))), 65536);
    json_decref(doc);
    free(msg);
}

static void test_level_parse(void **state)
{
    (void)state;
    assert_int_equal(log_level_parse("trace"), 10);
    assert_int_equal(log_level_parse("debug"), 20);
    assert_int_equal(log_level_parse("info"), 30);
    assert_int_equal(log_level_parse("WARN"), 40);
    assert_int_equal(log_level_parse("error"), 50);
    assert_int_equal(log_level_parse("fatal"), 60);
    assert_int_equal(log_level_parse("10"), 10);
    assert_int_equal(log_level_parse("40"), 40);
    assert_int_equal(log_level_parse("60"), 60);
    assert_int_equal(log_level_parse("warning"), -1);
    assert_int_equal(log_level_parse("35"), -1);
    assert_int_equal(log_level_parse("040"), -1);
    assert_int_equal(log_level_parse(""), -1);
    assert_int_equal(log_level_parse(NULL), -1);
}

/* Threads of the libuv pool log concurrently: every line must come out whole. */
#define THREADS    4
#define PER_THREAD 200

static void *log_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    char pad[6000];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < PER_THREAD; i++) {
        json_t *fields = json_pack("{s:i, s:i}", "thread", id, "seq", i);
        log_msg(TERN_LOG_INFO, "pool", fields, "%d/%d %s", id, i, pad + (i * 31) % 5000);
        json_decref(fields);
    }
    return NULL;
}

static void test_concurrent_lines_whole(void **state)
{
    fixture_t *f = *state;
    /* A blocking reader in this thread while the writers fill the pipe. */
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, log_thread, (void *)(intptr_t)i), 0);
    int flags = fcntl(f->rd, F_GETFL);
    fcntl(f->rd, F_SETFL, flags & ~O_NONBLOCK);

    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    int lines = 0, seen[THREADS] = {0};
    while (lines < THREADS * PER_THREAD) {
        if (len + 65536 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(f->rd, buf + len, cap - len);
        assert_true(n > 0);
        len += (size_t)n;
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', len - (size_t)(start - buf))) != NULL) {
            json_error_t jerr;
            json_t *doc = json_loadb(start, (size_t)(nl - start), JSON_REJECT_DUPLICATES, &jerr);
            if (doc == NULL)
                fail_msg("interleaved or broken line (%s)", jerr.text);
            int id = (int)json_integer_value(json_object_get(doc, "thread"));
            assert_in_range(id, 0, THREADS - 1);
            assert_int_equal(json_integer_value(json_object_get(doc, "seq")), seen[id]++);
            json_decref(doc);
            lines++;
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    fcntl(f->rd, F_SETFL, flags);
    assert_int_equal(len, 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_core_fields, setup),
        cmocka_unit_test_setup(test_component_and_order, setup),
        cmocka_unit_test_setup(test_level_filtering, setup),
        cmocka_unit_test_setup(test_fields_merged, setup),
        cmocka_unit_test_setup(test_core_fields_not_overridable, setup),
        cmocka_unit_test_setup(test_typed_fields_same_line, setup),
        cmocka_unit_test_setup(test_escaping, setup),
        cmocka_unit_test_setup(test_truncation, setup),
        cmocka_unit_test(test_level_parse),
        cmocka_unit_test_setup(test_concurrent_lines_whole, setup),
    };
    int failures = cmocka_run_group_tests_name("log", tests, group_setup, group_teardown);
    return failures == 0 ? 0 : 1;
}
