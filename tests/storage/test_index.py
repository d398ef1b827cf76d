"""Unit tests of kafkalog.index: the offset, time and transaction indexes as Kafka keeps them.

Every test runs twice, once per search path (the autouse ``search_path`` fixture): the default
path (native key cache + bisect) and Kafka's plain warm-first binary search over the map
(``KAFKALOG_INDEX_SEARCH=plain``). Kafka's rules come from ``AbstractIndex``, ``OffsetIndex``,
``TimeIndex`` and ``TransactionIndex`` (Kafka 3.8, storage module).
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkalog import (
    AbortedTxn,
    CorruptIndexError,
    InvalidOffsetError,
    KafkalogError,
    LogClosedError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    TransactionIndex,
)

MIB = 1024 * 1024
INT32_MAX = 2**31 - 1
# Kafka's warm section: the last 8 KiB of entries.
WARM_OFFSET_ENTRIES = 8192 // 8  # 1024
WARM_TIME_ENTRIES = 8192 // 12  # 682

# Hypothesis tests here build their files in their own temporary directories; the only
# function-scoped fixture they see is the (constant per test) search-path environment.
_HYP = dict(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.fixture(autouse=True, params=["fast", "plain"])
def search_path(request, monkeypatch) -> str:
    """Run every test of this module under both lookup paths."""
    if request.param == "plain":
        monkeypatch.setenv("KAFKALOG_INDEX_SEARCH", "plain")
    else:
        monkeypatch.delenv("KAFKALOG_INDEX_SEARCH", raising=False)
    return request.param


# -- helpers -------------------------------------------------------------------------------------


def pack_offsets(base: int, entries) -> bytes:
    """Kafka's .index bytes for absolute (offset, position) entries."""
    return b"".join(struct.pack(">ii", off - base, pos) for off, pos in entries)


def pack_times(base: int, entries) -> bytes:
    """Kafka's .timeindex bytes for (timestamp, absolute offset) entries."""
    return b"".join(struct.pack(">qi", ts, off - base) for ts, off in entries)


def pack_txns(txns, version: int = 0) -> bytes:
    return b"".join(struct.pack(">hqqqq", version, *t) for t in txns)


def offset_oracle(entries, base: int, target: int) -> OffsetPosition:
    """Linear scan: the last entry with offset <= target, else (base, 0)."""
    found = OffsetPosition(base, 0)
    for off, pos in entries:
        if off <= target:
            found = OffsetPosition(off, pos)
    return found


def time_oracle(entries, base: int, target: int) -> TimestampOffset:
    """Linear scan: the last entry with timestamp <= target, else (-1, base)."""
    found = TimestampOffset(-1, base)
    for ts, off in entries:
        if ts <= target:
            found = TimestampOffset(ts, off)
    return found


def all_offset_entries(idx: OffsetIndex) -> list[OffsetPosition]:
    return [idx.entry(i) for i in range(idx.entries)]


def all_time_entries(idx: TimeIndex) -> list[TimestampOffset]:
    return [idx.entry(i) for i in range(idx.entries)]


# -- lifecycle -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, max_size, length",
    [
        (OffsetIndex, 10 * MIB, 10485760),
        (TimeIndex, 10 * MIB, 10485756),
        (OffsetIndex, 1001, 1000),
        (TimeIndex, 1001, 996),
        (OffsetIndex, 8, 8),
        (TimeIndex, 23, 12),
    ],
)
def test_new_index_is_preallocated_rounded_down_to_entries(tmp_path, cls, max_size, length) -> None:
    """A new index file is preallocated to segment.index.bytes rounded down to whole entries
    (AbstractIndex: raf.setLength(roundDownToExactMultiple(maxIndexSize, entrySize)))."""
    path = tmp_path / "0.idx"
    idx = cls(path, 0, max_size)
    assert idx.entries == 0
    assert path.stat().st_size == length
    assert idx.length == length
    assert idx.max_entries == length // idx.entry_size
    assert path.read_bytes()[:64] == b"\0" * min(64, length)
    idx.close()


@pytest.mark.parametrize("cls, max_size", [(OffsetIndex, 7), (TimeIndex, 11), (OffsetIndex, 0)])
def test_max_index_size_below_one_entry_is_refused(tmp_path, cls, max_size) -> None:
    """A new index must have room for one entry (Kafka: "Invalid max index size")."""
    idx = cls(tmp_path / "0.idx", 0, max_size)
    with pytest.raises(KafkalogError):
        idx.entries


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_construction_is_lazy(tmp_path, cls) -> None:
    """Constructing an index neither creates nor opens its file; the first use does."""
    path = tmp_path / "00000000000000000000.idx"
    idx = cls(path, 0, 4096)
    assert not path.exists()
    assert idx.entries == 0
    assert path.exists() and path.stat().st_size == 4096 // idx.entry_size * idx.entry_size
    idx.close()

    # An existing file: change it after construction; the index sees the file as it is at first use.
    size = idx.entry_size
    path.write_bytes(b"\0" * (size * 10))
    lazy = cls(path, 0, 4096)
    path.write_bytes(b"\0" * (size * 3))
    assert lazy.entries == 3
    lazy.close()


def test_existing_trimmed_offset_index_counts_entries_from_length(tmp_path) -> None:
    """An index opened from disk has length/entry_size entries and is full (no free slot)."""
    base = 500
    entries = [(501, 0), (510, 4100), (530, 8300), (531, 12500), (600, 16700)]
    path = tmp_path / "00000000000000000500.index"
    path.write_bytes(pack_offsets(base, entries))
    idx = OffsetIndex(path, base, 10 * MIB)
    assert idx.entries == 5 and idx.max_entries == 5 and idx.is_full
    assert all_offset_entries(idx) == [OffsetPosition(*e) for e in entries]
    assert idx.last_offset == 600
    idx.sanity_check()
    with pytest.raises(InvalidOffsetError):
        idx.append(700, 20000)  # full
    assert idx.entries == 5
    idx.close()
    assert path.read_bytes() == pack_offsets(base, entries)


