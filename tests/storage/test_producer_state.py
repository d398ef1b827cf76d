"""Producer state (``kafkalog.producer_state.manager``): the snapshot format byte for byte, real broker
snapshots, Kafka's idempotence and transaction rules (the cases of Kafka's
``ProducerStateManagerTest``, written here from the behaviour), snapshot management and
reloading, and a hypothesis model of the client-side rules.
"""

from __future__ import annotations

import json
import logging
import re
import struct
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import FileRecords, MemoryRecords, RecordBatchBuilder
from kafkalog.crc import crc32c
from kafkalog.errors import (
    CorruptCheckpointError,
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkalogError,
    OutOfOrderSequenceError,
)
from kafkalog.producer_state.entry import BatchMetadata, ProducerStateEntry
from kafkalog.producer_state.snapshot import (
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    snapshot_order,
    write_snapshot,
)
from kafkalog.producer_state.manager import (
    AppendOrigin,
    CompletedTxn,
    LastRecord,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    TxnMetadata,
)
from kafkalog.record import ControlRecordType, control_key
from kafkalog.recordbatch import encode_batch
from kafkalog.transaction_index import TransactionIndex

INT32_MAX = 2**31 - 1
SNAPSHOTS = DATA / "snapshots"
REAL_COPIES = DATA / "real"
SHARED_REAL = SHARED_CORPUS / "real"
NIKHIL_DEMO = "NikhilDighe9975__kafka_setup/nikhilDemo-0"
TENITEMS = "macsakini__KafkaCluster/tenitems-0"
KSQL = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/_confluent-ksql-default__command_topic-0"
TXN_RANDOM = DATA / "kafka-3.8" / "v2-txn-random"
PID = 1
EPOCH = 0
NOW = 1_700_000_000_000


# -- building batches ------------------------------------------------------------------------------


def data_batch(
    pid: int = PID,
    epoch: int = EPOCH,
    seq: int = 0,
    offset: int = 0,
    *,
    count: int = 1,
    txn: bool = False,
    ts: int = NOW,
):
    """A v2 data batch of ``count`` records at ``offset`` with base sequence ``seq``."""
    b = RecordBatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn, base_offset=offset
    )
    for i in range(count):
        b.append(b"k%d" % i, b"v", timestamp=ts + i)
    return next(b.build().batches())


def marker(
    pid: int = PID,
    epoch: int = EPOCH,
    kind: ControlRecordType = ControlRecordType.COMMIT,
    offset: int = 0,
    *,
    coordinator_epoch: int = 0,
    ts: int = NOW,
):
    records = RecordBatchBuilder.end_transaction_marker(
        kind,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=ts,
        base_offset=offset,
    )
    return next(records.batches())


def apply(m: ProducerStateManager, batch, *, from_client: bool = True) -> CompletedTxn | None:
    """Append as Kafka's log does: update, complete the transaction a marker ends, move the end."""
    txn = m.append_batch(batch, from_client=from_client)
    if txn is not None:
        m.complete_txn(txn)
    m.update_map_end_offset(batch.last_offset + 1)
    return txn


def state_of(m: ProducerStateManager) -> tuple:
    """Everything observable about a manager's state, for before/after comparisons."""
    return (
        {pid: repr(e) for pid, e in m.active_producers.items()},
        m.ongoing_txns,
        m.first_undecided_offset,
        m.first_unstable_offset,
        m.map_end_offset,
        encode_snapshot(m.snapshot_entries()),
    )


@pytest.fixture
def m(tmp_path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


# == the snapshot format ===========================================================================


def test_empty_snapshot_is_ten_bytes_and_what_brokers_write():
    data = encode_snapshot([])
    assert len(data) == 10
    assert data == struct.pack(">hIi", 1, crc32c(b"\0\0\0\0"), 0)
    broker = SNAPSHOTS / "seanorth__kafka-server/__consumer_offsets-16/00000000000000000022.snapshot"
    assert data == broker.read_bytes()
    assert decode_snapshot(data) == []


def test_entry_layout_field_by_field():
    entry = ProducerStateEntry(
        0x0102030405060708,
        0x1112,
        0x21222324,
        0x3132333435363738,
        0x4142434445464748,
        [BatchMetadata(0x51525354, 0x6162636465666768, 0x71727374, 0x3132333435363738)],
    )
    data = encode_snapshot([entry])
    assert len(data) == 10 + 46
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])  # the CRC covers the count and the entries
    assert data[10:] == bytes.fromhex(
        "0102030405060708"  # ProducerId
        "1112"  # Epoch
        "51525354"  # LastSequence
        "6162636465666768"  # LastOffset
        "71727374"  # OffsetDelta
        "3132333435363738"  # Timestamp (the entry's last timestamp)
        "21222324"  # CoordinatorEpoch
        "4142434445464748"  # CurrentTxnFirstOffset
    )


def test_entry_without_batch_or_transaction_writes_minus_ones():
    entry = ProducerStateEntry(11, 12, 13, 123456)
    data = encode_snapshot([entry])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (11, 12, -1, -1, 0, 123456, 13, -1)
    (back,) = decode_snapshot(data)
    assert back == entry and back.is_empty and back.current_txn_first_offset is None


def test_only_the_last_batch_is_written_and_read_back():
    """Kafka's testReadWriteSnapshot, plus: of five remembered batches only the last survives."""
    batches = [BatchMetadata(i, 10 * i, 2, 1000 + i) for i in range(5)]
    entry = ProducerStateEntry(1, 2, 3, 1004, 100, batches)
    other = ProducerStateEntry(11, 12, 13, 123456)
    back = decode_snapshot(encode_snapshot([entry, other]))
    assert back[0] == ProducerStateEntry(1, 2, 3, 1004, 100, [batches[-1]])
    assert back[1] == other
    assert (back[0].first_seq, back[0].last_seq, back[0].first_data_offset, back[0].last_data_offset) == (2, 4, 38, 40)


def test_write_and_read_snapshot_files(tmp_path):
    entries = [ProducerStateEntry(5, 1, 0, NOW, None, [BatchMetadata(7, 70, 3, NOW)])]
    path = tmp_path / "00000000000000000071.snapshot"
    write_snapshot(path, entries)
    assert read_snapshot(path) == entries
    assert ProducerStateManager.read_snapshot(path) == entries
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left behind


INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NON_NEG64 = st.integers(0, 2**63 - 1)


@st.composite
def snapshot_entries(draw) -> ProducerStateEntry:
    """An entry as a snapshot can hold it: a last batch (offset >= 0) or none, an open
    transaction (first offset >= 0) or none."""
    batches = []
    if draw(st.booleans()):
        batches = [BatchMetadata(draw(INT32), draw(NON_NEG64), draw(INT32), draw(INT64))]
    ts = batches[0].timestamp if batches and draw(st.booleans()) else draw(INT64)
    if batches:  # the entry's timestamp is what is written; the batch's must agree to round trip
        batches = [batches[0]._replace(timestamp=ts)]
    txn = draw(st.none() | NON_NEG64)
    return ProducerStateEntry(draw(INT64), draw(INT16), draw(INT32), ts, txn, batches)


@examples(200)
@given(st.lists(snapshot_entries(), max_size=8))
def test_round_trip_entries(entries):
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    back = decode_snapshot(data)
    assert back == entries
    assert encode_snapshot(back) == data


@examples(200)
@given(st.binary(max_size=160))
def test_arbitrary_bytes_decode_or_raise_corrupt(data):
    try:
        entries = decode_snapshot(data, file="x.snapshot")
    except CorruptCheckpointError as e:
        assert e.file == "x.snapshot" and e.position is not None and 0 <= e.position <= len(data)
    else:
        assert len(data) == 10 + 46 * len(entries)


@examples(200)
@given(st.lists(snapshot_entries(), min_size=1, max_size=4), st.data())
def test_any_changed_byte_is_caught(entries, data):
    good = encode_snapshot(entries)
    pos = data.draw(st.integers(0, len(good) - 1), label="position")
    flip = data.draw(st.integers(1, 255), label="xor")
    bad = bytearray(good)
    bad[pos] ^= flip
    with pytest.raises(CorruptCheckpointError):
        decode_snapshot(bytes(bad))


@examples(100)
@given(st.lists(snapshot_entries(), max_size=4), st.data())
def test_every_truncation_is_caught(entries, data):
    good = encode_snapshot(entries)
    cut = data.draw(st.integers(0, len(good) - 1), label="length")
    with pytest.raises(CorruptCheckpointError) as info:
        decode_snapshot(good[:cut], file="f")
    assert "truncated" in str(info.value)


def _one_entry() -> bytes:
    return encode_snapshot([ProducerStateEntry(7, 1, 2, NOW, None, [BatchMetadata(4, 40, 0, NOW)])])


