/* kafkalog._native: the compiled record core. Shared declarations of its C files.
 *
 * Contract with the Python side (src/kafkalog/native.py): every function here only checks and
 * computes. On malformed input it raises kafkalog._native.Invalid (no message of its own) and the
 * caller re-runs the pure-Python reference, which raises kafkalog's typed, positioned error. So
 * the wording of every error lives in Python, once.
 *
 * Rules for every file: never read outside the buffer the caller passed; never allocate a size
 * taken from the input before checking it against the bytes that remain; detect int32/int64
 * overflow instead of wrapping; release the GIL around long loops (no Python API inside them).
 */
#ifndef KAFKALOG_NATIVE_H
#define KAFKALOG_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* kafkalog._native.Invalid: "this input is malformed; ask the pure core why". */
extern PyObject *kl_Invalid;

/* Raise Invalid carrying (index, position) of the failure: a hint for tests, not a message. */
void kl_set_invalid(Py_ssize_t index, Py_ssize_t pos);

/* ---- byte layouts, declared once for every C file --------------------------------------- */

/* Kafka's DefaultRecordBatch (v2) header; recordbatch.py declares the same layout. */
#define LOG_OVERHEAD 12 /* offset + size: every batch or message starts with them */
#define BASE_OFFSET_AT 0
#define LENGTH_AT 8
#define LEADER_EPOCH_AT 12
#define MAGIC_AT 16
#define CRC_AT 17
#define ATTRIBUTES_AT 21
#define LAST_OFFSET_DELTA_AT 23
#define BASE_TIMESTAMP_AT 27
#define MAX_TIMESTAMP_AT 35
#define PRODUCER_ID_AT 43
#define PRODUCER_EPOCH_AT 51
#define BASE_SEQUENCE_AT 53
#define COUNT_AT 57
#define RECORDS_AT 61
#define MIN_ENTRY_SIZE 14  /* a v0 message with null key and value: the smallest size field */
#define MIN_RECORD_BODY 6  /* a v2 record: attributes + five one-byte varints */

/* The attributes' bits (v2; the codec and timestamp-type bits are the same in v0/v1). */
#define CODEC_MASK 0x07
#define TIMESTAMP_TYPE_MASK 0x08
#define TRANSACTIONAL_MASK 0x10
#define CONTROL_MASK 0x20

/* Big-endian integers, as Kafka writes them. */
static inline int64_t
get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
get32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline void
put64(uint8_t *p, int64_t v)
{
    for (int i = 7; i >= 0; i--, v = (int64_t)((uint64_t)v >> 8))
        p[i] = (uint8_t)v;
}

static inline void
put32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
}

/* A key or value: bytes, or None for a length of -1 (the walk has checked the span). */
static inline PyObject *
bytes_or_none(const uint8_t *buf, Py_ssize_t pos, int32_t len)
{
    if (len < 0)
        return Py_NewRef(Py_None);
    return PyBytes_FromStringAndSize((const char *)buf + pos, len);
}

/* ---- varints (Kafka's ByteUtils.readVarint/readVarlong, ZigZag) -------------------------- */

/* Decode a varint (at most 5 bytes, value within 32 bits) at buf[*pos], not reading at or past
 * `end`. On success store the decoded value, advance *pos and return 0; return -1 when the varint
 * runs to `end`, is longer than 5 bytes or overflows 32 bits (the same inputs varint.py rejects). */
static inline int
kl_read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int32_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (p >= end || p - *pos >= 5)
            return -1;
        uint8_t b = buf[p++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    if (raw > 0xFFFFFFFFull)
        return -1;
    uint32_t z = (uint32_t)raw;
    *out = (int32_t)((z >> 1) ^ (~(z & 1) + 1));
    *pos = p;
    return 0;
}

/* The same for a varlong: at most 10 bytes, value within 64 bits. */
static inline int
kl_read_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (p >= end || p - *pos >= 10)
            return -1;
        uint8_t b = buf[p++];
        if (shift == 63 && (b & 0x7E))
            return -1; /* bits beyond 64 */
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    *pos = p;
    return 0;
}

/* ---- the v2 record walk (walk.c): the one compiled walk every caller goes through ----------- */

/* What the walk found in one record. Positions are absolute offsets into the walked buffer. */
typedef struct {
    Py_ssize_t start;        /* the record's first byte (its length varint) */
    Py_ssize_t end;          /* one past its last byte */
    int8_t attributes;
    int64_t timestamp_delta;
    int32_t offset_delta;
    Py_ssize_t key_pos;      /* meaningful when key_len >= 0 */
    int32_t key_len;         /* -1: null key */
    Py_ssize_t value_pos;
    int32_t value_len;       /* -1: null value */
    Py_ssize_t headers_pos;  /* the first byte after the header count */
    int32_t header_count;
} kl_record;

