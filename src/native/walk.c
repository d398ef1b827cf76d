/* The v2 record walk: the compiled twin of kafkalog/record_walk.py (same checks, same order).
 *
 * A record (DefaultRecord): length:varint, attributes:int8, timestampDelta:varlong,
 * offsetDelta:varint, keyLength:varint (-1 null), key, valueLength:varint (-1 null), value,
 * headerCount:varint, then per header keyLength:varint, key, valueLength:varint (-1 null), value.
 * The bytes a record consumes must equal its declared length (DefaultRecord.readFrom).
 */
#include "native.h"


int
kl_next_header(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t rend,
               Py_ssize_t *key_pos, int32_t *key_len, Py_ssize_t *value_pos, int32_t *value_len)
{
    Py_ssize_t p = *pos;
    int32_t n;
    if (kl_read_varint(buf, &p, rend, &n) < 0 || n < 0 || n > rend - p)
        return -1;
    *key_pos = p;
    *key_len = n;
    p += n;
    if (kl_read_varint(buf, &p, rend, &n) < 0)
        return -1;
    if (n == -1) {
        *value_pos = p;
        *value_len = -1;
    }
    else if (n >= 0 && n <= rend - p) {
        *value_pos = p;
        *value_len = n;
        p += n;
    }
    else
        return -1;
    *pos = p;
    return 0;
}

int
kl_walk_v2(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int32_t count,
           kl_record_fn fn, void *ctx, kl_walk_summary *summary,
           Py_ssize_t *fail_index, Py_ssize_t *fail_pos)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int null_key = 0, sequential = 1;
    kl_record r;
    Py_ssize_t i = 0;
    int32_t length, n;

    if (count > 0 && (int64_t)count > (end - pos) / (MIN_RECORD_BODY + 1)) {
        *fail_index = 0;
        *fail_pos = pos;
        return -1;
    }
    for (i = 0; i < count; i++) {
        r.start = pos;
        if (kl_read_varint(buf, &pos, end, &length) < 0 || length < MIN_RECORD_BODY || length > end - pos)
            goto bad;
        r.end = pos + length;
        /* Varints are read up to the payload's end, not the record's: a record whose fields run
         * past its declared size fails the size check at its end, as in record_walk.py. */
        r.attributes = (int8_t)buf[pos++];
        if (kl_read_varlong(buf, &pos, end, &r.timestamp_delta) < 0 ||
            kl_read_varint(buf, &pos, end, &r.offset_delta) < 0)
            goto bad;
        if (r.timestamp_delta < lo)
            lo = r.timestamp_delta;
        if (r.timestamp_delta > hi)
            hi = r.timestamp_delta;
        if (r.offset_delta != i)
            sequential = 0;
        if (kl_read_varint(buf, &pos, end, &n) < 0)
            goto bad;
        if (n >= 0) {
            if (n > r.end - pos)
                goto bad;
            r.key_pos = pos;
            pos += n;
        }
        else if (n == -1) {
            r.key_pos = pos;
            null_key = 1;
        }
        else
            goto bad;
        r.key_len = n;
        if (kl_read_varint(buf, &pos, end, &n) < 0)
            goto bad;
        if (n >= 0) {
            if (n > r.end - pos)
                goto bad;
            r.value_pos = pos;
            pos += n;
        }
        else if (n == -1)
            r.value_pos = pos;
        else
            goto bad;
        r.value_len = n;
        if (kl_read_varint(buf, &pos, end, &n) < 0 || n < 0)
            goto bad;
        r.header_count = n;
        r.headers_pos = pos;
        if (n > 0) {
            if ((int64_t)n * 2 > r.end - pos)
                goto bad;
            Py_ssize_t kp, vp;
            int32_t kl, vl;
            for (int32_t h = 0; h < n; h++)
                if (kl_next_header(buf, &pos, r.end, &kp, &kl, &vp, &vl) < 0)
                    goto bad;
        }
        if (pos != r.end)
            goto bad;
        if (fn != NULL && fn(ctx, i, &r) < 0) {
            pos = r.start;
            goto bad;
        }
    }
    if (pos != end) {
        *fail_index = count;
        *fail_pos = pos;
        return -1;
    }
    if (summary != NULL) {
        summary->ts_delta_min = lo;
        summary->ts_delta_max = hi;
        summary->null_key = null_key;
        summary->sequential = sequential;
    }
    return 0;