def _recrc(data: bytes) -> bytes:
    return data[:2] + struct.pack(">I", crc32c(data[6:])) + data[6:]


def _with_count(count: int) -> bytes:
    """The one-entry snapshot claiming ``count`` entries, its CRC refreshed."""
    return _recrc(_one_entry()[:6] + struct.pack(">i", count) + _one_entry()[10:])


CORRUPT = {
    # name: (bytes, position, words in the message)
    "empty": (b"", 0, "truncated"),
    "one-byte": (b"\0", 1, "truncated"),
    "version-0": (b"\0\0" + _one_entry()[2:], 0, "unknown snapshot version 0"),
    "version-2": (b"\0\2" + _one_entry()[2:], 0, "unknown snapshot version 2"),
    "version-minus-1": (b"\xff\xff" + _one_entry()[2:], 0, "unknown snapshot version -1"),
    "header-cut": (_one_entry()[:7], 7, "the header needs 10"),
    "negative-count": (_with_count(-1), 6, "negative entry count -1"),
    "count-too-large": (_with_count(2), 56, "2 entries need 102 bytes"),
    "count-too-small": (_with_count(0), 10, "46 bytes after the 0 entries"),
    "entry-cut": (_one_entry()[:40], 10, "entry 0 is incomplete"),
    "trailing-byte": (_one_entry() + b"\0", 56, "1 bytes after the 1 entries"),
    "entry-byte-changed": (_one_entry()[:20] + b"\x99" + _one_entry()[21:], 2, "CRC is no longer valid"),
    "crc-changed": (_one_entry()[:2] + b"\0\0\0\0" + _one_entry()[6:], 2, "stored crc 0"),
    # Kafka's testLoadFromCorruptSnapshotFile: 37 zero bytes written over the start.
    "zeroed-start": (b"\0" * 37 + _one_entry()[37:], 0, "unknown snapshot version 0"),
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_snapshot_variants(tmp_path, name):
    data, position, words = CORRUPT[name]
    path = tmp_path / "00000000000000000005.snapshot"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as info:
        read_snapshot(path)
    err = info.value
    assert err.file == str(path) and err.position == position
    assert str(path) in str(err) and f"position {position}" in str(err)
    assert words in str(err)


# == real snapshots ================================================================================


def test_real_copies_round_trip():
    copies = sorted(SNAPSHOTS.rglob("*.snapshot"))
    assert len(copies) == 3
    for path in copies:
        assert encode_snapshot(read_snapshot(path)) == path.read_bytes(), path


def test_real_nikhil_demo_entries():
    entries = read_snapshot(SNAPSHOTS / NIKHIL_DEMO / "00000000000000000003.snapshot")
    fields = [(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta) for e in entries]
    assert fields == [(10000, 0, 1, 2, 0), (7000, 0, 0, 0, 0)]
    assert [e.last_timestamp for e in entries] == [1722857166514, 1722856846589]
    assert all(e.coordinator_epoch == -1 and e.current_txn_first_offset is None for e in entries)


def replay(log: Path, directory: Path, *, from_client: bool) -> ProducerStateManager:
    """Load a log's producer state as Kafka's LogSegment.recover does, batch by batch."""
    m = ProducerStateManager(directory)
    for batch in FileRecords.open(log).batches():
        apply(m, batch, from_client=from_client)
    return m


@pytest.mark.parametrize("from_client", [False, True])
def test_replayed_nikhil_demo_snapshot_is_the_brokers_byte_for_byte(tmp_path, from_client):
    """The log holds producer 7000 before 10000; the broker's snapshot lists 10000 first, the
    order of Java's HashMap buckets (10000 & 15 = 0, 7000 & 15 = 8), and so does ours."""
    m = replay(REAL_COPIES / NIKHIL_DEMO / "00000000000000000000.log", tmp_path, from_client=from_client)
    path = m.take_snapshot()
    assert path == tmp_path / "00000000000000000003.snapshot"
    assert path.read_bytes() == (SNAPSHOTS / NIKHIL_DEMO / "00000000000000000003.snapshot").read_bytes()
    assert list(m.active_producers) == [7000, 10000]  # insertion order is not the file's


def test_replayed_debug_topic_snapshot_is_the_brokers(tmp_path):
    m = replay(REAL_COPIES / "William0423__kafka/debug_topic-0/00000000000000000000.log", tmp_path, from_client=True)
    assert m.is_empty and m.map_end_offset == 40
    expected = (SNAPSHOTS / "William0423__kafka/debug_topic-0/00000000000000000040.snapshot").read_bytes()
    assert m.take_snapshot().read_bytes() == expected


def _shared_snapshots() -> list[str]:
    if not SHARED_REAL.is_dir():
        return []
    return sorted(str(p.relative_to(SHARED_REAL)) for p in SHARED_REAL.rglob("*.snapshot"))


SHARED_SNAPSHOTS = _shared_snapshots()
_NO_SHARED = "shared corpus ../shared/corpus/real is absent"


def _manifest_entry_counts() -> dict[str, int]:
    """``<dir>/<tp>/<file>`` -> entry count from the shared MANIFEST's snapshot lines."""
    counts, repo, tp = {}, None, None
    for line in (SHARED_REAL / "MANIFEST.md").read_text().splitlines():
        if line.startswith("## "):
            repo = line[3:].strip()
        elif m := re.match(r"- `([^`]+)/` \(from", line):
            tp = m.group(1)
        elif m := re.match(r"\s+- (\d{20}\.snapshot): producer snapshot v1, \d+ B, (\d+) entries", line):
            counts[f"{repo}/{tp}/{m.group(1)}"] = int(m.group(2))
    return counts


@pytest.mark.parametrize("rel", SHARED_SNAPSHOTS or [None], ids=lambda r: r or "absent")
def test_every_shared_real_snapshot_reads_and_rewrites_byte_for_byte(rel):
    if rel is None:
        pytest.skip(_NO_SHARED)
    path = SHARED_REAL / rel
    data = path.read_bytes()
    entries = read_snapshot(path)
    assert encode_snapshot(entries) == data
    counts = _manifest_entry_counts()
    if rel in counts:
        assert len(entries) == counts[rel]


def test_shared_corpus_has_the_known_snapshots():
    if not SHARED_SNAPSHOTS:
        pytest.skip(_NO_SHARED)
    assert len(SHARED_SNAPSHOTS) >= 42
    assert f"{TENITEMS}/00000000000000000009.snapshot" in SHARED_SNAPSHOTS


def _scala_212_hashtable_order(ids: list[int]) -> list[int]:
    """The order Scala 2.12's ``mutable.HashMap`` (table of 16) iterates ``Long`` keys in:
    ``improve`` scrambles the hash with ``byteswap32``, iteration runs from the last bucket down.
    Kafka up to 3.4 kept producers in such a map."""
    mask = 0xFFFFFFFF

    def byteswap32(v: int) -> int:
        hc = (v * 0x9E3775CD) & mask
        hc = int.from_bytes(hc.to_bytes(4, "big"), "little")
        return (hc * 0x9E3775CD) & mask

    def index(h: int) -> int:
        i = byteswap32(h)
        improved = ((i >> 4) | (i << 28)) & mask  # seed = bitCount(15) = 4
        return (improved >> 28) & 15

    return sorted(ids, key=lambda k: -index(k))


def test_shared_tenitems_snapshot_from_a_scala_broker(tmp_path):
    """tenitems-0 (Kafka 3.3-era, Scala) lists producers 2, 4, 3: the same entries a replay
    gives, in Scala 2.12's HashMap order rather than Java's (2, 3, 4)."""
    snap = SHARED_REAL / TENITEMS / "00000000000000000009.snapshot"
    if not snap.exists():
        pytest.skip(_NO_SHARED)
    real = read_snapshot(snap)
    assert [e.producer_id for e in real] == [2, 4, 3]
    m = replay(SHARED_REAL / TENITEMS / "00000000000000000000.log", tmp_path, from_client=True)
    assert m.map_end_offset == 9
    # The same entries (a snapshot keeps each producer's last batch only).
    assert {e.producer_id: encode_snapshot([e]) for e in m.snapshot_entries()} == {
        e.producer_id: encode_snapshot([e]) for e in real
    }
    assert [e.producer_id for e in m.snapshot_entries()] == [2, 3, 4]
    entries = m.active_producers
    scala = [entries[pid] for pid in _scala_212_hashtable_order(list(entries))]
    assert encode_snapshot(scala) == snap.read_bytes()


def test_shared_ksql_transactional_snapshot_replayed_byte_for_byte(tmp_path):
    """A transactional producer's data batch and COMMIT marker: the entry keeps the data batch,
    the marker's timestamp and coordinator epoch 0, and no open transaction."""
    snap = SHARED_REAL / KSQL / "00000000000000000002.snapshot"
    if not snap.exists():
        pytest.skip(_NO_SHARED)
    m = replay(SHARED_REAL / KSQL / "00000000000000000000.log", tmp_path, from_client=True)
    assert m.take_snapshot().read_bytes() == snap.read_bytes()
    (entry,) = read_snapshot(snap)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset, entry.last_timestamp) == (0, None, 1728561475581)