def test_existing_trimmed_time_index_counts_entries_from_length(tmp_path) -> None:
    base = 500
    entries = [(1000, 501), (1005, 510), (2000, 530), (2001, 600)]
    path = tmp_path / "00000000000000000500.timeindex"
    path.write_bytes(pack_times(base, entries))
    idx = TimeIndex(path, base, 10 * MIB)
    assert idx.entries == 4 and idx.max_entries == 4 and idx.is_full
    assert all_time_entries(idx) == [TimestampOffset(*e) for e in entries]
    assert idx.last_entry == TimestampOffset(2001, 600)
    idx.sanity_check()
    idx.close()
    assert path.read_bytes() == pack_times(base, entries)


@pytest.mark.parametrize("cls, length", [(OffsetIndex, 10 * MIB), (TimeIndex, 10485756), (OffsetIndex, 4096), (TimeIndex, 4092)])
def test_zero_filled_preallocated_index_counts_every_slot(tmp_path, cls, length) -> None:
    """A preallocated index left by a crash (zeros to its full length) is read as full of zero
    entries, entries == length / entry_size, as Kafka's AbstractIndex does; it passes the
    sanity check (recovery, not the check, repairs it) and lookups answer from the zero entries."""
    base = 42
    path = tmp_path / "00000000000000000042.idx"
    with open(path, "wb") as fh:
        fh.truncate(length)
    idx = cls(path, base, 10 * MIB)
    assert idx.entries == length // idx.entry_size
    assert idx.is_full
    idx.sanity_check()
    if cls is OffsetIndex:
        assert idx.last_offset == base
        assert idx.lookup(base + 1000) == OffsetPosition(base, 0)
        assert idx.lookup(base - 1) == OffsetPosition(base, 0)
    else:
        assert idx.last_entry == TimestampOffset(0, base)
        assert idx.lookup(10**12) == TimestampOffset(0, base)
        assert idx.lookup(-5) == TimestampOffset(-1, base)
    # Recovery's first step, reset, empties it and keeps the preallocation.
    idx.reset()
    assert idx.entries == 0 and idx.length == 10 * MIB // idx.entry_size * idx.entry_size
    idx.close()


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_trim_to_valid_size(tmp_path, cls) -> None:
    """trim_to_valid_size shrinks the file to exactly its entries; a second call changes nothing."""
    path = tmp_path / "0.idx"
    idx = cls(path, 0, 4096)
    _append_three(idx)
    assert idx.trim_to_valid_size() is True
    assert path.stat().st_size == 3 * idx.entry_size == idx.length
    assert idx.max_entries == 3 and idx.entries == 3
    assert idx.trim_to_valid_size() is False
    assert len(_entries_of(idx)) == 3
    idx.close()


def _append_three(idx) -> None:
    if isinstance(idx, OffsetIndex):
        for off, pos in ((3, 0), (7, 4200), (12, 8500)):
            idx.append(idx.base_offset + off, pos)
    else:
        for ts, off in ((1000, 3), (1500, 7), (2500, 12)):
            assert idx.maybe_append(ts, idx.base_offset + off)


def _entries_of(idx):
    return all_offset_entries(idx) if isinstance(idx, OffsetIndex) else all_time_entries(idx)


def _raw_of(idx) -> bytes:
    entries = _entries_of(idx)
    if isinstance(idx, OffsetIndex):
        return pack_offsets(idx.base_offset, entries)
    return pack_times(idx.base_offset, entries)


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_resize_grows_and_shrinks_but_never_below_the_entries(tmp_path, cls) -> None:
    """resize rounds down to whole entries, keeps the entries (and their bytes), reports
    whether the length changed, and never cuts below the entries held."""
    path = tmp_path / "0.idx"
    idx = cls(path, 100, 4096)
    _append_three(idx)
    before = _entries_of(idx)
    size = idx.entry_size

    assert idx.resize(100 * size + size - 1) is True  # grow, rounded down
    assert idx.length == path.stat().st_size == 100 * size
    assert idx.max_entries == 100 and idx.entries == 3 and _entries_of(idx) == before
    assert idx.resize(100 * size) is False  # same length

    assert idx.resize(5 * size) is True  # shrink
    assert idx.length == 5 * size and _entries_of(idx) == before

    idx.resize(1)  # below the entries: stops at them
    assert idx.length == 3 * size and idx.entries == 3 and _entries_of(idx) == before
    assert path.read_bytes() == _raw_of(idx)

    idx.resize(4096)  # grow again and keep appending
    if cls is OffsetIndex:
        idx.append(100 + 20, 9000)
    else:
        assert idx.maybe_append(3000, 100 + 20)
    assert idx.entries == 4
    idx.close()
    assert path.stat().st_size == 4 * size


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_reset_empties_and_restores_preallocation(tmp_path, cls) -> None:
    """reset drops every entry and grows the file back to max_index_size (rounded down);
    lookups then see only what is appended afterwards."""
    path = tmp_path / "0.idx"
    idx = cls(path, 0, 1000)
    _append_three(idx)
    idx.lookup(10)  # build the fast path's cache before the reset
    idx.trim_to_valid_size()
    idx.reset()
    assert idx.entries == 0
    assert idx.length == path.stat().st_size == 1000 // idx.entry_size * idx.entry_size
    if cls is OffsetIndex:
        assert idx.lookup(10) == OffsetPosition(0, 0)
        idx.append(5, 77)
        assert idx.lookup(10) == OffsetPosition(5, 77)
        assert idx.lookup(4) == OffsetPosition(0, 0)
    else:
        assert idx.lookup(2000) == TimestampOffset(-1, 0)
        assert idx.maybe_append(50, 5)  # any timestamp above -1 is new again
        assert idx.lookup(2000) == TimestampOffset(50, 5)
    idx.close()


