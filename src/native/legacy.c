/* The v0/v1 inner-message walk: the compiled twin of legacy.LegacyRecordBatch._inner_records
 * (same checks), over the decompressed value of a compressed wrapper message.
 *
 * An inner message (Kafka's LegacyRecord, inside a wrapper): offset:int64, size:int32,
 * crc:uint32 (CRC-32 of everything after it), magic:int8, attributes:int8, timestamp:int64 (v1
 * only), keyLength:int32 (-1 null), key, valueLength:int32 (-1 null), value; the key and value
 * fill the message exactly. Inner messages share the wrapper's magic and are not compressed.
 */
#include "native.h"
#include <string.h>

#define V1_ATTRIBUTES_AT 17 /* a v0/v1 message: offset, size, crc, magic, attributes */
#define OVERHEAD_V0 14 /* the size field's minimum: crc, magic, attributes, key and value sizes */
#define OVERHEAD_V1 22 /* ... and the timestamp */

/* ---- CRC-32 (IEEE 802.3, reflected 0xEDB88320: zlib.crc32), slicing by 8 ---------------------- */

static uint32_t crc_table[8][256];
static int crc_ready = 0;

static void
crc_init(void) /* under the GIL, before any caller releases it */
{
    if (crc_ready)
        return;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = crc_table[0][crc_table[t - 1][n] & 0xFF] ^ (crc_table[t - 1][n] >> 8);
    crc_ready = 1;
}

static uint32_t
crc32_ieee(const uint8_t *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
            crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}



/* One inner message, as checked. */
typedef struct {
    Py_ssize_t start, end;
    int64_t offset, timestamp;
    uint32_t crc;
    Py_ssize_t key_pos, value_pos;
    int32_t key_len, value_len;
} message;

/* Check the message at buf[pos:] (len bytes in all); 0 and *m filled, or -1. */
static int
next_message(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t len, int magic, message *m)
{
    if (len - pos < LOG_OVERHEAD + OVERHEAD_V0 || buf[pos + MAGIC_AT] != magic)
        return -1;
    int32_t size = get32(buf + pos + 8);
    int overhead = magic == 0 ? OVERHEAD_V0 : OVERHEAD_V1;
    if (size < overhead || size > len - pos - LOG_OVERHEAD)
        return -1;
    m->start = pos;
    m->end = pos + LOG_OVERHEAD + size;
    m->offset = get64(buf + pos);
    m->crc = (uint32_t)get32(buf + pos + 12);
    if (crc32_ieee(buf + pos + MAGIC_AT, m->end - pos - MAGIC_AT) != m->crc)
        return -1;
    if (buf[pos + V1_ATTRIBUTES_AT] & CODEC_MASK)
        return -1; /* nested compression */
    Py_ssize_t p = pos + V1_ATTRIBUTES_AT + 1;
    m->timestamp = -1;
    if (magic == 1) {
        m->timestamp = get64(buf + p);
        p += 8;
    }
    for (int k = 0; k < 2; k++) {
        if (m->end - p < 4)
            return -1;
        int32_t n = get32(buf + p);
        p += 4;
        if (n < -1 || n > m->end - p)
            return -1;
        if (k == 0) {
            m->key_pos = p;
            m->key_len = n;
        }
        else {
            m->value_pos = p;
            m->value_len = n;
        }
        if (n > 0)
            p += n;
    }
    return p == m->end ? 0 : -1;
}

/* The first pass: every message checked; their count and the last one's offset. */
static int
check_all(const uint8_t *buf, Py_ssize_t len, int magic, Py_ssize_t *count, int64_t *last_offset)
{
    message m;
    Py_ssize_t pos = 0, n = 0;
    while (pos < len) {
        if (next_message(buf, pos, len, magic, &m) < 0)
            return -1;
        *last_offset = m.offset;
        pos = m.end;
        n++;
    }
    *count = n;
    return n > 0 ? 0 : -1; /* an empty inner set is malformed */
}


/* legacy_inner(data, magic, wrapper_offset, append_ts|None, Record) -> list of Record
 * The records of a compressed v0/v1 wrapper whose decompressed value is `data`: offsets
 * absolute (v1: relative to the wrapper's offset, Kafka's rule), timestamps the inner ones or
 * the wrapper's append time. Invalid for anything the pure walk rejects. */
static PyObject *
legacy_inner(PyObject *self, PyObject *args)
{
    PyObject *obj, *append_obj, *type_obj;
    int magic;
    long long wrapper_offset;
    int64_t append_ts = 0, last = 0, base = 0;
    int has_append = 0, rc;
    Py_ssize_t count = 0;
    Py_buffer view;
    kl_record_type rt;

    if (!PyArg_ParseTuple(args, "OiLOO:legacy_inner", &obj, &magic, &wrapper_offset, &append_obj, &type_obj))
        return NULL;
    if (magic != 0 && magic != 1) {
        PyErr_SetString(PyExc_ValueError, "legacy_inner: magic must be 0 or 1");
        return NULL;
    }
    if (append_obj != Py_None) {
        append_ts = PyLong_AsLongLong(append_obj);
        if (append_ts == -1 && PyErr_Occurred())
            return NULL;
        has_append = 1;
    }
    if (kl_record_type_init(&rt, type_obj) < 0)
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    crc_init();
    const uint8_t *buf = view.buf;
    Py_BEGIN_ALLOW_THREADS
    rc = check_all(buf, view.len, magic, &count, &last);
    Py_END_ALLOW_THREADS
    if (rc == 0 && magic == 1 && wrapper_offset != 0) {
        /* Kafka (AbstractLegacyRecordBatch): inner offsets are relative to the last one, which
         * the wrapper's offset names; a wrapper offset below it is refused. */
        if (wrapper_offset < last || __builtin_sub_overflow((int64_t)wrapper_offset, last, &base))
            rc = -1;
    }
    if (rc < 0) {
        PyBuffer_Release(&view);
        kl_set_invalid(0, 0);
        return NULL;
    }
    PyObject *list = PyList_New(count);
    if (list == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    message m;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t offset;
        if (next_message(buf, pos, view.len, magic, &m) < 0 || __builtin_add_overflow(base, m.offset, &offset)) {
            Py_DECREF(list);
            PyBuffer_Release(&view);
            kl_set_invalid(i, pos);
            return NULL;
        }
        PyObject *v[KL_RECORD_SLOTS];
        v[0] = PyLong_FromLongLong(offset);
        v[1] = PyLong_FromLongLong(has_append ? append_ts : m.timestamp);
        v[2] = bytes_or_none(buf, m.key_pos, m.key_len);
        v[3] = bytes_or_none(buf, m.value_pos, m.value_len);
        v[4] = PyTuple_New(0);
        v[5] = PyLong_FromLong(-1);
        v[6] = PyLong_FromSsize_t(m.end - m.start);
        v[7] = PyLong_FromUnsignedLong(m.crc);
        PyObject *record = kl_new_record(&rt, v);
        if (record == NULL) {
            Py_DECREF(list);
            PyBuffer_Release(&view);
            return NULL;
        }
        PyList_SET_ITEM(list, i, record);
        pos = m.end;
    }
    PyBuffer_Release(&view);
    return list;
}

PyMethodDef kl_legacy_methods[] = {
    {"legacy_inner", legacy_inner, METH_VARARGS,
     "legacy_inner(data, magic, wrapper_offset, append_ts, Record) -> list of Record"},
    {NULL, NULL, 0, NULL},
};
