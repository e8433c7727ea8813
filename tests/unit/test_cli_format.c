/*
 * test_cli_format.c -- the pure parts of the tern CLI: -p KEY=VALUE into nested JSON,
 * human units, durations and ETAs, ISO times, the progress line at given widths,
 * table output with -o/-H/-j, and terminal capabilities.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "params.h"
#include "term.h"
#include "units.h"
#include "watch_view.h"

/* ---- helpers ------------------------------------------------------------------- */

/* Applies each assignment to a fresh object and returns its compact, sorted JSON
 * (static buffer), or the error message of the first refusal prefixed by "ERR ". */
static const char *params_of(const char *const *assignments)
{
    static char out[1024];
    json_t *p = json_object();
    char err[256];
    for (size_t i = 0; assignments[i] != NULL; i++) {
        if (params_set(p, assignments[i], err, sizeof err) != 0) {
            snprintf(out, sizeof out, "ERR %s", err);
            json_decref(p);
            return out;
        }
    }
    char *s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(out, sizeof out, "%s", s);
    free(s);
    json_decref(p);
    return out;
}

#define PARAMS(...) params_of((const char *const[]){__VA_ARGS__, NULL})

/* Runs `fn` writing to a memory stream and returns what it wrote (caller frees). */
typedef void (*write_fn)(FILE *out, void *data);

static char *capture(write_fn fn, void *data)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(f, data);
    fclose(f);
    return buf;
}

/* ---- -p KEY=VALUE -------------------------------------------------------------- */

static void test_params_json_values(void **state)
{
    (void)state;
    assert_string_equal(PARAMS("size=42"), "{\"size\":42}");
    assert_string_equal(PARAMS("force=true"), "{\"force\":true}");
    assert_string_equal(PARAMS("x=null"), "{\"x\":null}");
    assert_string_equal(PARAMS("ratio=0.5"), "{\"ratio\":0.5}");
    assert_string_equal(PARAMS("disk={\"a\":1}"), "{\"disk\":{\"a\":1}}");
    assert_string_equal(PARAMS("ids=[1,2]"), "{\"ids\":[1,2]}");
    /* Not JSON: a string, as typed. */
    assert_string_equal(PARAMS("name=db1"), "{\"name\":\"db1\"}");
    assert_string_equal(PARAMS("id=007"), "{\"id\":\"007\"}");
    assert_string_equal(PARAMS("quoted=\"007\""), "{\"quoted\":\"007\"}");
    assert_string_equal(PARAMS("empty="), "{\"empty\":\"\"}");
    assert_string_equal(PARAMS("eq=a=b"), "{\"eq\":\"a=b\"}");
    assert_string_equal(PARAMS("half={\"a\":"), "{\"half\":\"{\\\"a\\\":\"}");
}

static void test_params_dotted_keys(void **state)
{
    (void)state;
    assert_string_equal(PARAMS("disk.size=10"), "{\"disk\":{\"size\":10}}");
    assert_string_equal(PARAMS("disk.size=10", "disk.id=2", "vm=x"),
                        "{\"disk\":{\"id\":2,\"size\":10},\"vm\":\"x\"}");
    assert_string_equal(PARAMS("a.b.c=true"), "{\"a\":{\"b\":{\"c\":true}}}");
    /* A literal dot. */
    assert_string_equal(PARAMS("host\\.name=n1"), "{\"host.name\":\"n1\"}");
    /* A later value replaces an earlier one; an object can be extended. */
    assert_string_equal(PARAMS("a=1", "a=2"), "{\"a\":2}");
    assert_string_equal(PARAMS("d={\"x\":1}", "d.y=2"), "{\"d\":{\"x\":1,\"y\":2}}");
}

static void test_params_refusals(void **state)
{
    (void)state;
    assert_string_equal(PARAMS("novalue"), "ERR -p \"novalue\": expected KEY=VALUE");
    assert_string_equal(PARAMS("=1"), "ERR -p \"=1\": empty key or key segment");
    assert_string_equal(PARAMS("a..b=1"), "ERR -p \"a..b=1\": empty key or key segment");
    assert_string_equal(PARAMS("a.=1"), "ERR -p \"a.=1\": empty key or key segment");
    assert_string_equal(PARAMS("disk=10", "disk.size=2"),
                        "ERR -p \"disk.size=2\": disk is 10, not an object");
    assert_string_equal(PARAMS("a.b=1", "a.b.c=2"), "ERR -p \"a.b.c=2\": a.b is 1, not an object");
}

