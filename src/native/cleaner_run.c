/* The cleaner's two passes over a run of batches, one call per read of a segment: map_run
 * (cleaner._map_segment's loop) and filter_run (memory_records.filter_to with CleanerFilter),
 * over the per-record pieces of cleaner.c (cleaner.h). */
#include "cleaner.h"
#include <string.h>

/* ---- building the map over a run of batches ------------------------------------------------ */

/* map_run(table, buffer, pos, end, max_batch, min_offset, entries, max_entries)
 *   -> (stop, batches, records, last_offset, entries, puts, last_put_offset, lookups, probes, status)
 * cleaner._map_segment's loop over the batches it needs no Python for: from pos, every whole,
 * CRC-checked, uncompressed, non-control, non-transactional v2 batch (kl_frame_plain_v2), its
 * keys at or past min_offset put as put_v2 puts them. Stops before the first other entry (or one
 * whose records do not walk), or after the batch that filled the map to max_entries (status 1:
 * the pass ends there) or found no free slot (status 2). stop: where the next entry starts (after
 * the last batch taken); records: the records of the batches taken; max_last_offset: the highest
 * last offset among them (-1 if none: the transactions passed); latest: the map's latest offset
 * as the Python loop would leave it, or None where it would not have changed it. */
PyObject *
kl_map_run(PyObject *self, PyObject *args)
{
    PyObject *tobj, *obj;
    Py_ssize_t pos, end, entries, max_entries, fail_index = 0, fail_pos = 0;
    long long max_batch, min_offset;
    Py_buffer table, view;
    kl_map m;

    if (!PyArg_ParseTuple(args, "OOnnLLnn:map_run", &tobj, &obj, &pos, &end, &max_batch, &min_offset, &entries,
                          &max_entries))
        return NULL;
    if (kl_cleaner_table(tobj, &table, &m) < 0)
        return NULL;
    if (kl_get_buffer(obj, &view) < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_ValueError, "map_run: pos and end must lie within the buffer");
        return NULL;
    }
    /* Digests of one batch at a time: a count is bounded by its payload (7 bytes a record). */
    put_ctx c = {view.buf, 0, min_offset, NULL, 0};
    c.items = PyMem_Malloc(sizeof(put_item) * (size_t)((end - pos) / (MIN_RECORD_BODY + 1) + 1));
    if (c.items == NULL) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&table);
        return PyErr_NoMemory();
    }
    Py_ssize_t batches = 0, records = 0, puts = 0;
    int64_t last = -1, max_last = INT64_MIN, latest = -1;
    int status = 0, latest_set = 0;
    kl_framed f;
    Py_BEGIN_ALLOW_THREADS
    while (status == 0 && kl_frame_plain_v2(view.buf, pos, end, max_batch, 1, CONTROL_MASK | TRANSACTIONAL_MASK, &f) == 0) {
        const uint8_t *b = (const uint8_t *)view.buf + pos;
        int64_t batch_last;
        if (__builtin_add_overflow(get64(b + BASE_OFFSET_AT), (int64_t)get32(b + LAST_OFFSET_DELTA_AT), &batch_last))
            break; /* a last offset beyond int64: the Python loop's */
        c.base_offset = get64(b + BASE_OFFSET_AT);
        Py_ssize_t puts_before = puts;
        if (f.count > 0 && kl_put_records(&m, &c, pos + RECORDS_AT, f.entry_end, f.count, &entries, max_entries, &puts,
                                       &last, &status, &fail_index, &fail_pos) < 0)
            break; /* a record that does not walk: the Python loop raises its error */
        batches++;
        records += f.count;
        if (batch_last > max_last)
            max_last = batch_last;
        pos = f.entry_end;
        /* The map's latest offset as _map_segment leaves it after each batch: the last key put,
         * then the batch's last offset when at or past min_offset (not after the map filled). */
        if (puts > puts_before) {
            latest = last;
            latest_set = 1;
        }
        if (status == 0 && batch_last >= min_offset) {
            latest = batch_last;
            latest_set = 1;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(c.items);
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    PyObject *latest_obj = latest_set ? PyLong_FromLongLong(latest) : Py_NewRef(Py_None);
    if (latest_obj == NULL)
        return NULL;
    return Py_BuildValue("nnnLnnNLLi", pos, batches, records, (long long)(batches ? max_last : -1), entries, puts,
                         latest_obj, (long long)m.lookups, (long long)m.probes, status);
}

/* ---- the keep/drop pass over a run of batches, rewriting what it keeps ----------------------
 *
 * filter_run is memory_records.filter_to with cleaner_filter.CleanerFilter over the batches it
 * needs no Python for (the ones map_run takes: whole, CRC-checked, uncompressed, non-control,
 * non-transactional v2 batches), writing the bytes filter_to writes: a batch keeping all its
 * records copied as it is (unless it keeps a tombstone and has no delete horizon yet), one that
 * loses records re-encoded (rebuild_v2's records in encode_batch's header, the horizon set when
 * it keeps a tombstone), one that keeps none dropped -- or, when it is its producer's last batch
 * or ends at the pass's upper bound, written as an empty header (Kafka's writeEmptyHeader).
 * A batch it cannot finish (a record that does not walk, an offset beyond int64, a header key
 * that is not ASCII) ends the run before it, nothing of it counted: the Python filter takes it. */

#define PRODUCER_EPOCH_AT 51
#define DELETE_HORIZON_MASK 0x40

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
} out_buf;

