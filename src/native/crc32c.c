/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Kafka's Crc32C computes it over a
 * v2 batch from its attributes to its end.
 *
 * Two implementations behind kl_crc32c, chosen once at run time:
 *  - x86-64 with SSE4.2: the `crc32` instruction over three independent streams at a time (the
 *    instruction has a latency of three cycles but a throughput of one, so one stream leaves two
 *    thirds of the unit idle); the three partial CRCs are joined by "shift by n zero bytes"
 *    operators precomputed as byte tables (CRC is linear over GF(2)).
 *  - everywhere else: slice-by-8 tables (eight bytes per step, table lookups only).
 * Both work on the raw register (no pre/post inversion inside); kl_crc32c applies Kafka's
 * conventions (initial ~0, final inversion) so it continues a CRC as crc32c(crc, more) does.
 */
#include "native.h"
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KL_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

#define POLY 0x82F63B78u

static uint32_t slice8[8][256];
/* Stream lengths of the three-way hardware loop, and their zero-shift operators. */
#define LONG_STREAM 4096
#define SHORT_STREAM 256
static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];
static int use_hw = 0;
static int ready = 0;

/* ---- GF(2) operators on the 32-bit register --------------------------------------------------- */

/* Apply the 32x32 bit matrix `mat` (column i = image of bit i) to `vec`. */
static uint32_t
gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1)
            sum ^= mat[i];
    return sum;
}

/* square = mat * mat */
static void
gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int i = 0; i < 32; i++)
        square[i] = gf2_times(mat, mat[i]);
}

/* The operator "feed `len` zero bytes to the register", as four byte-indexed tables. */
static void
zero_shift_tables(uint32_t tables[4][256], size_t len)
{
    uint32_t op[32], sq[32], acc[32];
    /* One zero bit: the reflected register shifts right, xoring the polynomial out of bit 0. */
    op[0] = POLY;
    for (int i = 1; i < 32; i++)
        op[i] = 1u << (i - 1);
    for (int i = 0; i < 32; i++)
        acc[i] = 1u << i; /* identity */
    /* op^8 is one zero byte; raise it to `len` by squaring. */
    gf2_square(sq, op);  /* 2 bits */
    gf2_square(op, sq);  /* 4 bits */
    gf2_square(sq, op);  /* 8 bits = one byte */
    memcpy(op, sq, sizeof(op));
    while (len) {
        if (len & 1) {
            uint32_t next[32];
            for (int i = 0; i < 32; i++)
                next[i] = gf2_times(op, acc[i]);
            memcpy(acc, next, sizeof(acc));
        }
        len >>= 1;
        if (len) {
            gf2_square(sq, op);
            memcpy(op, sq, sizeof(op));
        }
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            tables[k][b] = gf2_times(acc, b << (8 * k));
}

static inline uint32_t
shift(uint32_t tables[4][256], uint32_t crc)
{
    return tables[0][crc & 0xFF] ^ tables[1][(crc >> 8) & 0xFF] ^ tables[2][(crc >> 16) & 0xFF] ^
           tables[3][crc >> 24];
}

/* ---- the portable slice-by-8 core ------------------------------------------------------------- */

static uint32_t
crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ slice8[0][(crc ^ *p++) & 0xFF];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = slice8[7][w & 0xFF] ^ slice8[6][(w >> 8) & 0xFF] ^ slice8[5][(w >> 16) & 0xFF] ^
              slice8[4][(w >> 24) & 0xFF] ^ slice8[3][(w >> 32) & 0xFF] ^ slice8[2][(w >> 40) & 0xFF] ^
              slice8[1][(w >> 48) & 0xFF] ^ slice8[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ slice8[0][(crc ^ *p++) & 0xFF];
    return crc;
}

/* ---- the SSE4.2 core -------------------------------------------------------------------------- */

#ifdef KL_HAVE_SSE42
__attribute__((target("sse4.2"))) static uint32_t
crc_hw_streams(uint32_t crc, const uint8_t **pp, size_t *lenp, size_t stream, uint32_t tables[4][256])
{
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * stream) {
        uint64_t c0 = crc, c1 = 0, c2 = 0, w;
        const uint8_t *end = p + stream;
        do {
            memcpy(&w, p, 8);
            c0 = _mm_crc32_u64(c0, w);
            memcpy(&w, p + stream, 8);
            c1 = _mm_crc32_u64(c1, w);
            memcpy(&w, p + 2 * stream, 8);
            c2 = _mm_crc32_u64(c2, w);
            p += 8;
        } while (p < end);
        /* CRC(A || B) = shift_|B|(CRC(A)) ^ CRC_from_zero(B) on the raw register. */
        crc = shift(tables, (uint32_t)c0) ^ (uint32_t)c1;
        crc = shift(tables, crc) ^ (uint32_t)c2;
        p += 2 * stream;
        len -= 3 * stream;
    }
    *pp = p;
    *lenp = len;
    return crc;
}

__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8(crc, *p++);
        len--;
    }
    crc = crc_hw_streams(crc, &p, &len, LONG_STREAM, shift_long);
    crc = crc_hw_streams(crc, &p, &len, SHORT_STREAM, shift_short);
    uint64_t c = crc, w;
    while (len >= 8) {
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    crc = (uint32_t)c;
    while (len--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

void
kl_crc32c_init(void)
{
    if (ready)
        return;
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (c & 1 ? POLY : 0);
        slice8[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++)
            slice8[t][b] = (slice8[t - 1][b] >> 8) ^ slice8[0][slice8[t - 1][b] & 0xFF];
    zero_shift_tables(shift_long, LONG_STREAM);
    zero_shift_tables(shift_short, SHORT_STREAM);
#ifdef KL_HAVE_SSE42
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
    ready = 1;
}

uint32_t
kl_crc32c(uint32_t crc, const uint8_t *buf, size_t len)
{
    crc = ~crc;
#ifdef KL_HAVE_SSE42
    if (use_hw)
        return ~crc_hw(crc, buf, len);
#endif
    return ~crc_sw(crc, buf, len);
}

/* The portable core with Kafka's conventions (tests compare it with the hardware one). */
static uint32_t
crc32c_portable(uint32_t crc, const uint8_t *buf, size_t len)
{
    return ~crc_sw(~crc, buf, len);
}

/* crc32c(buffer, crc=0, portable=False) -> int: CRC-32C of the buffer, continuing `crc`. */
static PyObject *
py_crc32c(PyObject *self, PyObject *args)
{
    PyObject *obj;
    unsigned int crc = 0;
    int portable = 0;
    Py_buffer view;
    uint32_t out;
    uint32_t (*fn)(uint32_t, const uint8_t *, size_t);
    if (!PyArg_ParseTuple(args, "O|Ip:crc32c", &obj, &crc, &portable))
        return NULL;
    if (kl_get_buffer(obj, &view) < 0)
        return NULL;
    fn = portable ? crc32c_portable : kl_crc32c;
    if (view.len >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        out = fn(crc, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    else
        out = fn(crc, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(out);
}

/* crc32c_backend() -> "sse4.2" or "slice-by-8": which implementation runs on this CPU. */
static PyObject *
py_crc32c_backend(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(use_hw ? "sse4.2" : "slice-by-8");
}

PyMethodDef kl_crc32c_methods[] = {
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(buffer, crc=0, portable=False) -> int: CRC-32C, continuing crc"},
    {"crc32c_backend", py_crc32c_backend, METH_NOARGS, "which CRC-32C implementation runs here"},
    {NULL, NULL, 0, NULL},
};
