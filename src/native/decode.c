/* Decoding v2 records: into Record objects (deep iteration) and into columns (columnar decode).
 * The compiled twin of record_walk.walk's RECORDS and COLUMNS modes; both go through the one
 * compiled walk kl_walk_v2 (walk.c), which has checked every record before a callback sees it.
 *
 * Offsets and timestamps are int64: a base plus a delta that leaves the range is Invalid (the
 * pure walk words it), never wrapped.
 */
#include "native.h"
#include <string.h>
#include <structmember.h> /* T_OBJECT_EX */

#define INT32_MAX_ 0x7FFFFFFFLL

/* ---- into Record objects ------------------------------------------------------------------ */

static const char *const record_slots[KL_RECORD_SLOTS] = {
    "offset", "timestamp", "key", "value", "headers", "sequence", "size_in_bytes", "crc",
};

int
kl_record_type_init(kl_record_type *t, PyObject *type)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "the record class must be a type");
        return -1;
    }
    t->type = (PyTypeObject *)type;
    for (int k = 0; k < KL_RECORD_SLOTS; k++) {
        PyObject *d = PyObject_GetAttrString(type, record_slots[k]);
        if (d == NULL)
            return -1;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", t->type->tp_name, record_slots[k]);
            return -1;
        }
        t->slot[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    return 0;
}

PyObject *
kl_new_record(const kl_record_type *t, PyObject *values[KL_RECORD_SLOTS])
{
    PyObject *obj = NULL;
    int k;
    for (k = 0; k < KL_RECORD_SLOTS; k++)
        if (values[k] == NULL)
            goto fail;
    obj = t->type->tp_alloc(t->type, 0);
    if (obj == NULL)
        goto fail;
    for (k = 0; k < KL_RECORD_SLOTS; k++) {
        PyObject **where = (PyObject **)((char *)obj + t->slot[k]);
        PyObject *old = *where;
        *where = values[k];
        Py_XDECREF(old);
    }
    return obj;
fail:
    for (k = 0; k < KL_RECORD_SLOTS; k++)
        Py_XDECREF(values[k]);
    return NULL;
}

typedef struct {
    kl_record_type rt;         /* record.Record */
    PyObject *header_type;     /* record.Header */
    PyObject *list;
    PyObject *empty;           /* () for records without headers */
    const uint8_t *buf;
    int64_t base_offset, base_ts, append_ts;
    int has_append_ts;
    int64_t base_seq;
} records_ctx;

static PyObject *
decode_headers(records_ctx *c, const kl_record *r)
{
    PyObject *tuple = PyTuple_New(r->header_count);
    if (tuple == NULL)
        return NULL;
    Py_ssize_t p = r->headers_pos, kp, vp;
    int32_t kl, vl;
    for (int32_t h = 0; h < r->header_count; h++) {
        if (kl_next_header(c->buf, &p, r->end, &kp, &kl, &vp, &vl) < 0) {
            Py_DECREF(tuple); /* cannot happen: the walk checked every header */
            PyErr_SetString(PyExc_SystemError, "decode_v2: a header the walk accepted does not parse");
            return NULL;
        }
        PyObject *args[2];
        args[0] = PyUnicode_DecodeUTF8((const char *)c->buf + kp, kl, "replace");
        args[1] = bytes_or_none(c->buf, vp, vl);
        PyObject *header = NULL;
        if (args[0] != NULL && args[1] != NULL)
            header = PyObject_Vectorcall(c->header_type, args, 2, NULL);
        Py_XDECREF(args[0]);
        Py_XDECREF(args[1]);
        if (header == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, h, header);
    }
    return tuple;
}

