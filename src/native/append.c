/* The leader's append pipeline over a whole produce request, in one call: the compiled twin of
 * log_append.analyze_records + validator.validate_and_assign_offsets for the common case, v2
 * batches without compression.
 *
 * One pass over a private copy of the request frames each batch once and checks what Kafka's
 * LogValidator checks of it (sizes, CRC-32C, counts, the client rules of validateBatch, every
 * record through the one compiled walk kl_walk_v2, keys of a compacted topic, the timestamp
 * bounds), then assigns offsets (base offset, leader epoch: outside the CRC) and sets the max
 * timestamp and timestamp type (inside the CRC, which is then recomputed).
 *
 * Three outcomes: a result; None when the request needs what only the pure code does (v0/v1,
 * compression, a LogAppendTime batch from a producer, a record rule to examine record by
 * record); Invalid when the bytes are malformed. On the last two the caller runs the pure code,
 * which then gives the result or the typed, positioned error.
 */
#include "native.h"
#include <string.h>







typedef struct {
    int64_t first_offset;
    int64_t now_ms;
    int64_t max_message_bytes;
    int64_t before_ms;
    int64_t after_ms;
    int log_append_time;
    int compact;
    int from_client;
    int stamp_epoch;
    long long leader_epoch;
    /* out */
    int64_t next_offset;
    int64_t max_timestamp;
    int64_t offset_of_max_timestamp;
    Py_ssize_t batches;
    Py_ssize_t fail_pos;
} append_job;

enum { DONE = 0, MALFORMED = -1, UNHANDLED = -2 };

/* Frame, check and rewrite every batch of buf[0:len] in place; positions[i] = i-th batch start. */
static int
leader_append(uint8_t *buf, Py_ssize_t len, append_job *job, Py_ssize_t *positions)
{
    Py_ssize_t pos = 0;
    int64_t offset = job->first_offset;
    int64_t max_ts = -1, max_ts_offset = -1;
    const int create_time = !job->log_append_time;

    job->batches = 0;
    job->fail_pos = 0;
    if (job->stamp_epoch && (job->leader_epoch < INT32_MIN || job->leader_epoch > INT32_MAX))
        return UNHANDLED; /* the pure code's struct.pack refuses it */
    while (pos < len) {
        Py_ssize_t remaining = len - pos;
        uint8_t *b = buf + pos;
        job->fail_pos = pos;
        /* framing (records.frame_entry): a leader append must end on a batch boundary */
        if (remaining < RECORDS_AT)
            return MALFORMED;
        int32_t size_field = get32(b + LENGTH_AT);
        if (size_field < MIN_ENTRY_SIZE)
            return MALFORMED;
        if (b[MAGIC_AT] > 2)
            return MALFORMED;
        if (b[MAGIC_AT] != 2)
            return UNHANDLED; /* v0/v1: the pure validator */
        if ((int64_t)size_field > (int64_t)remaining - LOG_OVERHEAD)
            return MALFORMED;
        Py_ssize_t size = (Py_ssize_t)size_field + LOG_OVERHEAD;
        if (size < RECORDS_AT || (int64_t)size > job->max_message_bytes)
            return MALFORMED;
        /* ensure_valid: CRC-32C from the attributes on, codec, counts */
        if (kl_crc32c(0, b + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)) != (uint32_t)get32(b + CRC_AT))
            return MALFORMED;
        int attributes = (b[ATTRIBUTES_AT] << 8) | b[ATTRIBUTES_AT + 1];
        int codec = attributes & CODEC_MASK;
        if (codec > 4)
            return MALFORMED; /* ids 5-7 are not codecs */
        if (codec != 0)
            return UNHANDLED; /* compressed: decompression and maybe a rebuild are the pure code's */
        int32_t count = get32(b + COUNT_AT);
        int32_t delta = get32(b + LAST_OFFSET_DELTA_AT);
        if (count < 0 || (count && (int64_t)delta < (int64_t)count - 1))
            return MALFORMED;
        if ((int64_t)count * (MIN_RECORD_BODY + 1) > size - RECORDS_AT)
            return MALFORMED;
        /* validateBatch, for producers */
        int64_t producer_id = get64(b + PRODUCER_ID_AT);
        if (job->from_client) {
            if ((int64_t)delta + 1 <= 0 || count <= 0 || (int64_t)delta + 1 != count)
                return MALFORMED;
            if (attributes & CONTROL_MASK)
                return MALFORMED;
            if (producer_id >= 0 && get32(b + BASE_SEQUENCE_AT) < 0)
                return MALFORMED;
        }
        if (count == 0 || (attributes & TIMESTAMP_TYPE_MASK))
            return UNHANDLED; /* an empty batch or a producer's LogAppendTime: the pure rules */
        /* every record, through the one walk */
        kl_walk_summary s;
        Py_ssize_t fail_index, fail_pos;
        if (kl_walk_v2(buf, pos + RECORDS_AT, pos + size, count, NULL, NULL, &s, &fail_index, &fail_pos) < 0) {
            job->fail_pos = fail_pos;
            return MALFORMED;
        }
        if (job->compact && s.null_key)
            return UNHANDLED; /* the pure code names the record */
        int64_t base_ts = get64(b + BASE_TIMESTAMP_AT), lo, hi;
        if (__builtin_add_overflow(base_ts, s.ts_delta_min, &lo) || __builtin_add_overflow(base_ts, s.ts_delta_max, &hi))
            return UNHANDLED;
        if (create_time) {
            /* validateRecord's bounds over the whole batch at once; a batch outside them (or
             * holding -1 timestamps, which are exempt) is checked record by record in Python */
            int64_t early, late;
            if (__builtin_sub_overflow(job->now_ms, lo, &early) || __builtin_sub_overflow(hi, job->now_ms, &late) ||
                early > job->before_ms || late > job->after_ms)
                return UNHANDLED;
        }
        /* offsets: last = offset + count - 1, base = last - lastOffsetDelta */
        int64_t last, base, next;
        if (__builtin_add_overflow(offset, (int64_t)count - 1, &last) || __builtin_sub_overflow(last, (int64_t)delta, &base) ||
            __builtin_add_overflow(last, (int64_t)1, &next))
            return UNHANDLED;
        put64(b + BASE_OFFSET_AT, base);
        if (job->stamp_epoch)
            put32(b + LEADER_EPOCH_AT, (int32_t)job->leader_epoch);
        int64_t stamp = job->log_append_time ? job->now_ms : hi;
        int new_attributes = job->log_append_time ? (attributes | TIMESTAMP_TYPE_MASK) : (attributes & ~TIMESTAMP_TYPE_MASK);
        if (new_attributes != attributes || get64(b + MAX_TIMESTAMP_AT) != stamp) {
            b[ATTRIBUTES_AT] = (uint8_t)(new_attributes >> 8);
            b[ATTRIBUTES_AT + 1] = (uint8_t)new_attributes;
            put64(b + MAX_TIMESTAMP_AT, stamp);
            put32(b + CRC_AT, (int32_t)kl_crc32c(0, b + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)));
        }
        if (hi > max_ts) {
            max_ts = hi;
            max_ts_offset = last;
        }
        offset = next;
        positions[job->batches++] = pos;
        pos += size;
    }
    job->next_offset = offset;
    if (job->log_append_time) {
        job->max_timestamp = job->now_ms;
        job->offset_of_max_timestamp = offset - 1;
    }
    else {
        job->max_timestamp = max_ts;
        job->offset_of_max_timestamp = max_ts_offset;
    }
    return DONE;
}

