/*
 * test_sync_tree.c -- a storage instance's trees carried by a pass (tasks/dc/sync,
 * sync_tree_xfer.h): a full pass makes the target's export/ and snapshots/ equal to
 * the source's (digest of both, and file by file: content, holes kept, modes,
 * symlinks as links); a later pass sends only the files whose content, size or mode
 * changed (a change that keeps the file's size and mtime included), removes what was
 * removed and turns a file into a directory; a pass with nothing changed sends no
 * file; a fenced export (a final pass) is read under its own name; the digest moves with any path,
 * mode, content or link target; the paths a peer may name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sync_addr.h"
#include "sync_auth.h"
#include "sync_lab.h"
#include "sync_tree.h"
#include "sync_wire.h"
#include "tree_copy.h"

static const char *at(const char *dir, const char *rel)
{
    static char buf[4][PATH_MAX];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
    return buf[k];
}

static void mkdir_mode(const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0)
        fail_msg("mkdir %s: %s", path, strerror(errno));
    assert_int_equal(chmod(path, mode), 0);
}

/* Writes len bytes of a non-zero pattern at offset `off` of path (made with mode). */
static void write_at(const char *path, uint64_t off, uint64_t len, unsigned seed, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT, mode);
    assert_true(fd >= 0);
    static uint8_t buf[1 << 16];
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = (uint8_t)(1 + ((done + i) * 7 + seed) % 251);
        assert_int_equal(pwrite(fd, buf, k, (off_t)(off + done)), (ssize_t)k);
        done += k;
    }
    close(fd);
}

static void tree_digest(const char *dir, char hex[65])
{
    char err[256];
    if (sync_tree_dir_digest(dir, (uint32_t)MIB, hex, NULL, err, sizeof err) != 0)
        fail_msg("digest of %s: %s", dir, err);
}

/* Both sides' digests equal, and each listed file's content, mode and allocation. */
static void assert_trees_same(const sync_lab_t *lab)
{
    char a[65], b[65], err[256];
    tree_digest(lab->src, a);
    tree_digest(lab->dst, b);
    assert_string_equal(a, b);
    sync_tree_t t = {0};
    assert_int_equal(sync_tree_list(lab->src, (uint32_t)MIB, NULL, &t, err, sizeof err), 0);
    for (size_t i = 0; i < t.n; i++) {
        const char *s = at(lab->src, t.e[i].path), *d = at(lab->dst, t.e[i].path);
        struct stat ss, ds;
        assert_int_equal(lstat(s, &ss), 0);
        if (lstat(d, &ds) != 0)
            fail_msg("%s missing on the target", t.e[i].path);
        assert_int_equal(ss.st_mode, ds.st_mode);
        if (S_ISREG(ss.st_mode)) {
            char hs[65], hd[65];
            sync_lab_sha256(s, hs);
            sync_lab_sha256(d, hd);
            assert_string_equal(hs, hd);
            assert_int_equal(ss.st_size, ds.st_size);
            /* Holes kept: no more allocated than the source, give or take a page. */
            assert_true(sync_lab_allocated(d) <= sync_lab_allocated(s) + 4096);
            assert_int_equal(ss.st_mtim.tv_sec, ds.st_mtim.tv_sec);
        } else if (S_ISLNK(ss.st_mode)) {
            char ls[PATH_MAX] = {0}, ld[PATH_MAX] = {0};
            assert_true(readlink(s, ls, sizeof ls - 1) > 0);
            assert_true(readlink(d, ld, sizeof ld - 1) > 0);
            assert_string_equal(ls, ld);
        }
    }
    sync_tree_free(&t);
}

/* The volume: a sparse file (data only at its end), a file with a hole in the middle,
 * a symlink, a nested directory with a private file, an empty file, a snapshot. */