static int
record_fn(void *ctx, Py_ssize_t index, const kl_record *r)
{
    records_ctx *c = ctx;
    int64_t offset, timestamp, seq;
    (void)index;
    /* An offset or timestamp beyond int64 stops the walk with no exception set: Invalid. */
    if (__builtin_add_overflow(c->base_offset, (int64_t)r->offset_delta, &offset))
        return -1;
    if (c->has_append_ts)
        timestamp = c->append_ts;
    else if (__builtin_add_overflow(c->base_ts, r->timestamp_delta, &timestamp))
        return -1;
    if (c->base_seq < 0)
        seq = -1;
    else {
        seq = c->base_seq + r->offset_delta;
        if (seq > INT32_MAX_) /* wraps to 0 past 2**31-1 (Kafka's incrementSequence) */
            seq -= 0x80000000LL;
    }
    PyObject *v[KL_RECORD_SLOTS];
    v[0] = PyLong_FromLongLong(offset);
    v[1] = PyLong_FromLongLong(timestamp);
    v[2] = bytes_or_none(c->buf, r->key_pos, r->key_len);
    v[3] = bytes_or_none(c->buf, r->value_pos, r->value_len);
    v[4] = r->header_count == 0 ? Py_NewRef(c->empty) : decode_headers(c, r);
    v[5] = PyLong_FromLongLong(seq);
    v[6] = PyLong_FromSsize_t(r->end - r->start);
    v[7] = Py_NewRef(Py_None);
    PyObject *obj = kl_new_record(&c->rt, v);
    if (obj == NULL)
        return -1;
    int rc = PyList_Append(c->list, obj);
    Py_DECREF(obj);
    return rc;
}

/* decode_v2(buffer, pos, end, count, base_offset, base_ts, append_ts|None, base_seq, Record, Header)
 * -> list of Record. record_walk.decode_records' contract for non-control batches. */
static PyObject *
decode_v2(PyObject *self, PyObject *args)
{
    PyObject *obj, *append_obj, *type_obj;
    Py_ssize_t pos, end, fail_index, fail_pos;
    int count;
    long long base_offset, base_ts, base_seq;
    Py_buffer view;
    records_ctx c;

    memset(&c, 0, sizeof(c));
    if (!PyArg_ParseTuple(args, "OnniLLOLOO:decode_v2", &obj, &pos, &end, &count, &base_offset, &base_ts,
                          &append_obj, &base_seq, &type_obj, &c.header_type))
        return NULL;
    if (append_obj != Py_None) {
        c.append_ts = PyLong_AsLongLong(append_obj);
        if (c.append_ts == -1 && PyErr_Occurred())
            return NULL;
        c.has_append_ts = 1;
    }
    c.base_offset = base_offset;
    c.base_ts = base_ts;
    c.base_seq = base_seq;
    if (kl_record_type_init(&c.rt, type_obj) < 0)
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode_v2: pos and end must lie within the buffer");
        return NULL;
    }
    c.buf = view.buf;
    c.list = PyList_New(0);
    c.empty = PyTuple_New(0);
    if (c.list == NULL || c.empty == NULL)
        goto fail;
    /* Holding the GIL: the callback builds Python objects (no long loop without them). */
    if (kl_walk_v2(view.buf, pos, end, count, record_fn, &c, NULL, &fail_index, &fail_pos) < 0) {
        if (!PyErr_Occurred())
            kl_set_invalid(fail_index, fail_pos); /* malformed, or an offset/timestamp overflow */
        goto fail;
    }
    PyBuffer_Release(&view);
    Py_DECREF(c.empty);
    return c.list;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(c.list);
    Py_XDECREF(c.empty);
    return NULL;
}

/* ---- into columns --------------------------------------------------------------------------- */

/* A run of batches: one int64 row per batch of (start, end, count, base_offset, base_ts, max_ts,
 * attributes), positions into the walked buffer. */
#define BATCH_COLS 7

typedef struct {
    Py_ssize_t records, key_bytes, value_bytes, headers, hkey_bytes, hvalue_bytes;
} sizes;

typedef struct {
    const uint8_t *buf;
    /* outputs (NULL: not wanted) */
    int64_t *offset, *timestamp, *key_off, *value_off, *header_off, *hkey_off, *hvalue_off;
    uint8_t *key_data, *key_valid, *value_data, *value_valid, *hvalue_valid, *hkey_data, *hvalue_data;
    sizes cap;   /* room in each output */
    sizes at;    /* filled so far */
    int count_only;
    /* the batch being walked */
    int64_t base_offset, base_ts, max_ts;
    int log_append;
} columns_ctx;