@pytest.mark.parametrize("from_client", [False, True])
def test_kafka_38_transaction_index_from_replayed_producer_state(tmp_path, from_client):
    """Kafka 3.8's LogSegment.recover wrote v2-txn-random's .txnindex with its producer-state
    manager; the aborted transactions and last stable offsets computed here are the same."""
    m = ProducerStateManager(tmp_path)
    aborted = []
    for batch in FileRecords.open(TXN_RANDOM / "00000000000000000000.log").batches():
        txn = m.append_batch(batch, from_client=from_client)
        if txn is not None:
            if txn.is_aborted:
                aborted.append((txn.producer_id, txn.first_offset, txn.last_offset, m.last_stable_offset(txn)))
            m.complete_txn(txn)
        m.update_map_end_offset(batch.last_offset + 1)
    index = TransactionIndex(TXN_RANDOM / "00000000000000000000.txnindex", 0, writable=False)
    assert aborted == [tuple(t) for t in index.all_aborted_txns()]
    expected = [
        json.loads(line)
        for line in (TXN_RANDOM / "00000000000000000000.txnindex.expected.jsonl").read_text().splitlines()
    ]
    assert len(aborted) == sum(1 for e in expected if e["type"] == "abortedTxn") == 7
    assert m.ongoing_txns == {} and m.first_undecided_offset is None
    # Completed transactions hold the LSO back until the high watermark passes their markers.
    assert m.first_unstable_offset is not None
    m.on_high_watermark_updated(m.map_end_offset)
    assert m.first_unstable_offset is None
    assert sorted(m.active_producers) == [7001, 7002, 7003]


# == Java HashMap order ===========================================================================


def test_snapshot_order_by_bucket_then_insertion():
    assert snapshot_order([7000, 10000], 16) == [10000, 7000]
    assert snapshot_order([17, 1, 33], 16) == [17, 1, 33]  # one bucket: insertion order
    assert snapshot_order([17, 1, 33], 32) == [1, 33, 17]
    # Long.hashCode folds the high word in, then the spread folds bits 16-31 down.
    assert snapshot_order([(1 << 32) | 5, 3], 16) == [3, (1 << 32) | 5]  # 5 ^ 1 = 4 > 3
    assert snapshot_order([(1 << 16) | 2, 2], 16) == [2, (1 << 16) | 2]  # 0x10002 spreads to 3
    assert snapshot_order([-1, 0], 16) == [-1, 0]  # hashCode(-1) = 0
    assert snapshot_order([5, 3], 0) == [5, 3]


def test_snapshot_order_follows_table_growth(m):
    ids = [100 + i for i in range(13)]  # the 13th put passes 3/4 of 16: the table doubles
    for i, pid in enumerate(ids):
        apply(m, data_batch(pid, 0, 0, i))
    assert [e.producer_id for e in m.snapshot_entries()] == snapshot_order(ids, 32)
    assert snapshot_order(ids, 32) != snapshot_order(ids, 16)


def test_snapshot_order_a_long_chain_doubles_a_small_table(m):
    """Nine ids in one bucket of a table under 64: Java resizes instead of building a tree."""
    ids = [16 * i for i in range(9)]
    for i, pid in enumerate(ids[:8]):
        apply(m, data_batch(pid, 0, 0, i))
    assert [e.producer_id for e in m.snapshot_entries()] == ids[:8]  # one chain, insertion order
    apply(m, data_batch(ids[8], 0, 0, 8))
    assert [e.producer_id for e in m.snapshot_entries()] == [0, 32, 64, 96, 128, 16, 48, 80, 112]


def test_snapshot_order_table_never_shrinks(m):
    for i in range(13):
        apply(m, data_batch(1000 + i, 0, 0, i))
    m.truncate_fully_and_start_at(20)
    apply(m, data_batch(17, 0, 0, 20))
    apply(m, data_batch(1, 0, 0, 21))
    # In a fresh table of 16 both sit in bucket 1 (insertion order 17, 1); the kept 32 splits them.
    assert [e.producer_id for e in m.snapshot_entries()] == [1, 17]
    fresh = ProducerStateManager(m.directory / "fresh")
    apply(fresh, data_batch(17, 0, 0, 20))
    apply(fresh, data_batch(1, 0, 0, 21))
    assert [e.producer_id for e in fresh.snapshot_entries()] == [17, 1]


def test_snapshot_order_removed_and_readded_goes_last_in_its_bucket(m):
    apply(m, data_batch(1, 0, 0, 0, ts=0))
    apply(m, data_batch(17, 0, 0, 1, ts=NOW))
    m.remove_expired_producers(NOW)  # producer 1 is idle for ages
    apply(m, data_batch(1, 0, 5, 2, ts=NOW))
    assert [e.producer_id for e in m.snapshot_entries()] == [17, 1]


# == sequences and epochs ========================================================================


def test_basic_id_mapping(m):
    apply(m, data_batch(seq=0, offset=0))
    apply(m, data_batch(seq=1, offset=1))
    # The same batch again is a duplicate; through an append info alone it is out of order.
    with pytest.raises(DuplicateSequenceError):
        apply(m, data_batch(seq=1, offset=2))
    info = m.prepare_update(PID, AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        info.append(data_batch(seq=1, offset=2))
    with pytest.raises(OutOfOrderSequenceError, match=r"5 \(incoming seq. number\), 1 .*expected 2"):
        apply(m, data_batch(seq=5, offset=2))
    apply(m, data_batch(epoch=EPOCH + 1, seq=0, offset=3))
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 1"):
        apply(m, data_batch(epoch=EPOCH, seq=0, offset=4))


@pytest.mark.parametrize("seq", [0, 1, 17, INT32_MAX])
def test_new_producer_may_start_at_any_sequence(m, seq):
    apply(m, data_batch(seq=seq, offset=10))
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq, entry.producer_epoch) == (seq, seq, EPOCH)
    with pytest.raises(OutOfOrderSequenceError):
        apply(m, data_batch(seq=(seq + 2) % (INT32_MAX + 1), offset=11))
    apply(m, data_batch(seq=(seq + 1) % (INT32_MAX + 1), offset=11))


def test_new_epoch_must_restart_at_sequence_zero(m):
    apply(m, data_batch(seq=0, offset=0, count=3))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        apply(m, data_batch(epoch=1, seq=3, offset=3))
    apply(m, data_batch(epoch=1, seq=0, offset=3))
    entry = m.last_entry(PID)
    # The old epoch's batches are forgotten.
    assert entry.producer_epoch == 1 and [b.last_offset for b in entry.batch_metadata] == [3]


def test_epoch_jump_by_more_than_one_is_allowed(m):
    apply(m, data_batch(epoch=0, seq=0, offset=0))
    apply(m, data_batch(epoch=7, seq=0, offset=1))
    assert m.last_entry(PID).producer_epoch == 7


