"""One load of ``__consumer_offsets``: the broker's coordinator (over an open ``Log``) and the
offline dump (``read_consumer_offsets``, over the files) feed batches through the same
``OffsetsLoader.load_batch``, so they load the same offsets and groups and word a bad record
the same way (the segment file and the batch's position)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import ControlRecordType, FileRecords, Log, LogConfig, MemoryRecords, RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.broker._group_config import GroupConfig
from kafkalog.broker._offsets_topic import OffsetsTopic
from kafkalog.errors import InvalidRecordError
from kafkalog.protocol import (
    ConsumerOffsets,
    OffsetsLoader,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from kafkalog.tools import read_consumer_offsets

TS = 1_700_000_000_000
PARTITION_DIR = "__consumer_offsets-0"


def _batch(records, *, producer_id: int = -1, transactional: bool = False, base_offset: int = 0) -> MemoryRecords:
    builder = RecordBatchBuilder(
        base_offset=base_offset, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional,
    )
    for key, value in records:
        builder.append(key, value, timestamp=TS)
    return builder.build()


def _commit(group: str, partition: int, offset: int | None) -> tuple[bytes, bytes | None]:
    value = None if offset is None else offset_commit_value(offset, 0, "", TS)
    return offset_commit_key(group, "orders", partition), value


def _group(group: str, generation: int | None) -> tuple[bytes, bytes | None]:
    if generation is None:
        return group_metadata_key(group), None
    return group_metadata_key(group), group_metadata_value("consumer", generation, "range", None, TS, [])


def _broker_load(partition_dir: Path) -> ConsumerOffsets:
    """The broker's load of one ``__consumer_offsets`` partition (its cleaner off)."""
    topic = OffsetsTopic(GroupConfig(cleaner_enable=False))
    with Log.open(partition_dir, LogConfig(cleanup_policy="compact")) as log:
        topic.attach({0: log}, 1)
        return topic.load()


def _summary(loaded: ConsumerOffsets) -> tuple:
    return (
        {k: (v.offset, v.record_offset) for k, v in loaded.offsets.items()},
        {g: m.generation for g, m in loaded.groups.items()},
        loaded.deleted_groups,
    )


# An operation on __consumer_offsets: a plain batch of commits / group records, a transactional
# batch of commits of producer 1 or 2, or that producer's COMMIT or ABORT marker.
_GROUPS = st.sampled_from(["a", "b"])
_RECORD = st.one_of(
    st.tuples(st.just("commit"), _GROUPS, st.integers(0, 2), st.one_of(st.none(), st.integers(0, 1000))),
    st.tuples(st.just("group"), _GROUPS, st.one_of(st.none(), st.integers(0, 9))),
)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.lists(_RECORD, min_size=1, max_size=3)),
    st.tuples(st.just("txn"), st.sampled_from([1, 2]),
              st.lists(st.tuples(_GROUPS, st.integers(0, 2), st.integers(0, 1000)), min_size=1, max_size=3)),
    st.tuples(st.just("marker"), st.sampled_from([1, 2]), st.booleans()),
), max_size=12)


def _append(log: Log, op: tuple) -> None:
    if op[0] == "plain":
        records = [_commit(*r[1:]) if r[0] == "commit" else _group(*r[1:]) for r in op[1]]
        log.append(_batch(records), origin=AppendOrigin.COORDINATOR)
    elif op[0] == "txn":
        records = [_commit(group, partition, offset) for group, partition, offset in op[2]]
        log.append(_batch(records, producer_id=op[1], transactional=True), origin=AppendOrigin.COORDINATOR)
    else:
        kind = ControlRecordType.COMMIT if op[2] else ControlRecordType.ABORT
        marker = RecordBatchBuilder.end_transaction_marker(kind, producer_id=op[1], producer_epoch=0,
                                                           coordinator_epoch=0, timestamp=TS)
        log.append(marker, origin=AppendOrigin.COORDINATOR)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS)