static int
columns_fn(void *ctx, Py_ssize_t index, const kl_record *r)
{
    columns_ctx *c = ctx;
    sizes *at = &c->at;
    (void)index;
    if (c->count_only) {
        at->records++;
        if (r->key_len > 0)
            at->key_bytes += r->key_len;
        if (r->value_len > 0)
            at->value_bytes += r->value_len;
        Py_ssize_t p = r->headers_pos, kp, vp;
        int32_t kl, vl;
        for (int32_t h = 0; h < r->header_count; h++) {
            if (kl_next_header(c->buf, &p, r->end, &kp, &kl, &vp, &vl) < 0)
                return -1;
            at->headers++;
            at->hkey_bytes += kl;
            if (vl > 0)
                at->hvalue_bytes += vl;
        }
        return 0;
    }
    Py_ssize_t i = at->records;
    /* Never write past what the caller allocated, whatever the first pass said. */
    if (i >= c->cap.records || at->key_bytes + (r->key_len > 0 ? r->key_len : 0) > c->cap.key_bytes ||
        at->value_bytes + (r->value_len > 0 ? r->value_len : 0) > c->cap.value_bytes)
        return -1;
    int64_t offset, timestamp;
    if (__builtin_add_overflow(c->base_offset, (int64_t)r->offset_delta, &offset))
        return -1; /* beyond int64: Invalid */
    if (c->log_append)
        timestamp = c->max_ts;
    else if (__builtin_add_overflow(c->base_ts, r->timestamp_delta, &timestamp))
        return -1;
    c->offset[i] = offset;
    c->timestamp[i] = timestamp;
    if (r->key_len > 0) {
        memcpy(c->key_data + at->key_bytes, c->buf + r->key_pos, r->key_len);
        at->key_bytes += r->key_len;
    }
    c->key_valid[i] = r->key_len >= 0;
    c->key_off[i + 1] = at->key_bytes;
    if (r->value_len > 0) {
        memcpy(c->value_data + at->value_bytes, c->buf + r->value_pos, r->value_len);
        at->value_bytes += r->value_len;
    }
    c->value_valid[i] = r->value_len >= 0;
    c->value_off[i + 1] = at->value_bytes;
    if (c->header_off != NULL) {
        Py_ssize_t p = r->headers_pos, kp, vp;
        int32_t kl, vl;
        for (int32_t h = 0; h < r->header_count; h++) {
            Py_ssize_t j = at->headers;
            if (kl_next_header(c->buf, &p, r->end, &kp, &kl, &vp, &vl) < 0 || j >= c->cap.headers ||
                at->hkey_bytes + kl > c->cap.hkey_bytes ||
                at->hvalue_bytes + (vl > 0 ? vl : 0) > c->cap.hvalue_bytes)
                return -1;
            memcpy(c->hkey_data + at->hkey_bytes, c->buf + kp, kl);
            at->hkey_bytes += kl;
            c->hkey_off[j + 1] = at->hkey_bytes;
            if (vl > 0) {
                memcpy(c->hvalue_data + at->hvalue_bytes, c->buf + vp, vl);
                at->hvalue_bytes += vl;
            }
            c->hvalue_valid[j] = vl >= 0;
            c->hvalue_off[j + 1] = at->hvalue_bytes;
            at->headers = j + 1;
        }
        c->header_off[i + 1] = at->headers;
    }
    at->records = i + 1;
    return 0;
}

/* Walk every batch of the run; 0, or -1 with *fail set (Invalid) */
static int
walk_run(const uint8_t *buf, Py_ssize_t len, const int64_t *batches, Py_ssize_t nb, columns_ctx *c)
{
    Py_ssize_t fi, fp;
    for (Py_ssize_t b = 0; b < nb; b++) {
        const int64_t *row = batches + b * BATCH_COLS;
        int64_t start = row[0], end = row[1], count = row[2];
        if (start < 0 || end < start || end > len || count < 0 || count > INT32_MAX_)
            return -1;
        c->base_offset = row[3];
        c->base_ts = row[4];
        c->max_ts = row[5];
        c->log_append = (row[6] & TIMESTAMP_TYPE_MASK) != 0;
        if (kl_walk_v2(buf, start, end, (int32_t)count, columns_fn, c, NULL, &fi, &fp) < 0)
            return -1;
    }
    return 0;
}

static int
get_batches(PyObject *obj, Py_buffer *view, Py_ssize_t *nb)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != 8 || view->len % (8 * BATCH_COLS) != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "columns_v2: batches must be int64 rows of 7");
        return -1;
    }
    *nb = view->len / (8 * BATCH_COLS);
    return 0;
}

/* columns_v2_size(buffer, batches) -> (records, key_bytes, value_bytes, headers, hkey_bytes,
 * hvalue_bytes): the first pass, checking every record. */