def test_offset_index_truncate_to(tmp_path) -> None:
    """truncate_to(offset) removes every entry whose offset is >= offset, on an exact entry
    offset and between entries (Kafka's OffsetIndex.truncateTo); appends continue after it."""
    base = 1000
    entries = [(1010, 0), (1020, 4100), (1030, 8200), (1040, 12300)]
    idx = OffsetIndex(tmp_path / "0.index", base, 4096)
    for e in entries:
        idx.append(*e)
    assert idx.lookup(5000) == OffsetPosition(1040, 12300)  # warms the fast path's cache

    idx.truncate_to(2000)  # beyond the last: nothing removed
    assert all_offset_entries(idx) == entries
    idx.truncate_to(1040)  # exact: the entry itself goes
    assert all_offset_entries(idx) == entries[:3]
    assert idx.last_offset == 1030
    assert idx.lookup(5000) == OffsetPosition(1030, 8200)
    idx.truncate_to(1025)  # between 1020 and 1030
    assert all_offset_entries(idx) == entries[:2]
    assert idx.lookup(1029) == OffsetPosition(1020, 4100)
    idx.append(1021, 5000)  # above the new last offset
    assert idx.lookup(5000) == OffsetPosition(1021, 5000)
    idx.truncate_to(1005)  # below the first: everything goes
    assert idx.entries == 0 and idx.last_offset == base
    assert idx.lookup(5000) == OffsetPosition(base, 0)
    idx.append(1001, 1)
    assert all_offset_entries(idx) == [(1001, 1)]
    idx.close()


def test_time_index_truncate_to_uses_offsets(tmp_path) -> None:
    """TimeIndex.truncate_to removes every entry whose *offset* is >= the target."""
    base = 1000
    entries = [(5000, 1010), (6000, 1020), (7000, 1030), (8000, 1040)]
    idx = TimeIndex(tmp_path / "0.timeindex", base, 4096)
    for ts, off in entries:
        assert idx.maybe_append(ts, off)
    assert idx.lookup(10**9) == TimestampOffset(8000, 1040)

    idx.truncate_to(1040)
    assert all_time_entries(idx) == entries[:3]
    assert idx.last_entry == TimestampOffset(7000, 1030)
    assert idx.lookup(10**9) == TimestampOffset(7000, 1030)
    idx.truncate_to(1015)
    assert all_time_entries(idx) == entries[:1]
    assert idx.lookup(6500) == TimestampOffset(5000, 1010)
    assert idx.maybe_append(5500, 1012)  # timestamps only need to exceed the new last entry
    assert idx.lookup(6500) == TimestampOffset(5500, 1012)
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_entry == TimestampOffset(-1, base)
    idx.close()


@pytest.mark.parametrize("trimmed", [False, True], ids=["active-untrimmed", "trimmed"])
@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_rename_to_moves_the_file_and_keeps_the_entries(tmp_path, cls, trimmed) -> None:
    """rename_to moves the file atomically and the index carries on: same entries, same
    lookups, appends continue into the renamed file. Kafka's renameTo only moves the file; the
    in-memory entry count stays, so an active (still preallocated) index must not be re-counted
    from its zero tail."""
    old = tmp_path / "00000000000000000100.idx"
    new = tmp_path / "00000000000000000100.idx.deleted"
    idx = cls(old, 100, 4096)
    _append_three(idx)
    before = _entries_of(idx)
    if trimmed:
        idx.trim_to_valid_size()
    idx.rename_to(new)
    assert not old.exists() and new.exists()
    assert idx.path == new
    assert idx.entries == 3
    assert _entries_of(idx) == before
    if cls is OffsetIndex:
        assert idx.last_offset == 112
        assert idx.lookup(1000) == OffsetPosition(112, 8500)
    else:
        assert idx.last_entry == TimestampOffset(2500, 112)
        assert idx.lookup(10**6) == TimestampOffset(2500, 112)
    if not trimmed:
        if cls is OffsetIndex:
            idx.append(150, 9999)
        else:
            assert idx.maybe_append(4000, 150)
        assert idx.entries == 4
    idx.close()
    assert new.read_bytes()[: 3 * idx.entry_size] == _raw_of_entries(cls, 100, before)


def _raw_of_entries(cls, base, entries) -> bytes:
    return pack_offsets(base, entries) if cls is OffsetIndex else pack_times(base, entries)


def test_rename_of_a_never_opened_index_only_changes_the_path(tmp_path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 4096)
    idx.rename_to(tmp_path / "b.index")
    assert not (tmp_path / "a.index").exists() and not (tmp_path / "b.index").exists()
    assert idx.entries == 0
    assert (tmp_path / "b.index").exists()
    idx.close()


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_delete_if_exists(tmp_path, cls) -> None:
    """delete_if_exists closes the map, deletes the file and says whether it existed."""
    path = tmp_path / "0.idx"
    idx = cls(path, 0, 4096)
    _append_three(idx)
    assert idx.delete_if_exists() is True
    assert not path.exists()
    assert idx.delete_if_exists() is False
    never = cls(tmp_path / "never.idx", 0, 4096)
    assert never.delete_if_exists() is False
    assert not (tmp_path / "never.idx").exists()


