/* The shallow batch scan of LogSegment.recover, one call per chunk of the log file: the compiled
 * twin of segment.py's per-batch recovery step for the batches that need nothing but checks.
 *
 * For each whole v2 batch in the chunk: the framing and ensure_valid checks (size, CRC-32C,
 * codec, counts), Kafka's recovery rule on offsets (increasing, within the segment's int32
 * range), the segment's max timestamp and its offset, and the offset and time index entries
 * due every index.interval.bytes (Kafka's LogSegment.recover), written into caller-allocated
 * int64 arrays. The scan stops at the first batch it does not take whole - a partial batch at
 * the chunk's end (read more), or anything else (a legacy or invalid batch, a leader epoch to
 * record, a batch the producer state must see, an index that would fill up): the pure code
 * handles that one batch, then the scan resumes after it. So every decision other than "plain
 * and valid" is the pure code's, and the result is the same on both cores.
 */
#include "native.h"




enum { CHUNK_END = 0, HANDOVER = 1 };

typedef struct {
    /* in */
    int64_t base_offset;
    int64_t position;          /* file position of buf[0], relative to the segment's start */
    int64_t index_interval;
    int64_t max_batch_size;    /* largest size field accepted */
    int64_t latest_epoch;      /* -1: none known; INT64_MAX: no leader-epoch cache to feed */
    int producer_state;        /* every batch with a producer id goes to the producer state */
    Py_ssize_t offset_room;    /* offset index entries that still fit */
    Py_ssize_t time_room;
    /* in and out */
    int64_t previous;          /* last offset of the last valid batch */
    int64_t last_index_entry;  /* position of the last offset index entry */
    int64_t max_ts, max_ts_offset;
    int64_t last_time_entry;   /* timestamp of the time index's last entry */
    /* out */
    Py_ssize_t consumed;
    Py_ssize_t n_offset, n_time;
    int64_t last_offset;       /* of the last batch taken, -1 if none */
} scan_job;

static int
scan(const uint8_t *buf, Py_ssize_t len, scan_job *j, int64_t *idx_offset, int64_t *idx_position,
     int64_t *time_ts, int64_t *time_offset)
{
    Py_ssize_t off = 0;
    j->n_offset = j->n_time = 0;
    j->last_offset = -1;
    for (;;) {
        j->consumed = off;
        Py_ssize_t remaining = len - off;
        if (remaining == 0)
            return CHUNK_END;
        const uint8_t *b = buf + off;
        if (remaining < RECORDS_AT)
            return off ? CHUNK_END : HANDOVER;
        int32_t size_field = get32(b + LENGTH_AT);
        if (size_field < MIN_ENTRY_SIZE || size_field > j->max_batch_size || b[MAGIC_AT] != 2 ||
            (int64_t)size_field + LOG_OVERHEAD < RECORDS_AT)
            return HANDOVER;
        Py_ssize_t size = (Py_ssize_t)size_field + LOG_OVERHEAD;
        if (size > remaining)
            return off ? CHUNK_END : HANDOVER;
        if (kl_crc32c(0, b + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)) != (uint32_t)get32(b + CRC_AT))
            return HANDOVER;
        int attributes = (b[ATTRIBUTES_AT] << 8) | b[ATTRIBUTES_AT + 1];
        int32_t count = get32(b + COUNT_AT), delta = get32(b + LAST_OFFSET_DELTA_AT);
        if ((attributes & CODEC_MASK) > 4 || count < 0 || (count && (int64_t)delta < (int64_t)count - 1) ||
            ((attributes & CODEC_MASK) == 0 && (int64_t)count * (MIN_RECORD_BODY + 1) > size - RECORDS_AT))
            return HANDOVER;
        int64_t last_offset;
        if (__builtin_add_overflow(get64(b), (int64_t)delta, &last_offset) || last_offset <= j->previous ||
            last_offset - j->base_offset > INT32_MAX)
            return HANDOVER;
        int64_t producer_id = get64(b + PRODUCER_ID_AT);
        if (producer_id >= 0 && (j->producer_state || (attributes & TRANSACTIONAL_MASK)))
            return HANDOVER;
        int32_t epoch = get32(b + LEADER_EPOCH_AT);
        if (j->latest_epoch != INT64_MAX && epoch >= 0 && epoch > j->latest_epoch)
            return HANDOVER;
        /* taken: Kafka's recover rule for the segment's max timestamp and the index entries */
        int64_t max_timestamp = get64(b + MAX_TIMESTAMP_AT);
        if (max_timestamp > j->max_ts) {
            j->max_ts = max_timestamp;
            j->max_ts_offset = last_offset;
        }
        int64_t valid_bytes = j->position + off;
        if (valid_bytes - j->last_index_entry > j->index_interval) {
            int time_entry = j->max_ts > j->last_time_entry;
            if (j->n_offset >= j->offset_room || j->n_time >= j->time_room)
                return HANDOVER; /* a full index: the pure code raises */
            idx_offset[j->n_offset] = last_offset;
            idx_position[j->n_offset++] = valid_bytes;
            if (time_entry) {
                time_ts[j->n_time] = j->max_ts;
                time_offset[j->n_time++] = j->max_ts_offset;
                j->last_time_entry = j->max_ts;
            }
            j->last_index_entry = valid_bytes;
        }
        j->previous = last_offset;
        j->last_offset = last_offset;
        off += size;
    }
}