def test_fencing_older_epoch_data_and_marker(m):
    apply(m, data_batch(epoch=5, seq=0, offset=99, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        apply(m, data_batch(epoch=4, seq=1, offset=100, txn=True))
    with pytest.raises(InvalidProducerEpochError):  # Kafka's testOldEpochForControlRecord
        apply(m, marker(epoch=3, offset=100))
    assert m.ongoing_txns == {PID: 99}


def _six_batches(m) -> list:
    """Six batches of one producer (1, 2, 3, 1, 2, 3 records); the first is no longer remembered."""
    batches, seq, offset = [], 0, 0
    for count in (1, 2, 3, 1, 2, 3):
        batch = data_batch(seq=seq, offset=offset, count=count)
        apply(m, batch)
        batches.append(batch)
        seq += count
        offset += count + 1  # leave gaps in the offsets, as other producers' batches would
    return batches


@pytest.mark.parametrize("which", [1, 2, 3, 4, 5])
def test_duplicate_of_each_of_the_last_five_batches(m, which):
    batches = _six_batches(m)
    original = batches[which]
    before = state_of(m)
    retry = data_batch(seq=original.base_sequence, offset=500, count=original.count)
    with pytest.raises(DuplicateSequenceError) as info:
        m.append_batch(retry, from_client=True)
    err = info.value
    assert (err.first_offset, err.last_offset) == (original.base_offset, original.last_offset)
    assert err.timestamp == original.max_timestamp
    assert f"offsets {original.base_offset}..{original.last_offset}" in str(err)
    assert state_of(m) == before


def test_sixth_batch_back_is_forgotten(m):
    batches = _six_batches(m)
    assert len(m.last_entry(PID).batch_metadata) == 5
    first = batches[0]
    with pytest.raises(OutOfOrderSequenceError):
        m.append_batch(data_batch(seq=first.base_sequence, offset=500, count=first.count), from_client=True)


def test_not_a_duplicate_unless_epoch_and_whole_range_match(m):
    apply(m, data_batch(seq=0, offset=0, count=3))
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, different last
        m.append_batch(data_batch(seq=0, offset=5, count=2), from_client=True)
    apply(m, data_batch(epoch=EPOCH + 1, seq=0, offset=5, count=1))
    with pytest.raises(InvalidProducerEpochError):  # the old epoch's batch is no duplicate now
        m.append_batch(data_batch(epoch=EPOCH, seq=0, offset=6, count=3), from_client=True)


def test_duplicates_are_only_detected_for_clients(m):
    apply(m, data_batch(seq=0, offset=0))
    apply(m, data_batch(seq=0, offset=1), from_client=False)  # a replica copies what it is given
    assert m.last_entry(PID).last_data_offset == 1


@pytest.mark.parametrize("gap", [2, 3, 100])
def test_sequence_gaps_are_out_of_order(m, gap):
    apply(m, data_batch(seq=0, offset=0))
    with pytest.raises(OutOfOrderSequenceError):
        apply(m, data_batch(seq=gap, offset=1))
    with pytest.raises(OutOfOrderSequenceError):  # going back (not a remembered batch) too
        apply(m, data_batch(seq=INT32_MAX, offset=1))


def test_sequence_wraps_around(m):
    """Kafka's testProducerSequenceWrapAround and testProducerSequenceInvalidWrapAround."""
    apply(m, data_batch(epoch=15, seq=INT32_MAX, offset=735), from_client=False)
    with pytest.raises(OutOfOrderSequenceError):
        apply(m, data_batch(epoch=15, seq=1, offset=1235))
    apply(m, data_batch(epoch=15, seq=0, offset=1235))
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (15, INT32_MAX, 0)


def test_batch_spanning_the_wrap(m):
    """Kafka's testProducerSequenceWithWrapAroundBatchRecord: base 2**31-11 with 21 records ends at 9."""
    batch = data_batch(epoch=15, seq=INT32_MAX - 10, offset=2000, count=21)
    assert batch.last_sequence == 9
    info = m.prepare_update(PID, AppendOrigin.REPLICATION)
    info.append(batch)
    assert m.last_entry(PID) is None
    m.update(info)
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq, entry.first_data_offset, entry.last_data_offset) == (
        INT32_MAX - 10,
        9,
        2000,
        2020,
    )
    apply(m, data_batch(epoch=15, seq=10, offset=2021, count=2))
    with pytest.raises(DuplicateSequenceError) as info_:
        m.append_batch(data_batch(epoch=15, seq=INT32_MAX - 10, offset=3000, count=21), from_client=True)
    assert (info_.value.first_offset, info_.value.last_offset) == (2000, 2020)


def test_replication_skips_sequence_and_epoch_checks(m, caplog):
    """Kafka's testNoValidationOnFirstEntryWhenLoadingLog and testAcceptAppendWithSequenceGapsOnReplica."""
    apply(m, data_batch(epoch=5, seq=16, offset=735), from_client=False)
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.first_data_offset) == (5, 16, 16, 735)
    apply(m, data_batch(epoch=5, seq=40, offset=736), from_client=False)
    assert m.last_entry(PID).last_seq == 40
    with caplog.at_level(logging.WARNING, logger="kafkalog.producer_state.manager"):
        apply(m, data_batch(epoch=3, seq=0, offset=737), from_client=False)
    assert "smaller than the last seen epoch 5" in caplog.text
    assert m.last_entry(PID).producer_epoch == 3  # as Kafka: the older epoch is taken


def test_replication_accepts_older_coordinator_epoch(m):
    apply(m, data_batch(seq=0, offset=0, txn=True))
    apply(m, marker(offset=1, coordinator_epoch=5))
    apply(m, data_batch(seq=1, offset=2, txn=True))
    txn = apply(m, marker(offset=3, coordinator_epoch=2), from_client=False)
    assert txn == CompletedTxn(PID, 2, 3, False)
    assert m.last_entry(PID).coordinator_epoch == 2


def test_marker_without_producer_state(m):
    """Kafka's testAppendTxnMarkerWithNoProducerState."""
    assert apply(m, marker(epoch=2, offset=27)) is None
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.producer_id, entry.last_seq) == (2, PID, -1)
    with pytest.raises(InvalidProducerEpochError):
        apply(m, data_batch(epoch=0, seq=0, offset=28))
    with pytest.raises(OutOfOrderSequenceError):  # the marker is all that is left: restart at 0
        apply(m, data_batch(epoch=2, seq=17, offset=28))
    apply(m, data_batch(epoch=2, seq=0, offset=28))
    assert m.last_entry(PID).last_seq == 0


def test_control_record_bumps_producer_epoch(m):
    apply(m, data_batch(seq=0, offset=0))
    apply(m, marker(epoch=1, kind=ControlRecordType.ABORT, offset=1))
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.current_txn_first_offset, entry.first_seq, entry.last_seq) == (1, None, -1, -1)
    apply(m, data_batch(epoch=1, seq=0, offset=2))
    assert m.last_entry(PID).first_seq == 0
    # Within one append info too: the marker's new epoch drops the batches appended before it.
    info = m.prepare_update(PID, AppendOrigin.COORDINATOR)
    info.append_data_batch(1, 1, 1, NOW, 3, 3, True)
    assert info.append_end_txn_marker(ControlRecordType.ABORT, 0, 2, 4, NOW) == CompletedTxn(PID, 3, 4, True)
    assert info.to_entry().batch_metadata == () and info.to_entry().producer_epoch == 2
    m.update(info)
    assert m.last_entry(PID).batch_metadata == ()


def test_out_of_sequence_after_control_record_epoch_bump(m):
    apply(m, data_batch(seq=0, offset=0, txn=True))
    apply(m, data_batch(seq=1, offset=1, txn=True))
    apply(m, marker(epoch=1, kind=ControlRecordType.ABORT, offset=2))
    with pytest.raises(OutOfOrderSequenceError):
        apply(m, data_batch(epoch=1, seq=2, offset=3, txn=True))
    with pytest.raises(OutOfOrderSequenceError):
        apply(m, data_batch(epoch=2, seq=2, offset=3, txn=True))
    apply(m, data_batch(epoch=1, seq=0, offset=3, txn=True))
    assert (m.last_entry(PID).producer_epoch, m.last_entry(PID).last_seq) == (1, 0)


def test_prepare_update_does_not_mutate(m):
    info = m.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 0, 5, NOW, 15, 20, False)
    assert m.last_entry(PID) is None
    m.update(info)
    nxt = m.prepare_update(PID, AppendOrigin.CLIENT)
    nxt.append_data_batch(EPOCH, 6, 10, NOW, 26, 30, False)
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 5, 20)
    m.update(nxt)
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 10, 30)


def test_update_producer_transaction_state_in_one_append_info(m):
    """Kafka's updateProducerTransactionState: several batches and a marker in one append info."""
    apply(m, data_batch(seq=0, offset=9))
    info = m.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(EPOCH, 1, 5, NOW, 16, 20, True)
    info.append_data_batch(EPOCH, 6, 10, NOW, 26, 30, True)
    entry = info.to_entry()
    assert (entry.first_seq, entry.last_seq, entry.first_data_offset, entry.last_data_offset) == (1, 10, 16, 30)
    assert entry.current_txn_first_offset == 16
    txn = info.append_end_txn_marker(ControlRecordType.COMMIT, 15, EPOCH, 40, NOW)
    assert txn == CompletedTxn(PID, 16, 40, False)
    entry = info.to_entry()
    assert (entry.first_seq, entry.last_seq, entry.current_txn_first_offset) == (1, 10, None)  # batches kept
    assert info.started_transactions == (TxnMetadata(PID, 16),)


@pytest.mark.parametrize("from_client", [True, False])
def test_non_transactional_write_during_a_transaction(m, from_client):
    """Kafka raises this for every origin, replication and log loading included."""
    apply(m, data_batch(seq=0, offset=0, txn=True))
    before = state_of(m)
    with pytest.raises(InvalidTxnStateError, match="still open"):
        apply(m, data_batch(seq=1, offset=1, txn=False), from_client=from_client)
    assert state_of(m) == before