static void make_volume(const sync_lab_t *lab)
{
    mkdir_mode(at(lab->src, "export"), 0755);
    write_at(at(lab->src, "export/sparse.img"), 40 * MIB, 3000, 1, 0644);
    write_at(at(lab->src, "export/holed.bin"), 0, MIB + 5, 2, 0644);
    write_at(at(lab->src, "export/holed.bin"), 9 * MIB, MIB, 3, 0644);
    assert_int_equal(symlink("holed.bin", at(lab->src, "export/link")), 0);
    assert_int_equal(symlink("/nowhere/at/all", at(lab->src, "export/dangling")), 0);
    mkdir_mode(at(lab->src, "export/a"), 0750);
    mkdir_mode(at(lab->src, "export/a/b"), 0700);
    write_at(at(lab->src, "export/a/b/private"), 0, 100, 4, 0600);
    assert_int_equal(chmod(at(lab->src, "export/a/b/private"), 0600), 0);
    int fd = open(at(lab->src, "export/a/empty"), O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    mkdir_mode(at(lab->src, "snapshots"), 0755);
    mkdir_mode(at(lab->src, "snapshots/first"), 0755);
    write_at(at(lab->src, "snapshots/first/old"), 0, 5000, 5, 0644);
}

static void test_full_then_incremental(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree");
    make_volume(&lab);

    sync_pass_result_t r = sync_lab_pass(&lab);
    assert_true(r.tree);
    assert_int_equal(r.tree_files_sent, 5);
    assert_int_equal(r.tree_removed, 0);
    assert_int_equal(strlen(r.tree_digest), 64);
    assert_trees_same(&lab);
    char src[65];
    tree_digest(lab.src, src);
    assert_string_equal(r.tree_digest, src);
    /* The sparse file stayed sparse on the target. */
    assert_true(sync_lab_allocated(at(lab.dst, "export/sparse.img")) < MIB);
    /* Nothing left behind in .migration/ but what the transfer keeps. */
    assert_int_not_equal(access(at(lab.dst, ".migration/tree.part"), F_OK), 0);

    /* Nothing changed: no file sent. */
    r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 0);
    assert_int_equal(r.tree_removed, 0);

    /* Content changed in place with the same size and mtime (change detection is by
     * content, not by times); a file removed; a directory removed; a file made a
     * directory; a new file; a mode changed; a link re-pointed. */
    struct stat st;
    assert_int_equal(stat(at(lab.src, "export/holed.bin"), &st), 0);
    write_at(at(lab.src, "export/holed.bin"), 9 * MIB + 10, 10, 9, 0644);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, at(lab.src, "export/holed.bin"), times, 0), 0);
    assert_int_equal(unlink(at(lab.src, "snapshots/first/old")), 0);
    assert_int_equal(rmdir(at(lab.src, "snapshots/first")), 0);
    assert_int_equal(unlink(at(lab.src, "export/a/empty")), 0);
    mkdir_mode(at(lab.src, "export/a/empty"), 0755);
    write_at(at(lab.src, "export/a/empty/inside"), 0, 10, 6, 0644);
    assert_int_equal(chmod(at(lab.src, "export/a/b/private"), 0640), 0);
    assert_int_equal(unlink(at(lab.src, "export/link")), 0);
    assert_int_equal(symlink("a/b/private", at(lab.src, "export/link")), 0);
    r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 3); /* holed.bin, inside, private */
    assert_int_equal(r.tree_removed, 3);    /* old, first, empty (a file then) */
    assert_trees_same(&lab);
    assert_int_not_equal(access(at(lab.dst, "snapshots/first"), F_OK), 0);
    sync_lab_close(&lab);
}

/* A file changed by the target's side (a stray write there, a torn copy): the next
 * pass finds it by its content and sends it again. */
static void test_target_damage_repaired(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_damage");
    make_volume(&lab);
    sync_pass_result_t r = sync_lab_pass(&lab);
    write_at(at(lab.dst, "export/a/b/private"), 50, 1, 77, 0600);
    assert_int_equal(unlink(at(lab.dst, "export/holed.bin")), 0);
    write_at(at(lab.dst, "export/stray"), 0, 10, 1, 0644);
    r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 2);
    assert_int_equal(r.tree_removed, 1);
    assert_trees_same(&lab);
    sync_lab_close(&lab);
}

/* A storage instance's final pass reads its export fenced (renamed so consumers'
 * mounts find nothing): listed and sent under its own name, the digests equal; the
 * fence undone gives the export back. */