def test_the_broker_and_the_dump_load_the_same(ops) -> None:
    """Any history of commits, group records, transactional commits and markers (segments
    rolled small): the broker's load over ``Log`` and the dump's over the files agree."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / PARTITION_DIR
        with Log.open(directory, LogConfig(cleanup_policy="compact", segment_bytes=300)) as log:
            for op in ops:
                _append(log, op)
        broker = _broker_load(directory)
        dump = read_consumer_offsets(directory)
        assert _summary(broker) == _summary(dump)
        assert broker.warnings == [] and dump.warnings == []


def test_records_before_the_log_start_offset_are_not_loaded() -> None:
    """Kafka loads from the log start offset: a batch that straddles it loads only its later
    records (the broker passes its log's start offset; the dump reads every record)."""
    records = _batch([_commit("g", 0, 10), _commit("g", 1, 11), _commit("g", 2, 12)], base_offset=5)
    (batch,) = records.batches()
    loaded = ConsumerOffsets()
    OffsetsLoader(loaded, 0).load_batch(batch, log_start_offset=6)
    assert {k[2]: (v.offset, v.record_offset) for k, v in loaded.offsets.items()} == {1: (11, 6), 2: (12, 7)}
    everything = ConsumerOffsets()
    OffsetsLoader(everything, 0).load_batch(batch)
    assert len(everything.offsets) == 3


def test_a_pending_commit_waits_for_its_marker() -> None:
    """A transactional commit is loaded on its producer's COMMIT marker only."""
    loaded = ConsumerOffsets()
    loader = OffsetsLoader(loaded, 0)
    for records in (
        _batch([_commit("g", 0, 1)], producer_id=7, transactional=True),
        _batch([_commit("g", 1, 2)], producer_id=8, transactional=True, base_offset=1),
    ):
        loader.load_batch(next(records.batches()))
    assert loaded.offsets == {}
    for kind, producer_id in ((ControlRecordType.ABORT, 8), (ControlRecordType.COMMIT, 7)):
        marker = RecordBatchBuilder.end_transaction_marker(kind, producer_id=producer_id, producer_epoch=0,
                                                           coordinator_epoch=0, timestamp=TS, base_offset=2)
        loader.load_batch(next(marker.batches()))
    assert {k: v.offset for k, v in loaded.offsets.items()} == {("g", "orders", 0): 1}


def test_a_bad_record_is_named_by_segment_and_position_in_both(tmp_path: Path) -> None:
    """A record that does not decode: the dump raises and the broker logs a warning, both
    naming the segment file and the byte position of the batch holding it."""
    directory = tmp_path / PARTITION_DIR
    with Log.open(directory, LogConfig(cleanup_policy="compact")) as log:
        log.append(_batch([_commit("g", 0, 1)]), origin=AppendOrigin.COORDINATOR)
        log.append(_batch([(b"\x00\x01garbage", b"\x00\x03")]), origin=AppendOrigin.COORDINATOR)
        log.append(_batch([_commit("g", 0, 2)]), origin=AppendOrigin.COORDINATOR)
    segment = next(directory.glob("*.log"))
    with FileRecords.open(segment) as records:
        position = [b.position for b in records.batches()][1]
    with pytest.raises(InvalidRecordError) as err:
        read_consumer_offsets(directory)
    assert err.value.file == str(segment) and err.value.position == position
    loaded = _broker_load(directory)
    assert len(loaded.warnings) == 1
    assert str(segment) in loaded.warnings[0] and str(position) in loaded.warnings[0]
    # the broker stops the partition at the bad record: what came before is loaded
    assert {k: v.offset for k, v in loaded.offsets.items()} == {("g", "orders", 0): 1}


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(2**31)),
    ("\U0001F600", 55357 * 31 + 56832),  # a surrogate pair: two UTF-16 units
])
def test_java_string_hash(text, expected) -> None:
    """``String.hashCode``, the one implementation ``partition_for`` and the dump's Scala map
    order share."""
    assert java_string_hash(text) == expected


def test_partition_for_maps_integer_min_value_to_partition_0() -> None:
    """Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (Java's ``Math.abs`` would not)."""
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("hello", 50) == 99162322 % 50
