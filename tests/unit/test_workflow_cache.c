/*
 * test_workflow_cache.c -- the cache of parsed workflow versions by uuid
 * (engine/model/workflow_cache.c) that a runner and job creates share: a version is
 * parsed once and found again by its uuid, whoever asks; an entry lives while it is
 * held and is kept idle up to the cache's bound, the one unused longest freed first;
 * a document that does not parse is refused with the parser's reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/workflow_cache.h"

#define UUID_A "6f1c2a3b-0000-4000-8000-00000000000a"
#define UUID_B "6f1c2a3b-0000-4000-8000-00000000000b"

/* The stored document of version `n` of workflow "w". */
static char *doc_of(int n)
{
    static char buf[8][160];
    char *b = buf[n % 8];
    snprintf(b, sizeof buf[0],
             "{\"name\": \"w\", \"version\": \"%d\", "
             "\"chain\": [{\"name\": \"a\", \"task\": \"core.noop\"}]}",
             n);
    return b;
}

/* The uuid of version `n`. */
static void uuid_of(int n, char out[40])
{
    snprintf(out, 40, "6f1c2a3b-0000-4000-8000-%012d", n);
}

static const workflow_cache_entry_t *load(workflow_cache_t *c, const char *uuid, const char *doc)
{
    char err[256] = "";
    const workflow_cache_entry_t *e =
        workflow_cache_load(c, uuid, uuid != NULL ? strlen(uuid) : 0, doc,
                            doc != NULL ? strlen(doc) : 0, err, sizeof err);
    if (e == NULL)
        fail_msg("load %s: %s", uuid != NULL ? uuid : "(no uuid)", err);
    return e;
}

static void test_load_then_hit(void **state)
{
    (void)state;
    workflow_cache_t *c = workflow_cache_new(0);
    assert_null(workflow_cache_find(c, UUID_A, strlen(UUID_A)));
    const workflow_cache_entry_t *e = load(c, UUID_A, doc_of(1));
    assert_string_equal(e->uuid, UUID_A);
    assert_string_equal(e->wf->name, "w");
    assert_string_equal(e->wf->version, "1");
    assert_string_equal(e->doc, doc_of(1));
    assert_int_equal(e->doc_len, strlen(doc_of(1)));
    assert_int_equal(workflow_cache_count(c), 1);
    assert_int_equal(workflow_cache_idle(c), 0);

    /* A hit: the same entry, and the document given is not parsed again (this one
     * would not parse). */
    assert_ptr_equal(workflow_cache_find(c, UUID_A, strlen(UUID_A)), e);
    assert_ptr_equal(load(c, UUID_A, "not json"), e);
    assert_ptr_equal(load(c, UUID_A, NULL), e);
    assert_int_equal(workflow_cache_count(c), 1);
    assert_int_equal(workflow_cache_parses(c), 1);

    /* A uuid need not be NUL-terminated: replies give its length. */
    char padded[] = UUID_A "-and-more";
    assert_ptr_equal(workflow_cache_find(c, padded, strlen(UUID_A)), e);
    assert_null(workflow_cache_find(c, padded, strlen(padded)));
    for (int i = 0; i < 5; i++)
        workflow_cache_put(c, e);
    workflow_cache_free(c);
}

static void test_refcounts(void **state)
{
    (void)state;
    workflow_cache_t *c = workflow_cache_new(4);
    const workflow_cache_entry_t *e1 = load(c, UUID_A, doc_of(1));
    const workflow_cache_entry_t *e2 = workflow_cache_find(c, UUID_A, strlen(UUID_A));
    assert_ptr_equal(e1, e2);
    workflow_cache_put(c, e1);
    assert_int_equal(workflow_cache_idle(c), 0); /* still held once */
    workflow_cache_put(c, e2);
    assert_int_equal(workflow_cache_idle(c), 1); /* nobody holds it: kept idle */
    assert_int_equal(workflow_cache_count(c), 1);
    const workflow_cache_entry_t *e3 = workflow_cache_find(c, UUID_A, strlen(UUID_A));
    assert_ptr_equal(e3, e1); /* found again, no longer idle */
    assert_int_equal(workflow_cache_idle(c), 0);
    workflow_cache_put(c, e3);
    workflow_cache_put(c, NULL); /* nothing */
    workflow_cache_free(c);      /* frees the idle entry (ASan: no leak) */
}

