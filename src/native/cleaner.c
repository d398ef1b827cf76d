/* The cleaner's per-record work: the compiled twin of the loops in kafkalog/offset_map.py,
 * kafkalog/cleaner.py (building the map), kafkalog/cleaner_filter.py (the keep/drop pass) and
 * kafkalog/records.py (re-encoding the records a batch keeps).
 *
 * The offset map is offset_map.py's numpy array of uint64 cells, three per slot: the MD5 digest
 * of the key as two little-endian 64-bit halves, then the offset. A slot is found by Kafka's
 * SkimpyOffsetMap probe sequence: the big-endian 4-byte window of the digest at byte
 * min(attempt, 12), plus (attempt - 12) past the last window, modulo the slot count. An all-zero
 * digest marks an empty slot, so the one digest that is all zeros is stored with its low half 1.
 *
 * Every function walks records with kl_walk_v2 (walk.c) and raises Invalid, before changing
 * anything, for input the pure code would reject or compute differently (an offset or timestamp
 * that overflows int64, a header key that is not ASCII): the Python caller then re-runs the
 * batch on the pure core.
 */
#include "cleaner.h"
#include <string.h>

static inline uint64_t
load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* OffsetMap._find: the cell index of the digest's slot (*found: it holds the digest; else it is
 * empty), or -1 when the probe sequence met neither (only a full map). */
static Py_ssize_t
map_find(kl_map *m, const uint8_t d[16], uint64_t *lo_out, uint64_t *hi_out, int *found)
{
    uint64_t lo = load_le64(d), hi = load_le64(d + 8);
    if (lo == 0 && hi == 0)
        lo = 1;
    *lo_out = lo;
    *hi_out = hi;
    m->lookups++;
    uint64_t slots = (uint64_t)m->slots;
    for (uint64_t attempt = 0;; attempt++) {
        uint64_t probe = attempt <= LAST_WINDOW ? (uint32_t)get32(d + attempt)
                                                : (uint64_t)(uint32_t)get32(d + LAST_WINDOW) + attempt - LAST_WINDOW;
        Py_ssize_t cell = (Py_ssize_t)(probe % slots) * CELLS_PER_SLOT;
        m->probes++;
        uint64_t a = m->cells[cell], b = m->cells[cell + 1];
        if (a == lo && b == hi) {
            *found = 1;
            return cell;
        }
        if (a == 0 && b == 0) {
            *found = 0;
            return cell;
        }
        if (attempt + 1 > slots + LAST_WINDOW)
            return -1;
    }
}

/* The table argument: a writable C-contiguous buffer of uint64 cells, three per slot. */
int
kl_cleaner_table(PyObject *obj, Py_buffer *view, kl_map *m)
{
    if (kl_get_writable(obj, view, 8, CELLS_PER_SLOT, "table") < 0)
        return -1;
    m->cells = (uint64_t *)view->buf;
    m->slots = view->len / 8 / CELLS_PER_SLOT;
    m->lookups = m->probes = 0;
    return 0;
}

/* The payload argument: buffer[pos:end] must lie in the buffer; count must be one the payload
 * can hold (so arrays of `count` items are bounded by the input's size). */
static int
get_payload(PyObject *obj, Py_buffer *view, Py_ssize_t pos, Py_ssize_t end, int count, const char *fn)
{
    if (kl_get_buffer(obj, view) < 0)
        return -1;
    if (pos < 0 || end < pos || end > view->len) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: pos and end must lie within the buffer", fn);
        return -1;
    }
    if (count < 0 || (int64_t)count > (end - pos) / 7) { /* 7: the smallest record */
        PyBuffer_Release(view);
        kl_set_invalid(0, pos);
        return -1;
    }
    return 0;
}

/* ---- building the map: digest every key, then put digest -> offset ------------------------ */

static int
put_record(void *vctx, Py_ssize_t index, const kl_record *r)
{
    put_ctx *c = vctx;
    int64_t offset;
    if (__builtin_add_overflow(c->base_offset, (int64_t)r->offset_delta, &offset))
        return -1;
    /* cleaner._map_segment: keyless records and records before the dirty start are not mapped */
    if (r->key_len < 0 || offset < c->min_offset)
        return 0;
    put_item *it = &c->items[c->n++];
    kl_md5(c->buf + r->key_pos, (size_t)r->key_len, it->digest);
    it->offset = offset;
    return 0;
}