/* recover_scan(chunk, length, state, entries) -> (status, consumed, n_offset, n_time, last_offset)
 *   state: a writable int64 array [base_offset, position, index_interval, max_batch_size,
 *     latest_epoch, producer_state, offset_room, time_room, previous, last_index_entry, max_ts,
 *     max_ts_offset, last_time_entry]; the last five are updated.
 *   entries: a writable int64 array of 4 * n items, n >= length // 61 + 1: offset index offsets,
 *     positions, time index timestamps, offsets, in four runs of n. */
static PyObject *
recover_scan(PyObject *self, PyObject *args)
{
    PyObject *chunk_obj, *state_obj, *entries_obj;
    Py_ssize_t length;
    Py_buffer chunk, state, entries;
    scan_job j;
    int status;

    if (!PyArg_ParseTuple(args, "OnOO:recover_scan", &chunk_obj, &length, &state_obj, &entries_obj))
        return NULL;
    if (kl_get_buffer(chunk_obj, &chunk) < 0)
        return NULL;
    if (length < 0 || length > chunk.len) {
        PyBuffer_Release(&chunk);
        PyErr_SetString(PyExc_ValueError, "recover_scan: length must lie within the chunk");
        return NULL;
    }
    Py_ssize_t cap = length / RECORDS_AT + 1;
    if (kl_get_writable(state_obj, &state, 8, 13, "state") < 0) {
        PyBuffer_Release(&chunk);
        return NULL;
    }
    if (kl_get_writable(entries_obj, &entries, 8, 4 * cap, "entries") < 0) {
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&state);
        return NULL;
    }
    cap = entries.len / 8 / 4; /* the four runs split the whole array */
    int64_t *s = state.buf, *e = entries.buf;
    j.base_offset = s[0];
    j.position = s[1];
    j.index_interval = s[2];
    j.max_batch_size = s[3];
    j.latest_epoch = s[4];
    j.producer_state = s[5] != 0;
    j.offset_room = (Py_ssize_t)(s[6] < 0 ? 0 : s[6] > cap ? cap : s[6]);
    j.time_room = (Py_ssize_t)(s[7] < 0 ? 0 : s[7] > cap ? cap : s[7]);
    j.previous = s[8];
    j.last_index_entry = s[9];
    j.max_ts = s[10];
    j.max_ts_offset = s[11];
    j.last_time_entry = s[12];
    if (length >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        status = scan(chunk.buf, length, &j, e, e + cap, e + 2 * cap, e + 3 * cap);
        Py_END_ALLOW_THREADS
    }
    else
        status = scan(chunk.buf, length, &j, e, e + cap, e + 2 * cap, e + 3 * cap);
    s[8] = j.previous;
    s[9] = j.last_index_entry;
    s[10] = j.max_ts;
    s[11] = j.max_ts_offset;
    s[12] = j.last_time_entry;
    PyBuffer_Release(&chunk);
    PyBuffer_Release(&state);
    PyBuffer_Release(&entries);
    return Py_BuildValue("innnL", status, j.consumed, j.n_offset, j.n_time, (long long)j.last_offset);
}

PyMethodDef kl_recover_methods[] = {
    {"recover_scan", recover_scan, METH_VARARGS,
     "recover_scan(chunk, length, state, entries) -> (status, consumed, n_offset, n_time, last_offset): "
     "0 = the chunk's whole batches are taken, 1 = the batch at `consumed` is the pure code's"},
    {NULL, NULL, 0, NULL},
};
