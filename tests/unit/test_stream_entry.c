/*
 * test_stream_entry.c -- the events of one event-stream entry (stream_entry.h): a field
 * "e" is one event, a field "a" an array of events written together; readers get every
 * event once, in order, and skip what is not an event.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "events/stream_entry.h"

/* An entry's [field, value, ...] array as Redis sends it, parsed by hiredis's reader
 * (caller frees with freeReplyObject). `pairs` is NULL-terminated. */
static redisReply *entry_fields(const char *const *pairs)
{
    char buf[4096];
    size_t n = 0, count = 0;
    while (pairs[count] != NULL)
        count++;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "*%zu\r\n", count);
    for (size_t i = 0; i < count; i++)
        n +=
            (size_t)snprintf(buf + n, sizeof buf - n, "$%zu\r\n%s\r\n", strlen(pairs[i]), pairs[i]);
    redisReader *r = redisReaderCreate();
    assert_int_equal(redisReaderFeed(r, buf, n), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    redisReaderFree(r);
    assert_non_null(reply);
    return reply;
}

typedef struct seen {
    char types[16][32];
    size_t n;
    size_t stop_after; /* 0: never stop */
} seen_t;

static bool collect(void *data, const json_t *ev)
{
    seen_t *s = data;
    const char *t = json_string_value(json_object_get(ev, "type"));
    snprintf(s->types[s->n], sizeof s->types[0], "%s", t != NULL ? t : "?");
    s->n++;
    return s->stop_after == 0 || s->n < s->stop_after;
}

static void test_single_and_array_fields_in_order(void **state)
{
    (void)state;
    const char *const pairs[] = {"e",
                                 "{\"type\": \"created\"}",
                                 "a",
                                 "[{\"type\": \"running\"}, {\"type\": \"step\"}, "
                                 "{\"type\": \"finished\"}]",
                                 "e",
                                 "{\"type\": \"info\"}",
                                 NULL};
    redisReply *f = entry_fields(pairs);
    seen_t s = {0};
    assert_true(stream_entry_each(f, collect, &s));
    assert_int_equal(s.n, 5);
    const char *want[] = {"created", "running", "step", "finished", "info"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(s.types[i], want[i]);
    freeReplyObject(f);
}

static void test_stop_inside_an_array(void **state)
{
    (void)state;
    const char *const pairs[] = {"a", "[{\"type\": \"x\"}, {\"type\": \"y\"}, {\"type\": \"z\"}]",
                                 "e", "{\"type\": \"after\"}", NULL};
    redisReply *f = entry_fields(pairs);
    seen_t s = {.stop_after = 2};
    assert_false(stream_entry_each(f, collect, &s));
    assert_int_equal(s.n, 2);
    assert_string_equal(s.types[1], "y");
    freeReplyObject(f);
}

/* Other fields, values that are not JSON, and array members that are not objects are
 * skipped; the events around them still come. */
static void test_what_is_not_an_event_is_skipped(void **state)
{
    (void)state;
    const char *const pairs[] = {"other", "{\"type\": \"no\"}",
                                 "e",     "not json",
                                 "e",     "[{\"type\": \"array in e\"}]",
                                 "a",     "{\"type\": \"object in a\"}",
                                 "a",     "[1, \"s\", {\"type\": \"kept\"}, null]",
                                 NULL};
    redisReply *f = entry_fields(pairs);
    seen_t s = {0};
    assert_true(stream_entry_each(f, collect, &s));
    assert_int_equal(s.n, 1);
    assert_string_equal(s.types[0], "kept");
    freeReplyObject(f);
    assert_true(stream_entry_each(NULL, collect, &s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_and_array_fields_in_order),
        cmocka_unit_test(test_stop_inside_an_array),
        cmocka_unit_test(test_what_is_not_an_event_is_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