static void test_fenced_source(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_fenced");
    make_volume(&lab);
    sync_pass_result_t r = sync_lab_pass(&lab);
    char err[256], a[65], b[65];
    assert_int_equal(sync_tree_fence(lab.src, true, err, sizeof err), 0);
    assert_int_equal(sync_tree_fence(lab.src, true, err, sizeof err), 0); /* again: done */
    assert_int_not_equal(access(at(lab.src, "export"), F_OK), 0);
    assert_true(sync_tree_present(lab.src));
    write_at(at(lab.src, SYNC_TREE_FENCED "/late"), 0, 4000, 8, 0644);
    r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 1);
    tree_digest(lab.src, a);
    tree_digest(lab.dst, b);
    assert_string_equal(a, b);
    assert_string_equal(r.tree_digest, a);
    char hs[65], hd[65];
    sync_lab_sha256(at(lab.src, SYNC_TREE_FENCED "/late"), hs);
    sync_lab_sha256(at(lab.dst, "export/late"), hd);
    assert_string_equal(hs, hd);
    assert_int_equal(sync_tree_fence(lab.src, false, err, sizeof err), 0);
    assert_int_equal(access(at(lab.src, "export/late"), F_OK), 0);
    /* Both names there (never made by a fence): refused, nothing moved. */
    mkdir_mode(at(lab.src, SYNC_TREE_FENCED), 0755);
    assert_int_equal(sync_tree_fence(lab.src, true, err, sizeof err), -EEXIST);
    assert_non_null(strstr(err, "both"));
    assert_int_equal(access(at(lab.src, "export/late"), F_OK), 0);
    sync_lab_close(&lab);
}

/* A setuid or setgid file in the export arrives without those bits (the target's agent
 * would own it); the sticky bit and the rest of the mode arrive; the digests agree. */
