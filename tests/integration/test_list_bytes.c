/*
 * test_list_bytes.c -- GET /jobs pages are bounded in bytes as well as in count: with a
 * small bound (list_max_bytes) and jobs with big params, every page stays under the
 * bound (but a page of one job bigger than it), and following x-tern-next-marker lists
 * every job exactly once, newest first, whatever the page size.
 *
 * One ternd (runner and API) against a private redis-server; the jobs belong to a queue
 * no runner serves, so they stay as they are while being listed.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/iso8601.h"
#include "http_sync.h"
#include "world.h"

#define BOUND     65536 /* list_max_bytes */
#define JOBS      60
#define PARAM_LEN 7000  /* bytes of each job's "blob" param: about 9 jobs a page */
#define BIG_LEN   90000 /* one job bigger than the bound on its own */

static itest_world_t W;
static char uuids[JOBS + 1][40]; /* in creation order; the last one is the big job */

static int group_setup(void **state)
{
    (void)state;
    itest_world_start(&W, "lister", "{\"list_max_bytes\": 65536}", NULL);
    itest_workflow_put_ok(&W.client, "{\"name\": \"listed\", \"queue\": \"nobody-serves\","
                                     " \"chain\": [{\"name\": \"n\", \"task\": \"core.noop\"}]}");
    char *blob = malloc(BIG_LEN + 1);
    for (size_t i = 0; i <= JOBS; i++) {
        size_t len = i == JOBS / 2 ? BIG_LEN : PARAM_LEN;
        memset(blob, 'a' + (int)(i % 26), len);
        blob[len] = '\0';
        char *params = xasprintf("{\"n\": %zu, \"blob\": \"%s\"}", i, blob);
        itest_job_create_ok(&W.client, "listed", params, uuids[i]);
        free(params);
    }
    free(blob);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    itest_world_stop(&W, 15000);
    return 0;
}

/* Lists every job with `limit` per page, following the marker (or, by_offset, asking
 * for ?offset= the jobs listed so far, as node-workflow's clients page); checks each
 * page's size and that the pages hold every job exactly once. Returns the number of
 * pages. */
static int list_all(unsigned limit, bool by_offset)
{
    http_sync_t h;
    http_sync_open(&h, W.base);
    char marker[128] = "";
    int seen[JOBS + 1] = {0};
    size_t listed = 0;
    uint64_t last_created = UINT64_MAX;
    int pages = 0;
    for (; pages < 2 * (JOBS + 1); pages++) {
        char path[256];
        if (by_offset)
            snprintf(path, sizeof path, "/jobs?limit=%u&offset=%zu", limit, listed);
        else
            snprintf(path, sizeof path, "/jobs?limit=%u%s%s", limit, marker[0] ? "&marker=" : "",
                     marker);
        http_sync_resp_t r;
        http_sync_do(&h, "GET", path, NULL, 0, NULL, &r);
        if (r.status != 200 || !json_is_array(r.json))
            fail_msg("GET %s answered %ld: %s", path, r.status, r.body ? r.body : r.error);
        size_t n = json_array_size(r.json);
        print_message("limit %u, page %d: %zu jobs, %zu bytes\n", limit, pages, n, r.body_len);
        /* Under the bound, but for a page of the one job bigger than it. */
        if (r.body_len > BOUND) {
            assert_int_equal(n, 1);
            assert_string_equal(
                json_string_value(json_object_get(json_array_get(r.json, 0), "uuid")),
                uuids[JOBS / 2]);
        }
        assert_true(n >= 1 || pages == 0);
        assert_true(n <= limit);
        for (size_t i = 0; i < n; i++) {
            const char *u = json_string_value(json_object_get(json_array_get(r.json, i), "uuid"));
            assert_non_null(u);
            size_t k = 0;
            while (k <= JOBS && strcmp(uuids[k], u) != 0)
                k++;
            if (k > JOBS)
                fail_msg("page %d lists a job that was not created: %s", pages, u);
            /* Newest first by creation time (in ms), across pages too. */
            uint64_t created = 0;
            const char *iso =
                json_string_value(json_object_get(json_array_get(r.json, i), "created_at"));
            assert_int_equal(iso8601_parse_ms(iso != NULL ? iso : "", &created), 0);
            assert_true(created <= last_created);
            last_created = created;
            seen[k]++;
            listed++;
        }
        char next[128];
        bool more = http_sync_header(&r, "x-tern-next-marker", next, sizeof next) != NULL;
        http_sync_resp_dispose(&r);
        if (!more) {
            pages++;
            break;
        }
        snprintf(marker, sizeof marker, "%s", next);
    }
    http_sync_close(&h);
    for (size_t k = 0; k <= JOBS; k++)
        if (seen[k] != 1)
            fail_msg("job %zu (%s) listed %d times", k, uuids[k], seen[k]);
    assert_int_equal(listed, JOBS + 1);
    return pages;
}

static void test_pages_bounded_in_bytes_list_every_job_once(void **state)
{
    (void)state;
    /* The count allows every job on one page; the size does not. */
    int pages = list_all(1000, false);
    assert_true(pages >= (JOBS * PARAM_LEN) / BOUND);
    /* A count below what the size allows still bounds the page, and the union holds. */
    list_all(4, false);
    list_all(13, false);
    /* Paging by offset goes on from the count of jobs received. */
    list_all(1000, true);

    /* A params filter still picks its job out of pages bounded in bytes. */
    http_sync_t h;
    http_sync_open(&h, W.base);
    http_sync_resp_t r;
    http_sync_do(&h, "GET", "/jobs?limit=1000&n=7", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(r.json), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r.json, 0), "uuid")),
                        uuids[7]);
    http_sync_resp_dispose(&r);
    http_sync_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_bounded_in_bytes_list_every_job_once),
    };
    return cmocka_run_group_tests_name("list_bytes", tests, group_setup, group_teardown);
}
