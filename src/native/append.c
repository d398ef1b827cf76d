/* The append pipeline over a whole request, in one call: append_request, the twin of
 * kafkalog.append_request.append_request_py. A leader's request (leader_append: the twin of
 * log_append.analyze_records + validator.validate_and_assign_offsets for v2 batches, a
 * compressed one when its records come decompressed, see below) or a follower's (follower_check: framing, CRC-32C, counts, increasing offsets
 * from the log end) is checked and, when no per-request decision is left to Python (no producer
 * id, no roll), written to the segment file with its offset and time index entries, all with
 * the GIL released.
 *
 * One pass over a private copy of the request frames each batch once and checks what Kafka's
 * LogValidator checks of it (sizes, CRC-32C, counts, the client rules of validateBatch, every
 * record through the one compiled walk kl_walk_v2, keys of a compacted topic, the timestamp
 * bounds), then assigns offsets (base offset, leader epoch: outside the CRC) and sets the max
 * timestamp and timestamp type (inside the CRC, which is then recomputed).
 *
 * A leader's compressed batch (Kafka's validateMessagesAndAssignOffsetsCompressed): the C core
 * links no codec, so the caller decompresses the records of a request that is one compressed v2
 * batch (Kafka: a compressed append is one batch) with the codec package and passes them as
 * `body`. When the codec stays (kafkalog keeps the producer's codec: Kafka's compression.type
 * =producer) and the offset deltas are 0, 1, 2, ... Kafka assigns in place ("inPlaceAssignment"):
 * the records in `body` are walked and checked as an uncompressed batch's are, and only the
 * header of the compressed batch is rewritten; the compressed bytes are written as they came.
 * Other offset deltas make Kafka recompress: that is the pure code's (None).
 *
 * Three outcomes: a result; None when the request needs what only the pure code does (v0/v1,
 * a compressed batch without its body or to be recompressed, a LogAppendTime batch from a
 * producer, a record rule to examine record by record); Invalid when the bytes are malformed. On
 * the last two the caller runs the pure code, which then gives the result or the typed,
 * positioned error.
 */