static PyObject *
columns_v2_size(PyObject *self, PyObject *args)
{
    PyObject *obj, *batches_obj;
    Py_buffer view, bview;
    Py_ssize_t nb;
    columns_ctx c;
    int rc;

    if (!PyArg_ParseTuple(args, "OO:columns_v2_size", &obj, &batches_obj))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (get_batches(batches_obj, &bview, &nb) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    memset(&c, 0, sizeof(c));
    c.buf = view.buf;
    c.count_only = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_run(view.buf, view.len, bview.buf, nb, &c);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&bview);
    if (rc < 0) {
        kl_set_invalid(0, 0);
        return NULL;
    }
    return Py_BuildValue("nnnnnn", c.at.records, c.at.key_bytes, c.at.value_bytes, c.at.headers, c.at.hkey_bytes,
                         c.at.hvalue_bytes);
}

/* columns_v2_fill(buffer, batches, offset, timestamp, key_offsets, key_data, key_valid,
 *                 value_offsets, value_data, value_valid,
 *                 header_offsets, hkey_offsets, hkey_data, hvalue_offsets, hvalue_data, hvalue_valid)
 * The second pass: fills the caller's arrays (sized from columns_v2_size; offsets arrays have
 * their first element set to 0 here). The six header arrays may all be None. */
static PyObject *
columns_v2_fill(PyObject *self, PyObject *args)
{
    PyObject *obj, *batches_obj, *o[14];
    Py_buffer view, bview, v[14];
    Py_ssize_t nb;
    columns_ctx c;
    int rc, got = 0, with_headers;

    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOO:columns_v2_fill", &obj, &batches_obj, &o[0], &o[1], &o[2],
                          &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13]))
        return NULL;
    with_headers = o[8] != Py_None;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (get_batches(batches_obj, &bview, &nb) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* item sizes of the 14 outputs */
    static const Py_ssize_t item[14] = {8, 8, 8, 1, 1, 8, 1, 1, 8, 8, 1, 8, 1, 1};
    static const char *const names[14] = {
        "offset", "timestamp", "key_offsets", "key_data", "key_valid", "value_offsets", "value_data",
        "value_valid", "header_offsets", "hkey_offsets", "hkey_data", "hvalue_offsets", "hvalue_data",
        "hvalue_valid",
    };
    int n_out = with_headers ? 14 : 8;
    for (got = 0; got < n_out; got++)
        if (kl_get_writable(o[got], &v[got], item[got], 0, names[got]) < 0)
            goto fail;
    memset(&c, 0, sizeof(c));
    c.buf = view.buf;
    c.offset = v[0].buf;
    c.timestamp = v[1].buf;
    c.key_off = v[2].buf;
    c.key_data = v[3].buf;
    c.key_valid = v[4].buf;
    c.value_off = v[5].buf;
    c.value_data = v[6].buf;
    c.value_valid = v[7].buf;
    c.cap.records = v[0].len / 8;
    if (v[1].len / 8 < c.cap.records)
        c.cap.records = v[1].len / 8;
    if (v[4].len < c.cap.records)
        c.cap.records = v[4].len;
    if (v[7].len < c.cap.records)
        c.cap.records = v[7].len;
    if (v[2].len / 8 - 1 < c.cap.records)
        c.cap.records = v[2].len / 8 - 1;
    if (v[5].len / 8 - 1 < c.cap.records)
        c.cap.records = v[5].len / 8 - 1;
    c.cap.key_bytes = v[3].len;
    c.cap.value_bytes = v[6].len;
    if (with_headers) {
        c.header_off = v[8].buf;
        c.hkey_off = v[9].buf;
        c.hkey_data = v[10].buf;
        c.hvalue_off = v[11].buf;
        c.hvalue_data = v[12].buf;
        c.hvalue_valid = v[13].buf;
        if (v[8].len / 8 - 1 < c.cap.records)
            c.cap.records = v[8].len / 8 - 1;
        c.cap.headers = v[9].len / 8 - 1;
        if (v[11].len / 8 - 1 < c.cap.headers)
            c.cap.headers = v[11].len / 8 - 1;
        if (v[13].len < c.cap.headers)
            c.cap.headers = v[13].len;
        c.cap.hkey_bytes = v[10].len;
        c.cap.hvalue_bytes = v[12].len;
    }
    if (c.cap.records < 0 || c.cap.headers < 0) {
        PyErr_SetString(PyExc_ValueError, "columns_v2_fill: an offsets array is empty");
        goto fail;
    }
    c.key_off[0] = c.value_off[0] = 0;
    if (with_headers)
        c.header_off[0] = c.hkey_off[0] = c.hvalue_off[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_run(view.buf, view.len, bview.buf, nb, &c);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        kl_set_invalid(c.at.records, 0);
        goto fail;
    }
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&v[k]);
    PyBuffer_Release(&view);
    PyBuffer_Release(&bview);
    return Py_BuildValue("nn", c.at.records, c.at.headers);
