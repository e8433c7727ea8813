/*
 * test_lock_load.c -- a real ternd (API and a runner of one slot, on one loop) with a
 * hundred unfinished jobs holding the costliest lock within the limits: creates checked
 * against them keep the loop serving (GET /ping answers within a bound, a job of the
 * runner keeps its short lease, which a second runner would otherwise find expired and
 * re-queue), and the cap on the size of all locks refuses the lock
 * that would pass it, at create and at retry, storing nothing, until a locked job ends.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_calls.h"
#include "base/clock.h"
#include "world.h"

/* The costliest lock within the limits: 2482 instructions, every one of them alive at
 * every code point of a target of 'a's. */
#define WORST_LOCK  "(.?){1240}x"
#define WORST_SIZE  2482
#define N_LOCKERS   120 /* unfinished jobs holding it: 297840 instructions */
#define LOCK_CAP    300000
#define N_CREATES   12  /* creates of 1024-character targets checked against them */
#define PING_MAX_MS 200 /* the longest GET /ping allowed meanwhile */

static itest_world_t W;
/* A second runner, of another queue: it claims nothing here but re-queues the jobs of
 * a runner whose lease expired (r1's, when its loop is held past the lease). */
static itest_ternd_t watcher;
static http_sync_t http;
static char lockers[N_LOCKERS][40];

/* An hour from now: a job created so stays queued, its lock held. */
static unsigned long long later_ms(void)
{
    return (unsigned long long)clock_wall_ms() + 3600 * 1000;
}

static int group_setup(void **state)
{
    (void)state;
    /* One slot with a short lease: a loop held for 400 ms loses it. */
    static const char *const flags[] = {"--concurrency",  "1",   "--lease-ms", "400",
                                        "--heartbeat-ms", "100", NULL};
    itest_world_start(&W, "r1", itest_fmt("{\"max_lock_instructions\": %d}", LOCK_CAP), flags);
    http_sync_open(&http, W.base);
    static const char *const watcher_flags[] = {"--role",         "runner",     "--queues",
                                                "watch",          "--lease-ms", "400",
                                                "--heartbeat-ms", "100",        NULL};
    itest_ternd_start(&watcher, &W.redis, &W.dir, "r2", watcher_flags);
    itest_workflow_put_ok(&W.client, "{\"name\": \"ll-quick\", \"chain\": [{\"name\": \"n\", "
                                     "\"task\": \"core.noop\"}]}");
    itest_workflow_put_ok(&W.client, "{\"name\": \"ll-fail\", \"chain\": [{\"name\": \"f\", "
                                     "\"task\": \"core.fail\"}]}");
    itest_workflow_put_ok(&W.client,
                          itest_fmt("{\"name\": \"ll-steps\", \"chain\": ["
                                    "{\"name\": \"s1\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 400}},"
                                    "{\"name\": \"s2\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 400}},"
                                    "{\"name\": \"s3\", \"task\": \"itest.record\", \"args\": "
                                    "{\"file\": \"%s\", \"ms\": 400}}]}",
                                    W.side, W.side, W.side));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_sync_close(&http);
    itest_ternd_signal(&watcher, SIGTERM, 10000);
    itest_world_stop(&W, 10000);
    return 0;
}

static long long locks_size(void)
{
    return itest_redis_int(&W.redis, "GET tern:locks:size");
}

/* ---- the cap ------------------------------------------------------------------- */