static void test_params_file_and_merge(void **state)
{
    (void)state;
    char path[] = "/tmp/tern-cli-params.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"disk\": {\"size\": 5, \"id\": 1}, \"vm\": \"a\"}";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char err[256];
    json_t *file = params_load_file(path, err, sizeof err);
    assert_non_null(file);
    json_t *p = json_object();
    assert_int_equal(params_set(p, "disk.size=10", err, sizeof err), 0);
    params_merge(file, p);
    char *s = json_dumps(file, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"disk\":{\"id\":1,\"size\":10},\"vm\":\"a\"}");
    free(s);
    json_decref(p);
    json_decref(file);

    /* Not an object, not JSON, missing. */
    FILE *f = fopen(path, "w");
    fputs("[1, 2]", f);
    fclose(f);
    assert_null(params_load_file(path, err, sizeof err));
    assert_non_null(strstr(err, "expected a JSON object"));
    f = fopen(path, "w");
    fputs("{\"a\": 1,\n \"a\": 2}", f);
    fclose(f);
    assert_null(params_load_file(path, err, sizeof err));
    assert_non_null(strstr(err, "line 2"));
    assert_non_null(strstr(err, "duplicate"));
    unlink(path);
    assert_null(params_load_file(path, err, sizeof err));
    assert_non_null(strstr(err, "No such file"));
}

/* ---- units --------------------------------------------------------------------- */