#include "native.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


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
    const uint8_t *body; /* the decompressed records of the request's one compressed batch, or NULL */
    Py_ssize_t body_len;
    /* out */
    int codec; /* the compressed batch's codec id, 0 when none (log_append.source_compression) */
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
    job->codec = 0;
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
        /* compressed: only as the request's one batch, with its records decompressed by the
         * caller (several batches with one compressed: the validator's "more than one batch") */
        if (codec != 0 && (job->body == NULL || pos != 0 || size != len))
            return UNHANDLED;
        int32_t count = get32(b + COUNT_AT);
        int32_t delta = get32(b + LAST_OFFSET_DELTA_AT);
        if (count < 0 || (count && (int64_t)delta < (int64_t)count - 1))
            return MALFORMED;
        if (codec == 0 && (int64_t)count * (MIN_RECORD_BODY + 1) > size - RECORDS_AT)
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
        /* every record, through the one walk (a compressed batch's in its decompressed body) */
        kl_walk_summary s;
        Py_ssize_t fail_index, fail_pos;
        if (codec != 0) {
            if (kl_walk_v2(job->body, 0, job->body_len, count, NULL, NULL, &s, &fail_index, &fail_pos) < 0)
                return MALFORMED; /* the pure code positions it in the decompressed records */
            if (!s.sequential)
                return UNHANDLED; /* Kafka's inner offsets out of sequence: recompressed (the pure code) */
            job->codec = codec;
        }
        else if (kl_walk_v2(buf, pos + RECORDS_AT, pos + size, count, NULL, NULL, &s, &fail_index, &fail_pos) < 0) {
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

/* ---- append_request: a leader's or a follower's request, checked and written ---------------- */

/* Outcomes of append_request (append_request.py names them). */
enum { WRITTEN = 0, PREPARED = 1, ROLL = 2, FAILED = 3 };
/* Which write failed (FAILED). */
enum { STAGE_LOG = 1, STAGE_OFFSET_INDEX = 2, STAGE_TIME_INDEX = 3 };

/* The active segment as the write needs it (LogSegment.append_job gives the tuple). */
typedef struct {
    int fd;
    long long position; /* the log file's size: where the request goes */
    long long base_offset;
    long long max_segment_bytes;
    long long roll_ts; /* the segment's rolling-based timestamp, -1 for none */
    long long roll_ms; /* segment.ms minus the jitter */
    long long index_interval;
    long long bytes_since_index;
    int oi_fd;
    long long oi_entries, oi_capacity, oi_last_offset;
    int ti_fd;
    long long ti_entries, ti_capacity, ti_last_ts, ti_last_offset;
    long long seg_max_ts, seg_max_ts_offset;
} segment_job;

typedef struct {
    int64_t first_offset, last_offset, max_ts, max_ts_offset, valid, records;
    int codec; /* the last compressed batch's codec, 0 when none is (log_append.source_compression) */
    Py_ssize_t batches;
    int producer; /* a batch carries a producer id: the producer-state checks are Python's */
    /* FAILED */
    int stage, error;
    int64_t written;
    int indexed; /* 0, 1 (offset entry) or 2 (offset and time entries) */
} request_facts;

/* A follower's request (log_append.analyze_records without offsets + check_follower_offsets):
 * frame in place, CRC-32C and counts of every batch, a partial batch at the end left out, last
 * offsets increasing, the first batch at or past the log end. */
static int
follower_check(const uint8_t *buf, Py_ssize_t len, int64_t log_end, int64_t max_message_bytes, Py_ssize_t *positions,
               request_facts *f, Py_ssize_t *fail_pos)
{
    Py_ssize_t pos = 0, n = 0;
    int64_t previous = -1, max_ts = -1, max_ts_offset = -1, records = 0;

    while (pos < len) {
        Py_ssize_t remaining = len - pos;
        const uint8_t *b = buf + pos;
        *fail_pos = pos;
        /* records.frame_entry: a fetch response may end inside a batch */
        if (remaining < LOG_OVERHEAD)
            break;
        int32_t size_field = get32(b + LENGTH_AT);
        if (size_field < MIN_ENTRY_SIZE)
            return MALFORMED;
        if (remaining < MAGIC_AT + 1)
            break;
        if (b[MAGIC_AT] > 2)
            return MALFORMED;
        if (b[MAGIC_AT] != 2)
            return UNHANDLED; /* v0/v1: the pure code (their epochs clear the cache) */
        if ((int64_t)size_field > (int64_t)remaining - LOG_OVERHEAD)
            break;
        Py_ssize_t size = (Py_ssize_t)size_field + LOG_OVERHEAD;
        if (size < RECORDS_AT || (int64_t)size > max_message_bytes)
            return MALFORMED;
        /* ensure_valid */
        if (kl_crc32c(0, b + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)) != (uint32_t)get32(b + CRC_AT))
            return MALFORMED;
        int codec = b[ATTRIBUTES_AT + 1] & CODEC_MASK;
        if (codec > 4)
            return MALFORMED;
        int32_t count = get32(b + COUNT_AT);
        int32_t delta = get32(b + LAST_OFFSET_DELTA_AT);
        if (count < 0 || (count && (int64_t)delta < (int64_t)count - 1))
            return MALFORMED;
        if (codec == 0 && (int64_t)count * (MIN_RECORD_BODY + 1) > size - RECORDS_AT)
            return MALFORMED;
        if (codec)
            f->codec = codec;
        /* Kafka's follower check: offsets increase (last offsets, batch by batch) */
        int64_t last;
        if (__builtin_add_overflow(get64(b + BASE_OFFSET_AT), (int64_t)delta, &last))
            return UNHANDLED;
        if (last <= previous)
            return MALFORMED;
        previous = last;
        if (get64(b + PRODUCER_ID_AT) >= 0)
            f->producer = 1;
        int64_t batch_max = get64(b + MAX_TIMESTAMP_AT);
        if (batch_max > max_ts) {
            max_ts = batch_max;
            max_ts_offset = last;
        }
        records += count;
        positions[n++] = pos;
        pos += size;
    }
    if (n == 0)
        return UNHANDLED; /* nothing to append: the pure code answers */
    f->first_offset = get64(buf + BASE_OFFSET_AT);
    if (f->first_offset < log_end) {
        *fail_pos = 0;
        return MALFORMED; /* UnexpectedAppendOffsetError, with its offsets, from the pure code */
    }
    f->last_offset = previous;
    f->max_ts = max_ts;
    f->max_ts_offset = max_ts_offset;
    f->valid = pos;
    f->records = records;
    f->batches = n;
    return DONE;
}