def test_offset_index_flush_close_reopen_byte_for_byte(tmp_path) -> None:
    """Entries reach the file as Kafka lays them out (>ii, relative offsets); flush leaves the
    preallocated file, close trims it to the entries, and a reopened index reads them back."""
    base = 15000
    entries = [(15000 + i * 37 + 5, i * 4111) for i in range(50)]
    path = tmp_path / "00000000000000015000.index"
    idx = OffsetIndex(path, base, 10 * MIB)
    for e in entries:
        idx.append(*e)
    idx.flush()
    raw = path.read_bytes()
    assert len(raw) == 10 * MIB
    assert raw[: 8 * 50] == pack_offsets(base, entries)
    assert raw[8 * 50 :].count(0) == len(raw) - 8 * 50
    idx.close()
    assert path.read_bytes() == b"".join(struct.pack(">ii", o - base, p) for o, p in entries)
    with pytest.raises(LogClosedError):
        idx.entries

    again = OffsetIndex(path, base, 10 * MIB)
    assert again.entries == 50
    assert all_offset_entries(again) == entries
    assert again.lookup(15000 + 10 * 37 + 6) == OffsetPosition(*entries[10])
    again.close()
    assert path.read_bytes() == pack_offsets(base, entries)

    ro = OffsetIndex(path, base, 10 * MIB, writable=False)
    assert all_offset_entries(ro) == entries
    ro.close()
    assert path.read_bytes() == pack_offsets(base, entries)


def test_time_index_flush_close_reopen_byte_for_byte(tmp_path) -> None:
    base = 48000
    entries = [(1_700_000_000_000 + i * 997, 48000 + i * 3) for i in range(40)]
    path = tmp_path / "00000000000000048000.timeindex"
    idx = TimeIndex(path, base, 10 * MIB)
    for ts, off in entries:
        assert idx.maybe_append(ts, off)
    idx.flush()
    raw = path.read_bytes()
    assert len(raw) == 10485756
    assert raw[: 12 * 40] == b"".join(struct.pack(">qi", ts, off - base) for ts, off in entries)
    idx.close()
    assert path.read_bytes() == pack_times(base, entries)
    again = TimeIndex(path, base, 10 * MIB)
    assert all_time_entries(again) == entries
    assert again.last_entry == TimestampOffset(*entries[-1])
    again.close()
    assert path.read_bytes() == pack_times(base, entries)


# -- append rules --------------------------------------------------------------------------------


def test_offset_index_append_rules(tmp_path) -> None:
    """Offsets must strictly increase; the relative offset must fit [0, 2**31-1]; a full index
    refuses; a refused append leaves the index as it was."""
    base = 1_000_000
    idx = OffsetIndex(tmp_path / "0.index", base, 8 * 4)
    with pytest.raises(InvalidOffsetError):
        idx.append(base - 1, 0)  # below the base offset
    with pytest.raises(InvalidOffsetError):
        idx.append(base + INT32_MAX + 1, 0)  # relative offset overflow
    assert idx.entries == 0
    idx.append(base, 0)  # relative 0 is fine
    with pytest.raises(InvalidOffsetError):
        idx.append(base, 10)  # not larger
    idx.append(base + 5, 100)
    with pytest.raises(InvalidOffsetError):
        idx.append(base + 4, 200)  # smaller
    idx.append(base + INT32_MAX, 300)  # the largest relative offset
    with pytest.raises(InvalidOffsetError):
        idx.append(base + INT32_MAX + 1, 400)
    assert idx.entries == 3 and not idx.is_full
    assert all_offset_entries(idx) == [(base, 0), (base + 5, 100), (base + INT32_MAX, 300)]


def test_offset_index_full(tmp_path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 3)
    for off in (1, 2, 3):
        assert not idx.is_full
        idx.append(off, off * 10)
    assert idx.is_full
    with pytest.raises(InvalidOffsetError):
        idx.append(4, 40)
    assert idx.entries == 3 and idx.last_offset == 3


def test_time_index_maybe_append_rules(tmp_path) -> None:
    """maybe_append writes only when the timestamp grows; a smaller offset or timestamp is an
    error; an equal offset with a larger timestamp is accepted (Kafka's TimeIndex.maybeAppend)."""
    base = 200
    idx = TimeIndex(tmp_path / "0.timeindex", base, 12 * 10)
    assert idx.maybe_append(-1, 205) is False  # not above the empty index's NO_TIMESTAMP (-1)
    assert idx.entries == 0
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10, base - 1)  # below the base offset
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10, base + INT32_MAX + 1)  # relative overflow
    assert idx.maybe_append(0, 205) is True
    assert idx.maybe_append(0, 206) is False  # same timestamp: nothing written
    assert idx.maybe_append(1000, 210) is True
    assert idx.maybe_append(1000, 220) is False
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(2000, 209)  # offset below the last entry's
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(999, 230)  # timestamp below the last entry's
    assert idx.maybe_append(1001, 210) is True  # same offset, larger timestamp
    assert idx.maybe_append(5000, base + INT32_MAX) is True
    assert all_time_entries(idx) == [(0, 205), (1000, 210), (1001, 210), (5000, base + INT32_MAX)]
    assert idx.last_entry == TimestampOffset(5000, base + INT32_MAX)


def test_time_index_is_full_keeps_the_last_slot(tmp_path) -> None:
    """is_full is true one entry early so the roll-time entry fits; skip_full_check writes
    into that last slot; past it the index refuses even with skip_full_check."""
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 12 * 3)
    assert idx.max_entries == 3
    assert idx.maybe_append(10, 1)
    assert not idx.is_full
    assert idx.maybe_append(20, 2)
    assert idx.is_full  # 2 of 3 slots used
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(30, 3)
    assert idx.entries == 2
    assert idx.maybe_append(30, 3, skip_full_check=True)
    assert idx.entries == 3
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(40, 4, skip_full_check=True)
    assert all_time_entries(idx) == [(10, 1), (20, 2), (30, 3)]
    idx.close()
    assert (tmp_path / "0.timeindex").read_bytes() == pack_times(0, [(10, 1), (20, 2), (30, 3)])


# -- lookups against a linear scan -----------------------------------------------------------------