def test_coordinator_fencing(m):
    apply(m, data_batch(epoch=5, seq=0, offset=99, txn=True))
    apply(m, marker(epoch=5, offset=100, coordinator_epoch=1))
    assert m.last_entry(PID).coordinator_epoch == 1
    apply(m, marker(epoch=5, offset=101, coordinator_epoch=1))  # the same epoch is fine
    apply(m, marker(epoch=5, offset=102, coordinator_epoch=2))  # a newer one too
    with pytest.raises(TransactionCoordinatorFencedError, match=r"1 \(zombie\), 2 \(current\)") as info:
        apply(m, marker(epoch=5, offset=103, coordinator_epoch=1))
    assert isinstance(info.value, InvalidTxnStateError)


def test_coordinator_fenced_after_reload(tmp_path, m):
    apply(m, data_batch(seq=0, offset=0, txn=True))
    apply(m, marker(offset=1, coordinator_epoch=1))
    m.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 2, NOW)
    with pytest.raises(TransactionCoordinatorFencedError):
        apply(reloaded, marker(offset=2, coordinator_epoch=0))


def test_empty_control_batch_creates_the_entry_only(m):
    """Kafka's testAppendEmptyControlBatch: a marker whose records were all cleaned away."""
    raw = encode_batch(
        b"",
        count=0,
        base_offset=15,
        last_offset_delta=0,
        base_timestamp=NOW,
        max_timestamp=NOW,
        producer_id=23423,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    batch = next(MemoryRecords(raw).batches())
    assert apply(m, batch) is None
    entry = m.last_entry(23423)
    assert entry is not None and entry.current_txn_first_offset is None and m.ongoing_txns == {}


def test_control_batch_that_is_no_transaction_marker(m):
    b = RecordBatchBuilder(producer_id=PID, producer_epoch=0, is_transactional=True, is_control=True, base_offset=4)
    b.append(control_key(ControlRecordType.LEADER_CHANGE), b"\0\0", timestamp=NOW)
    batch = next(b.build().batches())
    with pytest.raises(InvalidRecordError, match="not an end-transaction marker"):
        m.append_batch(batch, from_client=False)
    assert m.is_empty


def test_batches_without_producer_id_are_ignored(m):
    b = RecordBatchBuilder(base_offset=0)
    b.append(b"k", b"v", timestamp=NOW)
    assert apply(m, next(b.build().batches())) is None
    legacy = RecordBatchBuilder(magic=1, base_offset=1)
    legacy.append(b"k", b"v", timestamp=NOW)
    assert apply(m, next(legacy.build().batches())) is None
    assert m.is_empty and m.map_end_offset == 2


@pytest.mark.parametrize(
    "bad, error",
    [
        (lambda: data_batch(epoch=0, seq=0, offset=5), InvalidProducerEpochError),
        (lambda: data_batch(epoch=1, seq=9, offset=5, txn=True), OutOfOrderSequenceError),
        (lambda: data_batch(epoch=1, seq=4, offset=5, txn=False), InvalidTxnStateError),
        (lambda: data_batch(epoch=1, seq=0, offset=5, count=3, txn=True), DuplicateSequenceError),
        (lambda: marker(epoch=0, offset=5), InvalidProducerEpochError),
        (lambda: marker(epoch=1, offset=5, coordinator_epoch=0), TransactionCoordinatorFencedError),
    ],
    ids=["epoch", "sequence", "txn-state", "duplicate", "marker-epoch", "coordinator"],
)
def test_a_failed_batch_leaves_the_state_untouched(m, bad, error):
    apply(m, data_batch(epoch=1, seq=0, offset=0, count=3, txn=True))
    apply(m, marker(epoch=1, offset=3, coordinator_epoch=4))
    apply(m, data_batch(epoch=1, seq=3, offset=4, txn=True))
    before = state_of(m)
    with pytest.raises(KafkalogError) as info:
        m.append_batch(bad(), from_client=True)
    assert type(info.value) is error
    assert state_of(m) == before


def test_analyze_batches_is_all_or_nothing(m):
    apply(m, data_batch(seq=0, offset=0))
    before = state_of(m)
    batches = [data_batch(seq=1, offset=1), data_batch(2, 0, 0, 2), data_batch(seq=5, offset=3)]
    with pytest.raises(OutOfOrderSequenceError):
        m.analyze_batches(batches, origin=AppendOrigin.CLIENT)
    assert state_of(m) == before
    update = m.analyze_batches(batches[:2], origin=AppendOrigin.CLIENT)
    assert state_of(m) == before
    assert [i.producer_id for i in update.append_infos] == [PID, 2] and update.completed_txns == ()
    for info in update.append_infos:
        m.update(info)
    assert (m.last_entry(PID).last_seq, m.last_entry(2).last_seq) == (1, 0)


def test_analyze_batches_checks_duplicates_against_the_state_before_the_append(m):
    apply(m, data_batch(seq=0, offset=0))
    # Within one append the second copy of a batch is not a duplicate, but out of order.
    with pytest.raises(OutOfOrderSequenceError):
        m.analyze_batches([data_batch(seq=1, offset=1), data_batch(seq=1, offset=2)], origin=AppendOrigin.CLIENT)
    with pytest.raises(DuplicateSequenceError):
        m.analyze_batches([data_batch(seq=1, offset=1), data_batch(seq=0, offset=2)], origin=AppendOrigin.CLIENT)


def test_analyze_batches_new_producer_quirk(m):
    """Kafka checks a new producer's later batches of the same append against nothing: with no
    known epoch every sequence is accepted, so the gap 5 -> 9 passes in one append but not in two."""
    update = m.analyze_batches([data_batch(seq=5, offset=0), data_batch(seq=9, offset=1)], origin=AppendOrigin.CLIENT)
    assert len(update.append_infos) == 1
    other = ProducerStateManager(m.directory / "other")
    apply(other, data_batch(seq=5, offset=0))
    with pytest.raises(OutOfOrderSequenceError):
        apply(other, data_batch(seq=9, offset=1))


def test_coordinator_origin_checks_epochs_but_not_sequences(m):
    """Kafka's testSequenceNotValidatedForGroupMetadataTopic: offset commits carry no sequence."""
    for offset in (99, 100):
        info = m.prepare_update(PID, AppendOrigin.COORDINATOR)
        info.append_data_batch(EPOCH, -1, -1, NOW, offset, offset, True)
        m.update(info)
    info = m.prepare_update(PID, AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpochError):
        info.append_data_batch(EPOCH - 1, -1, -1, NOW, 101, 101, True)


def test_update_rejects_no_producer_id(m):
    with pytest.raises(ValueError):
        m.update(m.prepare_update(-1, AppendOrigin.CLIENT))


# == transactions =================================================================================


@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_transaction_begin_and_end(m, kind):
    apply(m, data_batch(seq=0, offset=10, count=2, txn=True))
    apply(m, data_batch(seq=2, offset=12, txn=True))
    assert m.first_undecided_offset == 10 and m.ongoing_txns == {PID: 10}
    assert m.last_entry(PID).current_txn_first_offset == 10
    txn = m.append_batch(marker(kind=kind, offset=13, coordinator_epoch=3), from_client=True)
    assert txn == CompletedTxn(PID, 10, 13, kind is ControlRecordType.ABORT)
    assert m.last_entry(PID).current_txn_first_offset is None
    assert m.first_undecided_offset == 10  # still tracked until complete_txn, as in Kafka
    assert m.last_stable_offset(txn) == 14
    m.complete_txn(txn)
    assert m.first_undecided_offset is None and m.ongoing_txns == {}
    with pytest.raises(ValueError, match="not started"):
        m.complete_txn(txn)


def test_marker_of_an_empty_transaction_completes_nothing(m):
    """Kafka 2.8+ (KAFKA-10702) skips empty transactions: no CompletedTxn, no index entry."""
    apply(m, data_batch(seq=0, offset=0))
    abort = marker(kind=ControlRecordType.ABORT, offset=1, coordinator_epoch=7, ts=NOW + 5)
    assert m.append_batch(abort, from_client=True) is None
    entry = m.last_entry(PID)
    assert (entry.coordinator_epoch, entry.last_timestamp, entry.last_seq) == (7, NOW + 5, 0)
    assert m.ongoing_txns == {}


def test_skip_empty_transactions_in_one_append(m):
    """Kafka's testSkipEmptyTransactions."""
    seq = iter(range(100))

    def data(info, first, last):
        for offset in range(first, last + 1):
            s = next(seq)
            info.append_data_batch(EPOCH, s, s, NOW, offset, offset, True)

    def end(info, kind, offset):
        return info.append_end_txn_marker(kind, 0, EPOCH, offset, NOW)

    first = m.prepare_update(PID, AppendOrigin.CLIENT)
    data(first, 16, 20)
    assert first.started_transactions == (TxnMetadata(PID, 16),)
    m.update(first)
    assert m.first_undecided_offset == 16

    second = m.prepare_update(PID, AppendOrigin.CLIENT)
    first_done = end(second, ControlRecordType.COMMIT, 21)
    assert first_done == CompletedTxn(PID, 16, 21, False)
    assert end(second, ControlRecordType.COMMIT, 22) is None
    assert end(second, ControlRecordType.ABORT, 23) is None
    data(second, 24, 27)
    second_done = end(second, ControlRecordType.ABORT, 28)
    assert second_done == CompletedTxn(PID, 24, 28, True)
    assert end(second, ControlRecordType.ABORT, 29) is None
    data(second, 30, 31)
    assert second.started_transactions == (TxnMetadata(PID, 24), TxnMetadata(PID, 30))
    m.update(second)
    m.complete_txn(first_done)
    m.complete_txn(second_done)
    assert m.first_undecided_offset == 30 and m.ongoing_txns == {PID: 30}


def test_last_stable_offset_with_overlapping_transactions(m):
    """Kafka's testLastStableOffsetCompletedTxn: three producers' transactions overlap."""
    start1, start2, start3 = 992342, 992367, 992399
    for pid, start in ((1, start1), (2, start2), (3, start3)):
        apply(m, data_batch(pid, EPOCH, 0, start, txn=True))
    assert m.ongoing_txns == {1: start1, 2: start2, 3: start3}
    last1 = start3 + 15
    done1 = CompletedTxn(1, start1, last1, False)
    assert m.last_stable_offset(done1) == start2
    m.complete_txn(done1)
    assert m.first_undecided_offset == start2
    last3 = last1 + 20
    done3 = CompletedTxn(3, start3, last3, False)
    assert m.last_stable_offset(done3) == start2
    m.complete_txn(done3)
    assert m.first_undecided_offset == start2
    last2 = last3 + 78
    done2 = CompletedTxn(2, start2, last2, False)
    assert m.last_stable_offset(done2) == last2 + 1
    m.complete_txn(done2)
    assert m.first_undecided_offset is None


def test_last_stable_offset_ignores_the_completing_producer_only(m):
    apply(m, data_batch(1, EPOCH, 0, 5, txn=True))
    apply(m, data_batch(2, EPOCH, 0, 6, txn=True))
    done = m.append_batch(marker(2, offset=7), from_client=True)
    assert m.last_stable_offset(done) == 5  # producer 1's open transaction started earlier
    m.complete_txn(done)
    done = m.append_batch(marker(1, offset=8), from_client=True)
    assert m.last_stable_offset(done) == 9


def test_first_undecided_offset_follows_the_earliest_open_transaction(m):
    """Kafka's testFirstUnstableOffset, without the high watermark."""
    assert m.first_undecided_offset is None
    apply(m, data_batch(PID, 5, 0, 99, txn=True))
    assert m.first_undecided_offset == 99
    apply(m, data_batch(2, 5, 0, 105, txn=True))
    assert m.first_undecided_offset == 99
    apply(m, marker(PID, 5, ControlRecordType.COMMIT, 109))
    assert m.first_undecided_offset == 105
    apply(m, marker(2, 5, ControlRecordType.ABORT, 112))
    assert m.first_undecided_offset is None


def test_ongoing_txns_is_a_copy(m):
    apply(m, data_batch(seq=0, offset=3, txn=True))
    txns = m.ongoing_txns
    txns.clear()
    assert m.ongoing_txns == {PID: 3}


def test_active_producers_is_read_only(m):
    apply(m, data_batch(seq=0, offset=0))
    view = m.active_producers
    with pytest.raises(TypeError):
        view[5] = ProducerStateEntry(5)  # type: ignore[index]
    assert list(view) == [PID] and m.producer_id_count == 1


def test_last_records(m):
    apply(m, data_batch(1, 3, 0, 4))
    apply(m, marker(2, 7, offset=5))
    assert m.last_records() == {1: LastRecord(4, 3), 2: LastRecord(None, 7)}


# == expiration ===================================================================================


def test_producer_expires_at_exactly_the_expiration(tmp_path):
    m = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    apply(m, data_batch(seq=0, offset=0, ts=NOW))
    m.remove_expired_producers(NOW + 999)
    assert m.last_entry(PID) is not None
    m.remove_expired_producers(NOW + 1000)
    assert m.last_entry(PID) is None and m.is_empty
    # An expired producer is new again: any sequence is accepted (Kafka's testPidExpirationTimeout).
    apply(m, data_batch(seq=1, offset=1, ts=NOW + 1001))
    assert m.last_entry(PID).last_seq == 1 and m.map_end_offset == 2


def test_producers_with_open_transactions_do_not_expire(tmp_path):
    m = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    apply(m, data_batch(seq=0, offset=99, txn=True, ts=NOW))
    m.remove_expired_producers(NOW + 10**9)
    assert m.last_entry(PID) is not None and m.first_undecided_offset == 99


def test_fencing_abort_marker_keeps_the_producer(m):
    """Kafka's testProducerStateAfterFencingAbortMarker: the epoch must survive for fencing."""
    apply(m, data_batch(seq=0, offset=0, txn=True, ts=NOW))
    apply(m, marker(epoch=EPOCH + 1, kind=ControlRecordType.ABORT, offset=1, ts=NOW + 10))
    entry = m.last_entry(PID)
    assert (entry.current_txn_first_offset, entry.last_data_offset, entry.first_data_offset) == (None, -1, -1)
    m.remove_expired_producers(NOW + 10)
    assert m.last_entry(PID) is not None


def test_expiration_must_be_positive(tmp_path):
    with pytest.raises(InvalidConfigError):
        ProducerStateManager(tmp_path, producer_id_expiration_ms=0)


# == snapshot files ===============================================================================


def snapshot_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.is_file())