fail:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&v[k]);
    PyBuffer_Release(&view);
    PyBuffer_Release(&bview);
    return NULL;
}

/* ---- a run of whole v2 batches, framed, checked and decoded here ---------------------------
 *
 * columns_v2_scan frames entries from a position of a buffer (a MemoryRecords) and takes the
 * longest run of batches that need nothing but this walk: whole uncompressed non-control v2
 * batches passing every check of DefaultRecordBatch.ensure_valid (size, CRC-32C when asked,
 * count, lastOffsetDelta) and whose records all walk (and whose offsets and timestamps fit in
 * int64). It stops before the first entry that is anything else, leaving that entry to the
 * Python driver (which decompresses, decodes control batches or words the error). Its sums size
 * the outputs: every figure is bounded by the bytes walked, never taken from a count field.
 * columns_v2_run_fill then walks the same batches again writing each column once into its final
 * array, batch-level columns included. Neither holds the GIL during its loop. */

static void
set_batch(columns_ctx *c, const uint8_t *b)
{
    c->base_offset = get64(b + BASE_OFFSET_AT);
    c->base_ts = get64(b + BASE_TIMESTAMP_AT);
    c->max_ts = get64(b + MAX_TIMESTAMP_AT);
    c->log_append = (b[ATTRIBUTES_AT + 1] & TIMESTAMP_TYPE_MASK) != 0;
}

/* The counting pass's callback: columns_fn's, plus the int64 checks the filling pass makes, so
 * that a batch the scan took always fills. */
static int
scan_fn(void *ctx, Py_ssize_t index, const kl_record *r)
{
    columns_ctx *c = ctx;
    int64_t v;
    if (__builtin_add_overflow(c->base_offset, (int64_t)r->offset_delta, &v))
        return -1;
    if (!c->log_append && __builtin_add_overflow(c->base_ts, r->timestamp_delta, &v))
        return -1;
    return columns_fn(ctx, index, r);
}

typedef struct {
    Py_ssize_t stop, batches;
} run_extent;

static void
scan_run(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t max_batch, int validate,
         int64_t max_records, int within, columns_ctx *c, run_extent *x)
{
    kl_framed f;
    Py_ssize_t fi, fp;
    x->stop = pos;
    x->batches = 0;
    while (pos < end && (max_records < 0 || c->at.records < max_records)) {
        if (kl_frame_plain_v2(buf, pos, end, max_batch, validate, CONTROL_MASK, &f) < 0)
            break;
        /* `within`: a batch that would take the run past max_records ends it (unless it is the
         * first), so that a reader's batches of rows are never split into a tail of a few rows. */
        if (within && max_records >= 0 && x->batches > 0 && c->at.records + f.count > max_records)
            break;
        set_batch(c, buf + pos);
        sizes before = c->at;
        if (f.count > 0 && kl_walk_v2(buf, pos + RECORDS_AT, f.entry_end, f.count, scan_fn, c, NULL, &fi, &fp) < 0) {
            c->at = before; /* a bad record: the batch is the Python driver's, which words it */
            break;
        }
        pos = f.entry_end;
        x->stop = pos;
        x->batches++;
    }
}

/* columns_v2_scan(buffer, pos, end, max_batch, validate, max_records[, within]) -> (stop, batches,
 * records, key_bytes, value_bytes, headers, hkey_bytes, hvalue_bytes); max_records -1: no limit
 * (else the run ends before the first batch that starts at or past it, or with `within` before
 * the first batch that would end past it, unless that is the run's first). */