static void test_cap_refuses_and_frees(void **state)
{
    (void)state;
    /* A failed job whose lock is dropped when it ends, to be retried at the cap. */
    char failed[40];
    itest_api_create_ok(&http, "{\"workflow\": \"ll-fail\", \"locks\": \"" WORST_LOCK "\"}",
                        failed);
    json_t *job = itest_wait_finished_ok(&W.client, failed, 10000);
    assert_string_equal(itest_execution(job), "failed");
    json_decref(job);
    assert_int_equal(locks_size(), 0);

    for (int i = 0; i < N_LOCKERS; i++)
        itest_api_create_ok(
            &http,
            itest_fmt("{\"workflow\": \"ll-quick\", \"exec_after\": %llu, \"params\": "
                      "{\"i\": %d}, \"locks\": \"" WORST_LOCK "\"}",
                      later_ms(), i),
            lockers[i]);
    assert_int_equal(locks_size(), (long long)N_LOCKERS * WORST_SIZE);

    /* One more would pass the cap: refused, naming it, and nothing is stored. */
    long long keys = itest_redis_int(&W.redis, "DBSIZE"),
              version = itest_redis_int(&W.redis, "GET tern:locks:version");
    http_sync_resp_t r;
    itest_api_call(&http, &r, "POST", "/jobs",
                   itest_fmt("{\"workflow\": \"ll-quick\", \"exec_after\": %llu, \"locks\": "
                             "\"" WORST_LOCK "\"}",
                             later_ms()));
    if (r.status != 503 || strcmp(itest_str_of(r.json, "code"), "ServiceUnavailable") != 0 ||
        strstr(itest_str_of(r.json, "message"), "max_lock_instructions") == NULL ||
        strstr(itest_str_of(r.json, "message"), itest_fmt("%d", LOCK_CAP)) == NULL)
        fail_msg("expected 503 naming max_lock_instructions and %d, got %ld: %s", LOCK_CAP,
                 r.status, r.body);
    http_sync_resp_dispose(&r);
    assert_int_equal(itest_redis_int(&W.redis, "DBSIZE"), keys);
    assert_int_equal(itest_redis_int(&W.redis, "GET tern:locks:version"), version);
    assert_int_equal(locks_size(), (long long)N_LOCKERS * WORST_SIZE);

    /* A retry would hold the failed job's lock again: refused as well, nothing changed. */
    json_t *before = itest_job_get(&W.client, failed);
    itest_api_call(&http, &r, "POST", itest_fmt("/jobs/%s/retry", failed), NULL);
    if (r.status != 503 || strstr(itest_str_of(r.json, "message"), "max_lock_instructions") == NULL)
        fail_msg("expected the retry refused with 503, got %ld: %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    json_t *after = itest_job_get(&W.client, failed);
    assert_string_equal(itest_execution(after), "failed");
    assert_int_equal(json_array_size(json_object_get(after, "history")),
                     json_array_size(json_object_get(before, "history")));
    json_decref(before);
    json_decref(after);
    assert_int_equal(itest_redis_int(&W.redis, "DBSIZE"), keys);

    /* A small lock still fits. */
    char small[40];
    itest_api_create_ok(&http,
                        itest_fmt("{\"workflow\": \"ll-quick\", \"exec_after\": %llu, \"locks\": "
                                  "\"^small$\"}",
                                  later_ms()),
                        small);
    itest_api_cancel_ok(&http, &W.client, small);
    assert_int_equal(locks_size(), (long long)N_LOCKERS * WORST_SIZE);

    /* A locked job ends: the retry fits again, and so does a new lock once it ended. */
    itest_api_cancel_ok(&http, &W.client, lockers[N_LOCKERS - 1]);
    assert_int_equal(locks_size(), (long long)(N_LOCKERS - 1) * WORST_SIZE);
    itest_api_call(&http, &r, "POST", itest_fmt("/jobs/%s/retry", failed), NULL);
    if (r.status != 200)
        fail_msg("retry refused (%ld): %s", r.status, r.body);
    http_sync_resp_dispose(&r);
    json_decref(itest_wait_event_nth(&W.client, failed, "finished", NULL, -1, 2, 10000));
    assert_int_equal(locks_size(), (long long)(N_LOCKERS - 1) * WORST_SIZE);
    itest_api_create_ok(&http,
                        itest_fmt("{\"workflow\": \"ll-quick\", \"exec_after\": %llu, \"params\": "
                                  "{\"i\": %d}, \"locks\": \"" WORST_LOCK "\"}",
                                  later_ms(), N_LOCKERS - 1),
                        lockers[N_LOCKERS - 1]);
    assert_int_equal(locks_size(), (long long)N_LOCKERS * WORST_SIZE);
}

/* ---- the loop keeps serving --------------------------------------------------- */

typedef struct creator {
    char base[64];
    int answered; /* creates answered 201 */
    long refused; /* the status of the first other answer, 0 if none */
    char why[256];
    int done; /* set last (atomically): the pings stop */
} creator_t;

/* Creates N_CREATES jobs of 1024-character targets, one after the other, on a
 * connection of its own: each is checked against every lock. */
static void *creator_main(void *arg)
{
    creator_t *c = arg;
    http_sync_t conn;
    http_sync_open(&conn, c->base);
    char target[1025];
    memset(target, 'a', 1024);
    target[1024] = '\0';
    for (int i = 0; i < N_CREATES; i++) {
        char num[16];
        int n = snprintf(num, sizeof num, "%d", i);
        memcpy(target, num, (size_t)n);
        char body[1200];
        snprintf(body, sizeof body,
                 "{\"workflow\": \"ll-quick\", \"target\": \"%s\", \"exec_after\": %llu}", target,
                 later_ms());
        http_sync_resp_t r;
        int rc = http_sync_do(&conn, "POST", "/jobs", body, strlen(body), NULL, &r);
        if (rc == 0 && r.status == 201) {
            c->answered++;
        } else {
            /* The first refusal ends the run (and its connection). */
            c->refused = rc == 0 ? r.status : -1;
            snprintf(c->why, sizeof c->why, "%s", rc == 0 ? r.body : r.error);
            http_sync_resp_dispose(&r);
            break;
        }
        http_sync_resp_dispose(&r);
    }
    http_sync_close(&conn);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_loop_serves_while_checking(void **state)
{
    (void)state;
    /* The runner's one slot runs a job of three 400 ms steps on a 400 ms lease. */
    char steps[40];
    itest_api_create_ok(&http, "{\"workflow\": \"ll-steps\"}", steps);
    json_decref(itest_wait_event(&W.client, steps, "running", NULL, 10000));

    creator_t c = {0};
    snprintf(c.base, sizeof c.base, "%s", W.base);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, creator_main, &c), 0);
    /* GET /ping on this connection while the creates are checked: each answer is
     * timed; the loop serves it between two slices of a check. */
    uint64_t t0 = clock_wall_ms(), worst = 0;
    int pings = 0;
    while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE) && clock_wall_ms() - t0 < 180000) {
        http_sync_resp_t r;
        uint64_t ms = itest_api_call(&http, &r, "GET", "/ping", NULL);
        assert_int_equal(r.status, 200);
        http_sync_resp_dispose(&r);
        worst = ms > worst ? ms : worst;
        pings++;
        itest_pause_ms(5);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    uint64_t took = clock_wall_ms() - t0;
    print_message("%d creates against %d locks of %d instructions in %llu ms; %d pings, the "
                  "longest %llu ms\n",
                  N_CREATES, N_LOCKERS, WORST_SIZE, (unsigned long long)took, pings,
                  (unsigned long long)worst);
    if (c.refused != 0)
        fail_msg("a create was refused (%ld): %s", c.refused, c.why);
    assert_int_equal(c.answered, N_CREATES);
    if (worst > PING_MAX_MS)
        fail_msg("GET /ping took %llu ms while creates were checked against locks",
                 (unsigned long long)worst);

    /* The runner's job kept its lease: each step ran once, never re-queued. */
    json_t *job = itest_wait_finished_ok(&W.client, steps, 60000);
    assert_string_equal(itest_execution(job), "succeeded");
    json_decref(job);
    json_t *events = itest_events(&W.client, steps);
    assert_int_equal(itest_count_events(events, "retried", NULL), 0);
    json_decref(events);
    assert_int_equal(itest_side_count(W.side, "start", steps), 3);
}