@st.composite
def offset_index_cases(draw):
    """Strictly increasing (offset, position) entries: small indexes and ones larger than the
    warm section (1024 entries) so both halves of Kafka's search run."""
    lo, hi = draw(st.sampled_from([(1030, 2600), (WARM_OFFSET_ENTRIES - 2, WARM_OFFSET_ENTRIES + 3), (0, 12)]))
    n = draw(st.integers(lo, hi))
    base = draw(st.sampled_from([0, 1, 15000, 2**40]))
    max_gap = draw(st.sampled_from([1, 2, 7, 5000, 2**19]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    first = int(rng.integers(0, 50))
    rel = (first + np.concatenate([[0], np.cumsum(rng.integers(1, max_gap + 1, size=max(0, n - 1)))])).tolist()[:n]
    positions = np.cumsum(rng.integers(1, 20000, size=n)).tolist()
    return base, [(base + r, int(p)) for r, p in zip(rel, positions)]


@st.composite
def time_index_cases(draw):
    """Strictly increasing timestamps with increasing offsets, around and above the warm
    section of a time index (682 entries)."""
    lo, hi = draw(st.sampled_from([(690, 1600), (WARM_TIME_ENTRIES - 2, WARM_TIME_ENTRIES + 3), (0, 12)]))
    n = draw(st.integers(lo, hi))
    base = draw(st.sampled_from([0, 46000, 2**40]))
    max_gap = draw(st.sampled_from([1, 3, 1000, 2**30]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ts0 = int(rng.integers(0, 2**41))
    ts = (ts0 + np.concatenate([[0], np.cumsum(rng.integers(1, max_gap + 1, size=max(0, n - 1)))])).tolist()[:n]
    offs = np.cumsum(rng.integers(1, 40, size=n)).tolist()
    return base, [(int(t), base + int(o)) for t, o in zip(ts, offs)]


def _targets(data, keys: list[int], warm: int) -> list[int]:
    """Targets below the first key, equal to keys, between keys, above the last, at the
    warm/cold boundary, and at random."""
    event("entries > warm section" if len(keys) > warm + 1 else "entries within the warm section")
    if not keys:
        return data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=5))
    special = {keys[0] - 1, keys[0], keys[-1], keys[-1] + 1, keys[-1] + 10**6, keys[0] - 10**6}
    boundary = max(0, len(keys) - 1 - warm)
    for i in (boundary - 1, boundary, boundary + 1, len(keys) // 2, len(keys) - 2):
        if 0 <= i < len(keys):
            special.update({keys[i] - 1, keys[i], keys[i] + 1})
    picks = data.draw(st.lists(st.sampled_from(keys), max_size=20))
    between = data.draw(st.lists(st.integers(keys[0] - 3, keys[-1] + 3), max_size=20))
    return sorted(special) + picks + between


@settings(examples(60), **_HYP)
@given(case=offset_index_cases(), data=st.data())
def test_offset_lookup_matches_linear_scan(case, data) -> None:
    """OffsetIndex.lookup is the last entry with offset <= target (or (base, 0)), as a linear
    scan finds it, before and after further appends (the fast path's cache must follow)."""
    base, entries = case
    half = len(entries) // 2
    with tempfile.TemporaryDirectory() as d:
        idx = OffsetIndex(Path(d) / "x.index", base, 8 * (len(entries) + 1))
        for e in entries[:half]:
            idx.append(*e)
        keys = [o for o, _ in entries[:half]]
        for t in _targets(data, keys, WARM_OFFSET_ENTRIES)[:30]:
            assert idx.lookup(t) == offset_oracle(entries[:half], base, t), t
        for e in entries[half:]:
            idx.append(*e)
        keys = [o for o, _ in entries]
        for t in _targets(data, keys, WARM_OFFSET_ENTRIES):
            assert idx.lookup(t) == offset_oracle(entries, base, t), t
        idx.close()


@settings(examples(60), **_HYP)
@given(case=offset_index_cases(), data=st.data())
def test_offset_lookup_many_equals_lookup(case, data) -> None:
    """lookup_many answers element-wise what lookup answers, including targets far outside
    the int32 relative range."""
    base, entries = case
    with tempfile.TemporaryDirectory() as d:
        idx = OffsetIndex(Path(d) / "x.index", base, 8 * (len(entries) + 1))
        for e in entries:
            idx.append(*e)
        keys = [o for o, _ in entries]
        targets = _targets(data, keys, WARM_OFFSET_ENTRIES) + [base + 2**40, base - 2**40, base - 1, base]
        offsets, positions = idx.lookup_many(np.array(targets, dtype=np.int64))
        assert offsets.shape == positions.shape == (len(targets),)
        for t, o, p in zip(targets, offsets.tolist(), positions.tolist()):
            assert (o, p) == tuple(idx.lookup(t)) == tuple(offset_oracle(entries, base, t)), t
        idx.close()


@settings(examples(60), **_HYP)
@given(case=time_index_cases(), data=st.data())
def test_time_lookup_matches_linear_scan(case, data) -> None:
    """TimeIndex.lookup is the last entry with timestamp <= target (or (-1, base))."""
    base, entries = case
    half = len(entries) // 2
    with tempfile.TemporaryDirectory() as d:
        idx = TimeIndex(Path(d) / "x.timeindex", base, 12 * (len(entries) + 2))
        for ts, off in entries[:half]:
            assert idx.maybe_append(ts, off)
        for t in _targets(data, [ts for ts, _ in entries[:half]], WARM_TIME_ENTRIES)[:30]:
            assert idx.lookup(t) == time_oracle(entries[:half], base, t), t
        for ts, off in entries[half:]:
            assert idx.maybe_append(ts, off)
        for t in _targets(data, [ts for ts, _ in entries], WARM_TIME_ENTRIES):
            assert idx.lookup(t) == time_oracle(entries, base, t), t
        idx.close()


@settings(examples(40), **_HYP)
@given(case=offset_index_cases(), data=st.data())
def test_offset_truncate_to_matches_linear_scan(case, data) -> None:
    """After truncate_to(t) exactly the entries with offset < t remain (lookups and the file
    agree), and appends resume after the new last offset."""
    base, entries = case
    keys = [o for o, _ in entries]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.index"
        idx = OffsetIndex(path, base, 8 * (len(entries) + 2))
        for e in entries:
            idx.append(*e)
        idx.lookup(keys[-1] if keys else base)  # build the cache first
        target = data.draw(st.sampled_from(_targets(data, keys, WARM_OFFSET_ENTRIES)))
        idx.truncate_to(target)
        kept = [e for e in entries if e[0] < target]
        assert all_offset_entries(idx) == kept
        assert idx.last_offset == (kept[-1][0] if kept else base)
        for t in _targets(data, keys, WARM_OFFSET_ENTRIES)[:40]:
            assert idx.lookup(t) == offset_oracle(kept, base, t), t
        nxt = max(idx.last_offset + 1, base) if kept else base
        idx.append(nxt, 123)
        assert idx.lookup(nxt + 10**6) == OffsetPosition(nxt, 123)
        idx.close()
        assert path.read_bytes() == pack_offsets(base, kept + [(nxt, 123)])


@settings(examples(40), **_HYP)
@given(case=time_index_cases(), data=st.data())
def test_time_truncate_to_matches_linear_scan(case, data) -> None:
    base, entries = case
    offsets = [o for _, o in entries]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.timeindex"
        idx = TimeIndex(path, base, 12 * (len(entries) + 2))
        for ts, off in entries:
            assert idx.maybe_append(ts, off)
        idx.lookup(2**62)  # build the cache first
        target = data.draw(st.sampled_from(_targets(data, offsets, WARM_TIME_ENTRIES)))
        idx.truncate_to(target)
        kept = [e for e in entries if e[1] < target]
        assert all_time_entries(idx) == kept
        assert idx.last_entry == (TimestampOffset(*kept[-1]) if kept else TimestampOffset(-1, base))
        for t in _targets(data, [ts for ts, _ in entries], WARM_TIME_ENTRIES)[:40]:
            assert idx.lookup(t) == time_oracle(kept, base, t), t
        idx.close()
        assert path.read_bytes() == pack_times(base, kept)


def test_every_target_across_the_warm_boundary(tmp_path) -> None:
    """Every target from below the first entry to above the last of indexes larger than the
    warm section (3000 offset entries, 1500 time entries) answers as a bisect over the entries."""
    import bisect

    base = 1000
    off_entries = [(base + 2 * i + 1, 10 * i) for i in range(3000)]
    off = OffsetIndex(tmp_path / "a.index", base, 8 * 3000)
    for e in off_entries:
        off.append(*e)
    keys = [o for o, _ in off_entries]
    targets = np.arange(base - 2, keys[-1] + 3)
    many_offsets, many_positions = off.lookup_many(targets)
    for t, mo, mp in zip(targets.tolist(), many_offsets.tolist(), many_positions.tolist()):
        i = bisect.bisect_right(keys, t) - 1
        want = OffsetPosition(base, 0) if i < 0 else OffsetPosition(*off_entries[i])
        assert off.lookup(t) == want, t
        assert (mo, mp) == want, t
    off.close()

    time_entries = [(5000 + 3 * i, base + i) for i in range(1500)]
    tim = TimeIndex(tmp_path / "a.timeindex", base, 12 * 1501)
    for ts, o in time_entries:
        assert tim.maybe_append(ts, o)
    tkeys = [ts for ts, _ in time_entries]
    for t in range(4990, tkeys[-1] + 5):
        i = bisect.bisect_right(tkeys, t) - 1
        want = TimestampOffset(-1, base) if i < 0 else TimestampOffset(*time_entries[i])
        assert tim.lookup(t) == want, t
    tim.close()


def test_empty_indexes_answer_base(tmp_path) -> None:
    """An empty offset index answers (base, 0) and an empty time index (-1, base)."""
    off = OffsetIndex(tmp_path / "a.index", 77, 4096)
    tim = TimeIndex(tmp_path / "a.timeindex", 77, 4096)
    for t in (-(2**40), 0, 76, 77, 78, 2**40):
        assert off.lookup(t) == OffsetPosition(77, 0)
        assert tim.lookup(t) == TimestampOffset(-1, 77)
    offsets, positions = off.lookup_many([0, 77, 10**9])
    assert offsets.tolist() == [77, 77, 77] and positions.tolist() == [0, 0, 0]
    assert off.last_offset == 77 and tim.last_entry == TimestampOffset(-1, 77)


def test_read_only_index_answers_as_the_writer(tmp_path) -> None:
    """An index opened read-only (writable=False) reads the writer's entries and lookups."""
    path = tmp_path / "00000000000000000009.index"
    w = OffsetIndex(path, 9, 4096)
    entries = [(9 + i * 3, i * 100) for i in range(1, 60)]
    for e in entries:
        w.append(*e)
    w.close()
    r = OffsetIndex(path, 9, 4096, writable=False)
    for t in range(0, 200):
        assert r.lookup(t) == offset_oracle(entries, 9, t)
    r.close()
    assert path.read_bytes() == pack_offsets(9, entries)


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_read_live_cuts_the_preallocated_zero_tail(tmp_path, cls) -> None:
    """read_live on an active (preallocated) index: only the entries before the zero tail, the
    writer's lookups; the file is neither mapped nor held open."""
    path = tmp_path / "00000000000000000009.idx"
    w = cls(path, 9, 4096)
    entries = [(9 + i * 3, i * 100) for i in range(1, 60)]
    for offset, value in entries:
        if cls is OffsetIndex:
            w.append(offset, value)
        else:
            w.maybe_append(value, offset)
    w.flush()
    assert path.stat().st_size == 4096 // w.entry_size * w.entry_size  # still preallocated
    live = cls.read_live(path, 9)
    plain = cls(path, 9, writable=False)
    try:
        assert live.entries == len(entries) < plain.entries
        assert [live.entry(i) for i in range(live.entries)] == [w.entry(i) for i in range(w.entries)]
        for t in range(0, 6200, 7):
            assert live.lookup(t) == w.lookup(t)
    finally:
        w.close()
        live.close()
        plain.close()


@pytest.mark.parametrize("content", [None, b"", b"\x00" * 24, (5).to_bytes(4, "big") + (77).to_bytes(4, "big") + b"\x01\x02\x03"])
def test_read_live_of_a_missing_or_broken_file(tmp_path, content) -> None:
    """A missing file reads as empty, a zero file as empty, a torn one as its whole entries."""
    path = tmp_path / "00000000000000001000.index"
    if content is not None:
        path.write_bytes(content)
    live = OffsetIndex.read_live(path, 1000)
    expected = [OffsetPosition(1005, 77)] if content and any(content) else []
    assert [live.entry(i) for i in range(live.entries)] == expected
    assert live.lookup(10**6) == (expected[-1] if expected else OffsetPosition(1000, 0))


# -- sanity checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, length", [(OffsetIndex, 13), (OffsetIndex, 5), (TimeIndex, 25), (TimeIndex, 8)])
def test_sanity_check_length_not_whole_entries(tmp_path, cls, length) -> None:
    """A length that is not a multiple of the entry size is a CorruptIndexError naming the file."""
    path = tmp_path / "00000000000000000000.idx"
    path.write_bytes(bytes(range(1, length + 1)) if cls is OffsetIndex else b"\0" * length)
    idx = cls(path, 0, 10 * MIB)
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)
    assert str(path) in str(info.value)


def test_sanity_check_time_index_last_timestamp_below_first(tmp_path) -> None:
    """A time index whose last timestamp is below its first is corrupt (crafted bytes: the
    API refuses to write it)."""
    path = tmp_path / "00000000000000000010.timeindex"
    path.write_bytes(pack_times(10, [(2000, 11), (3000, 12), (1999, 13)]))
    idx = TimeIndex(path, 10, 10 * MIB)
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)


def test_sanity_check_time_index_last_offset_below_base(tmp_path) -> None:
    path = tmp_path / "00000000000000000010.timeindex"
    path.write_bytes(pack_times(10, [(2000, 11), (3000, 9)]))  # relative -1
    idx = TimeIndex(path, 10, 10 * MIB)
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)