static PyObject *
columns_v2_scan(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long max_batch, max_records;
    int validate, within = 0;
    columns_ctx c;
    run_extent x;

    if (!PyArg_ParseTuple(args, "OnnLpL|p:columns_v2_scan", &obj, &pos, &end, &max_batch, &validate, &max_records,
                          &within))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "columns_v2_scan: pos and end must lie within the buffer");
        return NULL;
    }
    memset(&c, 0, sizeof(c));
    c.buf = view.buf;
    c.count_only = 1;
    Py_BEGIN_ALLOW_THREADS
    scan_run(view.buf, pos, end, max_batch, validate, max_records, within, &c, &x);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("nnnnnnnn", x.stop, x.batches, c.at.records, c.at.key_bytes, c.at.value_bytes,
                         c.at.headers, c.at.hkey_bytes, c.at.hvalue_bytes);
}

/* The outputs of columns_v2_run_fill, in order: name, item size, and whether it is one item per
 * record (1), per record plus one (2), per header (3), per header plus one (4) or a data buffer
 * (0). The first RUN_BASE are always given, the RUN_HEADERS after them only with headers. */
#define RUN_BASE 12
#define RUN_HEADERS 7
static const struct {
    const char *name;
    Py_ssize_t item;
    int per;
} run_out[RUN_BASE + RUN_HEADERS] = {
    {"offset", 8, 1}, {"timestamp", 8, 1}, {"timestamp_type", 1, 1}, {"key_offsets", 8, 2},
    {"key_data", 1, 0}, {"key_valid", 1, 1}, {"value_offsets", 8, 2}, {"value_data", 1, 0},
    {"value_valid", 1, 1}, {"producer_id", 8, 1}, {"partition_leader_epoch", 4, 1}, {"batch_index", 8, 1},
    {"header_offsets", 8, 2}, {"headers_valid", 1, 1}, {"header_key_offsets", 8, 4}, {"header_key_data", 1, 0},
    {"header_value_offsets", 8, 4}, {"header_value_data", 1, 0}, {"header_value_valid", 1, 3},
};

/* Walk `batches` batches from pos again, filling; 0, or -1 if one no longer walks or overflows
 * an output (the buffer changed since the scan, or the outputs are short). */
static int
fill_run(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t batches, int64_t first_index,
         columns_ctx *c, int8_t *ts_type, int64_t *producer_id, int32_t *epoch, int64_t *batch_index,
         uint8_t *headers_valid)
{
    Py_ssize_t fi, fp;
    for (Py_ssize_t k = 0; k < batches; k++) {
        const uint8_t *b = buf + pos;
        if (end - pos < RECORDS_AT)
            return -1;
        int64_t size = get32(b + LENGTH_AT);
        int32_t count = get32(b + COUNT_AT);
        if (size < RECORDS_AT - LOG_OVERHEAD || size > end - pos - LOG_OVERHEAD || count < 0)
            return -1;
        Py_ssize_t entry_end = pos + LOG_OVERHEAD + (Py_ssize_t)size;
        Py_ssize_t first = c->at.records;
        set_batch(c, b);
        if (count > 0 && kl_walk_v2(buf, pos + RECORDS_AT, entry_end, count, columns_fn, c, NULL, &fi, &fp) < 0)
            return -1;
        /* The batch-level columns, repeated over its records. v2's timestamp type: 0 CreateTime,
         * 1 LogAppendTime (the attributes' bit 3). */
        int8_t tt = (int8_t)c->log_append;
        int64_t pid = get64(b + PRODUCER_ID_AT);
        int32_t ple = get32(b + LEADER_EPOCH_AT);
        for (Py_ssize_t i = first; i < c->at.records; i++) {
            ts_type[i] = tt;
            producer_id[i] = pid;
            epoch[i] = ple;
            batch_index[i] = first_index + k;
            if (headers_valid != NULL)
                headers_valid[i] = c->header_off[i + 1] > c->header_off[i];
        }
        pos = entry_end;
    }
    return 0;
}

/* columns_v2_run_fill(buffer, pos, batches, first_index, outputs) -> records
 * The second pass over the run columns_v2_scan took: `outputs` is a tuple of the RUN_BASE arrays
 * (or RUN_BASE + RUN_HEADERS with headers) named in run_out, sized from the scan's sums. */