def test_take_snapshot_names_and_skips(tmp_path, m):
    assert m.take_snapshot() is None  # nothing since offset 0
    apply(m, data_batch(seq=0, offset=0))
    apply(m, data_batch(seq=1, offset=1))
    path = m.take_snapshot()
    assert path == tmp_path / "00000000000000000002.snapshot"
    assert path.read_bytes() == encode_snapshot(m.snapshot_entries())
    assert m.take_snapshot() is None  # Kafka's testSkipSnapshotIfOffsetUnchanged
    assert snapshot_names(tmp_path) == ["00000000000000000002.snapshot"]
    assert (m.latest_snapshot_offset, m.oldest_snapshot_offset, m.snapshot_offsets()) == (2, 2, [2])
    assert m.fetch_snapshot(2) == path and m.fetch_snapshot(1) is None


def test_snapshot_written_atomically_and_stale_temporaries_removed(tmp_path):
    (tmp_path / "00000000000000000007.snapshot.tmp").write_bytes(b"half a snapsh")
    (tmp_path / "00000000000000000003.snapshot.deleted").write_bytes(b"")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"")
    (tmp_path / "junk.snapshot").write_bytes(b"")
    (tmp_path / "00000000000000000009.snapshot").mkdir()
    m = ProducerStateManager(tmp_path)
    assert not (tmp_path / "00000000000000000007.snapshot.tmp").exists()
    assert m.snapshot_offsets() == []
    apply(m, data_batch(seq=0, offset=0))
    m.take_snapshot()
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_directory_has_no_snapshots(tmp_path):
    m = ProducerStateManager(tmp_path / "absent")
    assert m.snapshot_offsets() == [] and m.latest_snapshot_offset is None and m.oldest_snapshot_offset is None


def _snapshots_at(m, offsets) -> None:
    """Append one batch per offset and snapshot after each: snapshots at offset + 1."""
    for i, offset in enumerate(offsets):
        apply(m, data_batch(seq=i, offset=offset, ts=NOW + i))
        m.take_snapshot()


def test_delete_snapshots_before_and_after(tmp_path, m):
    _snapshots_at(m, range(5))
    assert m.snapshot_offsets() == [1, 2, 3, 4, 5]
    m.delete_snapshots_before(3)
    assert m.snapshot_offsets() == [3, 4, 5] and len(snapshot_names(tmp_path)) == 3
    m.delete_snapshots_after(4)
    assert m.snapshot_offsets() == [3, 4] and snapshot_names(tmp_path) == [
        "00000000000000000003.snapshot",
        "00000000000000000004.snapshot",
    ]
    m.delete_snapshots_before(5)
    assert m.snapshot_offsets() == [] and snapshot_names(tmp_path) == []


def test_truncate_and_reload_removes_out_of_range_snapshots(m):
    """Kafka's testTruncateAndReloadRemovesOutOfRangeSnapshots: the range is (start, end]."""
    _snapshots_at(m, range(5))
    m.truncate_and_reload(1, 3, NOW)
    assert (m.oldest_snapshot_offset, m.latest_snapshot_offset) == (2, 3)
    assert m.map_end_offset == 3 and m.last_entry(PID).last_seq == 2


