"""Batches with producer ids through the one-call append (issue 29): checked by the compiled
call, the producer state analysed from the header facts it returns, written by the compiled
write (``_native.append_write``), against the pure twin.

Differential properties, with hypothesis: the write half alone (``append_write`` against
``write_prepared_py``) over random segment states and injected full disks gives the same result
and byte-identical files; whole logs driven by idempotent and transactional producers (in-order
batches, retried duplicates, sequence gaps, fenced epochs, new epochs, transactions committed or
aborted by markers, data outside a transaction, several producers per request, rolls) give the
same append infos or error types, identical ``.log``/``.index``/``.timeindex``/``.txnindex``
files, producer state, last stable offset and leader epochs, on the leader and on a follower
copying it; a full disk during such an append cuts it back and leaves the producer state as it
was, so the producer's retry is appended, not answered as a duplicate.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kafkalog import Log, LogConfig, native
from kafkalog.append_request import (
    FAILED,
    ROLL,
    WRITTEN,
    ProducerBatch,
    append_request,
    append_request_py,
    write_prepared_py,
)
from kafkalog.errors import KafkalogError
from kafkalog.log_append import rules_of
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.record import MAGIC_V2, ControlRecordType
from kafkalog.recordbatch import increment_sequence
from kafkalog.segment import LogSegment
from conftest import examples
from test_append_request import _Files, _plain_batches, segment_states
from test_native_append import NOW, _fix_crc

pytestmark = pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")

#: These tests compare the cores themselves.
SWITCHES_CORES = True


def _batch(pid: int, epoch: int, seq: int, n: int, *, txn: bool = False, leader_epoch: int = -1, size: int = 30) -> bytes:
    builder = RecordBatchBuilder(
        MAGIC_V2, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn,
        partition_leader_epoch=leader_epoch,
    )
    for i in range(n):
        builder.append(b"k%d" % (seq + i), bytes(size), timestamp=NOW - 1000 + seq + i)
    return bytes(builder.build().buffer)


def _marker(pid: int, epoch: int, kind: ControlRecordType, coordinator_epoch: int = 0) -> bytes:
    return bytes(RecordBatchBuilder.end_transaction_marker(
        kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch, timestamp=NOW
    ).buffer)


#: What a producer does next.
_ACTIONS = ["next"] * 6 + ["dup", "gap", "stale-epoch", "new-epoch", "txn", "txn", "commit", "abort", "plain", "pair"]


@st.composite
def scenarios(draw) -> list[tuple[bytes, AppendOrigin]]:
    """Requests of up to three producers, in Kafka's words: each action builds the producer's
    next request from what it sent before (sequences, epochs, open transactions), valid or not."""
    producers = {pid: {"epoch": 0, "seq": 0, "last": None} for pid in (7, 8, 9)}
    out = []
    for _ in range(draw(st.integers(1, 14))):
        pid = draw(st.sampled_from(sorted(producers)))
        p = producers[pid]
        action = draw(st.sampled_from(_ACTIONS))
        n = draw(st.integers(1, 4))
        epoch_stamp = draw(st.sampled_from([-1, 3]))
        if action in ("next", "txn"):
            data = _batch(pid, p["epoch"], p["seq"], n, txn=action == "txn", leader_epoch=epoch_stamp)
            p["seq"] += n
            p["last"] = data
            out.append((data, AppendOrigin.CLIENT))
        elif action == "dup" and p["last"] is not None:
            out.append((p["last"], AppendOrigin.CLIENT))
        elif action == "gap":
            out.append((_batch(pid, p["epoch"], p["seq"] + draw(st.integers(1, 3)), n), AppendOrigin.CLIENT))
        elif action == "stale-epoch" and p["epoch"] > 0:
            out.append((_batch(pid, p["epoch"] - 1, 0, n), AppendOrigin.CLIENT))
        elif action == "new-epoch":
            p["epoch"] += 1
            p["seq"] = draw(st.sampled_from([0, 0, 0, 5]))  # 5: a new epoch must start at 0
            data = _batch(pid, p["epoch"], p["seq"], n)
            p["seq"] += n
            out.append((data, AppendOrigin.CLIENT))
        elif action in ("commit", "abort"):
            kind = ControlRecordType.COMMIT if action == "commit" else ControlRecordType.ABORT
            # a coordinator epoch below the producer's last marker's is a fenced (zombie) coordinator
            p["coordinator"] = max(p.get("coordinator", 0), draw(st.sampled_from([0, 0, 1, 2])))
            coordinator = p["coordinator"] - draw(st.sampled_from([0, 0, 0, 1]))
            out.append((_marker(pid, p["epoch"], kind, coordinator), AppendOrigin.COORDINATOR))
        elif action == "plain":
            out.append((_plain_batches(1, records=n, value=20), AppendOrigin.CLIENT))
        elif action == "pair":  # two producers' batches in one request
            other = producers[pid % 3 + 7]
            first = _batch(pid, p["epoch"], p["seq"], n)
            second = _batch(pid % 3 + 7, other["epoch"], other["seq"], 1)
            p["seq"] += n
            other["seq"] += 1
            out.append((first + second, AppendOrigin.CLIENT))
    return out


def _state(log: Log) -> tuple:
    producers = {
        pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.current_txn_first_offset, e.coordinator_epoch)
        for pid, e in log.producer_state.active_producers.items()
    }
    return (
        log.log_end_offset, log.last_stable_offset, [(s.base_offset, s.size) for s in log.segments],
        [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries], producers,
        log.producer_state.ongoing_txns,
    )


def _files(directory) -> dict:
    suffixes = (".log", ".index", ".timeindex", ".txnindex")
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in suffixes}


def _outcome(call):
    try:
        return call()
    except KafkalogError as e:
        return type(e)


@pytest.mark.timeout_guard(300)
@given(scenarios(), st.sampled_from([1 << 30, 900, 3000]), st.sampled_from([4096, 0, 200]), st.booleans())
@examples(80)
def test_producer_logs_are_identical_on_both_cores(tmp_path_factory, requests, segment_bytes, interval, stamp):
    """A leader appends the producers' requests on each core, then a follower copies what it
    wrote: identical infos or errors, files, producer state, LSO and epochs throughout."""
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    results = []
    for pure in (False, True):
        leader_dir = tmp_path_factory.mktemp("leader") / "t-0"
        follower_dir = tmp_path_factory.mktemp("follower") / "t-0"
        infos = []
        with native.use(pure=pure):
            with Log.open(leader_dir, config, clock=lambda: NOW) as leader:
                for data, origin in requests:
                    infos.append(_outcome(lambda d=data, o=origin: leader.append(d, origin=o, leader_epoch=5 if stamp else None)))
                    if not pure:
                        event("outcome: " + (infos[-1].__name__ if isinstance(infos[-1], type)
                                             else "duplicate" if infos[-1].duplicate else "appended"))
                    infos.append(_state(leader))
                leader_state = _state(leader)
                fetched = []
                for segment in leader.segments:
                    if segment.size:
                        piece = leader.read(segment.base_offset, 1 << 30)
                        fetched.append(piece.read(0, piece.size_in_bytes))
            with Log.open(follower_dir, config, clock=lambda: NOW) as follower:
                for chunk in fetched:
                    infos.append(_outcome(lambda c=chunk: follower.append_as_follower(c)))
                follower_state = _state(follower)
        results.append((infos, leader_state, follower_state, _files(leader_dir), _files(follower_dir)))
    assert results[0] == results[1]
    assert results[0][1][0] == results[0][2][0]  # the follower caught up
    assert results[0][1][2:] == results[0][2][2:]  # the same segments, epochs and producers


@pytest.mark.timeout_guard(300)
@given(st.data(), segment_states(), st.sampled_from([None, "enospc", "short", "zero"]), st.integers(1, 3))
@examples(150)
def test_the_compiled_write_matches_its_twin(tmp_path_factory, draw, state, how, fail_at):
    """``append_write`` against ``write_prepared_py``: the same result (written with its index
    entries, a roll, or the failure with its stage, errno and bytes landed) and the same files."""
    data = _batch(7, 0, 0, draw.draw(st.integers(1, 30)))
    last_offset = draw.draw(st.sampled_from([5, 60, 2**31 + 10]))
    max_ts = draw.draw(st.sampled_from([NOW - 10**6, NOW, NOW + 10**7]))
    max_ts_offset = last_offset - draw.draw(st.integers(0, 3))
    real = os.pwrite
    calls = {"n": 0}

    def write(fd, buf, position):
        calls["n"] += 1
        if how is None or calls["n"] < fail_at:
            return real(fd, buf, position)
        if how == "short" and calls["n"] == fail_at:
            return real(fd, memoryview(buf).cast("B")[: max(1, len(memoryview(buf).cast("B")) // 2)], position)
        if how == "zero":
            return 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    root = tmp_path_factory.mktemp("write")
    outcomes = []
    for pure in (False, True):
        calls["n"] = 0
        files = _Files(root / ("pure" if pure else "native"), state)
        try:
            if pure:
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(os, "pwrite", write)
                    out = write_prepared_py(data, files.job, last_offset, max_ts, max_ts_offset)
            else:
                out = native._compiled.append_write(data, files.job, last_offset, max_ts, max_ts_offset, write)
        finally:
            outcomes.append((out, files.contents()))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][0] in (WRITTEN, ROLL, FAILED)


def test_producer_batches_come_back_as_header_facts():
    """The one call checks a request with producer ids and returns each such batch's header
    facts, read from the bytes as they will be written (offsets assigned); no write yet."""
    data = _batch(7, 2, 10, 3, txn=True) + _plain_batches(1, records=2) + _batch(8, 0, 2**31 - 2, 4)
    config = LogConfig()
    out = append_request(
        memoryview(data), leader=True, log_end_offset=100, log_start_offset=0, config=config, now_ms=NOW,
        leader_epoch=None, from_client=True, segment=None, partition="t-0", file="t-0",
    )
    producers = [ProducerBatch._make(f) for f in out[12]]
    assert [(p.producer_id, p.producer_epoch, p.base_sequence, p.last_sequence) for p in producers] == [
        (7, 2, 10, 12), (8, 0, 2**31 - 2, 1)  # Kafka's sequences wrap past 2**31-1 to 0
    ]
    assert [(p.base_offset, p.last_offset, p.is_transactional, p.is_control) for p in producers] == [
        (100, 102, True, False), (105, 108, False, False)
    ]
    assert producers[1].position == len(data) - len(_batch(8, 0, 2**31 - 2, 4))


def test_idempotent_appends_are_written_by_the_compiled_call(tmp_path, monkeypatch):
    """Batches with producer ids, a leader's and a follower's, go through the compiled write,
    not LogSegment.append (which would be the slow Python write); a roll is made in Python and
    the request then written compiled into the new segment."""

    def refuse(*args, **kwargs):
        raise AssertionError("LogSegment.append used")

    monkeypatch.setattr(LogSegment, "append", refuse)
    config = LogConfig(segment_bytes=2000)
    with native.use(pure=False):
        with Log.open(tmp_path / "l-0", config, clock=lambda: NOW) as leader:
            seq = 0
            for _ in range(20):
                leader.append(_batch(7, 0, seq, 5))
                seq += 5
            info = leader.append(_batch(7, 0, seq - 5, 5))  # a retry
            assert info.duplicate and (info.first_offset, info.last_offset) == (95, 99)
            leader.append(_batch(9, 0, 0, 2, txn=True))
            leader.append(_marker(9, 0, ControlRecordType.ABORT), origin=AppendOrigin.COORDINATOR)
            assert len(leader.segments) > 2
            assert leader.log_end_offset == 103
            chunks = [leader.read(s.base_offset, 1 << 30) for s in leader.segments]
            chunks = [c.read(0, c.size_in_bytes) for c in chunks if c.size_in_bytes]
            aborted = leader.collect_aborted_transactions(0, leader.log_end_offset)
        with Log.open(tmp_path / "f-0", config, clock=lambda: NOW) as follower:
            for chunk in chunks:
                follower.append_as_follower(chunk)
            assert follower.log_end_offset == 103
            assert follower.producer_state.last_entry(7).last_seq == 99
            assert follower.collect_aborted_transactions(0, follower.log_end_offset) == aborted


def _kept(log: Log) -> tuple:
    """What a log holds: its files' bytes up to the index entries it counts (as in Kafka, bytes
    past the last entry of an index are not its content: truncation leaves them too)."""
    segment = log.segments[-1]
    files = _files(log.directory)
    name = f"{segment.base_offset:020d}"
    return (
        files[name + ".log"], files[name + ".index"][: 8 * segment.offset_index.entries],
        files[name + ".timeindex"][: 12 * segment.time_index.entries], segment.offset_index.entries,
        segment.time_index.entries,
    )


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_full_disk_during_an_idempotent_append_is_cut_back(tmp_path, monkeypatch, pure, fail_at):
    """ENOSPC at the log write or an index entry of an append with a producer id: OSError, the
    files and the producer state as before the append, and the producer's retry of the same
    batch is appended (not answered as a duplicate of a batch that is not there)."""
    config = LogConfig(index_interval_bytes=0)
    with native.use(pure=pure), Log.open(tmp_path / "t-0", config, clock=lambda: NOW) as log:
        log.append(_batch(7, 0, 0, 3))
        before_files, before_state = _kept(log), _state(log)
        real = os.pwrite
        calls = {"n": 0}

        def write(fd, buf, position):
            calls["n"] += 1
            if calls["n"] >= fail_at:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, buf, position)

        retry = _batch(7, 0, 3, 4)
        with monkeypatch.context() as patch:
            patch.setattr(os, "pwrite", write)
            with pytest.raises(OSError) as excinfo:
                log.append(retry)
        assert excinfo.value.errno == errno.ENOSPC
        assert _state(log) == before_state
        assert _kept(log) == before_files
        info = log.append(retry)
        assert not info.duplicate and (info.first_offset, info.last_offset) == (3, 6)
        assert log.producer_state.last_entry(7).last_seq == 6
        assert [b.base_offset for b in log.read(0, 1 << 20).batches()] == [0, 3]


@pytest.mark.parametrize("base_seq, delta, count", [
    (-5, 0, 1), (2**31 - 1, 2, 3), (7, 2**31 - 1, 1), (-5, -2**31, 0), (-2**31, -1, 0),
])
def test_header_facts_of_odd_follower_sequences_match_the_twin(base_seq, delta, count):
    """A follower's batch keeps what the leader wrote, odd sequences included (no rule refuses a
    negative base sequence there): the compiled facts equal the twin's (64-bit sequence sums,
    Kafka's wrap past 2**31-1), with no int32 overflow in C."""
    buf = bytearray(_batch(7, 0, 0, 1))
    struct.pack_into(">i", buf, 53, base_seq)  # baseSequence
    struct.pack_into(">i", buf, 23, delta)  # lastOffsetDelta
    struct.pack_into(">i", buf, 57, count)  # the declared count (0: emptied by compaction, any delta)
    _fix_crc(buf)
    struct.pack_into(">q", buf, 0, 2**33)  # the leader's base offset (outside the CRC): past the log end
    out = native._compiled.append_request(bytes(buf), False, 40, NOW, *rules_of(LogConfig()), False, False, -1, None)
    twin = append_request_py(
        memoryview(bytes(buf)), leader=False, log_end_offset=40, log_start_offset=0, config=LogConfig(), now_ms=NOW,
        leader_epoch=None, from_client=False, segment=None, partition="t-0", file="t-0",
    )
    assert out[12] == twin[12] and len(out[12]) == 1
    assert out[12][0][4] == increment_sequence(base_seq, delta)