def test_sanity_check_offset_index_last_offset_below_base(tmp_path) -> None:
    """An offset index whose last offset is below the base offset is corrupt; append cannot
    write one, so the file is crafted with a negative relative offset."""
    base = 100
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", -3, 4096))
    idx = OffsetIndex(path, base, 10 * MIB)
    assert idx.last_offset == 97
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_sanity_check_passes_on_good_indexes(tmp_path, cls) -> None:
    empty = cls(tmp_path / "empty.idx", 0, 4096)
    empty.sanity_check()  # a new preallocated index
    empty.close()
    (tmp_path / "zero.idx").write_bytes(b"")
    zero = cls(tmp_path / "zero.idx", 0, 4096)
    zero.sanity_check()  # a zero-length index is valid
    zero.close()
    idx = cls(tmp_path / "good.idx", 0, 4096)
    _append_three(idx)
    idx.sanity_check()
    idx.close()
    good = cls(tmp_path / "good.idx", 0, 4096)
    good.sanity_check()
    good.close()


# -- transaction index ---------------------------------------------------------------------------


TXNS = [
    AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=5),
    AbortedTxn(producer_id=8, first_offset=15, last_offset=30, last_stable_offset=10),
    AbortedTxn(producer_id=7, first_offset=40, last_offset=50, last_stable_offset=41),
    AbortedTxn(producer_id=9, first_offset=45, last_offset=70, last_stable_offset=71),
]


