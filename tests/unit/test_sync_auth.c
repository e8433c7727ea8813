/*
 * test_sync_auth.c -- who may write to a migration's target (tasks/dc/sync): a sender
 * without the migration's secret, or for another migration, or for an instance with no
 * open session, is refused (TransferRefused), logged with the peer and the migration,
 * and nothing is written; a peer that sends garbage is closed; more than 16
 * connections at once are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sync_lab.h"
#include "sync_wire.h"

static int setup(void **state)
{
    sync_lab_t *lab = calloc(1, sizeof *lab);
    sync_lab_open(lab, "sync_auth");
    sync_lab_disk(lab, 0, GIB);
    sync_lab_write(lab, 0, 0, 2 * MIB, 1);
    *state = lab;
    return 0;
}

static int teardown(void **state)
{
    sync_lab_close(*state);
    free(*state);
    return 0;
}

/* Nothing but what recv_open and target_create made: no disk, no manifest, vm.json as
 * it was. */
static void assert_nothing_written(const sync_lab_t *lab)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/disks", lab->dst);
    DIR *d = opendir(p);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
    snprintf(p, sizeof p, "%s/.migration/manifest", lab->dst);
    assert_int_equal(access(p, F_OK), -1);
    snprintf(p, sizeof p, "%s/vm.json", lab->dst);
    FILE *f = fopen(p, "r");
    char buf[512] = {0};
    assert_non_null(f);
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    assert_null(strstr(buf, "\"ram\""));
}

static void refused(sync_lab_t *lab, const char *why)
{
    sync_counters_t c;
    sync_pass_result_t r;
    char err[512];
    int rc = sync_send_pass(&lab->o, &c, NULL, &r, err, sizeof err);
    assert_int_equal(rc, -EACCES);
    if (strncmp(err, "TransferRefused: ", 17) || !strstr(err, why))
        fail_msg("expected TransferRefused naming \"%s\", got \"%s\"", why, err);
    assert_int_equal(r.blocks, 0);
    assert_nothing_written(lab);
}

static void test_wrong_secret_refused_nothing_written(void **state)
{
    sync_lab_t *lab = *state;
    lab->o.secret = "0000000000000000000000000000000000000000000000000000000000000000";
    refused(lab, "wrong proof");
    assert_int_equal(sync_listener_refusals(lab->l), 1);
    /* One line naming the peer and the migration. */
    assert_non_null(strstr(lab->log, "refused: peer 127.0.0.1:"));
    assert_non_null(strstr(lab->log, "migration " SYNC_LAB_MIGRATION));
    /* The right secret still works afterwards. */
    lab->o.secret = SYNC_LAB_SECRET;
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_int_equal(r.blocks, 2);
    sync_lab_assert_same(lab, 0);
}

static void test_other_migration_refused(void **state)
{
    sync_lab_t *lab = *state;
    lab->o.migration_uuid = "11111111-2222-4333-8444-555555555555";
    refused(lab, "session is for migration " SYNC_LAB_MIGRATION);
}

static void test_no_session_refused(void **state)
{
    sync_lab_t *lab = *state;
    char p[1024];
    snprintf(p, sizeof p, "%s/.migration/session.json", lab->dst);
    assert_int_equal(unlink(p), 0);
    refused(lab, "no migration session for vm " SYNC_LAB_VM);
}

static int connect_raw(const sync_lab_t *lab)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)sync_listener_port(lab->l))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 5};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    return fd;
}

/* A frame announcing 1 GiB, or an unknown type: the connection is closed, nothing is
 * allocated for it or written. */
static void test_garbage_closed(void **state)
{
    sync_lab_t *lab = *state;
    int fd = connect_raw(lab);
    sync_buf_t b = {0};
    uint32_t type;
    assert_int_equal(sync_frame_read(fd, &type, &b, 1024, NULL), 0);
    assert_int_equal(type, SYNC_HELLO);
    uint8_t hdr[8];
    sync_le32(hdr, SYNC_AUTH);
    sync_le32(hdr + 4, 1u << 30);
    assert_int_equal(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    int rc = sync_frame_read(fd, &type, &b, 1024, NULL);
    assert_true(rc == -ECONNRESET || (rc == 0 && type == SYNC_ERROR));
    close(fd);
    sync_buf_free(&b);
    assert_nothing_written(lab);
}

static void test_seventeenth_connection_refused(void **state)
{
    sync_lab_t *lab = *state;
    int fds[SYNC_LISTENER_MAX_CONNS];
    sync_buf_t b = {0};
    uint32_t type;
    for (int i = 0; i < SYNC_LISTENER_MAX_CONNS; i++) {
        fds[i] = connect_raw(lab);
        /* Each has its thread once its hello arrives. */
        assert_int_equal(sync_frame_read(fds[i], &type, &b, 1024, NULL), 0);
        assert_int_equal(type, SYNC_HELLO);
    }
    int extra = connect_raw(lab);
    assert_int_equal(sync_frame_read(extra, &type, &b, 1024, NULL), 0);
    assert_int_equal(type, SYNC_ERROR);
    assert_non_null(memmem(b.p, b.len, "busy", 4));
    close(extra);
    for (int i = 0; i < SYNC_LISTENER_MAX_CONNS; i++)
        close(fds[i]);
    sync_buf_free(&b);
    /* Their slots come back as their threads see the ends of their streams; a pass
     * succeeds within a bounded number of tries. */
    sync_counters_t c;
    sync_pass_result_t r;
    char err[512];
    int rc = -1;
    for (int tries = 0; tries < 100 && rc != 0; tries++) {
        rc = sync_send_pass(&lab->o, &c, NULL, &r, err, sizeof err);
        if (rc != 0) {
            assert_non_null(strstr(err, "busy"));
            struct timespec ts = {.tv_nsec = 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal(rc, 0);
    sync_lab_assert_same(lab, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wrong_secret_refused_nothing_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_migration_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_session_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seventeenth_connection_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
