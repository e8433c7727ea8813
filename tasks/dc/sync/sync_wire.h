/*
 * sync_wire.h -- the frames of a migration's block transfer and the little-endian
 * fields inside them. A frame is `u32 type, u32 length, payload` (little-endian); a
 * reader refuses a frame longer than the bound it was given, so a peer can never make
 * the other side allocate more than one block and its header.
 *
 * The conversation (S: the sender on the source, R: the receiver on the target):
 *
 *   R: HELLO {nonce[32], u32 version}
 *   S: AUTH {str migration_uuid, str vm_uuid, hmac[32]}
 *        hmac = HMAC-SHA256(secret, nonce || migration_uuid)
 *   R: AUTH_OK {}, or ERROR {text} and closes
 *   S: MANIFEST_REQ {u32 block_size}
 *   R: per disk: MANIFEST_DISK {str name, u64 size, str generation, u64 entries}
 *        and MANIFEST_ENTRIES {(u64 index, hash[32])...} until that many;
 *      then MANIFEST_END {}
 *   S: per disk: DISK {str name, u64 size, str generation, u8 reset}, then its
 *        windows: WINDOW {u32 count, (u64 index, u8 kind)...} and one
 *        BLOCK {u64 index, hash[32], data} per data item, in order ({u64 index}
 *        alone: the block is all zero by now; a punch has no frame of its own)
 *   S: (a storage instance, its export/ present) the trees' part: sync_tree_xfer.h
 *   S: REMOVE {str name} per disk the source no longer has
 *   S: VMJSON {text} (not on a stopped pass), PASS_END {u8 stopped}
 *   R: PASS_DONE {} once everything the pass wrote is durable, or ERROR {text}
 *
 * An image pass (sync_image.h) sends, after AUTH_OK, instead of MANIFEST_REQ:
 *
 *   S: IMAGE {str image_uuid, u64 size, str digest, u32 block_size}
 *   R: IMAGE_HAVE {u8 have}: 1 when <root>/images/<uuid>.img has that digest already
 *   S: (have 0) IMAGE_DATA {u64 index, data} per data block, then IMAGE_END {}
 *   R: PASS_DONE {} once the file is whole, its digest checked and renamed into place
 *
 * `str` is u16 length and bytes (no NUL). Any error on either side ends the
 * connection; the receiver says why in an ERROR frame first when it can.
 *
 * Thread-safe: no state but the caller's file descriptors and counters.
 */
#ifndef DC_SYNC_WIRE_H
#define DC_SYNC_WIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SYNC_PROTOCOL_VERSION 1
#define SYNC_NONCE_LEN        32
#define SYNC_HASH_LEN         32
#define SYNC_HEADER_LEN       8
/* What a frame other than BLOCK may hold: a window's list, a chunk of manifest
 * entries, the instance's vm.json. */
#define SYNC_CONTROL_MAX (4u << 20)

enum sync_frame_type {
    SYNC_HELLO = 1,
    SYNC_AUTH = 2,
    SYNC_AUTH_OK = 3,
    SYNC_ERROR = 4,
    SYNC_MANIFEST_REQ = 5,
    SYNC_MANIFEST_DISK = 6,
    SYNC_MANIFEST_ENTRIES = 7,
    SYNC_MANIFEST_END = 8,
    SYNC_DISK = 9,
    SYNC_WINDOW = 10,
    SYNC_BLOCK = 11,
    SYNC_REMOVE = 12,
    SYNC_VMJSON = 13,
    SYNC_PASS_END = 14,
    SYNC_PASS_DONE = 15,
    SYNC_IMAGE = 16,
    SYNC_IMAGE_HAVE = 17,
    SYNC_IMAGE_DATA = 18,
    SYNC_IMAGE_END = 19,
    /* A storage instance's trees, after its disks (sync_tree_xfer.h). */
    SYNC_TREE_REQ = 20,
    SYNC_TREE_ENTRIES = 21,
    SYNC_TREE_LIST_END = 22,
    SYNC_TREE_REMOVE = 23,
    SYNC_TREE_DIR = 24,
    SYNC_TREE_LINK = 25,
    SYNC_TREE_FILE = 26,
    SYNC_TREE_DATA = 27,
    SYNC_TREE_FILE_END = 28,
    SYNC_TREE_DONE = 29,
};

/* Kinds of a window's items. */
enum sync_item_kind { SYNC_ITEM_DATA = 1, SYNC_ITEM_PUNCH = 2 };

/* A growable byte buffer a frame's payload is built in (owned by its user). */
typedef struct sync_buf {
    uint8_t *p;
    size_t len, cap;
} sync_buf_t;

void sync_buf_reset(sync_buf_t *b);
void sync_buf_free(sync_buf_t *b);
void sync_buf_put(sync_buf_t *b, const void *data, size_t n);
void sync_buf_u8(sync_buf_t *b, uint8_t v);
void sync_buf_u32(sync_buf_t *b, uint32_t v);
void sync_buf_u64(sync_buf_t *b, uint64_t v);
/* u16 length and the bytes of s (at most 65535 of them). */
void sync_buf_str(sync_buf_t *b, const char *s);

/* A cursor over a received payload: each read fails (returns -1) past the end, and
 * `bad` stays set so a caller checks once at the end. */
typedef struct sync_cur {
    const uint8_t *p;
    size_t left;
    int bad;
} sync_cur_t;

uint8_t sync_cur_u8(sync_cur_t *c);
uint32_t sync_cur_u32(sync_cur_t *c);
uint64_t sync_cur_u64(sync_cur_t *c);
/* Copies n bytes into out (zeros when short). */
void sync_cur_bytes(sync_cur_t *c, void *out, size_t n);
/* A str into out (cap bytes with its NUL); too long for out or short: bad. */
void sync_cur_str(sync_cur_t *c, char *out, size_t cap);

void sync_le32(uint8_t *p, uint32_t v);
void sync_le64(uint8_t *p, uint64_t v);
uint32_t sync_get_le32(const uint8_t *p);
uint64_t sync_get_le64(const uint8_t *p);

/* Writes one frame: the header, then the iov pieces, as one writev loop. Adds every
 * byte written to *wire when wire is not NULL. 0 or -errno. */
int sync_frame_writev(int fd, uint32_t type, const struct iovec *iov, int iovcnt,
                      atomic_uint_fast64_t *wire);
int sync_frame_write(int fd, uint32_t type, const void *payload, size_t len,
                     atomic_uint_fast64_t *wire);

/* Reads one frame into b (its payload; b->len its length) and *type. A length over
 * max: -EMSGSIZE. The peer closing before a whole frame: -ECONNRESET. 0 or -errno. */
int sync_frame_read(int fd, uint32_t *type, sync_buf_t *b, size_t max, atomic_uint_fast64_t *wire);

/* Reads exactly n bytes. 0, -ECONNRESET at end of stream, or -errno. */
int sync_read_full(int fd, void *p, size_t n);

#endif