static void test_setid_bits_dropped(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_setid");
    mkdir_mode(at(lab.src, "export"), 0755);
    mkdir_mode(at(lab.src, "export/tmp"), 0777);
    assert_int_equal(chmod(at(lab.src, "export/tmp"), 01777), 0);
    write_at(at(lab.src, "export/tool"), 0, 4000, 1, 0755);
    assert_int_equal(chmod(at(lab.src, "export/tool"), 06755), 0);
    sync_pass_result_t r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 1);
    struct stat st;
    assert_int_equal(lstat(at(lab.dst, "export/tool"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(lstat(at(lab.dst, "export/tmp"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 01777);
    char a[65], b[65];
    tree_digest(lab.src, a);
    tree_digest(lab.dst, b);
    assert_string_equal(a, b);
    assert_string_equal(r.tree_digest, a);
    /* Nothing differs for the next pass. */
    r = sync_lab_pass(&lab);
    assert_int_equal(r.tree_files_sent, 0);
    sync_lab_close(&lab);
}

static void test_digest_moves(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_digest");
    make_volume(&lab);
    char a[65], b[65];
    tree_digest(lab.src, a);
    assert_int_equal(chmod(at(lab.src, "export/a"), 0755), 0);
    tree_digest(lab.src, b);
    assert_string_not_equal(a, b);
    assert_int_equal(chmod(at(lab.src, "export/a"), 0750), 0);
    tree_digest(lab.src, b);
    assert_string_equal(a, b);
    write_at(at(lab.src, "export/a/b/private"), 99, 1, 50, 0600);
    tree_digest(lab.src, b);
    assert_string_not_equal(a, b);
    tree_digest(lab.dst, b); /* nothing there: another digest */
    assert_string_not_equal(a, b);
    sync_lab_close(&lab);
}

/* A raw peer past the proof and the manifest, at the trees' part: its socket. */
static int raw_peer_at_trees(const sync_lab_t *lab, sync_buf_t *in)
{
    struct sockaddr_in sa;
    char err[256];
    assert_int_equal(sync_addr_parse(lab->addr, &sa, err, sizeof err), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint32_t type;
    assert_int_equal(sync_frame_read(fd, &type, in, 1024, NULL), 0);
    assert_int_equal(type, SYNC_HELLO);
    uint8_t mac[SYNC_HASH_LEN];
    assert_int_equal(sync_auth_mac(SYNC_LAB_SECRET, in->p, SYNC_LAB_MIGRATION, mac), 0);
    sync_buf_t out = {0};
    sync_buf_str(&out, SYNC_LAB_MIGRATION);
    sync_buf_str(&out, SYNC_LAB_VM);
    sync_buf_put(&out, mac, sizeof mac);
    assert_int_equal(sync_frame_write(fd, SYNC_AUTH, out.p, out.len, NULL), 0);
    assert_int_equal(sync_frame_read(fd, &type, in, 1024, NULL), 0);
    assert_int_equal(type, SYNC_AUTH_OK);
    sync_buf_reset(&out);
    sync_buf_u32(&out, (uint32_t)MIB);
    assert_int_equal(sync_frame_write(fd, SYNC_MANIFEST_REQ, out.p, out.len, NULL), 0);
    do
        assert_int_equal(sync_frame_read(fd, &type, in, SYNC_CONTROL_MAX, NULL), 0);
    while (type != SYNC_MANIFEST_END);
    assert_int_equal(sync_frame_write(fd, SYNC_TREE_REQ, out.p, out.len, NULL), 0);
    do
        assert_int_equal(sync_frame_read(fd, &type, in, SYNC_CONTROL_MAX, NULL), 0);
    while (type != SYNC_TREE_LIST_END);
    sync_buf_free(&out);
    return fd;
}

/* What a peer names is checked before anything is written: a path leaving the trees,
 * or one through a symlink on the target, ends the connection with an ERROR naming
 * it, and nothing outside the trees is touched. */
static void test_bad_paths_refused(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_refusals");
    make_volume(&lab);
    assert_int_equal(symlink(lab.dir, at(lab.src, "export/out")), 0);
    sync_lab_pass(&lab); /* the target now has export/out -> the lab's directory */
    static const char *const bad[] = {"export/../vm.json", "export/out/escaped", "vm.json",
                                      "export/a/../../x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sync_buf_t in = {0}, out = {0};
        int fd = raw_peer_at_trees(&lab, &in);
        sync_buf_str(&out, bad[i]);
        sync_buf_u32(&out, 0644);
        sync_buf_u64(&out, 10);
        sync_buf_u64(&out, 0);
        sync_buf_u32(&out, 0);
        assert_int_equal(sync_frame_write(fd, SYNC_TREE_FILE, out.p, out.len, NULL), 0);
        uint32_t type = 0;
        assert_int_equal(sync_frame_read(fd, &type, &in, SYNC_CONTROL_MAX, NULL), 0);
        assert_int_equal(type, SYNC_ERROR);
        char msg[600];
        snprintf(msg, sizeof msg, "%.*s", (int)in.len, (const char *)in.p);
        if (!strstr(msg, bad[i]))
            fail_msg("%s: %s", bad[i], msg);
        close(fd);
        sync_buf_free(&in);
        sync_buf_free(&out);
    }
    assert_int_not_equal(access(at(lab.dir, "escaped"), F_OK), 0);
    assert_int_not_equal(access(at(lab.dst_root, "x"), F_OK), 0);
    /* The next pass still works. */
    sync_pass_result_t r = sync_lab_pass(&lab);
    assert_true(r.tree);
    assert_trees_same(&lab);
    sync_lab_close(&lab);
}

/* export/ and snapshots/ themselves are only ever directories: a peer naming either
 * as a link (export -> /, which the share would then serve) or as a file is refused,
 * and the target's directory stays. */
static void test_tops_only_dirs(void **state)
{
    (void)state;
    sync_lab_t lab;
    sync_lab_open(&lab, "sync_tree_tops");
    make_volume(&lab);
    sync_lab_pass(&lab);
    for (int i = 0; i < 3; i++) {
        sync_buf_t in = {0}, out = {0};
        int fd = raw_peer_at_trees(&lab, &in);
        const char *top = i == 1 ? "snapshots" : "export";
        uint32_t type = i == 2 ? SYNC_TREE_FILE : SYNC_TREE_LINK;
        sync_buf_str(&out, top);
        if (type == SYNC_TREE_LINK) {
            sync_buf_str(&out, "/");
        } else {
            sync_buf_u32(&out, 0644);
            sync_buf_u64(&out, 0);
            sync_buf_u64(&out, 0);
            sync_buf_u32(&out, 0);
        }
        assert_int_equal(sync_frame_write(fd, type, out.p, out.len, NULL), 0);
        if (type == SYNC_TREE_FILE)
            assert_int_equal(sync_frame_write(fd, SYNC_TREE_FILE_END, NULL, 0, NULL), 0);
        uint32_t got = 0;
        assert_int_equal(sync_frame_read(fd, &got, &in, SYNC_CONTROL_MAX, NULL), 0);
        assert_int_equal(got, SYNC_ERROR);
        close(fd);
        sync_buf_free(&in);
        sync_buf_free(&out);
        struct stat st;
        assert_int_equal(lstat(at(lab.dst, top), &st), 0);
        assert_true(S_ISDIR(st.st_mode));
    }
    sync_pass_result_t r = sync_lab_pass(&lab);
    assert_true(r.tree);
    assert_trees_same(&lab);
    sync_lab_close(&lab);
}

/* The source opens a listed file following no symlink on the way: a directory swapped
 * for a link since the listing (a consumer racing the pass) is not read through. */
static void test_open_no_links(void **state)
{
    (void)state;
    char dir[] = "/tmp/sync_tree_open.XXXXXX";
    assert_non_null(mkdtemp(dir));
    mkdir_mode(at(dir, "export"), 0755);
    mkdir_mode(at(dir, "export/real"), 0755);
    write_at(at(dir, "export/real/f"), 0, 10, 1, 0644);
    mkdir_mode(at(dir, "outside"), 0755);
    write_at(at(dir, "outside/f"), 0, 10, 2, 0600);
    assert_int_equal(symlink("../outside", at(dir, "export/ln")), 0);
    assert_int_equal(symlink("real/f", at(dir, "export/flink")), 0);
    int fd = sync_tree_open_file(dir, "export/real/f");
    assert_true(fd >= 0);
    close(fd);
    int rc = sync_tree_open_file(dir, "export/ln/f");
    assert_true(rc == -ELOOP || rc == -ENOTDIR);
    assert_int_equal(sync_tree_open_file(dir, "export/flink"), -ELOOP);
    assert_int_equal(sync_tree_open_file(dir, "export/real/f/x"), -ENOTDIR);
    assert_int_equal(sync_tree_open_file(dir, "export/nothing"), -ENOENT);
    assert_int_equal(sync_tree_open_file(dir, "export/../outside/f"), -EINVAL);
    /* Fenced: read from export.fenced/, links there refused alike. */
    assert_int_equal(rename(at(dir, "export"), at(dir, SYNC_TREE_FENCED)), 0);
    fd = sync_tree_open_file(dir, "export/real/f");
    assert_true(fd >= 0);
    close(fd);
    rc = sync_tree_open_file(dir, "export/ln/f");
    assert_true(rc == -ELOOP || rc == -ENOTDIR);
    char err[256];
    assert_int_equal(dc_tree_remove(dir, err, sizeof err), 0);
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(sync_tree_path_ok("export"));
    assert_true(sync_tree_path_ok("snapshots"));
    assert_true(sync_tree_path_ok("export/a/b.c"));
    assert_true(sync_tree_path_ok("export/..a"));
    assert_false(sync_tree_path_ok(""));
    assert_false(sync_tree_path_ok("exports"));
    assert_false(sync_tree_path_ok("disks/disk0.img"));
    assert_false(sync_tree_path_ok("/export"));
    assert_false(sync_tree_path_ok("export/"));
    assert_false(sync_tree_path_ok("export//a"));
    assert_false(sync_tree_path_ok("export/../vm.json"));
    assert_false(sync_tree_path_ok("export/a/./b"));
    assert_false(sync_tree_path_ok("vm.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_then_incremental), cmocka_unit_test(test_target_damage_repaired),
        cmocka_unit_test(test_fenced_source),         cmocka_unit_test(test_bad_paths_refused),
        cmocka_unit_test(test_digest_moves),          cmocka_unit_test(test_paths),
        cmocka_unit_test(test_tops_only_dirs),        cmocka_unit_test(test_open_no_links),
        cmocka_unit_test(test_setid_bits_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
