"""LeaderEpochFileCache: Kafka's rules for assigning, truncating and answering
OffsetsForLeaderEpoch, each change persisted atomically to leader-epoch-checkpoint.

The worked examples restate the cases of Kafka's ``LeaderEpochFileCacheTest`` (written here from
the behaviour they describe); a hypothesis model test runs random assign/truncate/reopen
sequences against a plain list model; real broker files load and re-derive from their logs.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import FileRecords
from kafkalog.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from kafkalog.errors import CorruptCheckpointError, InvalidOffsetError
from kafkalog.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochFileCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
E = EpochEntry


class CountingCheckpoint(LeaderEpochCheckpointFile):
    """A checkpoint that counts its writes."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.writes = 0

    def write(self, entries) -> None:
        self.writes += 1
        super().write(entries)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "leader-epoch-checkpoint"


@pytest.fixture
def cache(path: Path) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(CountingCheckpoint(path))


def _cache_with(path: Path, *assignments: tuple[int, int]) -> LeaderEpochFileCache:
    """A fresh cache (over a new file) after ``assignments``."""
    assert not path.exists(), "each worked example starts from an empty history"
    cache = LeaderEpochFileCache(CountingCheckpoint(path))
    for epoch, offset in assignments:
        cache.assign(epoch, offset)
    return cache


def _on_disk(path: Path) -> list[EpochEntry]:
    return LeaderEpochCheckpointFile(path).read()


# -- an empty cache ---------------------------------------------------------------------------