/* One pwrite, or a call of `hook(fd, memoryview, position)` when one is given: the interposer
 * tests install in place of os.pwrite (an injected short write or ENOSPC), called with the GIL
 * taken back. -1 with errno set on failure. */
static ssize_t
pwrite_once(PyObject *hook, int fd, const uint8_t *buf, int64_t size, int64_t pos)
{
    if (hook == NULL)
        return pwrite(fd, buf, (size_t)size, (off_t)pos);
    ssize_t n = -1;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *mv = PyMemoryView_FromMemory((char *)buf, (Py_ssize_t)size, PyBUF_READ);
    PyObject *r = mv == NULL ? NULL : PyObject_CallFunction(hook, "iOL", fd, mv, (long long)pos);
    Py_XDECREF(mv);
    if (r != NULL) {
        n = (ssize_t)PyLong_AsSsize_t(r);
        Py_DECREF(r);
    }
    if (PyErr_Occurred()) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *code = value != NULL ? PyObject_GetAttrString(value, "errno") : NULL;
        errno = code != NULL && PyLong_Check(code) ? (int)PyLong_AsLong(code) : EIO;
        Py_XDECREF(code);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
        n = -1;
    }
    PyGILState_Release(gil);
    return n;
}

/* pwrite all of buf at pos, as the pure twin's loop; -1 with errno set on failure (a write that
 * takes nothing counts as ENOSPC), *done the bytes that landed. */
static int
pwrite_all(PyObject *hook, int fd, const uint8_t *buf, int64_t size, int64_t pos, int64_t *done)
{
    *done = 0;
    while (*done < size) {
        ssize_t w = pwrite_once(hook, fd, buf + *done, size - *done, pos + *done);
        if (w < 0) {
            if (errno == EINTR && hook == NULL)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = ENOSPC;
            return -1;
        }
        *done += w;
    }
    return 0;
}

/* LogSegment.should_roll with the request's facts, and the index rules Python would refuse on:
 * 1 when the request must go the pure way (a roll, or an error to word). */
static int
needs_python(const segment_job *sj, const request_facts *f, int64_t *new_max_ts, int64_t *new_max_ts_offset)
{
    int64_t size = f->valid, relative;
    if (sj->position > sj->max_segment_bytes - size)
        return 1;
    if (sj->position > 0 && sj->roll_ts >= 0 && f->max_ts - sj->roll_ts > sj->roll_ms)
        return 1;
    if (sj->oi_entries >= sj->oi_capacity || sj->ti_entries >= sj->ti_capacity - 1)
        return 1;
    if (__builtin_sub_overflow(f->last_offset, sj->base_offset, &relative) || relative < 0 || relative > INT32_MAX)
        return 1;
    if (sj->position > INT32_MAX)
        return 1;
    *new_max_ts = sj->seg_max_ts;
    *new_max_ts_offset = sj->seg_max_ts_offset;
    if (f->max_ts > sj->seg_max_ts) {
        *new_max_ts = f->max_ts;
        *new_max_ts_offset = f->max_ts_offset;
    }
    if (sj->bytes_since_index > sj->index_interval) {
        /* OffsetIndex.append and TimeIndex.maybe_append refuse these */
        if (sj->oi_entries && f->last_offset <= sj->oi_last_offset)
            return 1;
        if (sj->ti_entries && (*new_max_ts_offset < sj->ti_last_offset || *new_max_ts < sj->ti_last_ts))
            return 1;
        if (*new_max_ts > sj->ti_last_ts &&
            (__builtin_sub_overflow(*new_max_ts_offset, sj->base_offset, &relative) || relative < 0 || relative > INT32_MAX))
            return 1;
    }
    return 0;
}