static void test_units_bytes(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(units_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(units_bytes(999, b, sizeof b), "999 B");
    assert_string_equal(units_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(units_bytes(1024, b, sizeof b), "1.00 KiB");
    assert_string_equal(units_bytes(1536, b, sizeof b), "1.50 KiB");
    assert_string_equal(units_bytes(45.3 * 1048576, b, sizeof b), "45.3 MiB");
    assert_string_equal(units_bytes(512.0 * 1048576, b, sizeof b), "512 MiB");
    /* Never "1024 KiB": the next unit instead. */
    assert_string_equal(units_bytes(1048575, b, sizeof b), "1.00 MiB");
    assert_string_equal(units_bytes(1.21 * 1073741824.0, b, sizeof b), "1.21 GiB");
    assert_string_equal(units_bytes(3.0 * 1099511627776.0, b, sizeof b), "3.00 TiB");
    assert_string_equal(units_bytes(-1, b, sizeof b), "?");
    assert_string_equal(units_bytes(NAN, b, sizeof b), "?");
    assert_string_equal(units_rate(22943, b, sizeof b), "22.4 KiB/s");
    assert_string_equal(units_rate(0, b, sizeof b), "0 B/s");
}

static void test_units_durations(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(units_duration_ms(0, b, sizeof b), "0ms");
    assert_string_equal(units_duration_ms(812, b, sizeof b), "812ms");
    assert_string_equal(units_duration_ms(1000, b, sizeof b), "1.0s");
    assert_string_equal(units_duration_ms(1234, b, sizeof b), "1.2s");
    assert_string_equal(units_duration_ms(9999, b, sizeof b), "9.9s");
    assert_string_equal(units_duration_ms(19999, b, sizeof b), "19s");
    /* RFD 34's examples. */
    assert_string_equal(units_duration_ms(198000, b, sizeof b), "3m18s");
    assert_string_equal(units_duration_ms(30000, b, sizeof b), "30s");
    assert_string_equal(units_duration_ms(79000, b, sizeof b), "1m19s");
    assert_string_equal(units_duration_ms(6727000, b, sizeof b), "1h52m07s");
    assert_string_equal(units_duration_ms(60000, b, sizeof b), "1m00s");
    assert_string_equal(units_duration_ms(90061000, b, sizeof b), "25h01m01s");
}

static void test_units_eta(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(units_eta_s(0, b, sizeof b), "0s");
    assert_string_equal(units_eta_s(0.4, b, sizeof b), "0s");
    assert_string_equal(units_eta_s(44.6, b, sizeof b), "45s");
    assert_string_equal(units_eta_s(80, b, sizeof b), "1m20s");
    assert_string_equal(units_eta_s(300, b, sizeof b), "5m00s");
    assert_string_equal(units_eta_s(5580, b, sizeof b), "1h33m");
    assert_string_equal(units_eta_s(183600, b, sizeof b), "2d03h");
    assert_string_equal(units_eta_s(-1, b, sizeof b), "?");
    assert_string_equal(units_eta_s(NAN, b, sizeof b), "?");
    assert_string_equal(units_eta_s(INFINITY, b, sizeof b), "?");
}

static void test_units_times(void **state)
{
    (void)state;
    uint64_t ms = 0;
    assert_true(units_parse_iso("2026-11-21T04:47:28Z", &ms));
    assert_int_equal(ms, 1795236448000ull);
    assert_true(units_parse_iso("2026-11-21T04:47:28.512Z", &ms));
    assert_int_equal(ms, 1795236448512ull);
    assert_true(units_parse_iso("2026-11-21T05:47:28.5+01:00", &ms));
    assert_int_equal(ms, 1795236448500ull);
    assert_true(units_parse_iso("2026-11-21 04:47:28", &ms)); /* no zone: UTC */
    assert_int_equal(ms, 1795236448000ull);
    assert_false(units_parse_iso("2026-02-31T00:00:00Z", &ms));
    assert_false(units_parse_iso("2026-11-21", &ms));
    assert_false(units_parse_iso("2026-11-21T04:47:28Zjunk", &ms));
    assert_false(units_parse_iso("tomorrow", &ms));
    assert_true(units_parse_relative("+30s", &ms));
    assert_int_equal(ms, 30000);
    assert_true(units_parse_relative("+10m", &ms));
    assert_int_equal(ms, 600000);
    assert_true(units_parse_relative("+2h", &ms));
    assert_int_equal(ms, 7200000);
    assert_true(units_parse_relative("+1d", &ms));
    assert_int_equal(ms, 86400000);
    assert_false(units_parse_relative("10m", &ms));
    assert_false(units_parse_relative("+0s", &ms));
    assert_false(units_parse_relative("+5y", &ms));
    assert_false(units_parse_relative("+", &ms));
}

/* ---- the progress line ----------------------------------------------------------- */

static json_t *progress(void)
{
    return json_pack("{s:i, s:I, s:I, s:f, s:i}", "percent", 39, "bytes",
                     (json_int_t)(1.21 * 1073741824.0), "total_bytes", (json_int_t)3221225472LL,
                     "rate", 45.3 * 1048576, "eta_s", 41);
}

static void test_progress_line_widths(void **state)
{
    (void)state;
    json_t *p = progress();
    char line[1024];
    /* Wide: everything, the bar capped at 30 columns. */
    watch_progress_line(line, sizeof line, 120, "sync", p, true);
    assert_string_equal(line,
                        "\u2610 sync  39% [===========>                  ]  1.21 GiB/3.00 GiB  "
                        "45.3 MiB/s  ETA 41s");
    /* 80 columns: the bar shrinks to what is left. */
    watch_progress_line(line, sizeof line, 80, "sync", p, true);
    assert_string_equal(line, "\u2610 sync  39% [==========>               ]  1.21 GiB/3.00 GiB  "
                              "45.3 MiB/s  ETA 41s");
    assert_int_equal(output_display_width(line), 80);
    /* 50: the rate goes, then the bytes, to keep a bar of 10 or more. */
    watch_progress_line(line, sizeof line, 50, "sync", p, true);
    assert_string_equal(line, "\u2610 sync  39% [==========>                ]  ETA 41s");
    assert_int_equal(output_display_width(line), 50);
    /* 30: no room for a bar; the text that fits. */
    watch_progress_line(line, sizeof line, 30, "sync", p, true);
    assert_string_equal(line, "\u2610 sync  39%  ETA 41s");
    /* 12: the percent alone. */
    watch_progress_line(line, sizeof line, 12, "sync", p, true);
    assert_string_equal(line, "\u2610 sync  39%");
    /* 8: the name is shortened. */
    watch_progress_line(line, sizeof line, 8, "synchronize", p, true);
    assert_string_equal(line, "\u2610 synch\u2026");
    /* Every width from 10 to 160 fits. */
    for (int w = 10; w <= 160; w++) {
        watch_progress_line(line, sizeof line, w, "synchronizing filesystems", p, true);
        if (output_display_width(line) > (size_t)w)
            fail_msg("width %d: \"%s\" is %zu columns", w, line, output_display_width(line));
    }
    json_decref(p);
}

static void test_progress_line_partial_reports(void **state)
{
    (void)state;
    char line[1024];
    /* Percent from bytes and total; ETA from the rate. */
    json_t *p = json_pack("{s:I, s:I, s:I}", "bytes", (json_int_t)512, "total_bytes",
                          (json_int_t)2048, "rate", (json_int_t)128);
    assert_true(fabs(watch_progress_percent(p) - 25.0) < 1e-9);
    watch_progress_line(line, sizeof line, 200, "copy", p, false);
    assert_string_equal(line, "\u2610 copy  25%  512 B/2.00 KiB  128 B/s  ETA 12s");
    json_decref(p);
    /* Bytes only: no percent, no bar. */
    p = json_pack("{s:I, s:s}", "bytes", (json_int_t)1048576, "message", "scanning");
    assert_true(watch_progress_percent(p) < 0);
    watch_progress_line(line, sizeof line, 80, "scan", p, true);
    assert_string_equal(line, "\u2610 scan  1.00 MiB  scanning");
    json_decref(p);
    /* Done: a full bar and no ETA. */
    p = json_pack("{s:i, s:i}", "percent", 100, "eta_s", 0);
    watch_progress_line(line, sizeof line, 30, "x", p, true);
    assert_string_equal(line, "\u2610 x 100% [===================]");
    json_decref(p);
    /* A message with a newline or an escape cannot break the line. */
    p = json_pack("{s:i, s:s}", "percent", 5, "message", "a\nb\033[2Jc");
    watch_progress_line(line, sizeof line, 200, "x", p, false);
    assert_null(strchr(line, '\n'));
    assert_null(strchr(line, '\033'));
    json_decref(p);
    /* Nothing at all. */
    watch_progress_line(line, sizeof line, 80, "idle", NULL, true);
    assert_string_equal(line, "\u2610 idle");
}

/* ---- tables ---------------------------------------------------------------------- */

typedef struct table_case {
    output_opts_t opts;
    const json_t *rows;
} table_case_t;

static void cell_len(const json_t *row, char *buf, size_t n)
{
    snprintf(buf, n, "%zu", json_array_size(json_object_get(row, "chain")));
}

static const output_column_t cols[] = {
    {"UUID", "uuid", NULL},
    {"NAME", "name", NULL},
    {"STEPS", NULL, cell_len},
    {NULL, NULL, NULL},
};

static void write_table(FILE *out, void *data)
{
    table_case_t *c = data;
    output_table(out, &c->opts, c->rows, cols, NULL);
}

static void test_output_tables(void **state)
{
    (void)state;
    json_t *rows = json_loads("[{\"uuid\": \"u-1\", \"name\": \"hello\", \"chain\": [1,2,3],"
                              "  \"params\": {\"vm\": {\"id\": 7}}, \"tags\": [\"a\", \"b\"]},"
                              " {\"uuid\": \"u-22\", \"name\": \"h\u00e9\", \"chain\": [],"
                              "  \"params\": null, \"tags\": []}]",
                              0, NULL);
    assert_non_null(rows);
    table_case_t c = {.rows = rows};
    char *s = capture(write_table, &c);
    assert_string_equal(s, "UUID  NAME   STEPS\n"
                           "u-1   hello  3\n"
                           "u-22  h\u00e9     0\n");
    free(s);
    c.opts.no_header = true;
    c.opts.columns = "name, params.vm.id,tags,steps";
    s = capture(write_table, &c);
    assert_string_equal(s, "hello  7  a,b  3\n"
                           "h\u00e9     -  -    0\n");
    free(s);
    c.opts.no_header = false;
    c.opts.columns = "uuid,params.vm.id";
    c.opts.json = true;
    s = capture(write_table, &c);
    json_t *back = json_loads(s, 0, NULL);
    assert_non_null(back);
    assert_string_equal(json_string_value(json_object_get(json_array_get(back, 1), "uuid")),
                        "u-22");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(back, 0), "params.vm.id")),
                     7);
    assert_true(json_is_null(json_object_get(json_array_get(back, 1), "params.vm.id")));
    json_decref(back);
    free(s);
    /* -j alone: the rows as they are. */
    c.opts.columns = NULL;
    s = capture(write_table, &c);
    back = json_loads(s, 0, NULL);
    assert_true(json_equal(back, rows));
    json_decref(back);
    free(s);
    json_decref(rows);
}

