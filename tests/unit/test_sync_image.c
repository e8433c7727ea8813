/*
 * test_sync_image.c -- an image pass of the block transfer (tasks/dc/sync/sync_image.h):
 * the source's image reaches the target's <root>/images/<uuid>.img whole, sparse and
 * equal; a second pass sends nothing; a stale copy on the target is replaced; a wrong
 * secret writes nothing; an image whose bytes do not match the digest announced is
 * discarded, leaving no file and no .part.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_auth.h"
#include "sync_digest.h"
#include "sync_lab.h"
#include "sync_wire.h"

#define IMAGE "f3000000-0000-4000-8000-0000000000aa"

static char target_image[1024];

static int setup(void **state)
{
    sync_lab_t *lab = calloc(1, sizeof *lab);
    sync_lab_open(lab, "sync_image");
    /* The source's copy of the image: 64 MiB, 3 MiB of data in two extents. */
    sync_lab_disk(lab, 0, 64 * MIB);
    sync_lab_write(lab, 0, 0, 2 * MIB, 7);
    sync_lab_write(lab, 0, 40 * MIB, MIB, 8);
    static char path[1024]; /* sync_lab_src_disk's buffer is reused by later calls */
    snprintf(path, sizeof path, "%s", sync_lab_src_disk(lab, 0));
    lab->o.image_path = path;
    lab->o.image_uuid = IMAGE;
    snprintf(target_image, sizeof target_image, "%s/images/%s.img", lab->dst_root, IMAGE);
    *state = lab;
    return 0;
}

static int teardown(void **state)
{
    sync_lab_close(*state);
    free(*state);
    return 0;
}

static void assert_same_image(const sync_lab_t *lab)
{
    char a[65], b[65];
    sync_lab_sha256(lab->o.image_path, a);
    sync_lab_sha256(target_image, b);
    assert_string_equal(a, b);
    struct stat sa, sb;
    assert_int_equal(stat(lab->o.image_path, &sa), 0);
    assert_int_equal(stat(target_image, &sb), 0);
    assert_int_equal(sa.st_size, sb.st_size);
    /* Sparse: the data, not the 64 MiB. */
    assert_true(sync_lab_allocated(target_image) <= sync_lab_allocated(lab->o.image_path) + MIB);
    char part[1100];
    snprintf(part, sizeof part, "%s.part", target_image);
    assert_int_equal(access(part, F_OK), -1);
}

static void test_image_sent_then_present(void **state)
{
    sync_lab_t *lab = *state;
    sync_pass_result_t r = sync_lab_pass(lab);
    assert_false(r.image_present);
    assert_int_equal(r.sent, 3 * MIB);
    assert_same_image(lab);
    struct stat before, after;
    assert_int_equal(stat(target_image, &before), 0);
    r = sync_lab_pass(lab);
    assert_true(r.image_present);
    assert_int_equal(r.sent, 0);
    assert_int_equal(stat(target_image, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
}

static void test_stale_copy_replaced(void **state)
{
    sync_lab_t *lab = *state;
    sync_pass_result_t r = sync_lab_pass(lab);
    /* The target's copy changed behind the transfer's back: the next pass resends. */
    int fd = open(target_image, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "XXXX", 4, 10), 4);
    close(fd);
    r = sync_lab_pass(lab);
    assert_false(r.image_present);
    assert_same_image(lab);
}

static void test_wrong_secret_writes_nothing(void **state)
{
    sync_lab_t *lab = *state;
    lab->o.secret = "0000000000000000000000000000000000000000000000000000000000000000";
    sync_pass_result_t r;
    char err[512];
    int rc = sync_send_pass(&lab->o, NULL, NULL, &r, err, sizeof err);
    assert_int_equal(rc, -EACCES);
    assert_non_null(strstr(err, "TransferRefused"));
    assert_int_equal(access(target_image, F_OK), -1);
}

/* A raw connection to the listener; a read waits 5 s at most. */
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

/* A peer with the secret whose bytes do not match the digest it announced (as a source
 * whose file changed mid-send would): the target refuses the copy and keeps nothing. */
static void test_digest_mismatch_discarded(void **state)
{
    sync_lab_t *lab = *state;
    int fd = connect_raw(lab);
    sync_buf_t in = {0}, out = {0};
    uint32_t type;
    assert_int_equal(sync_frame_read(fd, &type, &in, 1024, NULL), 0);
    assert_int_equal(type, SYNC_HELLO);
    uint8_t mac[SYNC_HASH_LEN];
    assert_int_equal(sync_auth_mac(SYNC_LAB_SECRET, in.p, SYNC_LAB_MIGRATION, mac), 0);
    sync_buf_str(&out, SYNC_LAB_MIGRATION);
    sync_buf_str(&out, SYNC_LAB_VM);
    sync_buf_put(&out, mac, sizeof mac);
    assert_int_equal(sync_frame_write(fd, SYNC_AUTH, out.p, out.len, NULL), 0);
    assert_int_equal(sync_frame_read(fd, &type, &in, 1024, NULL), 0);
    assert_int_equal(type, SYNC_AUTH_OK);
    char digest[65], err[256];
    uint64_t size;
    assert_int_equal(sync_disk_digest(lab->o.image_path, MIB, digest, &size, err, sizeof err), 0);
    sync_buf_reset(&out);
    sync_buf_str(&out, IMAGE);
    sync_buf_u64(&out, size);
    sync_buf_str(&out, digest);
    sync_buf_u32(&out, MIB);
    assert_int_equal(sync_frame_write(fd, SYNC_IMAGE, out.p, out.len, NULL), 0);
    assert_int_equal(sync_frame_read(fd, &type, &in, 1024, NULL), 0);
    assert_int_equal(type, SYNC_IMAGE_HAVE);
    /* One block of other bytes than the image's. */
    uint8_t *block = malloc(8 + MIB);
    assert_non_null(block);
    sync_le64(block, 0);
    memset(block + 8, 0x5a, MIB);
    assert_int_equal(sync_frame_write(fd, SYNC_IMAGE_DATA, block, 8 + MIB, NULL), 0);
    free(block);
    assert_int_equal(sync_frame_write(fd, SYNC_IMAGE_END, NULL, 0, NULL), 0);
    assert_int_equal(sync_frame_read(fd, &type, &in, SYNC_CONTROL_MAX, NULL), 0);
    assert_int_equal(type, SYNC_ERROR);
    char text[600];
    snprintf(text, sizeof text, "%.*s", (int)in.len, (const char *)in.p);
    assert_non_null(strstr(text, "discarded"));
    close(fd);
    sync_buf_free(&in);
    sync_buf_free(&out);
    assert_int_equal(access(target_image, F_OK), -1);
    char part[1100];
    snprintf(part, sizeof part, "%s.part", target_image);
    assert_int_equal(access(part, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_image_sent_then_present, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_copy_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_secret_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest_mismatch_discarded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