/* LogSegment._append_at: the log write, then an offset index entry and maybe a time index entry
 * every index.interval.bytes (written with pwrite: a full disk is ENOSPC, never SIGBUS). */
static int
write_request(PyObject *hook, const uint8_t *data, const segment_job *sj, request_facts *f, int64_t max_ts,
              int64_t max_ts_offset)
{
    int64_t done;
    f->indexed = 0;
    f->written = 0;
    if (pwrite_all(hook, sj->fd, data, f->valid, sj->position, &done) < 0) {
        f->stage = STAGE_LOG;
        f->error = errno;
        f->written = done;
        return FAILED;
    }
    f->written = done;
    if (sj->bytes_since_index > sj->index_interval) {
        uint8_t entry[12];
        put32(entry, (int32_t)(f->last_offset - sj->base_offset));
        put32(entry + 4, (int32_t)sj->position);
        if (pwrite_all(hook, sj->oi_fd, entry, 8, sj->oi_entries * 8, &done) < 0) {
            f->stage = STAGE_OFFSET_INDEX;
            f->error = errno;
            return FAILED;
        }
        f->indexed = 1;
        if (max_ts > sj->ti_last_ts) {
            put64(entry, max_ts);
            put32(entry + 8, (int32_t)(max_ts_offset - sj->base_offset));
            if (pwrite_all(hook, sj->ti_fd, entry, 12, sj->ti_entries * 12, &done) < 0) {
                f->stage = STAGE_TIME_INDEX;
                f->error = errno;
                return FAILED;
            }
            f->indexed = 2;
        }
    }
    return WRITTEN;
}

/* The epochs the batches carry, as (epoch, base offset) of each v2 batch whose non-negative
 * epoch differs from the previous such batch's: what log_append.assign_epochs can change. */
static PyObject *
epoch_changes(const uint8_t *data, const Py_ssize_t *positions, Py_ssize_t n)
{
    PyObject *out = PyList_New(0);
    long long previous = -1;
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *b = data + positions[i];
        int32_t epoch = get32(b + LEADER_EPOCH_AT);
        if (epoch < 0 || epoch == previous)
            continue;
        previous = epoch;
        int64_t base = get64(b + BASE_OFFSET_AT);
        PyObject *item = Py_BuildValue("(iL)", (int)epoch, (long long)base);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    return out;
}

/* Kafka's incrementSequence: base + delta, wrapping past INT32_MAX to 0; in 64 bits, as the
 * pure twin computes it, so that a follower's batch with a negative sequence or delta (which no
 * rule refuses there) gives the same value and no int32 overflow. */
static int64_t
increment_sequence(int64_t sequence, int64_t increment)
{
    if (sequence > (int64_t)INT32_MAX - increment)
        return increment - ((int64_t)INT32_MAX - sequence) - 1;
    return sequence + increment;
}

/* The header facts the producer-state checks need (ProducerStateManager.analyze_batches, Kafka's
 * analyzeAndValidateProducerState) of every batch with a producer id, read from the bytes as
 * they will be written (a leader's rewritten copy): a tuple of
 * (position, producer_id, producer_epoch, base_sequence, last_sequence, max_timestamp,
 *  base_offset, last_offset, is_transactional, is_control), so Python checks sequences and
 * epochs without framing the batches again. An empty tuple when no batch has a producer id. */