/* Digest every key of the batch at buf[pos:end] (nothing changes if it is malformed: -1), then
 * put them in order: *status 0 every key put, 1 stopped at max_entries, 2 no free slot. */
int
kl_put_records(kl_map *m, put_ctx *c, Py_ssize_t pos, Py_ssize_t end, int count, Py_ssize_t *entries,
            Py_ssize_t max_entries, Py_ssize_t *puts, int64_t *last, int *status, Py_ssize_t *fail_index,
            Py_ssize_t *fail_pos)
{
    c->n = 0;
    if (kl_walk_v2(c->buf, pos, end, count, put_record, c, NULL, fail_index, fail_pos) < 0)
        return -1;
    /* Each key's first probe, requested before any is made: a map larger than the caches costs
     * one miss per key, and these overlap. */
    for (Py_ssize_t i = 0; i < c->n; i++)
        __builtin_prefetch(m->cells + (Py_ssize_t)((uint64_t)(uint32_t)get32(c->items[i].digest) % (uint64_t)m->slots) *
                                          CELLS_PER_SLOT, 1);
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (*entries >= max_entries) {
            *status = 1;
            break;
        }
        uint64_t lo, hi;
        int found;
        Py_ssize_t cell = map_find(m, c->items[i].digest, &lo, &hi, &found);
        if (!found) {
            if (cell < 0 || *entries >= m->slots) {
                *status = 2;
                break;
            }
            m->cells[cell] = lo;
            m->cells[cell + 1] = hi;
            (*entries)++;
        }
        m->cells[cell + 2] = (uint64_t)c->items[i].offset;
        *last = c->items[i].offset;
        (*puts)++;
    }
    return 0;
}

/* put_v2(table, buffer, pos, end, count, base_offset, min_offset, entries, max_entries)
 *   -> (entries, puts, last_put_offset, lookups, probes, status)
 * status 0: every key put; 1: stopped before a key because the map held max_entries (Kafka's
 * load factor: the pass ends there); 2: the table had no free slot (the pure put raises). */
static PyObject *
put_v2(PyObject *self, PyObject *args)
{
    PyObject *tobj, *obj;
    Py_ssize_t pos, end, entries, max_entries, fail_index = 0, fail_pos = 0;
    long long base_offset, min_offset;
    int count, rc = 0, status = 0;
    Py_buffer table, view;
    kl_map m;

    if (!PyArg_ParseTuple(args, "OOnniLLnn:put_v2", &tobj, &obj, &pos, &end, &count, &base_offset, &min_offset,
                          &entries, &max_entries))
        return NULL;
    if (kl_cleaner_table(tobj, &table, &m) < 0)
        return NULL;
    if (get_payload(obj, &view, pos, end, count, "put_v2") < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    put_ctx c = {view.buf, base_offset, min_offset, NULL, 0};
    c.items = PyMem_Malloc(sizeof(put_item) * (size_t)(count > 0 ? count : 1));
    if (c.items == NULL) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&table);
        return PyErr_NoMemory();
    }
    Py_ssize_t puts = 0;
    int64_t last = -1;
    PyThreadState *ts = count >= NOGIL_RECORDS ? PyEval_SaveThread() : NULL;
    rc = kl_put_records(&m, &c, pos, end, count, &entries, max_entries, &puts, &last, &status, &fail_index, &fail_pos);
    if (ts != NULL)
        PyEval_RestoreThread(ts);
    PyMem_Free(c.items);
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    if (rc < 0) {
        kl_set_invalid(fail_index, fail_pos);
        return NULL;
    }
    return Py_BuildValue("nnLLLi", entries, puts, (long long)last, (long long)m.lookups, (long long)m.probes, status);
}

/* ---- the keep/drop pass ---------------------------------------------------------------------- */

/* CleanerFilter.retain for one record of a v2 data batch. */
int
kl_filter_record(void *vctx, Py_ssize_t index, const kl_record *r)
{
    filter_ctx *c = vctx;
    int64_t offset;
    int keep = 0;
    if (__builtin_add_overflow(c->base_offset, (int64_t)r->offset_delta, &offset))
        return -1;
    if (offset > c->latest)
        keep = 1; /* past what this pass mapped */
    else if (r->key_len < 0)
        c->keyless++;
    else {
        uint8_t d[16];
        uint64_t lo, hi;
        int found;
        kl_md5(c->buf + r->key_pos, (size_t)r->key_len, d);
        Py_ssize_t cell = map_find(c->map, d, &lo, &hi, &found);
        int64_t mapped = found ? (int64_t)c->map->cells[cell + 2] : -1;
        if (offset < mapped)
            c->superseded++; /* a later record of the key is in the map */
        else if (r->value_len < 0 && !c->retain_deletes)
            c->tombstones++; /* a tombstone past its delete horizon */
        else
            keep = 1;
    }
    c->flags[index] = (uint8_t)keep;
    if (keep) {
        c->kept++;
        if (r->value_len < 0)
            c->kept_tombstone = 1;
    }
    return 0;
}