def test_txn_index_file_is_created_on_first_append(tmp_path) -> None:
    """No file until the first append; reads, truncation and reset of an absent index see it
    as empty and create nothing. The entry bytes are Kafka's (>hqqqq, version 0)."""
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, 0)
    assert not path.exists()
    assert idx.all_aborted_txns() == []
    assert idx.collect_aborted_txns(0, 100) == ([], False)
    idx.truncate_to(5)
    idx.reset()
    idx.sanity_check()
    assert not path.exists()
    idx.append(TXNS[0])
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 7, 10, 20, 5)
    idx.close()


def test_txn_index_append_and_reopen(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, 0)
    for t in TXNS:
        idx.append(t)
    assert idx.all_aborted_txns() == TXNS
    idx.flush()
    idx.close()
    assert path.read_bytes() == pack_txns(TXNS)
    again = TransactionIndex(path, 0)
    assert again.all_aborted_txns() == TXNS
    again.sanity_check()
    again.close()


def test_txn_index_last_offsets_must_increase(tmp_path) -> None:
    """Kafka: "The last offset of appended transactions must increase sequentially"."""
    idx = TransactionIndex(tmp_path / "0.txnindex", 0)
    idx.append(TXNS[1])
    with pytest.raises(InvalidOffsetError):
        idx.append(AbortedTxn(1, 0, 30, 0))  # equal
    with pytest.raises(InvalidOffsetError):
        idx.append(AbortedTxn(1, 0, 29, 0))  # smaller
    assert idx.all_aborted_txns() == [TXNS[1]]
    idx.append(AbortedTxn(1, 0, 31, 0))
    assert len(idx.all_aborted_txns()) == 2
    idx.close()