static PyObject *
columns_v2_run_fill(PyObject *self, PyObject *args)
{
    PyObject *obj, *outputs;
    Py_buffer view, v[RUN_BASE + RUN_HEADERS];
    Py_ssize_t pos, batches, n_out, got = 0;
    long long first_index;
    columns_ctx c;
    int rc;

    if (!PyArg_ParseTuple(args, "OnnLO!:columns_v2_run_fill", &obj, &pos, &batches, &first_index, &PyTuple_Type,
                          &outputs))
        return NULL;
    n_out = PyTuple_GET_SIZE(outputs);
    if (n_out != RUN_BASE && n_out != RUN_BASE + RUN_HEADERS) {
        PyErr_Format(PyExc_ValueError, "columns_v2_run_fill: %d or %d outputs, not %zd", RUN_BASE,
                     RUN_BASE + RUN_HEADERS, n_out);
        return NULL;
    }
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    if (pos < 0 || pos > view.len || batches < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "columns_v2_run_fill: pos must lie within the buffer");
        return NULL;
    }
    for (got = 0; got < n_out; got++)
        if (kl_get_writable(PyTuple_GET_ITEM(outputs, got), &v[got], run_out[got].item, 0, run_out[got].name) < 0)
            goto fail;
    /* Capacities: the least room among the outputs of each kind. */
    Py_ssize_t room[5] = {PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX};
    for (Py_ssize_t k = 0; k < n_out; k++) {
        Py_ssize_t items = v[k].len / run_out[k].item;
        int per = run_out[k].per;
        if (per == 2 || per == 4)
            items -= 1;
        if (per != 0 && items < room[per])
            room[per] = items;
    }
    memset(&c, 0, sizeof(c));
    c.buf = view.buf;
    c.cap.records = room[1] < room[2] ? room[1] : room[2];
    c.cap.headers = n_out == RUN_BASE ? 0 : (room[3] < room[4] ? room[3] : room[4]);
    if (c.cap.records < 0 || c.cap.headers < 0) {
        PyErr_SetString(PyExc_ValueError, "columns_v2_run_fill: an offsets array is empty");
        goto fail;
    }
    c.offset = v[0].buf;
    c.timestamp = v[1].buf;
    c.key_off = v[3].buf;
    c.key_data = v[4].buf;
    c.key_valid = v[5].buf;
    c.value_off = v[6].buf;
    c.value_data = v[7].buf;
    c.value_valid = v[8].buf;
    c.cap.key_bytes = v[4].len;
    c.cap.value_bytes = v[7].len;
    c.key_off[0] = c.value_off[0] = 0;
    uint8_t *headers_valid = NULL;
    if (n_out > RUN_BASE) {
        c.header_off = v[12].buf;
        headers_valid = v[13].buf;
        c.hkey_off = v[14].buf;
        c.hkey_data = v[15].buf;
        c.hvalue_off = v[16].buf;
        c.hvalue_data = v[17].buf;
        c.hvalue_valid = v[18].buf;
        c.cap.hkey_bytes = v[15].len;
        c.cap.hvalue_bytes = v[17].len;
        c.header_off[0] = c.hkey_off[0] = c.hvalue_off[0] = 0;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = fill_run(view.buf, pos, view.len, batches, first_index, &c, v[2].buf, v[9].buf, v[10].buf, v[11].buf,
                  headers_valid);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        kl_set_invalid(c.at.records, 0);
        goto fail;
    }
    for (Py_ssize_t k = 0; k < got; k++)
        PyBuffer_Release(&v[k]);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(c.at.records);
fail:
    for (Py_ssize_t k = 0; k < got; k++)
        PyBuffer_Release(&v[k]);
    PyBuffer_Release(&view);
    return NULL;
}

PyMethodDef kl_decode_methods[] = {
    {"decode_v2", decode_v2, METH_VARARGS,
     "decode_v2(buffer, pos, end, count, base_offset, base_ts, append_ts, base_seq, Record, Header) -> list"},
    {"columns_v2_size", columns_v2_size, METH_VARARGS,
     "columns_v2_size(buffer, batches) -> (records, key_bytes, value_bytes, headers, hkey_bytes, hvalue_bytes)"},
    {"columns_v2_fill", columns_v2_fill, METH_VARARGS,
     "columns_v2_fill(buffer, batches, 14 output arrays or 8 and 6 None) -> (records, headers)"},
    {"columns_v2_scan", columns_v2_scan, METH_VARARGS,
     "columns_v2_scan(buffer, pos, end, max_batch, validate, max_records[, within]) -> (stop, batches, records, key_bytes, "
     "value_bytes, headers, hkey_bytes, hvalue_bytes)"},
    {"columns_v2_run_fill", columns_v2_run_fill, METH_VARARGS,
     "columns_v2_run_fill(buffer, pos, batches, first_index, outputs) -> records"},
    {NULL, NULL, 0, NULL},
};