/* Called once per record, in order; return 0 to go on, -1 to stop the walk (the walk then
 * returns -1 with *fail_index = index, *fail_pos = r->start). Runs without the GIL when the
 * caller released it, so it must not touch Python objects then. */
typedef int (*kl_record_fn)(void *ctx, Py_ssize_t index, const kl_record *r);

/* Facts every caller of a validating walk wants, gathered on the way. */
typedef struct {
    int64_t ts_delta_min;    /* INT64_MAX when there are no records */
    int64_t ts_delta_max;    /* INT64_MIN when there are no records */
    int null_key;            /* some record has a null key */
    int sequential;          /* the offset deltas are 0, 1, 2, ... */
} kl_walk_summary;

/* Walk `count` records of a v2 batch payload buf[pos:end], checking what record_walk.py checks:
 * each record's size against what is left, key/value/header sizes against the record's end, the
 * bytes a record consumes equal to its declared size, and nothing left over after `count`
 * records. `fn` (may be NULL) sees every record; `summary` (may be NULL) is filled.
 * Returns 0, or -1 for malformed input with the failing record's index and byte position. */
int kl_walk_v2(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int32_t count,
               kl_record_fn fn, void *ctx, kl_walk_summary *summary,
               Py_ssize_t *fail_index, Py_ssize_t *fail_pos);

/* Step over one header at buf[*pos] inside a record ending at `rend`, giving the key and value
 * spans (value_len -1: null). Returns 0 or -1. The walk has already validated every header of a
 * record it returned, so decoders may call this without re-checking the result. */
int kl_next_header(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t rend,
                   Py_ssize_t *key_pos, int32_t *key_len, Py_ssize_t *value_pos, int32_t *value_len);

/* A whole uncompressed v2 batch at buf[pos:end] passing every check of
 * DefaultRecordBatch.ensure_valid but the record walk: framing (size at least the v2 overhead,
 * at most max_batch, within `end`, magic 2), no codec, the count checks, and the CRC-32C when
 * `validate`; none of the attribute bits in `refuse` (CONTROL_MASK, TRANSACTIONAL_MASK: batches
 * the caller leaves to Python) may be set. 0 with *f filled, or -1: anything else (the Python
 * side frames that entry and raises or decides). */
typedef struct {
    Py_ssize_t entry_end;
    int32_t count;
} kl_framed;
int kl_frame_plain_v2(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t max_batch, int validate, int refuse,
                      kl_framed *f);

/* ---- CRC-32C (crc32c.c): SSE4.2 where the CPU has it, else slice-by-8 ---------------------- */

/* Fill the tables and pick the implementation; module init calls it once. */
void kl_crc32c_init(void);

/* CRC-32C of buf[0:len] continuing `crc` (0 to start), Kafka's Crc32C. No Python API: call it
 * with or without the GIL. */
uint32_t kl_crc32c(uint32_t crc, const uint8_t *buf, size_t len);

/* ---- MD5 (md5.c): the offset map's key digest, RFC 1321 ----------------------------------- */
void kl_md5(const uint8_t *data, size_t len, uint8_t out[16]);

/* ---- building record.Record objects (decode.c) --------------------------------------------- */

/* record.Record's slots, in this order: offset, timestamp, key, value, headers, sequence,
 * size_in_bytes, crc. Record declares __slots__; each slot's offset comes from its member
 * descriptor, so objects are filled without running __init__ (same values it would store). */
#define KL_RECORD_SLOTS 8
typedef struct {
    PyTypeObject *type;
    Py_ssize_t slot[KL_RECORD_SLOTS];
} kl_record_type;

/* Resolve the slots of `type` (a Record class); 0, or -1 with TypeError. */
int kl_record_type_init(kl_record_type *t, PyObject *type);

/* A new instance with the slots set to `values` (references stolen, even on failure; a NULL
 * among them means its creation failed: the others are released and NULL returned). */
PyObject *kl_new_record(const kl_record_type *t, PyObject *values[KL_RECORD_SLOTS]);

/* ---- method tables, one per C file; module.c adds each to the module ---------------------- */
extern PyMethodDef kl_walk_methods[];
extern PyMethodDef kl_md5_methods[];
extern PyMethodDef kl_cleaner_methods[];
extern PyMethodDef kl_crc32c_methods[];
extern PyMethodDef kl_append_methods[];
extern PyMethodDef kl_recover_methods[];
extern PyMethodDef kl_decode_methods[];
extern PyMethodDef kl_legacy_methods[];

/* A read-only contiguous view of any buffer-protocol object (bytes, memoryview, mmap, numpy). */
int kl_get_buffer(PyObject *obj, Py_buffer *view);

/* Fill a caller-allocated writable contiguous buffer (a numpy array) of `itemsize`-byte items
 * with room for at least `n` items; 0 or -1 with TypeError/ValueError set. */
int kl_get_writable(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t n, const char *name);

#endif