/* filter_v2(table, buffer, pos, end, count, base_offset, latest, retain_deletes)
 *   -> (flags, kept, kept_tombstone, keyless, superseded, tombstones, lookups, probes)
 * flags: one byte per record, 1 to keep. The map is only read. */
static PyObject *
filter_v2(PyObject *self, PyObject *args)
{
    PyObject *tobj, *obj;
    Py_ssize_t pos, end, fail_index = 0, fail_pos = 0;
    long long base_offset, latest;
    int count, retain_deletes, rc;
    Py_buffer table, view;
    kl_map m;

    if (!PyArg_ParseTuple(args, "OOnniLLp:filter_v2", &tobj, &obj, &pos, &end, &count, &base_offset, &latest,
                          &retain_deletes))
        return NULL;
    if (kl_cleaner_table(tobj, &table, &m) < 0)
        return NULL;
    if (get_payload(obj, &view, pos, end, count, "filter_v2") < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    PyObject *flags = PyBytes_FromStringAndSize(NULL, count);
    if (flags == NULL) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&table);
        return NULL;
    }
    filter_ctx c = {view.buf, &m, base_offset, latest, retain_deletes, (uint8_t *)PyBytes_AS_STRING(flags), 0, 0, 0, 0, 0};
    if (count >= NOGIL_RECORDS) {
        Py_BEGIN_ALLOW_THREADS
        rc = kl_walk_v2(view.buf, pos, end, count, kl_filter_record, &c, NULL, &fail_index, &fail_pos);
        Py_END_ALLOW_THREADS
    }
    else
        rc = kl_walk_v2(view.buf, pos, end, count, kl_filter_record, &c, NULL, &fail_index, &fail_pos);
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    if (rc < 0) {
        Py_DECREF(flags);
        kl_set_invalid(fail_index, fail_pos);
        return NULL;
    }
    return Py_BuildValue("NnOnnnLL", flags, c.kept, c.kept_tombstone ? Py_True : Py_False, c.keyless, c.superseded,
                         c.tombstones, (long long)m.lookups, (long long)m.probes);
}

/* ---- re-encoding the kept records (records._rebuild's payload, without Record objects) -------- */

