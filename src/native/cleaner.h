/* The cleaner's compiled pieces shared by cleaner.c (per batch: put_v2, filter_v2, rebuild_v2)
 * and cleaner_run.c (per run of batches: map_run, filter_run). The layout of the offset map is
 * described in cleaner.c. */
#ifndef KAFKALOG_CLEANER_H
#define KAFKALOG_CLEANER_H

#include "native.h"

#define CELLS_PER_SLOT 3
#define LAST_WINDOW 12     /* Kafka's hashSize - 4 */
#define NOGIL_RECORDS 256  /* release the GIL for batches of at least this many records */

typedef struct {
    uint64_t *cells;
    Py_ssize_t slots;
    int64_t lookups;
    int64_t probes;
} kl_map;

typedef struct {
    uint8_t digest[16];
    int64_t offset;
} put_item;

typedef struct {
    const uint8_t *buf;
    int64_t base_offset;
    int64_t min_offset;
    put_item *items;
    Py_ssize_t n;
} put_ctx;

typedef struct {
    const uint8_t *buf;
    kl_map *map;
    int64_t base_offset;
    int64_t latest;
    int retain_deletes;
    uint8_t *flags;
    Py_ssize_t kept, keyless, superseded, tombstones;
    int kept_tombstone;
} filter_ctx;

typedef struct {
    kl_record r;
    int64_t timestamp;  /* as a reader reports it */
    Py_ssize_t body;    /* the re-encoded record's size after its length varint */
} kept_record;

typedef struct {
    const uint8_t *buf;
    const uint8_t *flags;
    int64_t base_offset, base_timestamp, append_time;
    int log_append;
    kept_record *kept;
    Py_ssize_t n;
} rebuild_ctx;

/* The table argument (a writable C-contiguous buffer of uint64 cells, three per slot) as a map. */
int kl_cleaner_table(PyObject *obj, Py_buffer *view, kl_map *m);

/* Digest every key of the batch at c->buf[pos:end] (nothing changes if it is malformed: -1),
 * then put them in order: *status 0 every key put, 1 stopped at max_entries, 2 no free slot. */
int kl_put_records(kl_map *m, put_ctx *c, Py_ssize_t pos, Py_ssize_t end, int count, Py_ssize_t *entries,
                   Py_ssize_t max_entries, Py_ssize_t *puts, int64_t *last, int *status, Py_ssize_t *fail_index,
                   Py_ssize_t *fail_pos);

/* CleanerFilter.retain for one record of a v2 data batch (a kl_walk_v2 callback on a filter_ctx). */
int kl_filter_record(void *vctx, Py_ssize_t index, const kl_record *r);

/* Re-encoding the kept records: plan (sizes, the new base and max timestamps; -1 for input the
 * pure encoder must take) and write one record. */
Py_ssize_t kl_rebuild_plan(rebuild_ctx *c, Py_ssize_t pos, Py_ssize_t end, int count, int has_horizon, int64_t horizon,
                           int64_t *new_base, int64_t *max_ts, Py_ssize_t *fail_index, Py_ssize_t *fail_pos);
uint8_t *kl_write_record(uint8_t *out, const uint8_t *buf, const kl_record *r, int64_t ts_delta, Py_ssize_t body);

/* cleaner_run.c's functions, in cleaner.c's method table. */
PyObject *kl_map_run(PyObject *self, PyObject *args);
PyObject *kl_filter_run(PyObject *self, PyObject *args);

#endif