/* leader_append_v2(data, first_offset, now_ms, max_message_bytes, log_append_time, before_ms,
 *                  after_ms, compact, from_client, stamp_epoch, leader_epoch)
 *   -> (bytearray, positions, next_offset, max_timestamp, offset_of_max_timestamp) | None */
static PyObject *
leader_append_v2(PyObject *self, PyObject *args)
{
    PyObject *obj, *out = NULL, *positions_tuple = NULL;
    append_job job;
    Py_buffer view;
    Py_ssize_t *positions = NULL;
    int rc;

    if (!PyArg_ParseTuple(args, "OLLLpLLpppL:leader_append_v2", &obj, &job.first_offset, &job.now_ms,
                          &job.max_message_bytes, &job.log_append_time, &job.before_ms, &job.after_ms,
                          &job.compact, &job.from_client, &job.stamp_epoch, &job.leader_epoch))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (view.len == 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    /* Every batch is at least 61 bytes: the positions array is bounded by the buffer's size. */
    positions = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(view.len / RECORDS_AT + 1));
    out = PyByteArray_FromStringAndSize(NULL, view.len);
    if (positions == NULL || out == NULL) {
        PyBuffer_Release(&view);
        PyMem_Free(positions);
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    uint8_t *copy = (uint8_t *)PyByteArray_AS_STRING(out);
    if (view.len >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        memcpy(copy, view.buf, (size_t)view.len);
        rc = leader_append(copy, view.len, &job, positions);
        Py_END_ALLOW_THREADS
    }
    else {
        memcpy(copy, view.buf, (size_t)view.len);
        rc = leader_append(copy, view.len, &job, positions);
    }
    PyBuffer_Release(&view);
    if (rc != DONE) {
        PyMem_Free(positions);
        Py_DECREF(out);
        if (rc == MALFORMED) {
            kl_set_invalid(job.batches, job.fail_pos);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    positions_tuple = PyTuple_New(job.batches);
    if (positions_tuple == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < job.batches; i++) {
        PyObject *p = PyLong_FromSsize_t(positions[i]);
        if (p == NULL)
            goto fail;
        PyTuple_SET_ITEM(positions_tuple, i, p);
    }
    PyMem_Free(positions);
    return Py_BuildValue("NNLLL", out, positions_tuple, (long long)job.next_offset, (long long)job.max_timestamp,
                         (long long)job.offset_of_max_timestamp);
fail:
    PyMem_Free(positions);
    Py_DECREF(out);
    Py_XDECREF(positions_tuple);
    return NULL;
}

PyMethodDef kl_append_methods[] = {
    {"leader_append_v2", leader_append_v2, METH_VARARGS,
     "leader_append_v2(data, first_offset, now_ms, max_message_bytes, log_append_time, before_ms, after_ms, "
     "compact, from_client, stamp_epoch, leader_epoch) -> (bytearray, positions, next_offset, max_timestamp, "
     "offset_of_max_timestamp), or None when the pure validator must take the append"},
    {NULL, NULL, 0, NULL},
};