static inline int
varint_size(uint64_t z)
{
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline uint64_t
zigzag32(int32_t v)
{
    return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static inline uint64_t
zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline uint8_t *
put_varint(uint8_t *p, uint64_t z)
{
    while (z >= 0x80) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

static int
rebuild_record(void *vctx, Py_ssize_t index, const kl_record *r)
{
    rebuild_ctx *c = vctx;
    if (!c->flags[index])
        return 0;
    kept_record *k = &c->kept[c->n++];
    k->r = *r;
    if (c->log_append)
        k->timestamp = c->append_time; /* LogAppendTime: every record reads as the batch's time */
    else if (__builtin_add_overflow(c->base_timestamp, r->timestamp_delta, &k->timestamp))
        return -1;
    /* Header keys are decoded as UTF-8 (with replacement) and re-encoded by the pure core: an
     * ASCII key comes back byte for byte; anything else is left to the pure core. */
    if (r->header_count > 0) {
        Py_ssize_t p = r->headers_pos, kp, vp;
        int32_t kl, vl;
        for (int32_t h = 0; h < r->header_count; h++) {
            if (kl_next_header(c->buf, &p, r->end, &kp, &kl, &vp, &vl) < 0)
                return -1;
            for (int32_t j = 0; j < kl; j++)
                if (c->buf[kp + j] & 0x80)
                    return -1;
        }
    }
    return 0;
}

/* The size of one re-encoded record after its length varint (encode_record's layout: attributes
 * 0, timestamp delta, offset delta, key, value, header count, headers, canonical varints). */
static Py_ssize_t
record_body_size(const uint8_t *buf, const kl_record *r, int64_t ts_delta)
{
    Py_ssize_t n = 1 + varint_size(zigzag64(ts_delta)) + varint_size(zigzag32(r->offset_delta));
    n += r->key_len < 0 ? 1 : varint_size(zigzag32(r->key_len)) + r->key_len;
    n += r->value_len < 0 ? 1 : varint_size(zigzag32(r->value_len)) + r->value_len;
    n += varint_size(zigzag32(r->header_count));
    Py_ssize_t p = r->headers_pos, kp, vp;
    int32_t kl, vl;
    for (int32_t h = 0; h < r->header_count; h++) {
        kl_next_header(buf, &p, r->end, &kp, &kl, &vp, &vl); /* the walk checked every header */
        n += varint_size(zigzag32(kl)) + kl;
        n += vl < 0 ? 1 : varint_size(zigzag32(vl)) + vl;
    }
    return n;
}

uint8_t *
kl_write_record(uint8_t *out, const uint8_t *buf, const kl_record *r, int64_t ts_delta, Py_ssize_t body)
{
    out = put_varint(out, zigzag32((int32_t)body));
    *out++ = 0; /* record attributes: unused, written as 0 */
    out = put_varint(out, zigzag64(ts_delta));
    out = put_varint(out, zigzag32(r->offset_delta));
    if (r->key_len < 0)
        *out++ = 1; /* varint(-1) */
    else {
        out = put_varint(out, zigzag32(r->key_len));
        memcpy(out, buf + r->key_pos, (size_t)r->key_len);
        out += r->key_len;
    }
    if (r->value_len < 0)
        *out++ = 1;
    else {
        out = put_varint(out, zigzag32(r->value_len));
        memcpy(out, buf + r->value_pos, (size_t)r->value_len);
        out += r->value_len;
    }
    out = put_varint(out, zigzag32(r->header_count));
    Py_ssize_t p = r->headers_pos, kp, vp;
    int32_t kl, vl;
    for (int32_t h = 0; h < r->header_count; h++) {
        kl_next_header(buf, &p, r->end, &kp, &kl, &vp, &vl);
        out = put_varint(out, zigzag32(kl));
        memcpy(out, buf + kp, (size_t)kl);
        out += kl;
        if (vl < 0)
            *out++ = 1;
        else {
            out = put_varint(out, zigzag32(vl));
            memcpy(out, buf + vp, (size_t)vl);
            out += vl;
        }
    }
    return out;
}

/* Phase one (no Python API): walk, collect the kept records, fix the new base timestamp, size
 * every record. Returns the payload size, or -1 (malformed, overflow or not ASCII). */
Py_ssize_t
kl_rebuild_plan(rebuild_ctx *c, Py_ssize_t pos, Py_ssize_t end, int count, int has_horizon, int64_t horizon,
             int64_t *new_base, int64_t *max_ts, Py_ssize_t *fail_index, Py_ssize_t *fail_pos)
{
    if (kl_walk_v2(c->buf, pos, end, count, rebuild_record, c, NULL, fail_index, fail_pos) < 0)
        return -1;
    if (c->n == 0) {
        *fail_index = 0;
        *fail_pos = pos;
        return -1;
    }
    /* MemoryRecordsBuilder: the base timestamp is the delete horizon, else the first record's. */
    *new_base = has_horizon ? horizon : c->kept[0].timestamp;
    int64_t hi = INT64_MIN;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        kept_record *k = &c->kept[i];
        int64_t delta;
        if (__builtin_sub_overflow(k->timestamp, *new_base, &delta)) {
            *fail_index = i;
            *fail_pos = k->r.start;
            return -1;
        }
        if (k->timestamp > hi)
            hi = k->timestamp;
        k->r.timestamp_delta = delta;
        k->body = record_body_size(c->buf, &k->r, delta);
        if (k->body > INT32_MAX) {
            *fail_index = i;
            *fail_pos = k->r.start;
            return -1;
        }
        total += varint_size(zigzag32((int32_t)k->body)) + k->body;
    }
    *max_ts = hi;
    return total;
}

/* rebuild_v2(buffer, pos, end, count, flags, base_offset, base_timestamp, append_time, horizon)
 *   -> (payload, kept, base_timestamp, max_timestamp, last_kept_offset)
 * append_time: the batch's max timestamp under LogAppendTime, else None; horizon: the delete
 * horizon the rebuilt batch carries, or None. At least one record must be kept. */
static PyObject *
rebuild_v2(PyObject *self, PyObject *args)
{
    PyObject *obj, *fobj, *append_obj, *horizon_obj;
    Py_ssize_t pos, end, fail_index = 0, fail_pos = 0, size;
    long long base_offset, base_timestamp;
    int count;
    Py_buffer view, fview;
    int64_t horizon = 0, new_base = 0, max_ts = 0;

    if (!PyArg_ParseTuple(args, "OnniOLLOO:rebuild_v2", &obj, &pos, &end, &count, &fobj, &base_offset, &base_timestamp,
                          &append_obj, &horizon_obj))
        return NULL;
    rebuild_ctx c = {NULL, NULL, base_offset, base_timestamp, 0, append_obj != Py_None, NULL, 0};
    if (c.log_append) {
        c.append_time = PyLong_AsLongLong(append_obj);
        if (c.append_time == -1 && PyErr_Occurred())
            return NULL;
    }
    if (horizon_obj != Py_None) {
        horizon = PyLong_AsLongLong(horizon_obj);
        if (horizon == -1 && PyErr_Occurred())
            return NULL;
    }
    if (get_payload(obj, &view, pos, end, count, "rebuild_v2") < 0)
        return NULL;
    if (kl_get_buffer(fobj, &fview) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (fview.len != count) {
        PyBuffer_Release(&fview);
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "rebuild_v2: one flag per record");
        return NULL;
    }
    c.buf = view.buf;
    c.flags = fview.buf;
    c.kept = PyMem_Malloc(sizeof(kept_record) * (size_t)(count > 0 ? count : 1));
    if (c.kept == NULL) {
        PyBuffer_Release(&fview);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL, *payload = NULL;
    int nogil = count >= NOGIL_RECORDS;
    PyThreadState *ts = nogil ? PyEval_SaveThread() : NULL;
    size = kl_rebuild_plan(&c, pos, end, count, horizon_obj != Py_None, horizon, &new_base, &max_ts, &fail_index,
                        &fail_pos);
    if (nogil)
        PyEval_RestoreThread(ts);
    if (size < 0) {
        kl_set_invalid(fail_index, fail_pos);
        goto done;
    }
    payload = PyBytes_FromStringAndSize(NULL, size);
    if (payload == NULL)
        goto done;
    ts = nogil ? PyEval_SaveThread() : NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(payload);
    for (Py_ssize_t i = 0; i < c.n; i++)
        out = kl_write_record(out, c.buf, &c.kept[i].r, c.kept[i].r.timestamp_delta, c.kept[i].body);
    if (nogil)
        PyEval_RestoreThread(ts);
    /* the last kept record's offset: base + its delta (the walk's put_record check applies) */
    int64_t last;
    if (__builtin_add_overflow((int64_t)base_offset, (int64_t)c.kept[c.n - 1].r.offset_delta, &last)) {
        kl_set_invalid(c.n - 1, c.kept[c.n - 1].r.start);
        goto done;
    }
    result = Py_BuildValue("OnLLL", payload, c.n, (long long)new_base, (long long)max_ts, (long long)last);
done:
    Py_XDECREF(payload);
    PyMem_Free(c.kept);
    PyBuffer_Release(&fview);
    PyBuffer_Release(&view);
    return result;
}

PyMethodDef kl_cleaner_methods[] = {
    {"put_v2", put_v2, METH_VARARGS,
     "put_v2(table, buffer, pos, end, count, base_offset, min_offset, entries, max_entries)"
     " -> (entries, puts, last_put_offset, lookups, probes, status)"},
    {"map_run", kl_map_run, METH_VARARGS,
     "map_run(table, buffer, pos, end, max_batch, min_offset, entries, max_entries)"
     " -> (stop, batches, records, max_last_offset, entries, puts, latest, lookups, probes, status)"},
    {"filter_v2", filter_v2, METH_VARARGS,
     "filter_v2(table, buffer, pos, end, count, base_offset, latest, retain_deletes)"
     " -> (flags, kept, kept_tombstone, keyless, superseded, tombstones, lookups, probes)"},
    {"filter_run", kl_filter_run, METH_VARARGS,
     "filter_run(table, buffer, pos, end, max_batch, latest, now, delete_retention_ms, upper_bound, producers)"
     " -> (stop, output, totals, lookups, probes)"},
    {"rebuild_v2", rebuild_v2, METH_VARARGS,
     "rebuild_v2(buffer, pos, end, count, flags, base_offset, base_timestamp, append_time, horizon)"
     " -> (payload, kept, base_timestamp, max_timestamp, last_kept_offset)"},
    {NULL, NULL, 0, NULL},
};