def kafka_collect(txns, fetch: int, upper: int):
    """Kafka's TransactionIndex.collectAbortedTxns, transcribed."""
    out = []
    for t in txns:
        if t.last_offset >= fetch and t.first_offset < upper:
            out.append(t)
        if t.last_stable_offset >= upper:
            return out, True
    return out, False


@pytest.mark.parametrize(
    "fetch, upper, expected, complete",
    [
        (0, 10, [], True),  # TXNS[0].first_offset 10 is not < 10; TXNS[1].lso 10 >= 10 ends it
        (0, 11, [0], True),  # ... and TXNS[2].lso 41 >= 11 ends it
        (21, 31, [1], True),  # TXNS[0] ended at 20 < 21
        (31, 40, [], True),  # TXNS[2].first_offset 40 is not < 40
        (31, 41, [2], True),
        (0, 1000, [0, 1, 2, 3], False),  # no LSO reaches 1000: the search goes on
        (51, 71, [3], True),
        (71, 72, [], False),
        (0, 5, [], True),  # TXNS[0].lso 5 >= 5: complete at once
        (20, 16, [0, 1], True),  # an empty range is searched all the same, as Kafka does
    ],
)
def test_txn_collect_aborted_txns(tmp_path, fetch, upper, expected, complete) -> None:
    """collect_aborted_txns includes a txn when last_offset >= fetch and first_offset < upper,
    and stops with complete=True at the first entry whose last_stable_offset >= upper."""
    idx = TransactionIndex(tmp_path / "0.txnindex", 0)
    for t in TXNS:
        idx.append(t)
    assert idx.collect_aborted_txns(fetch, upper) == ([TXNS[i] for i in expected], complete)
    assert kafka_collect(TXNS, fetch, upper) == ([TXNS[i] for i in expected], complete)
    idx.close()


@settings(examples(60), **_HYP)
@given(
    spans=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 30), st.integers(-20, 40)), max_size=12),
    fetch=st.integers(-5, 400),
    width=st.integers(-5, 400),
)
def test_txn_collect_matches_kafka(spans, fetch, width) -> None:
    """collect_aborted_txns equals Kafka's loop on random indexes and ranges."""
    txns, last = [], -1
    for gap, length, lso_shift in spans:
        first = last + 1 + gap
        end = first + length
        txns.append(AbortedTxn(len(txns), first, end, max(0, end + lso_shift)))
        last = end
    with tempfile.TemporaryDirectory() as d:
        idx = TransactionIndex(Path(d) / "0.txnindex", 0)
        for t in txns:
            idx.append(t)
        assert idx.collect_aborted_txns(fetch, fetch + width) == kafka_collect(txns, fetch, fetch + width)
        idx.close()


def test_txn_index_truncate_to(tmp_path) -> None:
    """truncate_to drops every entry whose last offset is >= the target; appends must then
    exceed the new last entry only."""
    path = tmp_path / "0.txnindex"
    idx = TransactionIndex(path, 0)
    for t in TXNS:
        idx.append(t)
    idx.truncate_to(51)  # 70 goes
    assert idx.all_aborted_txns() == TXNS[:3]
    idx.truncate_to(50)  # exact last offset goes
    assert idx.all_aborted_txns() == TXNS[:2]
    assert path.stat().st_size == 2 * 34
    with pytest.raises(InvalidOffsetError):
        idx.append(AbortedTxn(1, 25, 30, 0))
    idx.append(AbortedTxn(1, 31, 35, 36))
    assert idx.all_aborted_txns() == TXNS[:2] + [AbortedTxn(1, 31, 35, 36)]
    idx.truncate_to(0)
    assert idx.all_aborted_txns() == [] and path.stat().st_size == 0
    idx.append(AbortedTxn(1, 0, 1, 2))  # anything after truncating everything
    idx.close()


def test_txn_index_reset(tmp_path) -> None:
    path = tmp_path / "0.txnindex"
    idx = TransactionIndex(path, 0)
    for t in TXNS:
        idx.append(t)
    idx.reset()
    assert path.exists() and path.stat().st_size == 0
    assert idx.all_aborted_txns() == []
    idx.append(AbortedTxn(3, 1, 2, 3))  # last offset below the dropped entries: fine now
    assert idx.all_aborted_txns() == [AbortedTxn(3, 1, 2, 3)]
    idx.close()


@pytest.mark.parametrize("extra", [1, 33, 35])
def test_txn_index_bad_length_is_corrupt(tmp_path, extra) -> None:
    """A length that is not whole 34-byte entries fails the sanity check, naming the file."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(pack_txns(TXNS[:2]) + b"\x00" * extra)
    idx = TransactionIndex(path, 0)
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)
    idx.close()


@pytest.mark.parametrize("version", [1, 0x7FFF])
def test_txn_index_bad_version_is_corrupt(tmp_path, version) -> None:
    """An entry whose version field is not 0 is a CorruptIndexError (reading and checking)."""
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(pack_txns(TXNS[:1]) + pack_txns(TXNS[1:2], version=version))
    idx = TransactionIndex(path, 0)
    with pytest.raises(CorruptIndexError) as info:
        idx.all_aborted_txns()
    assert info.value.file == str(path)
    assert info.value.position == 34
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    with pytest.raises(CorruptIndexError):
        idx.collect_aborted_txns(0, 100)
    idx.close()


def test_txn_index_last_offset_below_start_offset_is_corrupt(tmp_path) -> None:
    """Kafka's TransactionIndex.sanityCheck: an aborted transaction whose last offset is below
    the index's start offset (the segment's base offset) is a CorruptIndexException."""
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(pack_txns([AbortedTxn(1, 90, 99, 100), AbortedTxn(1, 100, 120, 121)]))
    idx = TransactionIndex(path, 100)
    with pytest.raises(CorruptIndexError) as info:
        idx.sanity_check()
    assert info.value.file == str(path)
    idx.close()