static void test_eviction_bound(void **state)
{
    (void)state;
    enum { IDLE_MAX = 3, N = 8 };
    workflow_cache_t *c = workflow_cache_new(IDLE_MAX);
    const workflow_cache_entry_t *held[N];
    char uuid[N][40];
    for (int i = 0; i < N; i++) {
        uuid_of(i, uuid[i]);
        held[i] = load(c, uuid[i], doc_of(i));
    }
    /* Held entries are never evicted, however many. */
    assert_int_equal(workflow_cache_count(c), N);
    assert_int_equal(workflow_cache_idle(c), 0);
    for (int i = 0; i < N; i++) {
        workflow_cache_put(c, held[i]);
        assert_true(workflow_cache_idle(c) <= IDLE_MAX);
    }
    /* The last IDLE_MAX given back are kept; the older ones were freed. */
    assert_int_equal(workflow_cache_count(c), IDLE_MAX);
    assert_int_equal(workflow_cache_idle(c), IDLE_MAX);
    for (int i = 0; i < N; i++) {
        const workflow_cache_entry_t *e = workflow_cache_find(c, uuid[i], strlen(uuid[i]));
        if (i < N - IDLE_MAX) {
            assert_null(e);
        } else {
            assert_non_null(e);
            char version[16];
            snprintf(version, sizeof version, "%d", i);
            assert_string_equal(e->wf->version, version);
            workflow_cache_put(c, e);
        }
    }
    /* Taking one back makes it the most recent: a new idle entry evicts another. */
    const workflow_cache_entry_t *oldest = workflow_cache_find(c, uuid[N - IDLE_MAX], 36);
    workflow_cache_put(c, oldest);
    workflow_cache_put(c, load(c, UUID_B, doc_of(99)));
    assert_int_equal(workflow_cache_count(c), IDLE_MAX);
    assert_null(workflow_cache_find(c, uuid[N - IDLE_MAX + 1], 36));
    const workflow_cache_entry_t *kept = workflow_cache_find(c, uuid[N - IDLE_MAX], 36);
    assert_non_null(kept);
    workflow_cache_put(c, kept);
    workflow_cache_free(c);
}

/* The use ternd makes of one cache: a create parses the version it names (from
 * job_create.lua's WF answer) and holds it while it is in flight; the runner, given
 * the same uuid with the document of a claim, gets that very entry, and after both are
 * done the next create finds it still. */
static void test_shared_by_runner_and_create(void **state)
{
    (void)state;
    workflow_cache_t *shared = workflow_cache_new(0);
    char claim_doc[160];
    snprintf(claim_doc, sizeof claim_doc, "%s", doc_of(7)); /* another buffer, same text */

    const workflow_cache_entry_t *create = load(shared, UUID_A, doc_of(7));
    const workflow_cache_entry_t *runner = load(shared, UUID_A, claim_doc);
    assert_ptr_equal(runner, create);
    assert_ptr_equal(runner->wf, create->wf);
    assert_int_equal(workflow_cache_count(shared), 1);
    assert_int_equal(workflow_cache_parses(shared), 1);

    workflow_cache_put(shared, create); /* the create answered */
    assert_int_equal(workflow_cache_idle(shared), 0);
    workflow_cache_put(shared, runner); /* the job finished */
    assert_int_equal(workflow_cache_idle(shared), 1);
    const workflow_cache_entry_t *next = workflow_cache_find(shared, UUID_A, strlen(UUID_A));
    assert_ptr_equal(next, create);
    workflow_cache_put(shared, next);

    /* Apart (tests make a runner and job operations each with their own), each cache
     * parses for itself. */
    workflow_cache_t *own = workflow_cache_new(0);
    const workflow_cache_entry_t *other = load(own, UUID_A, claim_doc);
    assert_ptr_not_equal(other, next);
    assert_string_equal(other->wf->version, "7");
    workflow_cache_put(own, other);
    workflow_cache_free(own);
    workflow_cache_free(shared);
}

static void test_refusals_and_no_uuid(void **state)
{
    (void)state;
    workflow_cache_t *c = workflow_cache_new(0);
    char err[256] = "";
    assert_null(workflow_cache_load(c, UUID_A, strlen(UUID_A), NULL, 0, err, sizeof err));
    assert_string_equal(err, "missing workflow document");
    err[0] = '\0';
    assert_null(
        workflow_cache_load(c, UUID_A, strlen(UUID_A), "{\"name\": 1}", 11, err, sizeof err));
    assert_true(strlen(err) > 0);
    assert_int_equal(workflow_cache_count(c), 0);

    /* A job that names no version: its own entry, never found by others, freed when it
     * is given back (ASan: no leak). */
    const workflow_cache_entry_t *mine = load(c, NULL, doc_of(3));
    const workflow_cache_entry_t *theirs = load(c, NULL, doc_of(3));
    assert_ptr_not_equal(mine, theirs);
    assert_string_equal(mine->uuid, "");
    assert_int_equal(workflow_cache_count(c), 0);
    assert_int_equal(workflow_cache_parses(c), 3); /* the one refused, and these two */
    workflow_cache_put(c, mine);
    workflow_cache_put(c, theirs);
    assert_int_equal(workflow_cache_idle(c), 0);
    workflow_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_then_hit),
        cmocka_unit_test(test_refcounts),
        cmocka_unit_test(test_eviction_bound),
        cmocka_unit_test(test_shared_by_runner_and_create),
        cmocka_unit_test(test_refusals_and_no_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