static PyObject *
producer_facts(const uint8_t *data, const Py_ssize_t *positions, Py_ssize_t n, int any)
{
    if (!any)
        return PyTuple_New(0);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *b = data + positions[i];
        int64_t producer_id = get64(b + PRODUCER_ID_AT);
        if (producer_id < 0)
            continue; /* RecordBatch.NO_PRODUCER_ID: no state to check */
        int32_t base_seq = get32(b + BASE_SEQUENCE_AT);
        int32_t delta = get32(b + LAST_OFFSET_DELTA_AT);
        /* DefaultRecordBatch.lastSequence: NO_SEQUENCE stays NO_SEQUENCE */
        int64_t last_seq = base_seq == -1 ? -1 : increment_sequence(base_seq, delta);
        int64_t base = get64(b + BASE_OFFSET_AT);
        int attributes = (b[ATTRIBUTES_AT] << 8) | b[ATTRIBUTES_AT + 1];
        PyObject *item = Py_BuildValue(
            "(nLiiLLLLOO)", positions[i], (long long)producer_id, (int)(int16_t)((b[PRODUCER_EPOCH_AT] << 8) | b[PRODUCER_EPOCH_AT + 1]),
            (int)base_seq, (long long)last_seq, (long long)get64(b + MAX_TIMESTAMP_AT), (long long)base,
            (long long)(base + delta), (attributes & TRANSACTIONAL_MASK) ? Py_True : Py_False,
            (attributes & CONTROL_MASK) ? Py_True : Py_False);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    PyObject *t = PyList_AsTuple(out);
    Py_DECREF(out);
    return t;
}

/* append_request(data, leader, log_end_offset, now_ms, max_message_bytes, log_append_time,
 *                before_ms, after_ms, compact, from_client, stamp_epoch, leader_epoch, segment[, hook[, body]])
 *   -> None (the pure twin must take it) | raises Invalid (refused: the twin words why) |
 *      (WRITTEN, first, last, max_ts, max_ts_offset, valid, records, codec, epochs, indexed, None, None, ()) |
 *      (PREPARED or ROLL, first, last, max_ts, max_ts_offset, valid, records, codec, epochs, 0, data, positions,
 *       producers) |
 *      (FAILED, stage, errno, written)
 * `producers` holds the header facts of the batches with a producer id (producer_facts): a
 * request with one is checked, not written, and append_write writes it once Python has checked
 * the producer state.
 * `segment` is the tuple of LogSegment.append_job, or None to check without writing (PREPARED);
 * `hook`, when not None, is called in place of pwrite (pwrite_once); `body`, when not None, holds
 * the decompressed records of a leader's request that is one compressed batch (see the top). */
