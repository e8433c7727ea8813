/*
 * sync_lab.h -- what the unit tests of the block transfer (tasks/dc/sync) stand on: a
 * temporary directory holding a "source" data root with one instance (vm.json, sparse
 * disks/disk<N>.img) and a "target" data root with that instance's directory and its
 * .migration/session.json as dc.migration_recv_open writes it; a listener on
 * 127.0.0.1:0 over the target; the options of a pass to it; and the checks the tests
 * make on the files (sha256 of the content, allocated bytes). Every failure fails the
 * running cmocka test.
 */
#ifndef TEST_SYNC_LAB_H
#define TEST_SYNC_LAB_H

#include <stdbool.h>
#include <stdint.h>

#include "sync_listener.h"
#include "sync_send.h"

#define SYNC_LAB_VM        "6f1c2b1e-8a4d-4c3e-9f5a-2d7b9c0e1a11"
#define SYNC_LAB_MIGRATION "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"
#define SYNC_LAB_SECRET    "5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2"
#define MIB                (1ull << 20)
#define GIB                (1ull << 30)

typedef struct sync_lab {
    char dir[256];
    char src_root[512], dst_root[512];
    char src[640], dst[640]; /* the instance's directory on each side */
    char addr[64];
    sync_listener_t *l;
    sync_send_opts_t o;
    char log[4096]; /* the listener's last lines */
} sync_lab_t;

/* Makes the directories, the source's vm.json (disks 0 and 1), the target's vm.json
 * (hidden, migration_target) and its session, and starts the listener. Block size
 * 1 MiB, windows of 16, no rate limit, connect timeout 2 s. */
void sync_lab_open(sync_lab_t *lab, const char *name);
/* Stops the listener (when running) and removes the directory. */
void sync_lab_close(sync_lab_t *lab);
/* Restarts the listener on the same port. */
void sync_lab_restart(sync_lab_t *lab);

/* <src>/disks/disk<n>.img made (or resized) to size bytes, sparse. */
void sync_lab_disk(const sync_lab_t *lab, unsigned n, uint64_t size);
/* Writes len bytes of a pattern from seed at offset `at` of source disk n (never a
 * zero byte). */
void sync_lab_write(const sync_lab_t *lab, unsigned n, uint64_t at, uint64_t len, unsigned seed);
/* Punches [at, at + len) of source disk n. */
void sync_lab_punch(const sync_lab_t *lab, unsigned n, uint64_t at, uint64_t len);

/* One pass with lab->o; asserts it returned 0 and returns its result. */
sync_pass_result_t sync_lab_pass(sync_lab_t *lab);

/* The path of disk n on one side (a static buffer per side, valid until the next call). */
const char *sync_lab_src_disk(const sync_lab_t *lab, unsigned n);
const char *sync_lab_dst_disk(const sync_lab_t *lab, unsigned n);

/* SHA-256 (hex) of the whole content of a file; "" when there is none. */
void sync_lab_sha256(const char *path, char hex[65]);
/* Asserts disk n is on both sides with equal size and content (compared wherever
 * either has data), and that the target's
 * allocated bytes are at most the source's plus one block. */
void sync_lab_assert_same(const sync_lab_t *lab, unsigned n);
/* Allocated bytes of a file (st_blocks * 512). */
uint64_t sync_lab_allocated(const char *path);
/* Number of data entries the target's manifest holds now (reading the file as the
 * receiver would). */
uint64_t sync_lab_manifest_blocks(const sync_lab_t *lab);

#endif