/* Every locked job ended: their locks are no longer counted. */
static void test_cap_drains(void **state)
{
    (void)state;
    for (int i = 0; i < N_LOCKERS; i++)
        itest_api_cancel_ok(&http, &W.client, lockers[i]);
    assert_int_equal(locks_size(), 0);
    assert_int_equal(itest_redis_int(&W.redis, "HLEN tern:locks:sizes"), 0);
}

/* ternd stops while creates wait for their checks: it exits at once and cleanly (the
 * harness reads its log for sanitizer reports), and each create got an answer. */
static void test_stop_while_checking(void **state)
{
    (void)state;
    for (int i = 0; i < 40; i++)
        itest_api_create_ok(
            &http,
            itest_fmt("{\"workflow\": \"ll-quick\", \"exec_after\": %llu, \"params\": "
                      "{\"i\": %d}, \"locks\": \"" WORST_LOCK "\"}",
                      later_ms(), i),
            lockers[i]);
    creator_t c[4];
    pthread_t th[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 4; i++) {
        snprintf(c[i].base, sizeof c[i].base, "%s", W.base);
        assert_int_equal(pthread_create(&th[i], NULL, creator_main, &c[i]), 0);
    }
    /* An idle keep-alive connection holds h2o's shutdown (a known limit): closed first. */
    http_sync_close(&http);
    itest_pause_ms(300); /* let the four queue their checks */
    uint64_t t0 = clock_wall_ms();
    assert_int_equal(itest_ternd_signal(&W.ternd, SIGTERM, 15000), 0);
    uint64_t took = clock_wall_ms() - t0;
    int created = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        created += c[i].answered;
        /* Each run ended on a refusal saying why, not on a lost answer. */
        if (c[i].refused != 503 || strstr(c[i].why, "stopping") == NULL)
            fail_msg("a create was answered %ld: %s", c[i].refused, c[i].why);
    }
    print_message("ternd stopped in %llu ms with creates checking; %d of %d created\n",
                  (unsigned long long)took, created, 4 * N_CREATES);
    assert_true(created < 4 * N_CREATES);
    http_sync_open(&http, W.base); /* for group_teardown */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_refuses_and_frees),
        cmocka_unit_test(test_loop_serves_while_checking),
        cmocka_unit_test(test_cap_drains),
        cmocka_unit_test(test_stop_while_checking),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