static uint8_t *
out_reserve(out_buf *o, Py_ssize_t more)
{
    if (o->len + more > o->cap) {
        Py_ssize_t cap = o->cap ? o->cap : 1 << 16;
        while (cap < o->len + more)
            cap *= 2;
        uint8_t *d = PyMem_RawRealloc(o->data, (size_t)cap);
        if (d == NULL)
            return NULL;
        o->data = d;
        o->cap = cap;
    }
    return o->data + o->len;
}

/* encode_batch's header for the batch at `src` rewritten with `count` records, base and max
 * timestamps, attributes (no codec, not transactional, not control: the run's batches) and
 * `payload` bytes after it; the CRC is set once the payload is in place (finish_header). */
static void
write_header(uint8_t *h, const uint8_t *src, Py_ssize_t payload, int attributes, int64_t base_ts, int64_t max_ts,
             int32_t count)
{
    memcpy(h, src, RECORDS_AT); /* base offset, epoch, last offset delta, producer fields */
    put32(h + LENGTH_AT, (int32_t)(RECORDS_AT - LOG_OVERHEAD + payload));
    h[MAGIC_AT] = 2;
    h[ATTRIBUTES_AT] = (uint8_t)(attributes >> 8);
    h[ATTRIBUTES_AT + 1] = (uint8_t)attributes;
    put64(h + BASE_TIMESTAMP_AT, base_ts);
    put64(h + MAX_TIMESTAMP_AT, max_ts);
    put32(h + COUNT_AT, count);
}

static void
finish_header(uint8_t *h, Py_ssize_t size)
{
    put32(h + CRC_AT, (int32_t)kl_crc32c(0, h + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)));
}