def test_truncate_and_reload_drops_a_snapshot_at_the_log_start(tmp_path, m):
    _snapshots_at(m, range(3))
    fresh = ProducerStateManager(tmp_path)
    fresh.truncate_and_reload(3, 3, NOW)
    assert fresh.snapshot_offsets() == []
    assert fresh.map_end_offset == 3 and fresh.is_empty  # the caller replays from 3


def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(b"\0" * 37 + data[37:])
    elif how == "crc":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


@pytest.mark.parametrize("how", ["empty", "truncated", "garbage", "crc"])
def test_reload_skips_a_corrupt_latest_snapshot(tmp_path, m, how, caplog):
    """Kafka's testLoadFromCorruptSnapshot: the corrupt file is deleted, the older one loaded."""
    _snapshots_at(m, [0, 1])
    latest = tmp_path / "00000000000000000002.snapshot"
    _corrupt(latest, how)
    reloaded = ProducerStateManager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="kafkalog.producer_state.manager"):
        reloaded.truncate_and_reload(0, 20, NOW)
    assert not latest.exists() and str(latest) in caplog.text
    assert reloaded.last_entry(PID).last_data_offset == 0
    assert reloaded.map_end_offset == 1 and reloaded.snapshot_offsets() == [1]


def test_reload_with_several_snapshots_and_two_corrupt(tmp_path, m):
    _snapshots_at(m, range(6))
    _corrupt(tmp_path / "00000000000000000006.snapshot", "crc")
    _corrupt(tmp_path / "00000000000000000005.snapshot", "truncated")
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 6, NOW)
    assert reloaded.snapshot_offsets() == [1, 2, 3, 4]
    assert reloaded.map_end_offset == 4 and reloaded.last_entry(PID).last_seq == 3
    # Replaying the rest (as the log loader does) brings it back to the end.
    for i in (4, 5):
        apply(reloaded, data_batch(seq=i, offset=i, ts=NOW + i))
    assert encode_snapshot(reloaded.snapshot_entries()) == encode_snapshot(m.snapshot_entries())


def test_reload_with_every_snapshot_corrupt_starts_at_the_log_start(tmp_path, m):
    _snapshots_at(m, range(3))
    for offset in (1, 2, 3):
        _corrupt(tmp_path / f"{offset:020d}.snapshot", "empty")
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 3, NOW)
    assert reloaded.snapshot_offsets() == [] and reloaded.is_empty and reloaded.map_end_offset == 0


def test_reload_at_the_same_end_keeps_the_state(m):
    _snapshots_at(m, range(3))
    apply(m, data_batch(seq=3, offset=3))
    before = {pid: repr(e) for pid, e in m.active_producers.items()}
    m.truncate_and_reload(0, 4, NOW)  # the state already ends at 4: no reload
    assert {pid: repr(e) for pid, e in m.active_producers.items()} == before
    # Kafka sets the last snapshot offset to the latest snapshot (3): a new one at 4 is due.
    assert m.map_end_offset == 4 and m.take_snapshot() == m.directory / "00000000000000000004.snapshot"


def test_on_log_start_offset_incremented(m):
    _snapshots_at(m, range(3))
    m.on_log_start_offset_incremented(10)
    assert m.map_end_offset == 10
    assert m.take_snapshot() == m.directory / "00000000000000000010.snapshot"


def test_recover_unfinished_transaction_from_snapshot(tmp_path, m):
    apply(m, data_batch(seq=0, offset=0, txn=True))
    apply(m, data_batch(seq=1, offset=1, txn=True))
    m.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 3, NOW)
    entry = reloaded.last_entry(PID)
    assert (entry.first_data_offset, entry.first_seq, entry.last_data_offset, entry.last_seq) == (1, 1, 1, 1)
    assert entry.current_txn_first_offset == 0
    assert reloaded.ongoing_txns == {PID: 0} and reloaded.first_unstable_offset == 0
    apply(reloaded, data_batch(seq=2, offset=2, txn=True))


def test_recover_finished_and_empty_transactions_from_snapshot(tmp_path, m):
    apply(m, data_batch(seq=0, offset=0, txn=True))
    apply(m, data_batch(seq=1, offset=1, txn=True))
    apply(m, marker(kind=ControlRecordType.ABORT, offset=2))
    apply(m, marker(2, 0, ControlRecordType.ABORT, 3, ts=NOW + 3))  # an empty transaction
    m.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 4, NOW)
    entry = reloaded.last_entry(PID)
    assert (entry.first_data_offset, entry.last_data_offset, entry.current_txn_first_offset) == (1, 1, None)
    assert reloaded.last_entry(2).last_timestamp == NOW + 3 and reloaded.ongoing_txns == {}


def test_reload_removes_expired_producers(tmp_path):
    m = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    apply(m, data_batch(seq=0, offset=0, ts=0))
    apply(m, data_batch(seq=1, offset=1, ts=1))
    apply(m, data_batch(2, EPOCH, 0, 2, ts=50_000))
    m.take_snapshot()
    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    reloaded.truncate_and_reload(0, 3, 70_000)
    assert list(reloaded.active_producers) == [2]
    # The expired producer is unknown again: a client may continue at any sequence.
    apply(reloaded, data_batch(seq=2, offset=3, ts=70_001))
    assert reloaded.last_entry(PID).last_seq == 2 and reloaded.map_end_offset == 4


def test_load_retains_non_expired_producers(m):
    apply(m, data_batch(1, EPOCH, 0, 0))
    apply(m, data_batch(2, EPOCH, 0, 1))
    m.take_snapshot()
    m.truncate_and_reload(1, 2, NOW)
    assert sorted(m.active_producers) == [1, 2]
    assert (m.last_entry(1).last_data_offset, m.last_entry(2).last_data_offset) == (0, 1)


def test_first_unstable_offset_after_truncation(m):
    """Kafka's testFirstUnstableOffsetAfterTruncation."""
    apply(m, data_batch(seq=0, offset=99, txn=True))
    assert m.first_undecided_offset == 99
    m.take_snapshot()  # at 100
    apply(m, marker(offset=105))
    assert m.first_undecided_offset is None
    m.take_snapshot()  # at 106
    apply(m, data_batch(seq=1, offset=106))
    m.truncate_and_reload(0, 106, NOW)
    assert m.first_undecided_offset is None
    m.truncate_and_reload(0, 100, NOW)
    assert m.first_undecided_offset == 99


def test_truncate_fully_and_start_at(tmp_path, m):
    _snapshots_at(m, [0, 1])
    apply(m, data_batch(2, EPOCH, 0, 2, txn=True))
    m.truncate_fully_and_start_at(0)
    assert snapshot_names(tmp_path) == [] and m.snapshot_offsets() == []
    assert m.is_empty and m.ongoing_txns == {} and m.map_end_offset == 0
    apply(m, data_batch(seq=0, offset=0))
    assert m.take_snapshot() == tmp_path / "00000000000000000001.snapshot"


def test_truncate_fully_and_reload_snapshots(tmp_path, m):
    """Kafka's testReloadSnapshots."""
    apply(m, data_batch(seq=1, offset=1))
    apply(m, data_batch(seq=2, offset=2))
    m.take_snapshot()
    saved = {p: p.read_bytes() for p in tmp_path.iterdir()}
    apply(m, data_batch(seq=3, offset=3))
    apply(m, data_batch(seq=4, offset=4))
    m.take_snapshot()
    assert m.snapshot_offsets() == [3, 5]
    m.truncate_and_reload(3, 5, NOW)
    assert m.snapshot_offsets() == [5]
    for path, data in saved.items():
        path.write_bytes(data)
    m.truncate_fully_and_reload_snapshots()
    assert m.latest_snapshot_offset == 3 and m.snapshot_offsets() == [3] and m.map_end_offset == 0


def _touch_snapshots(directory: Path, offsets) -> None:
    for offset in offsets:
        write_snapshot(directory / f"{offset:020d}.snapshot", [])


def test_remove_stray_snapshots_keeps_the_clean_shutdown_one(tmp_path):
    _touch_snapshots(tmp_path, [1, 2, 3, 4, 5, 42])
    m = ProducerStateManager(tmp_path)
    m.remove_stray_snapshots([1, 3, 5])
    assert m.snapshot_offsets() == [1, 3, 5, 42] and len(snapshot_names(tmp_path)) == 4


def test_remove_all_stray_snapshots(tmp_path):
    _touch_snapshots(tmp_path, [1, 2, 3, 4, 5])
    m = ProducerStateManager(tmp_path)
    m.remove_stray_snapshots([1, 3, 5])
    assert m.snapshot_offsets() == [1, 3, 5] and len(snapshot_names(tmp_path)) == 3


