"""The compiled cleaner loops against the pure-Python reference: MD5, the offset map's put and
probe, the keep/drop pass and re-encoding in ``filter_to``, and whole cleanings of random logs,
which must leave byte-identical files and identical figures on both cores.

These tests switch cores themselves (``native.use``; ``SWITCHES_CORES``), so they run once.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    InvalidRecordError,
    Log,
    LogConfig,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
    native,
)
from kafkalog.cleaner import LogCleaner
from kafkalog.cleaner_filter import CleanedTransactionMetadata, CleanerFilter
from kafkalog.cleaner_offset_map import OffsetMap
from kafkalog.producer_state.manager import AppendOrigin, LastRecord
from kafkalog.recordbatch import encode_batch, encode_record
from kafkalog.memory_records import filter_to

from .test_cleaner import examples

pytestmark = pytest.mark.skipif(native.ext is None, reason="the compiled core is not built or KAFKALOG_PUREPYTHON=1")

T0 = 1_700_000_000_000
CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


#: These tests pick the core themselves (tests/conftest.py does not parametrize them).
SWITCHES_CORES = True


def ext():
    from kafkalog import _native

    return _native


# ---- MD5 ---------------------------------------------------------------------------------------

# RFC 1321, appendix A.5.
RFC_1321 = [
    (b"", "d41d8cd98f00b204e9800998ecf8427e"),
    (b"a", "0cc175b9c0f1b6a831c399e269772661"),
    (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
    (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
    (b"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
    (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
    (b"1234567890" * 8, "57edf4a22be3c955ac49da2e2107b67a"),
]


@pytest.mark.parametrize("data,digest", RFC_1321)
def test_md5_matches_the_rfc_1321_vectors(data: bytes, digest: str) -> None:
    assert ext().md5(data).hex() == digest


def test_md5_at_every_length_around_the_block_boundaries() -> None:
    data = bytes(range(256)) * 20
    for n in [*range(200), 4095, 4096, 4097, len(data)]:
        assert ext().md5(data[:n]) == hashlib.md5(data[:n]).digest(), n
    assert ext().md5(memoryview(data)[3:77]) == hashlib.md5(data[3:77]).digest()


@examples(300)
@given(st.binary(max_size=5000))
def test_md5_agrees_with_hashlib(data: bytes) -> None:
    assert ext().md5(data) == hashlib.md5(data).digest()


# ---- the offset map: put and probe -----------------------------------------------------------------


def payload_of(rows, *, base_offset: int = 0, headers=()) -> tuple[bytes, int]:
    """An uncompressed v2 records payload of ``(offset_delta, key, value)`` rows."""
    return b"".join(encode_record(d, 0, k, v, headers) for d, k, v in rows), len(rows)


def pure_put(m: OffsetMap, rows, base_offset: int, start: int, max_entries: int) -> bool:
    """The pure loop of ``Cleaner._map_batch``."""
    for delta, key, _ in rows:
        if key is not None and base_offset + delta >= start:
            if m.size >= max_entries:
                return True
            m.put(key, base_offset + delta)
    return False


keys = st.one_of(st.none(), st.binary(max_size=12), st.sampled_from([b"a", b"b", b"c", b""]))


@examples(200)
@given(
    batches=st.lists(st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=4))), min_size=1, max_size=30),
                     min_size=1, max_size=6),
    slots=st.integers(1, 40),
    load=st.sampled_from([0.5, 0.9, 1.0]),
    start=st.integers(0, 40),
)  # fmt: skip
def test_put_batch_matches_the_pure_puts(batches, slots, load, start) -> None:
    """Same slots, entries, latest offset, probe counts and stopping point, including small maps
    where keys collide, probe past the last digest window, and fill up."""
    a, b = OffsetMap(24 * slots), OffsetMap(24 * slots)
    max_entries = int(slots * load)
    offset = 0
    for batch in batches:
        rows = [(i, k, v) for i, (k, v) in enumerate(batch)]
        data, count = payload_of(rows)
        with native.use(pure=False):
            full_a = a.put_batch(data, 0, len(data), count, offset, start, max_entries)
        full_b = pure_put(b, rows, offset, start, max_entries)
        assert full_a == full_b
        assert bytes(a._table) == bytes(b._table)
        assert (a.size, a.latest_offset, a._lookups, a._probes) == (b.size, b.latest_offset, b._lookups, b._probes)
        if full_a:
            break
        offset += count
    for key in [k for batch in batches for k, _ in batch if k is not None]:
        assert a.get(key) == b.get(key)


def test_put_batch_reports_a_full_table_like_put() -> None:
    m = OffsetMap(24 * 3)
    data, count = payload_of([(i, b"k%d" % i, b"v") for i in range(5)])
    with native.use(pure=False), pytest.raises(OverflowError, match="full"):
        m.put_batch(data, 0, len(data), count, 0, 0, 10)
    assert m.size == 3


def test_a_malformed_payload_changes_nothing() -> None:
    m = OffsetMap(24 * 100)
    data, count = payload_of([(i, b"k%d" % i, b"v") for i in range(5)])
    with native.use(pure=False):
        for bad in (data[:-1], data + b"\x00"):
            with pytest.raises(native.Invalid):
                m.put_batch(bad, 0, len(bad), count, 0, 0, 100)
        with pytest.raises(native.Invalid):
            m.put_batch(data, 0, len(data), count + 1, 0, 0, 100)
        with pytest.raises(native.Invalid):  # an offset past int64
            m.put_batch(data, 0, len(data), count, 2**63 - 2, 0, 100)
    assert m.size == 0 and not any(bytes(m._table))


# ---- filter_to: the keep/drop pass and re-encoding ---------------------------------------------------


record = st.tuples(
    st.sampled_from([None, b"a", b"b", b"c", b"d", b"\x00" * 3]),
    st.one_of(st.none(), st.binary(max_size=30)),
    st.integers(-5, 5),  # timestamp step
    st.sampled_from([(), (("h", b"1"),), (("h", None), ("k2", b"")), (("\u00e9t\u00e9", b"x"),)]),
)


@st.composite
def batch_specs(draw):
    rows = draw(st.lists(record, min_size=1, max_size=12))
    return {
        "rows": rows,
        "codec": draw(st.sampled_from(CODECS)),
        "append_time": draw(st.booleans()),
        "gap": draw(st.integers(0, 3)),  # offsets skipped between records (a compacted batch)
        "horizon": draw(st.sampled_from([None, T0 - 10, T0 + 10])),
        "ts": draw(st.sampled_from([T0, 0, -1, 2**62])),
    }


def build_batch(spec, base_offset: int) -> tuple[bytes, int]:
    """A v2 batch from a spec (encoded by hand, so gaps and horizons are possible)."""
    rows, gap = spec["rows"], spec["gap"]
    base_ts = spec["horizon"] if spec["horizon"] is not None else spec["ts"]
    ts, parts, max_ts = spec["ts"], [], -1
    for i, (key, value, step, headers) in enumerate(rows):
        ts += step
        max_ts = max(max_ts, ts)
        parts.append(encode_record(i * (gap + 1), ts - base_ts, key, value, headers))
    last_delta = (len(rows) - 1) * (gap + 1) + gap
    entry = encode_batch(
        b"".join(parts), count=len(rows), base_offset=base_offset, last_offset_delta=last_delta, base_timestamp=base_ts,
        max_timestamp=T0 + 7 if spec["append_time"] else max_ts, compression=spec["codec"],
        timestamp_type=TimestampType.LOG_APPEND_TIME if spec["append_time"] else TimestampType.CREATE_TIME,
        delete_horizon_ms=spec["horizon"],
    )  # fmt: skip
    return entry, base_offset + last_delta + 1


def run_filter(data: bytes, mapped: dict, latest: int, now: int, pure: bool):
    m = OffsetMap(24 * 64)
    for key, offset in mapped.items():
        m.put(key, offset)
    m.update_latest_offset(latest)
    f = CleanerFilter(now, 50, m, False, CleanedTransactionMetadata(), {}, 10**9)
    out = bytearray()
    with native.use(pure=pure):
        try:
            result = filter_to(MemoryRecords(data).batches(validate=True), f, out)
        except Exception as e:  # noqa: BLE001 -- compared between the cores
            return ("error", type(e), str(e))
    return bytes(out), result, dict(f.removed), m._lookups, m._probes


@examples(150)
@given(specs=st.lists(batch_specs(), min_size=1, max_size=4), data=st.data())
def test_filter_to_is_byte_identical_on_both_cores(specs, data) -> None:
    """Random batches (codecs, LogAppendTime, offset gaps, delete horizons, tombstones, keyless
    records, headers with non-ASCII keys) and a random map: same bytes, same result."""
    entries, offset = [], 0
    for spec in specs:
        entry, offset = build_batch(spec, offset)
        entries.append(entry)
    log = b"".join(entries)
    mapped = data.draw(st.dictionaries(st.sampled_from([b"a", b"b", b"c", b"d", b"\x00" * 3]), st.integers(0, offset)))
    latest = data.draw(st.integers(-1, offset + 1))
    now = data.draw(st.sampled_from([T0 - 100, T0, T0 + 100]))
    assert run_filter(log, mapped, latest, now, pure=False) == run_filter(log, mapped, latest, now, pure=True)


@examples(150)
@given(spec=batch_specs(), data=st.data())
def test_mutated_records_give_the_same_result_or_error(spec, data) -> None:
    """A batch whose record bytes are damaged under a valid CRC: both cores keep the same bytes
    or raise the same error (the compiled core hands the batch to the pure one)."""
    spec = {**spec, "codec": Compression.NONE, "horizon": None}
    entry, _ = build_batch(spec, 0)
    body = bytearray(entry[61:])
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "cut", "extend", "varint"]))
        if kind == "flip" and body:
            i = data.draw(st.integers(0, len(body) - 1))
            body[i] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "cut" and body:
            del body[data.draw(st.integers(0, len(body) - 1)) :]
        elif kind == "extend":
            body += data.draw(st.binary(min_size=1, max_size=4))
        elif body:
            i = data.draw(st.integers(0, len(body) - 1))
            body[i : i + 1] = b"\xff" * data.draw(st.integers(1, 11))
    count = len(spec["rows"]) + data.draw(st.sampled_from([0, 0, 0, 1, -1]))
    damaged = encode_batch(bytes(body), count=max(count, 0), base_offset=0, last_offset_delta=max(count - 1, 0) + 3,
                           base_timestamp=T0, max_timestamp=T0)  # fmt: skip
    mapped = {b"a": 2, b"b": 0}
    a = run_filter(damaged, mapped, 5, T0, pure=False)
    b = run_filter(damaged, mapped, 5, T0, pure=True)
    assert a == b


def test_a_malformed_record_raises_the_pure_error_on_the_native_core() -> None:
    good, _ = payload_of([(0, b"a", b"1"), (1, b"b", b"2")])
    bad = good[:-1] + b"\x02"  # the second record's header count: 1 header that is not there
    entry = encode_batch(bad, count=2, base_offset=0, last_offset_delta=1, base_timestamp=T0, max_timestamp=T0)
    result = run_filter(entry, {b"a": 0}, 5, T0, pure=False)
    assert result[0] == "error" and result[1] is InvalidRecordError
    assert result == run_filter(entry, {b"a": 0}, 5, T0, pure=True)


# ---- whole cleanings ---------------------------------------------------------------------------------

TIMING = {"elapsed_s", "map_s", "throttled_s"}
FILES = (".log", ".index", ".timeindex", ".txnindex")

op = st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(st.sampled_from([b"k0", b"k1", b"k2", b"k3", None]),
                                                    st.one_of(st.none(), st.binary(max_size=40))), min_size=1, max_size=8),
              st.sampled_from(CODECS), st.integers(0, 2)),  # (rows, codec, producer: 0 none, 1 transactional, 2 idempotent)
    st.tuples(st.just("end"), st.booleans()),  # end the open transaction: commit or abort
    st.tuples(st.just("roll")),
    st.tuples(st.just("tick"), st.integers(0, 300)),
    st.tuples(st.just("clean"), st.sampled_from([3, 6, 1000])),
    st.tuples(st.just("legacy"), st.lists(st.tuples(st.sampled_from([b"k0", b"k1"]), st.binary(max_size=8)), min_size=1,
                                          max_size=3), st.sampled_from([0, 1])),
)  # fmt: skip


class Twin:
    """The same log twice, one cleaned on each core."""

    def __init__(self, root: Path) -> None:
        self.now = T0
        config = LogConfig(cleanup_policy="compact", segment_bytes=600, delete_retention_ms=100, file_delete_delay_ms=0)
        self.logs = {pure: Log.open(root / f"{'pure' if pure else 'native'}-0", config, clock=self.clock) for pure in (False, True)}
        self.seqs: dict[int, int] = {}  # the next sequence of each producer
        self.open_txn = False

    def clock(self) -> int:
        return self.now

    def append(self, records: MemoryRecords, **kw) -> None:
        for log in self.logs.values():
            log.append(MemoryRecords(bytes(records.buffer)), **kw)

    def clean(self, slots: int) -> None:
        results = {}
        for pure, log in self.logs.items():
            cleaner = LogCleaner(dedupe_buffer_size=24 * slots, clock=self.clock)
            with native.use(pure=pure):
                try:
                    stats = cleaner.clean(log)
                except Exception as e:  # noqa: BLE001
                    results[pure] = ("error", type(e))
                    continue
            d = None if stats is None else {k: v for k, v in stats.to_dict().items() if k not in TIMING and k != "log"}
            results[pure] = d
        assert results[False] == results[True]
        files = {}
        for pure, log in self.logs.items():
            files[pure] = {p.name: p.read_bytes() for p in sorted(log.directory.iterdir()) if p.suffix in FILES}
        assert files[False] == files[True]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


@pytest.mark.timeout_guard(240)
@examples(40)
@given(ops=st.lists(op, min_size=1, max_size=30))
def test_random_logs_clean_to_identical_files_on_both_cores(ops) -> None:
    root = Path(tempfile.mkdtemp(prefix="kafkalog-twin-"))
    twin = Twin(root)
    try:
        for step in ops:
            kind = step[0]
            if kind == "append":
                _, rows, codec, producer = step
                txn = producer == 1
                # A compacted topic refuses keyless records from producers: a follower's append
                # (offsets already assigned) brings them in.
                keyless = not producer and any(k is None for k, _ in rows)
                pid = {0: -1, 1: 7, 2: 8}[producer]  # 8: an idempotent producer outside transactions
                b = RecordBatchBuilder(
                    2, codec, producer_id=pid, producer_epoch=0 if producer else -1,
                    base_sequence=twin.seqs.get(pid, 0) if producer else -1, is_transactional=txn,
                    base_offset=twin.logs[False].log_end_offset if keyless else 0,
                )  # fmt: skip
                for i, (k, v) in enumerate(rows):
                    k = b"k0" if k is None and producer else k
                    b.append(k, v, timestamp=twin.now + i, headers=[("h", b"%d" % i)] if i % 3 == 1 else [])
                twin.append(b.build(), assign_offsets=not keyless)
                if producer:
                    twin.seqs[pid] = twin.seqs.get(pid, 0) + len(rows)
                if txn:
                    twin.open_txn = True
            elif kind == "end" and twin.open_txn:
                kind_ = ControlRecordType.COMMIT if step[1] else ControlRecordType.ABORT
                twin.append(RecordBatchBuilder.end_transaction_marker(
                    kind_, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=twin.now,
                ), origin=AppendOrigin.COORDINATOR)  # fmt: skip
                twin.open_txn = False
            elif kind == "roll":
                for log in twin.logs.values():
                    log.roll()
            elif kind == "tick":
                twin.now += step[1]
            elif kind == "clean":
                twin.clean(step[1])
            elif kind == "legacy":
                _, rows, magic = step
                b = RecordBatchBuilder(magic, Compression.GZIP,
                                       TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP_TYPE)
                for k, v in rows:
                    b.append(k, v, timestamp=twin.now if magic else -1)
                twin.append(b.build())
        for log in twin.logs.values():
            log.roll()
        twin.now += 1000
        twin.clean(1000)
    finally:
        twin.close()
        shutil.rmtree(root, ignore_errors=True)


# ---- whole runs of batches: put_run and filter_run against the per-batch loops ---------------------


def build_plain(spec, base_offset: int, producer_id: int) -> tuple[bytes, int, int]:
    """An uncompressed v2 data batch from a spec, with a producer id: (entry, next offset, last)."""
    entry, next_offset = build_batch({**spec, "codec": Compression.NONE}, base_offset)
    if producer_id >= 0:
        from kafkalog.crc import crc32c

        raw = bytearray(entry)
        raw[43:51] = producer_id.to_bytes(8, "big")
        raw[51:53] = (0).to_bytes(2, "big")
        raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
        entry = bytes(raw)
    return entry, next_offset, next_offset - 1


def _damage(data, log: bytes) -> bytes:
    """A few hostile edits: a flipped byte (CRC mismatch), a torn tail, a control or transactional
    flag (a batch the run must leave to Python), all with the CRC made good again but the flip."""
    from kafkalog.crc import crc32c

    raw = bytearray(log)
    kind = data.draw(st.sampled_from(["none", "none", "flip", "tail", "control", "txn", "record"]))
    starts, pos = [], 0
    while pos + 12 <= len(raw):
        starts.append(pos)
        pos += 12 + int.from_bytes(raw[pos + 8 : pos + 12], "big")
    at = data.draw(st.sampled_from(starts))
    if kind == "flip":
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 0x10
    elif kind == "tail":
        del raw[data.draw(st.integers(1, len(raw))) :]
    elif kind in ("control", "txn", "record"):
        if kind == "record":
            raw[at + 61] = 0x7F  # the first record's length: negative
        else:
            raw[at + 22] |= 0x20 if kind == "control" else 0x10
        size = int.from_bytes(raw[at + 8 : at + 12], "big")
        raw[at + 17 : at + 21] = crc32c(bytes(raw[at + 21 : at + 12 + size])).to_bytes(4, "big")
    return bytes(raw)


def _pure_filter(data: bytes, m: OffsetMap, now: int, last_records: dict, upper: int):
    """filter_to of the batches the run would take, one by one, on the pure core."""
    f = CleanerFilter(now, 50, m, False, CleanedTransactionMetadata(), last_records, upper)
    out = bytearray()
    with native.use(pure=True):
        result = filter_to(MemoryRecords(data).batches(validate=True), f, out)
    return bytes(out), result, dict(f.removed)


@examples(150)
@given(specs=st.lists(st.tuples(batch_specs(), st.sampled_from([-1, -1, 4, 9])), min_size=1, max_size=5),
       data=st.data())
def test_filter_run_writes_what_filter_to_writes(specs, data) -> None:
    """A run of plain data batches (LogAppendTime, offset gaps, delete horizons, tombstones,
    keyless records, non-ASCII header keys, producers whose last batch stays, the upper bound):
    filter_run's bytes and counts are filter_to's over the batches it took, and it stops exactly
    before an entry it must leave to Python (damage, markers, transactions, a torn tail)."""
    entries, offset, lasts = [], 0, {}
    for spec, pid in specs:
        entry, offset, last = build_plain(spec, offset, pid)
        entries.append(entry)
        if pid >= 0:
            lasts[pid] = last
    log = _damage(data, b"".join(entries))
    mapped = data.draw(st.dictionaries(st.sampled_from([b"a", b"b", b"c", b"d", b"\x00" * 3]), st.integers(0, offset)))
    latest = data.draw(st.integers(-1, offset + 1))
    now = data.draw(st.sampled_from([T0 - 100, T0, T0 + 100]))
    upper = data.draw(st.sampled_from([offset, offset + 5, 10**9]))
    last_records = {pid: LastRecord(data.draw(st.sampled_from([last, last - 1, None])), 0) for pid, last in lasts.items()}

    def fresh_map() -> OffsetMap:
        m = OffsetMap(24 * 64)
        for key, off in mapped.items():
            m.put(key, off)
        m.update_latest_offset(latest)
        return m

    m = fresh_map()
    f = CleanerFilter(now, 50, m, False, CleanedTransactionMetadata(), last_records, upper)
    with native.use(pure=False):
        run = f.filter_run(log, 0, len(log), 1 << 30)
    assert run is not None and 0 <= run.stop <= len(log)
    want_out, want, removed = _pure_filter(log[: run.stop], fresh_map(), now, last_records, upper)
    assert run.output == want_out
    assert (run.batches, run.records_read, run.records_retained, run.bytes_retained, run.batches_rewritten,
            run.empty_batches, run.horizons_set) == (
        want.batches_read, want.records_read, want.records_retained, want.bytes_retained, want.batches_rewritten,
        want.empty_batches, want.horizons_set)  # fmt: skip
    assert dict(f.removed) == removed
    if run.stop < len(log):
        # The entry at stop is one the run does not take: filter_to alone on it raises or keeps
        # what it keeps; the run taken again from there takes nothing.
        with native.use(pure=False):
            again = f.filter_run(log, run.stop, len(log), 1 << 30)
        assert again.batches == 0 and again.stop == run.stop


@examples(150)
@given(specs=st.lists(st.tuples(batch_specs(), st.sampled_from([-1, 4])), min_size=1, max_size=5),
       slots=st.integers(2, 40), load=st.sampled_from([0.5, 0.9, 1.0]), data=st.data())
def test_put_run_puts_what_the_map_loop_puts(specs, slots, load, data) -> None:
    """map_run over a run of plain batches: the same table, entries, latest offset and 'full'
    as put_batch and update_latest_offset batch by batch (Cleaner._map_one's rule)."""
    entries, offset = [], 0
    for spec, pid in specs:
        entry, offset, _ = build_plain(spec, offset, pid)
        entries.append(entry)
    log = _damage(data, b"".join(entries))
    start = data.draw(st.integers(0, offset + 1))
    max_entries = int(slots * load)
    run_map = OffsetMap(24 * slots)
    with native.use(pure=False):
        try:
            stop, batches, records, max_last, full = run_map.put_run(log, 0, len(log), 1 << 30, start, max_entries)
        except OverflowError:
            stop = None
    loop_map = OffsetMap(24 * slots)
    taken, n, loop_full, error = 0, 0, False, False
    with native.use(pure=False):
        for batch in MemoryRecords(log[: len(log) if stop is None else stop]).batches():
            try:
                data_, begin, end = (batch.entry(), 61, batch.size_in_bytes)
                loop_full = loop_map.put_batch(data_, begin, end, batch.count, batch.base_offset, start, max_entries)
            except OverflowError:
                error = True
                break
            taken += 1
            n += batch.count
            if loop_full:
                break
            if batch.last_offset >= start:
                loop_map.update_latest_offset(batch.last_offset)
    if stop is None:
        assert error
        return
    assert (batches, records, full) == (taken, n, loop_full)
    assert run_map.size == loop_map.size and run_map.latest_offset == loop_map.latest_offset
    assert (run_map._table == loop_map._table).all()