bad:
    *fail_index = i;
    *fail_pos = pos;
    return -1;
}

int
kl_frame_plain_v2(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t max_batch, int validate, int refuse,
                  kl_framed *f)
{
    const uint8_t *b = buf + pos;
    if (end - pos < RECORDS_AT)
        return -1;
    int64_t size = get32(b + LENGTH_AT);
    /* FileLogInputStream.nextBatch: a size below the v2 overhead, above the limit or beyond the
     * bytes present is the Python framing's to reject or to end the run at. */
    if (size < RECORDS_AT - LOG_OVERHEAD || size > max_batch || size > end - pos - LOG_OVERHEAD || b[MAGIC_AT] != 2)
        return -1;
    int attributes = (b[ATTRIBUTES_AT] << 8) | b[ATTRIBUTES_AT + 1];
    if ((attributes & (CODEC_MASK | refuse)) != 0)
        return -1; /* compressed, or a kind of batch the caller leaves to Python */
    int32_t count = get32(b + COUNT_AT);
    Py_ssize_t payload = (Py_ssize_t)size + LOG_OVERHEAD - RECORDS_AT;
    /* DefaultRecordBatch's count checks: not negative, lastOffsetDelta >= count - 1, and (the
     * payload being uncompressed) each record taking at least 7 bytes of it. */
    if (count < 0 || (count > 0 && (int64_t)get32(b + LAST_OFFSET_DELTA_AT) < (int64_t)count - 1) ||
        (int64_t)count * (MIN_RECORD_BODY + 1) > payload)
        return -1;
    if (validate && kl_crc32c(0, b + ATTRIBUTES_AT, (size_t)(size + LOG_OVERHEAD - ATTRIBUTES_AT)) != (uint32_t)get32(b + CRC_AT))
        return -1;
    f->entry_end = pos + LOG_OVERHEAD + (Py_ssize_t)size;
    f->count = count;
    return 0;
}

/* walk_v2(buffer, pos, end, count) -> (ts_delta_min, ts_delta_max, null_key, sequential)
 * record_walk.walk_records' contract; raises Invalid for malformed input. */
static PyObject *
walk_v2(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_ssize_t pos, end, fail_index, fail_pos;
    int count, rc;
    Py_buffer view;
    kl_walk_summary s;

    if (!PyArg_ParseTuple(args, "Onni:walk_v2", &obj, &pos, &end, &count))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk_v2: pos and end must lie within the buffer");
        return NULL;
    }
    if (count >= 256) {
        Py_BEGIN_ALLOW_THREADS
        rc = kl_walk_v2(view.buf, pos, end, count, NULL, NULL, &s, &fail_index, &fail_pos);
        Py_END_ALLOW_THREADS
    }
    else
        rc = kl_walk_v2(view.buf, pos, end, count, NULL, NULL, &s, &fail_index, &fail_pos);
    PyBuffer_Release(&view);
    if (rc < 0) {
        kl_set_invalid(fail_index, fail_pos);
        return NULL;
    }
    if (s.ts_delta_min == INT64_MAX && s.ts_delta_max == INT64_MIN)
        /* no records: record_walk.py's sentinels are 2**63 and -2**63 */
        return Py_BuildValue("NLOO", PyLong_FromUnsignedLongLong(1ull << 63), (long long)INT64_MIN, Py_False, Py_True);
    return Py_BuildValue("LLOO", (long long)s.ts_delta_min, (long long)s.ts_delta_max,
                         s.null_key ? Py_True : Py_False, s.sequential ? Py_True : Py_False);
}

PyMethodDef kl_walk_methods[] = {
    {"walk_v2", walk_v2, METH_VARARGS,
     "walk_v2(buffer, pos, end, count) -> (ts_delta_min, ts_delta_max, null_key, sequential)"},
    {NULL, NULL, 0, NULL},
};