def test_remove_and_mark_snapshot_for_deletion(tmp_path):
    _touch_snapshots(tmp_path, [1])
    m = ProducerStateManager(tmp_path)
    renamed = m.remove_and_mark_snapshot_for_deletion(1)
    assert renamed == tmp_path / "00000000000000000001.snapshot.deleted" and renamed.exists()
    assert m.snapshot_offsets() == [] and m.remove_and_mark_snapshot_for_deletion(1) is None
    _touch_snapshots(tmp_path, [2])
    m = ProducerStateManager(tmp_path)
    (tmp_path / "00000000000000000002.snapshot").unlink()  # deleted behind its back
    assert m.remove_and_mark_snapshot_for_deletion(2) is None


def test_update_parent_dir(tmp_path):
    old = tmp_path / "t-0"
    old.mkdir()
    m = ProducerStateManager(old)
    apply(m, data_batch(seq=0, offset=0))
    m.take_snapshot()
    new = tmp_path / "t-0.abc-delete"
    old.rename(new)
    m.update_parent_dir(new)
    assert m.fetch_snapshot(1) == new / "00000000000000000001.snapshot"
    m.delete_snapshots_before(2)
    assert snapshot_names(new) == []


def test_is_empty(m):
    assert m.is_empty
    apply(m, marker(offset=0))
    assert not m.is_empty


# == a model of the client-side rules =============================================================


class Model:
    """Kafka's rules for one batch at a time from a client, stated directly."""

    def __init__(self) -> None:
        self.producers: dict[int, dict] = {}  # epoch, coord, ts, txn, batches [(fseq, lseq, foff, loff)]
        self.ongoing: dict[int, int] = {}  # pid -> first offset

    def data(self, pid, epoch, first_seq, count, txn, offset, ts):
        last_seq = first_seq + count - 1
        if last_seq > INT32_MAX:
            last_seq -= INT32_MAX + 1
        p = self.producers.get(pid)
        if p is not None and p["epoch"] == epoch:
            for fs, ls, fo, lo in p["batches"]:
                if (fs, ls) == (first_seq, last_seq):
                    return DuplicateSequenceError, (fo, lo)
        known = -1 if p is None else p["epoch"]
        if epoch < known:
            return InvalidProducerEpochError, None
        if epoch != known:
            if first_seq != 0 and known != -1:
                return OutOfOrderSequenceError, None
        elif known != -1:
            last = p["batches"][-1][1] if p["batches"] else -1
            if first_seq != (0 if last == INT32_MAX else last + 1):
                return OutOfOrderSequenceError, None
        if p is not None and p["txn"] is not None and not txn:
            return InvalidTxnStateError, None
        if p is None:
            p = self.producers[pid] = {"epoch": epoch, "coord": -1, "ts": -1, "txn": None, "batches": []}
        if p["epoch"] != epoch:
            p["epoch"], p["batches"] = epoch, []
        p["batches"] = (p["batches"] + [(first_seq, last_seq, offset, offset + count - 1)])[-5:]
        p["ts"] = ts + count - 1
        if txn and p["txn"] is None:
            p["txn"] = offset
            self.ongoing[pid] = offset
        return None, None

    def marker(self, pid, epoch, abort, coord, offset, ts):
        p = self.producers.get(pid)
        if p is not None and epoch < p["epoch"]:
            return InvalidProducerEpochError, None
        if p is not None and p["coord"] > coord:
            return TransactionCoordinatorFencedError, None
        done = None
        if p is not None and p["txn"] is not None:
            others = [first for other, first in self.ongoing.items() if other != pid]
            done = (CompletedTxn(pid, p["txn"], offset, abort), min(others) if others else offset + 1)
            del self.ongoing[pid]
        if p is None:
            p = self.producers[pid] = {"epoch": epoch, "coord": coord, "ts": ts, "txn": None, "batches": []}
        if p["epoch"] != epoch:
            p["epoch"], p["batches"] = epoch, []
        p["coord"], p["txn"], p["ts"] = coord, None, ts
        return None, done

    def expire(self, now: int, expiration: int) -> None:
        for pid in [pid for pid, p in self.producers.items() if p["txn"] is None and now - p["ts"] >= expiration]:
            del self.producers[pid]

    def reloaded(self, now: int, expiration: int) -> None:
        """A snapshot keeps only each producer's last batch; loading it skips expired producers."""
        for p in self.producers.values():
            p["batches"] = p["batches"][-1:]
        self.expire(now, expiration)


SEQS = [0, 1, 2, 5, INT32_MAX - 1, INT32_MAX]

OPS = st.one_of(
    st.tuples(
        st.just("data"),
        st.sampled_from([1, 2, 3]),
        st.sampled_from([0, 1, 2]),
        st.sampled_from(["next", "dup", "dup-any-epoch", "any"]),
        st.sampled_from(SEQS),
        st.integers(0, 4),
        st.integers(1, 3),
        st.booleans(),
    ),
    st.tuples(
        st.just("marker"), st.sampled_from([1, 2, 3]), st.sampled_from([0, 1, 2]), st.booleans(), st.integers(0, 2)
    ),
    st.tuples(st.just("reload")),
    st.tuples(st.just("expire")),
)
MODEL_EXPIRATION_MS = 150  # 15 steps of the model's clock


def _check_against_model(m: ProducerStateManager, model: Model) -> None:
    assert sorted(m.active_producers) == sorted(model.producers)
    for pid, p in model.producers.items():
        e = m.last_entry(pid)
        got = [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batch_metadata]
        assert (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset, got) == (
            p["epoch"],
            p["coord"],
            p["ts"],
            p["txn"],
            p["batches"],
        )
    assert m.ongoing_txns == dict(sorted(model.ongoing.items(), key=lambda kv: kv[1]))
    assert m.first_undecided_offset == (min(model.ongoing.values()) if model.ongoing else None)
    # A snapshot keeps each producer's last batch, stamped with the entry's last timestamp.
    assert decode_snapshot(encode_snapshot(m.snapshot_entries())) == [
        ProducerStateEntry(
            e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset,
            [b._replace(timestamp=e.last_timestamp) for b in e.batch_metadata[-1:]],
        )
        for e in m.snapshot_entries()
    ]  # fmt: skip


@examples(150)
@given(st.lists(OPS, max_size=40))
def test_model(tmp_path_factory, ops):
    directory = tmp_path_factory.mktemp("psm")
    m = ProducerStateManager(directory, producer_id_expiration_ms=MODEL_EXPIRATION_MS)
    model = Model()
    offset, ts = 0, NOW
    for op in ops:
        ts += 10
        if op[0] == "data":
            _, pid, epoch, how, seq, which, count, txn = op
            p = model.producers.get(pid)
            if how == "next" and p is not None:
                last = p["batches"][-1][1] if p["batches"] else -1
                seq = 0 if last in (-1, INT32_MAX) else last + 1
            elif how.startswith("dup") and p is not None and p["batches"]:
                fs, ls, fo, lo = p["batches"][which % len(p["batches"])]
                seq, count = fs, lo - fo + 1
                if how == "dup":
                    epoch = p["epoch"]
            batch = data_batch(pid, epoch, seq, offset, count=count, txn=txn, ts=ts)
            expected, extra = model.data(pid, epoch, seq, count, txn, offset, ts)
        elif op[0] == "marker":
            _, pid, epoch, abort, coord = op
            kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
            batch = marker(pid, epoch, kind, offset, coordinator_epoch=coord, ts=ts)
            expected, extra = model.marker(pid, epoch, abort, coord, offset, ts)
        elif op[0] == "expire":
            m.remove_expired_producers(ts)
            model.expire(ts, MODEL_EXPIRATION_MS)
            _check_against_model(m, model)
            continue
        else:
            m.take_snapshot()
            m = ProducerStateManager(directory, producer_id_expiration_ms=MODEL_EXPIRATION_MS)
            m.truncate_and_reload(0, offset, ts)
            model.reloaded(ts, MODEL_EXPIRATION_MS)
            _check_against_model(m, model)
            continue
        before = state_of(m)
        if expected is None:
            done = m.append_batch(batch, from_client=True)
            assert (done, m.last_stable_offset(done) if done else None) == (extra or (None, None))
            if done is not None:
                m.complete_txn(done)
            offset = batch.last_offset + 1
            m.update_map_end_offset(offset)
        else:
            with pytest.raises(expected) as info:
                m.append_batch(batch, from_client=True)
            assert type(info.value) is expected
            if expected is DuplicateSequenceError:
                assert (info.value.first_offset, info.value.last_offset) == extra
            assert state_of(m) == before
        _check_against_model(m, model)