def test_empty_cache(cache: LeaderEpochFileCache, path: Path) -> None:
    assert cache.entries == []
    assert not cache.non_empty
    assert cache.latest_epoch is None and cache.latest_entry is None
    assert cache.earliest_entry is None and cache.previous_epoch is None
    assert cache.epoch_for_offset(0) is None
    assert cache.end_offset_for(7, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    cache.truncate_from_start(7)  # nothing to do, no error
    cache.truncate_from_end(7)
    assert cache.checkpoint.writes == 0
    assert not path.exists()  # opening and no-op truncations create no file


def test_first_assign_creates_the_file(cache: LeaderEpochFileCache, path: Path) -> None:
    assert cache.assign(2, 10) is True
    assert path.read_bytes() == b"0\n1\n2 10\n"
    assert cache.latest_epoch == 2
    assert cache.entries == [E(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)  # the latest epoch ends at the log end offset


# -- assign (Kafka's LeaderEpochFileCacheTest, restated) --------------------------------------


def test_latest_epoch_again_at_a_later_offset_is_ignored(path: Path) -> None:
    cache = _cache_with(path, (2, 6), (2, 7), (2, 10))
    assert cache.entries == [E(2, 6)]
    assert cache.checkpoint.writes == 1  # the ignored assignments wrote nothing
    assert cache.assign(2, 9) is False


def test_same_epoch_at_an_earlier_offset_replaces_it(path: Path) -> None:
    cache = _cache_with(path, (2, 9), (2, 5))
    assert cache.entries == [E(2, 5)]


def test_new_epoch_at_the_same_offset_replaces_the_old_one(path: Path) -> None:
    cache = _cache_with(path, (2, 9), (3, 9))
    assert cache.entries == [E(3, 9)]


def test_new_epoch_at_an_earlier_offset_removes_the_conflict(path: Path) -> None:
    cache = _cache_with(path, (2, 6), (3, 5))
    assert cache.entries == [E(3, 5)]


def test_older_epoch_truncates_the_later_ones(path: Path) -> None:
    """Assigning an epoch in the past: the cache truncates to the point of conflict instead of
    failing, so epochs and offsets stay monotonic."""
    cache = _cache_with(path, (1, 5), (2, 6), (1, 7))
    assert cache.entries == [E(1, 7)]
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert _on_disk(path) == [E(1, 7)]


def test_matching_epoch_with_earlier_start_truncates_between(path: Path) -> None:
    cache = _cache_with(path, (5, 11), (6, 12), (7, 13), (7, 12))
    assert cache.entries == [E(5, 11), E(7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_epochs_change_many_times(path: Path) -> None:
    cache = _cache_with(path, (0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.entries == [E(1, 0)]  # epoch 0 wrote nothing: (1, 0) replaced it
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)  # below every epoch: the first start offset
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_follower_receiving_many_batches(path: Path) -> None:
    cache = _cache_with(path, (0, 0), (0, 1), (0, 2))
    assert cache.end_offset_for(0, 3) == (0, 3)
    for offset in (3, 4, 5):
        cache.assign(1, offset)
    for offset in (6, 7, 8):
        cache.assign(2, offset)
    assert cache.entries == [E(0, 0), E(1, 3), E(2, 6)]
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)
    assert cache.checkpoint.writes == 3


@pytest.mark.parametrize(
    "requested, expected",
    [
        (UNDEFINED_EPOCH, UNDEFINED),  # a bootstrapping follower
        (-5, (-5, 10)),  # below every epoch, as Kafka answers any epoch below the first
        (0, (0, 13)),
        (1, (0, 13)),  # no exact epoch: the floor epoch and the start of the next
        (2, (2, 17)),
        (3, (2, 17)),
        (4, (4, 99)),  # the latest epoch ends at the log end offset
        (5, UNDEFINED),  # above the latest epoch
    ],
)
def test_end_offset_for(requested: int, expected: tuple[int, int], path: Path) -> None:
    cache = _cache_with(path, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(requested, 99) == expected


def test_end_offset_for_below_the_first_epoch(path: Path) -> None:
    cache = _cache_with(path, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_end_offset_for_epoch_not_tracked(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path / "a", (2, 100))
    assert cache.end_offset_for(3, 100) == UNDEFINED
    cache = _cache_with(tmp_path / "b", (2, 11), (3, 12))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_epoch_for_offset(path: Path) -> None:
    cache = _cache_with(path, (0, 10), (1, 20), (5, 30))
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(10) == 0
    assert cache.epoch_for_offset(5) is None


def test_previous_epoch_and_entry(cache: LeaderEpochFileCache) -> None:
    assert cache.previous_epoch is None and cache.previous_entry(2) is None
    cache.assign(2, 10)
    assert cache.previous_epoch is None and cache.previous_entry(2) is None
    cache.assign(4, 15)
    assert cache.previous_epoch == 2 and cache.previous_entry(4) == E(2, 10)
    cache.assign(10, 20)
    assert cache.previous_epoch == 4 and cache.previous_entry(10) == E(4, 15)
    cache.truncate_from_end(18)
    assert cache.previous_epoch == 2
    assert cache.previous_entry(cache.latest_epoch) == E(2, 10)
    assert cache.previous_entry(3) == E(2, 10)  # a lower key, not necessarily a neighbour


def test_next_epoch_and_epoch_entry(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path / "a", (0, 0), (1, 100), (2, 200))
    assert [cache.next_epoch(e) for e in (-1, 0, 1, 2, 100)] == [0, 1, 2, None, None]
    cache = _cache_with(tmp_path / "b", (2, 100), (3, 500), (5, 1000))
    assert cache.epoch_entry(2) == E(2, 100)
    assert cache.epoch_entry(5) == E(5, 1000)
    assert cache.epoch_entry(4) is None
    assert cache.earliest_entry == E(2, 100) and cache.latest_entry == E(5, 1000)


@pytest.mark.parametrize("epoch, offset", [(-1, 0), (0, -1), (2**31, 0), (0, 2**63)])
def test_assign_refuses_invalid_entries(epoch: int, offset: int, path: Path) -> None:
    cache = _cache_with(path, (1, 1))
    with pytest.raises(InvalidOffsetError) as info:
        cache.assign(epoch, offset)
    assert info.value.file == str(path)
    assert isinstance(info.value, ValueError)
    assert cache.entries == [E(1, 1)] and _on_disk(path) == [E(1, 1)]


def test_assign_refuses_non_integers(cache: LeaderEpochFileCache) -> None:
    with pytest.raises(TypeError):
        cache.assign(1.0, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cache.assign(1, True)


def test_assign_all_writes_once(path: Path) -> None:
    cache = _cache_with(path, (0, 0))
    cache.assign_all([(1, 5), E(1, 6), (3, 9), (2, 12)])
    assert cache.entries == [E(0, 0), E(1, 5), E(2, 12)]
    assert cache.checkpoint.writes == 2
    assert _on_disk(path) == cache.entries
    cache.assign_all([])
    assert cache.checkpoint.writes == 2
    with pytest.raises(InvalidOffsetError):
        cache.assign_all([(4, 20), (-1, 0)])  # validated before anything is assigned
    assert cache.entries == [E(0, 0), E(1, 5), E(2, 12)]


# -- truncation -----------------------------------------------------------------------------


def _three(path: Path) -> LeaderEpochFileCache:
    return _cache_with(path, (2, 6), (3, 8), (4, 11))


@pytest.mark.parametrize(
    "end_offset, expected",
    [
        (8, [E(2, 6)]),  # on an epoch boundary: that epoch goes too (inclusive)
        (9, [E(2, 6), E(3, 8)]),  # between boundaries: the epoch holding 8 stays
        (11, [E(2, 6), E(3, 8)]),
        (12, [E(2, 6), E(3, 8), E(4, 11)]),  # past the last start: nothing to do
        (6, []),
        (0, []),
        (UNDEFINED_EPOCH_OFFSET, [E(2, 6), E(3, 8), E(4, 11)]),  # undefined: nothing to do
    ],
)
def test_truncate_from_end(end_offset: int, expected: list[EpochEntry], path: Path) -> None:
    cache = _three(path)
    cache.truncate_from_end(end_offset)
    assert cache.entries == expected
    assert _on_disk(path) == expected
    assert cache.checkpoint.writes == 3 + (expected != _three_entries())


@pytest.mark.parametrize(
    "start_offset, expected",
    [
        (8, [E(3, 8), E(4, 11)]),  # on a boundary: (3, 8) is kept as it is
        (9, [E(3, 9), E(4, 11)]),  # between: epoch 3 kept, moved to start at 9
        (11, [E(4, 11)]),
        (15, [E(4, 15)]),  # beyond the last start: the latest epoch moves up
        (6, [E(2, 6), E(3, 8), E(4, 11)]),  # on the first start: nothing changes
        (1, [E(2, 6), E(3, 8), E(4, 11)]),  # before the first: nothing changes
        (UNDEFINED_EPOCH_OFFSET, [E(2, 6), E(3, 8), E(4, 11)]),
    ],
)
def test_truncate_from_start(start_offset: int, expected: list[EpochEntry], path: Path) -> None:
    cache = _three(path)
    cache.truncate_from_start(start_offset)
    assert cache.entries == expected
    assert _on_disk(path) == expected


def _three_entries() -> list[EpochEntry]:
    return [E(2, 6), E(3, 8), E(4, 11)]


def test_truncate_from_start_keeps_the_epoch_holding_the_offset(path: Path) -> None:
    cache = _cache_with(path, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert cache.entries == [E(0, 5), E(1, 7), E(2, 10)]


def test_truncations_are_written_at_once(path: Path) -> None:
    """Kafka flushes truncations asynchronously; kafkalog writes them before returning."""
    cache = _three(path)
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert path.read_bytes() == b"0\n1\n3 8\n"


def test_clear_and_flush(path: Path) -> None:
    cache = _three(path)
    cache.clear_and_flush()
    assert cache.entries == [] and not cache.non_empty
    assert path.read_bytes() == b"0\n0\n"


def test_epoch_entries_in_range_leaves_the_cache_alone(path: Path) -> None:
    cache = _cache_with(path, (2, 6), (3, 8), (4, 11), (6, 20))
    assert cache.epoch_entries_in_range(9, 20) == [E(3, 9), E(4, 11)]
    assert cache.epoch_entries_in_range(0, 100) == cache.entries
    assert cache.epoch_entries_in_range(-1, 11) == [E(2, 6), E(3, 8)]  # negative start: from the beginning
    assert cache.epoch_entries_in_range(25, 30) == [E(6, 25)]
    assert cache.epoch_entries_in_range(0, 6) == []  # everything starts at or after the end
    assert cache.entries == [E(2, 6), E(3, 8), E(4, 11), E(6, 20)]
    assert cache.checkpoint.writes == 4


# -- persistence ------------------------------------------------------------------------------


def test_entries_persist_between_instances(path: Path) -> None:
    _cache_with(path, (2, 6), (5, 9))
    again = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    assert again.entries == [E(2, 6), E(5, 9)]


def test_entries_property_is_a_copy(path: Path) -> None:
    cache = _cache_with(path, (1, 0))
    got = cache.entries
    got.append(E(9, 9))
    assert cache.entries == [E(1, 0)]


def test_loading_a_non_monotonic_file_repairs_in_memory_only(path: Path) -> None:
    """Kafka replays the file through assign and does not write it back; flush() does."""
    raw = b"0\n5\n1 0\n3 10\n2 20\n4 15\n4 30\n"
    path.write_bytes(raw)
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    # (2, 20) truncates epoch 3; (4, 15) truncates (2, 20); (4, 30) is the latest epoch again.
    assert cache.entries == [E(1, 0), E(4, 15)]
    assert path.read_bytes() == raw
    cache.flush()
    assert path.read_bytes() == b"0\n2\n1 0\n4 15\n"


def test_loading_a_corrupt_file_raises(path: Path) -> None:
    path.write_bytes(b"0\n2\n0 0\n-1 5\n")
    with pytest.raises(CorruptCheckpointError, match="line 4"):
        LeaderEpochFileCache(LeaderEpochCheckpointFile(path))


def test_a_failed_write_leaves_cache_and_file_unchanged(path: Path, monkeypatch) -> None:
    cache = _three(path)
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    for change in (lambda: cache.assign(9, 50), lambda: cache.truncate_from_end(8), lambda: cache.clear_and_flush()):
        with pytest.raises(OSError, match="disk gone"):
            change()
        assert cache.entries == _three_entries()
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not (path.parent / "leader-epoch-checkpoint.tmp").exists()


def test_with_checkpoint_moves_without_reading(path: Path, tmp_path: Path) -> None:
    cache = _three(path)
    other = tmp_path / "moved" / "leader-epoch-checkpoint"
    other.parent.mkdir()
    other.write_bytes(b"garbage that is never read")
    moved = cache.with_checkpoint(LeaderEpochCheckpointFile(other))
    assert moved.entries == cache.entries
    moved.assign(5, 20)
    assert _on_disk(other) == _three_entries() + [E(5, 20)]
    assert cache.entries == _three_entries()  # the original is independent


def test_readers_see_only_consistent_snapshots_while_a_writer_works(path: Path) -> None:
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                time.sleep(0.0002)  # let the writer have the GIL between snapshots
                got = cache.entries
                assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in zip(got, got[1:]))
                epoch, end = cache.end_offset_for(5, 10**9)
                assert (epoch, end) == UNDEFINED or (epoch <= 5 and end >= 0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(150):
            cache.assign(i, i * 10)
            if i % 10 == 9:
                cache.truncate_from_end(i * 10 - 15)
            if i % 25 == 24:
                cache.truncate_from_start(i * 5)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert _on_disk(path) == cache.entries


def test_concurrent_writers_keep_memory_and_file_equal(path: Path) -> None:
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))

    def writer(base: int) -> None:
        for i in range(40):
            cache.assign(base + i, (base + i) * 3)
            cache.truncate_from_end((base + i) * 3 - 1)

    threads = [threading.Thread(target=writer, args=(b,)) for b in (0, 1000, 2000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _on_disk(path) == cache.entries


# -- real broker files -------------------------------------------------------------------------


def test_real_checkpoint_matches_the_epochs_of_its_log(tmp_path: Path) -> None:
    """BiggerBrain lsx1-0: assigning (partition leader epoch, base offset) of each batch of the
    real log, as the broker did on append, rebuilds the real checkpoint; its last entry (7, 14)
    is an epoch that became leader at the log end offset and wrote nothing yet."""
    real = DATA / "checkpoints" / "BiggerBrain__kafka" / "lsx1-0" / "leader-epoch-checkpoint"
    log = DATA / "real" / "BiggerBrain__kafka" / "lsx1-0" / "00000000000000000000.log"
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    with FileRecords.open(log) as records:
        batches = list(records.batches())
    for batch in batches:
        cache.assign(batch.partition_leader_epoch, batch.base_offset)
    assert cache.entries == LeaderEpochCheckpointFile(real).read()[:-1]
    log_end_offset = batches[-1].last_offset + 1
    assert log_end_offset == 14
    cache.assign(7, log_end_offset)
    assert path.read_bytes() == real.read_bytes()
    assert cache.end_offset_for(6, log_end_offset) == (6, 14)
    assert cache.end_offset_for(2, log_end_offset) == (1, 10)
    assert cache.epoch_for_offset(11) == 3


def _shared_epoch_files() -> list[str]:
    real = SHARED_CORPUS / "real"
    if not real.is_dir():
        return []
    return sorted(str(p.relative_to(real)) for p in real.rglob("leader-epoch-checkpoint"))


@pytest.mark.parametrize("rel", _shared_epoch_files() or [None], ids=lambda r: r or "absent")
def test_shared_real_checkpoint_loads_as_is(rel: str | None, tmp_path: Path) -> None:
    """Every real leader-epoch-checkpoint is already monotonic: the cache loads it unchanged and
    its first write reproduces it (a 0-byte file becomes Kafka's empty checkpoint)."""
    if rel is None:
        pytest.skip("shared corpus ../shared/corpus/real is absent")
    src = SHARED_CORPUS / "real" / rel
    copy = tmp_path / "leader-epoch-checkpoint"
    copy.write_bytes(src.read_bytes())
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(copy))
    assert cache.entries == LeaderEpochCheckpointFile(src).read()
    cache.flush()
    assert copy.read_bytes() == (src.read_bytes() or b"0\n0\n")


# -- the model -------------------------------------------------------------------------------

Model = list[tuple[int, int]]


def _model_assign(model: Model, epoch: int, offset: int) -> Model:
    if model and model[-1][0] == epoch and offset >= model[-1][1]:
        return model
    return [(e, o) for e, o in model if e < epoch and o < offset] + [(epoch, offset)]


def _model_truncate_from_end(model: Model, end: int) -> Model:
    return model if end < 0 else [(e, o) for e, o in model if o < end]


def _model_truncate_from_start(model: Model, start: int) -> Model:
    before = [(e, o) for e, o in model if o <= start]
    if not before:
        return model
    return [(before[-1][0], start)] + [(e, o) for e, o in model if o > start]


def _model_end_offset_for(model: Model, requested: int, leo: int) -> tuple[int, int]:
    if requested == UNDEFINED_EPOCH or not model:
        return UNDEFINED
    if model[-1][0] == requested:
        return requested, leo
    higher = [o for e, o in model if e > requested]
    if not higher:
        return UNDEFINED
    floor = [e for e, o in model if e <= requested]
    return (floor[-1] if floor else requested), higher[0]


def _model_epoch_for_offset(model: Model, offset: int) -> int | None:
    held = [e for e, o in model if o <= offset]
    return held[-1] if held else None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("assign_all"), st.lists(st.tuples(st.integers(0, 12), st.integers(0, 60)), max_size=4)),
        st.tuples(st.just("end"), st.integers(-2, 65)),
        st.tuples(st.just("start"), st.integers(-2, 65)),
        st.tuples(st.just("clear")),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


@examples(150)
@given(ops=operations, probes=st.lists(st.tuples(st.integers(-2, 14), st.integers(0, 70)), min_size=1, max_size=6))
def test_model(ops, probes, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("model") / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    model: Model = []
    for op in ops:
        kind = op[0]
        if kind == "assign":
            changed = cache.assign(op[1], op[2])
            new = _model_assign(model, op[1], op[2])
            assert changed == (new != model), op  # Kafka's isUpdateNeeded <=> a change
            model = new
        elif kind == "assign_all":
            cache.assign_all(op[1])
            for epoch, offset in op[1]:
                model = _model_assign(model, epoch, offset)
        elif kind == "end":
            cache.truncate_from_end(op[1])
            model = _model_truncate_from_end(model, op[1])
        elif kind == "start":
            cache.truncate_from_start(op[1])
            model = _model_truncate_from_start(model, op[1])
        elif kind == "clear":
            cache.clear_and_flush()
            model = []
        else:
            cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
        assert cache.entries == [E(e, o) for e, o in model], op
        # Every change is on disk before the call returns (a missing file: nothing changed yet).
        assert _on_disk(path) == cache.entries, op
        # Strictly increasing in both epoch and start offset.
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(model, model[1:]))
        assert cache.latest_epoch == (model[-1][0] if model else None)
        assert cache.earliest_entry == (E(*model[0]) if model else None)
        assert cache.previous_epoch == (model[-2][0] if len(model) > 1 else None)
        for requested, offset in probes:
            assert cache.end_offset_for(requested, 70) == _model_end_offset_for(model, requested, 70)
            assert cache.epoch_for_offset(offset) == _model_epoch_for_offset(model, offset)