static void test_output_cells(void **state)
{
    (void)state;
    char b[64];
    json_t *v = json_loads("{\"a\": [{\"b\": \"x\"}], \"s\": \"l1\\nl2\\u001b[31m\", \"r\": 0.5,"
                           " \"o\": {\"k\": 1}}",
                           0, NULL);
    assert_string_equal(json_string_value(output_path_get(v, "a.0.b")), "x");
    assert_null(output_path_get(v, "a.1.b"));
    assert_null(output_path_get(v, "a.b"));
    output_cell_text(json_object_get(v, "s"), b, sizeof b);
    assert_string_equal(b, "l1 l2 [31m");
    output_cell_text(json_object_get(v, "r"), b, sizeof b);
    assert_string_equal(b, "0.5");
    output_cell_text(json_object_get(v, "o"), b, sizeof b);
    assert_string_equal(b, "{\"k\":1}");
    output_cell_text(json_object_get(v, "a"), b, sizeof b);
    assert_string_equal(b, "[{\"b\":\"x\"}]");
    output_cell_text(NULL, b, sizeof b);
    assert_string_equal(b, "-");
    json_decref(v);
    assert_int_equal(output_display_width("\u2713 ok"), 4);
}

/* ---- terminal ---------------------------------------------------------------------- */

static void test_term_caps(void **state)
{
    (void)state;
    term_caps_t t = term_caps_from(true, "xterm-256color", NULL, 120, NULL);
    assert_true(t.tty && t.ansi && t.color);
    assert_int_equal(t.width, 120);
    t = term_caps_from(true, "xterm", "1", 0, "90");
    assert_true(t.ansi);
    assert_false(t.color); /* NO_COLOR */
    assert_int_equal(t.width, 90);
    t = term_caps_from(true, "xterm", "", 0, NULL);
    assert_true(t.color); /* an empty NO_COLOR does not count */
    assert_int_equal(t.width, 80);
    t = term_caps_from(true, "dumb", NULL, 100, NULL);
    assert_true(t.tty);
    assert_false(t.ansi || t.color);
    t = term_caps_from(true, NULL, NULL, 100, NULL);
    assert_false(t.ansi || t.color);
    t = term_caps_from(false, "xterm", NULL, 0, NULL);
    assert_false(t.tty || t.ansi || t.color);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_json_values),
        cmocka_unit_test(test_params_dotted_keys),
        cmocka_unit_test(test_params_refusals),
        cmocka_unit_test(test_params_file_and_merge),
        cmocka_unit_test(test_units_bytes),
        cmocka_unit_test(test_units_durations),
        cmocka_unit_test(test_units_eta),
        cmocka_unit_test(test_units_times),
        cmocka_unit_test(test_progress_line_widths),
        cmocka_unit_test(test_progress_line_partial_reports),
        cmocka_unit_test(test_output_tables),
        cmocka_unit_test(test_output_cells),
        cmocka_unit_test(test_term_caps),
    };
    return cmocka_run_group_tests_name("cli_format", tests, NULL, NULL) == 0 ? 0 : 1;
}