static PyObject *
append_request(PyObject *self, PyObject *args)
{
    PyObject *obj, *seg_obj, *hook = NULL, *body_obj = NULL, *out = NULL, *result = NULL, *epochs = NULL;
    append_job job;
    segment_job sj;
    request_facts f;
    Py_buffer view, body;
    Py_ssize_t *positions = NULL, fail_pos = 0;
    int leader, rc, status = PREPARED, have_segment;
    int64_t max_ts = -1, max_ts_offset = -1;

    memset(&f, 0, sizeof f);
    if (!PyArg_ParseTuple(args, "OpLLLpLLpppLO|OO:append_request", &obj, &leader, &job.first_offset, &job.now_ms,
                          &job.max_message_bytes, &job.log_append_time, &job.before_ms, &job.after_ms, &job.compact,
                          &job.from_client, &job.stamp_epoch, &job.leader_epoch, &seg_obj, &hook, &body_obj))
        return NULL;
    if (hook == Py_None)
        hook = NULL;
    have_segment = seg_obj != Py_None;
    if (have_segment &&
        !PyArg_ParseTuple(seg_obj, "iLLLLLLLiLLLiLLLLLL:append_request segment", &sj.fd, &sj.position, &sj.base_offset,
                          &sj.max_segment_bytes, &sj.roll_ts, &sj.roll_ms, &sj.index_interval, &sj.bytes_since_index,
                          &sj.oi_fd, &sj.oi_entries, &sj.oi_capacity, &sj.oi_last_offset, &sj.ti_fd, &sj.ti_entries,
                          &sj.ti_capacity, &sj.ti_last_ts, &sj.ti_last_offset, &sj.seg_max_ts, &sj.seg_max_ts_offset))
        return NULL;
    if (body_obj == Py_None)
        body_obj = NULL;
    job.body = NULL;
    job.body_len = 0;
    if (body_obj != NULL) {
        if (kl_get_buffer(body_obj, &body) < 0)
            return NULL;
        job.body = (const uint8_t *)body.buf;
        job.body_len = body.len;
    }
    if (kl_get_buffer(obj, &view) < 0) {
        if (body_obj != NULL)
            PyBuffer_Release(&body);
        return NULL;
    }
    if (view.len == 0) {
        PyBuffer_Release(&view);
        if (body_obj != NULL)
            PyBuffer_Release(&body);
        Py_RETURN_NONE;
    }
    positions = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(view.len / RECORDS_AT + 1));
    if (leader)
        out = PyByteArray_FromStringAndSize(NULL, view.len);
    if (positions == NULL || (leader && out == NULL)) {
        PyBuffer_Release(&view);
        if (body_obj != NULL)
            PyBuffer_Release(&body);
        PyMem_Free(positions);
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    const uint8_t *data = leader ? (const uint8_t *)PyByteArray_AS_STRING(out) : (const uint8_t *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    if (leader) {
        uint8_t *copy = (uint8_t *)PyByteArray_AS_STRING(out);
        memcpy(copy, view.buf, (size_t)view.len);
        rc = leader_append(copy, view.len, &job, positions);
        fail_pos = job.fail_pos;
        if (rc == DONE) {
            f.first_offset = job.first_offset;
            f.last_offset = job.next_offset - 1;
            f.max_ts = job.max_timestamp;
            f.max_ts_offset = job.offset_of_max_timestamp;
            f.valid = view.len;
            f.records = job.next_offset - job.first_offset;
            f.batches = job.batches;
            f.codec = job.codec;
            for (Py_ssize_t i = 0; i < job.batches; i++)
                if (get64(copy + positions[i] + PRODUCER_ID_AT) >= 0)
                    f.producer = 1;
        }
    }
    else
        rc = follower_check(data, view.len, job.first_offset, job.max_message_bytes, positions, &f, &fail_pos);
    if (rc == DONE && have_segment && !f.producer) {
        if (needs_python(&sj, &f, &max_ts, &max_ts_offset))
            status = ROLL;
        else
            status = write_request(hook, data, &sj, &f, max_ts, max_ts_offset);
    }
    Py_END_ALLOW_THREADS
    if (body_obj != NULL)
        PyBuffer_Release(&body); /* the walk is done with it */
    if (rc != DONE) {
        PyBuffer_Release(&view);
        PyMem_Free(positions);
        Py_XDECREF(out);
        if (rc == MALFORMED) {
            kl_set_invalid(f.batches, fail_pos);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (status == FAILED) {
        result = Py_BuildValue("(iiiL)", FAILED, f.stage, f.error, (long long)f.written);
        goto done;
    }
    epochs = epoch_changes(data, positions, f.batches);
    if (epochs == NULL)
        goto done;
    if (status == WRITTEN) {
        result = Py_BuildValue("(iLLLLLLiNiOO())", WRITTEN, (long long)f.first_offset, (long long)f.last_offset,
                               (long long)f.max_ts, (long long)f.max_ts_offset, (long long)f.valid,
                               (long long)f.records, f.codec, epochs, f.indexed, Py_None, Py_None);
        goto done;
    }
    PyObject *producers = producer_facts(data, positions, f.batches, f.producer);
    if (producers == NULL) {
        Py_DECREF(epochs);
        goto done;
    }
    PyObject *positions_tuple = PyTuple_New(f.batches);
    if (positions_tuple == NULL) {
        Py_DECREF(epochs);
        Py_DECREF(producers);
        goto done;
    }
    for (Py_ssize_t i = 0; i < f.batches; i++) {
        PyObject *p = PyLong_FromSsize_t(positions[i]);
        if (p == NULL) {
            Py_DECREF(epochs);
            Py_DECREF(producers);
            Py_DECREF(positions_tuple);
            goto done;
        }
        PyTuple_SET_ITEM(positions_tuple, i, p);
    }
    result = Py_BuildValue("(iLLLLLLiNiONN)", status, (long long)f.first_offset, (long long)f.last_offset,
                           (long long)f.max_ts, (long long)f.max_ts_offset, (long long)f.valid, (long long)f.records,
                           f.codec, epochs, 0, out != NULL ? out : Py_None, positions_tuple, producers);
done:
    PyBuffer_Release(&view); /* after the epochs: a follower's are read from the caller's buffer */
    PyMem_Free(positions);
    Py_XDECREF(out);
    return result;
}

/* append_write(data, segment, last_offset, max_ts, max_ts_offset[, hook])
 *   -> (WRITTEN, indexed) | (ROLL,) | (FAILED, stage, errno, written)
 * The write half of append_request for a request it checked but left to Python (producer state,
 * a roll): Python has decided, the bytes (a leader's rewritten copy, a follower's own) go into
 * the segment with their index entries, the GIL released; ROLL when the segment cannot take them
 * as they are (needs_python): the caller rolls, or writes through LogSegment.append, which words
 * the index rule's error. The twin of append_request.write_prepared_py. */
static PyObject *
append_write(PyObject *self, PyObject *args)
{
    PyObject *obj, *seg_obj, *hook = NULL;
    segment_job sj;
    request_facts f;
    Py_buffer view;
    long long last_offset, max_ts_in, max_ts_offset_in;
    int64_t max_ts = -1, max_ts_offset = -1;
    int status;

    memset(&f, 0, sizeof f);
    if (!PyArg_ParseTuple(args, "OOLLL|O:append_write", &obj, &seg_obj, &last_offset, &max_ts_in, &max_ts_offset_in,
                          &hook))
        return NULL;
    if (hook == Py_None)
        hook = NULL;
    if (!PyArg_ParseTuple(seg_obj, "iLLLLLLLiLLLiLLLLLL:append_write segment", &sj.fd, &sj.position, &sj.base_offset,
                          &sj.max_segment_bytes, &sj.roll_ts, &sj.roll_ms, &sj.index_interval, &sj.bytes_since_index,
                          &sj.oi_fd, &sj.oi_entries, &sj.oi_capacity, &sj.oi_last_offset, &sj.ti_fd, &sj.ti_entries,
                          &sj.ti_capacity, &sj.ti_last_ts, &sj.ti_last_offset, &sj.seg_max_ts, &sj.seg_max_ts_offset))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    f.valid = view.len;
    f.last_offset = last_offset;
    f.max_ts = max_ts_in;
    f.max_ts_offset = max_ts_offset_in;
    Py_BEGIN_ALLOW_THREADS
    if (needs_python(&sj, &f, &max_ts, &max_ts_offset))
        status = ROLL;
    else
        status = write_request(hook, (const uint8_t *)view.buf, &sj, &f, max_ts, max_ts_offset);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status == FAILED)
        return Py_BuildValue("(iiiL)", FAILED, f.stage, f.error, (long long)f.written);
    if (status == ROLL)
        return Py_BuildValue("(i)", ROLL);
    return Py_BuildValue("(ii)", WRITTEN, f.indexed);
}

PyMethodDef kl_append_methods[] = {
    {"append_write", append_write, METH_VARARGS,
     "append_write(data, segment, last_offset, max_ts, max_ts_offset[, hook]) -> (WRITTEN, indexed) | (ROLL,) | "
     "(FAILED, stage, errno, written): a checked request written with its index entries (see append_request.py)"},
    {"append_request", append_request, METH_VARARGS,
     "append_request(data, leader, log_end_offset, now_ms, max_message_bytes, log_append_time, before_ms, after_ms, "
     "compact, from_client, stamp_epoch, leader_epoch, segment[, hook[, body]]) -> a request checked and, when nothing is left "
     "to decide in Python, written with its index entries (see append_request.py); None or Invalid: the pure "
     "twin must take it"},
    {NULL, NULL, 0, NULL},
};