/* Is (pid, last) in `producers`: rows of (producer id, last data offset) sorted by id? */
static int
is_producers_last(const int64_t *producers, Py_ssize_t n, int64_t pid, int64_t last)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (producers[2 * mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && producers[2 * lo] == pid && producers[2 * lo + 1] == last;
}

typedef struct {
    Py_ssize_t batches, records_read, records_retained, bytes_retained, batches_retained, batches_rewritten,
        empty_batches, horizons_set, keyless, superseded, tombstones;
    int64_t max_last, max_offset, max_timestamp;
} run_totals;

typedef struct {
    kl_map *map;
    const uint8_t *buf;
    int64_t latest, now, delete_retention, upper_bound;
    const int64_t *producers;
    Py_ssize_t n_producers;
    uint8_t *flags;
    kept_record *kept;
} run_filter;

/* One batch at buf[pos:f->entry_end] into `out` and `t`; -1 (nothing written nor counted) when
 * the Python filter must take it. */
static int
filter_one(run_filter *rf, Py_ssize_t pos, const kl_framed *f, out_buf *out, run_totals *t)
{
    const uint8_t *b = rf->buf + pos;
    Py_ssize_t size = f->entry_end - pos, fi, fp;
    int attributes = (b[ATTRIBUTES_AT] << 8) | b[ATTRIBUTES_AT + 1];
    int64_t base_offset = get64(b + BASE_OFFSET_AT), base_ts = get64(b + BASE_TIMESTAMP_AT);
    int64_t max_ts = get64(b + MAX_TIMESTAMP_AT), pid = get64(b + PRODUCER_ID_AT), last_offset;
    if (__builtin_add_overflow(base_offset, (int64_t)get32(b + LAST_OFFSET_DELTA_AT), &last_offset))
        return -1;
    int has_horizon = (attributes & DELETE_HORIZON_MASK) != 0;
    int log_append = (attributes & TIMESTAMP_TYPE_MASK) != 0;
    /* CleanerFilter.check_batch_retention for data outside transactions: kept empty when it is
     * its producer's last batch (the producer state survives) or ends at the upper bound. */
    int retain_empty = (pid >= 0 && is_producers_last(rf->producers, rf->n_producers, pid, last_offset)) ||
                       (last_offset != INT64_MAX && last_offset + 1 == rf->upper_bound);
    filter_ctx c = {rf->buf, rf->map, base_offset, rf->latest, !has_horizon || rf->now < base_ts, rf->flags,
                    0, 0, 0, 0, 0};
    if (f->count > 0 &&
        kl_walk_v2(rf->buf, pos + RECORDS_AT, f->entry_end, f->count, kl_filter_record, &c, NULL, &fi, &fp) < 0)
        return -1;
    Py_ssize_t at = out->len;
    if (c.kept > 0) {
        int needs_horizon = c.kept_tombstone && !has_horizon;
        if (c.kept == f->count && !needs_horizon) {
            uint8_t *o = out_reserve(out, size);
            if (o == NULL)
                return -2;
            memcpy(o, b, (size_t)size); /* every record kept: the batch as it is */
            out->len += size;
            if (max_ts > t->max_timestamp)
                t->max_timestamp = max_ts;
            if (last_offset > t->max_offset)
                t->max_offset = last_offset;
        }
        else {
            int64_t horizon = base_ts;
            if (needs_horizon && __builtin_add_overflow(rf->now, rf->delete_retention, &horizon))
                return -1; /* a horizon beyond int64: the Python filter's to refuse */
            rebuild_ctx rc = {rf->buf, rf->flags, base_offset, base_ts, max_ts, log_append, rf->kept, 0};
            int64_t new_base, new_max, last_kept;
            Py_ssize_t payload = kl_rebuild_plan(&rc, pos + RECORDS_AT, f->entry_end, f->count,
                                              needs_horizon || has_horizon, horizon, &new_base, &new_max, &fi, &fp);
            if (payload < 0 || __builtin_add_overflow(base_offset, (int64_t)rc.kept[rc.n - 1].r.offset_delta, &last_kept))
                return -1;
            uint8_t *o = out_reserve(out, RECORDS_AT + payload);
            if (o == NULL)
                return -2;
            int attrs = (attributes & TIMESTAMP_TYPE_MASK) | (needs_horizon || has_horizon ? DELETE_HORIZON_MASK : 0);
            write_header(o, b, payload, attrs, new_base, new_max, (int32_t)rc.n);
            uint8_t *w = o + RECORDS_AT;
            for (Py_ssize_t i = 0; i < rc.n; i++)
                w = kl_write_record(w, rf->buf, &rc.kept[i].r, rc.kept[i].r.timestamp_delta, rc.kept[i].body);
            finish_header(o, RECORDS_AT + payload);
            out->len += RECORDS_AT + payload;
            t->batches_rewritten++;
            t->horizons_set += needs_horizon;
            if (new_max > t->max_timestamp)
                t->max_timestamp = new_max;
            if (last_kept > t->max_offset)
                t->max_offset = last_kept;
        }
        t->batches_retained++;
    }
    else if (retain_empty) {
        uint8_t *o = out_reserve(out, RECORDS_AT);
        if (o == NULL)
            return -2;
        write_header(o, b, 0, attributes & TIMESTAMP_TYPE_MASK, -1, max_ts, 0);
        finish_header(o, RECORDS_AT);
        out->len += RECORDS_AT;
        t->empty_batches++;
        t->batches_retained++;
        if (max_ts > t->max_timestamp)
            t->max_timestamp = max_ts;
        if (last_offset > t->max_offset)
            t->max_offset = last_offset;
    }
    t->batches++;
    t->records_read += f->count;
    t->records_retained += c.kept;
    t->bytes_retained += out->len - at;
    t->keyless += c.keyless;
    t->superseded += c.superseded;
    t->tombstones += c.tombstones;
    if (last_offset > t->max_last)
        t->max_last = last_offset;
    return 0;
}

/* filter_run(table, buffer, pos, end, max_batch, latest, now, delete_retention_ms, upper_bound,
 *            producers) -> (stop, output bytes, totals tuple, lookups, probes)
 * producers: int64 rows of (producer id, last data offset) sorted by id (the producers whose
 * last batch must stay). totals: (batches, records_read, records_retained, bytes_retained,
 * batches_retained, batches_rewritten, empty_batches, horizons_set, keyless, superseded,
 * tombstones, max_last_offset, max_offset, max_timestamp). The map is only read. */
PyObject *
kl_filter_run(PyObject *self, PyObject *args)
{
    PyObject *tobj, *obj, *pobj;
    Py_ssize_t pos, end;
    long long max_batch, latest, now, retention, upper;
    Py_buffer table, view, prod;
    kl_map m;

    if (!PyArg_ParseTuple(args, "OOnnLLLLLO:filter_run", &tobj, &obj, &pos, &end, &max_batch, &latest, &now,
                          &retention, &upper, &pobj))
        return NULL;
    if (kl_cleaner_table(tobj, &table, &m) < 0)
        return NULL;
    if (PyObject_GetBuffer(pobj, &prod, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    if (kl_get_buffer(obj, &view) < 0) {
        PyBuffer_Release(&prod);
        PyBuffer_Release(&table);
        return NULL;
    }
    PyObject *result = NULL;
    if (prod.itemsize != 8 || prod.len % 16 != 0 || pos < 0 || end < pos || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "filter_run: producers must be int64 pairs, pos and end within the buffer");
        goto done_buffers;
    }
    Py_ssize_t most = (end - pos) / (MIN_RECORD_BODY + 1) + 1; /* records any batch of the run can hold */
    run_filter rf = {&m, view.buf, latest, now, retention, upper, prod.buf, prod.len / 16, NULL, NULL};
    rf.flags = PyMem_RawMalloc((size_t)most);
    rf.kept = PyMem_RawMalloc(sizeof(kept_record) * (size_t)most);
    out_buf out = {NULL, 0, 0};
    run_totals t;
    memset(&t, 0, sizeof(t));
    t.max_last = t.max_offset = t.max_timestamp = -1;
    int rc = 0;
    if (rf.flags == NULL || rf.kept == NULL)
        rc = -2;
    else {
        kl_framed f;
        Py_BEGIN_ALLOW_THREADS
        while (kl_frame_plain_v2(view.buf, pos, end, max_batch, 1, CONTROL_MASK | TRANSACTIONAL_MASK, &f) == 0) {
            Py_ssize_t before = out.len;
            run_totals saved = t;
            rc = filter_one(&rf, pos, &f, &out, &t);
            if (rc < 0) {
                out.len = before;
                t = saved;
                break;
            }
            pos = f.entry_end;
        }
        Py_END_ALLOW_THREADS
    }
    if (rc == -2)
        PyErr_NoMemory();
    else
        result = Py_BuildValue("ny#(nnnnnnnnnnnLLL)LL", pos, out.data ? (const char *)out.data : "", out.len, t.batches,
                               t.records_read, t.records_retained, t.bytes_retained, t.batches_retained,
                               t.batches_rewritten, t.empty_batches, t.horizons_set, t.keyless, t.superseded,
                               t.tombstones, (long long)t.max_last, (long long)t.max_offset,
                               (long long)t.max_timestamp, (long long)m.lookups, (long long)m.probes);
    PyMem_RawFree(out.data);
    PyMem_RawFree(rf.flags);
    PyMem_RawFree(rf.kept);
done_buffers:
    PyBuffer_Release(&view);
    PyBuffer_Release(&prod);
    PyBuffer_Release(&table);
    return result;
}
