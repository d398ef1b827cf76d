"""Descriptors (issue 16, item 7): an index dropped without close() releases its descriptor (and
its map's) when it is collected; close() releases them at once. Counted in /proc/self/fd."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from kafkalog.log_config import LogConfig
from kafkalog.index import OffsetIndex, TimeIndex
from kafkalog.segment import LogSegment
from kafkalog.transaction_index import AbortedTxn, TransactionIndex

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")

N = 50


def open_fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def _offset_index(path: Path, i: int) -> OffsetIndex:
    index = OffsetIndex(path / f"{i}.index", 0, 4096)
    index.append(1, 10)
    return index


def _time_index(path: Path, i: int) -> TimeIndex:
    index = TimeIndex(path / f"{i}.timeindex", 0, 4096)
    index.maybe_append(1_000, 1)
    return index


def _txn_index(path: Path, i: int) -> TransactionIndex:
    index = TransactionIndex(path / f"{i}.txnindex", 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    return index


MAKERS = [_offset_index, _time_index, _txn_index]


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__.strip("_"))
def test_dropped_index_releases_its_descriptor(tmp_path, make):
    before = open_fds()
    indexes = [make(tmp_path, i) for i in range(N)]
    assert open_fds() > before  # they hold descriptors while alive
    del indexes
    assert open_fds() == before


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__.strip("_"))
def test_closed_index_releases_its_descriptor_at_once(tmp_path, make):
    before = open_fds()
    indexes = [make(tmp_path, i) for i in range(N)]
    for index in indexes:
        index.close()
    assert open_fds() == before
    for index in indexes:
        index.close()  # closing twice is harmless
    del indexes
    assert open_fds() == before


def test_reopened_index_is_released_once(tmp_path):
    """close_handler() then lazy reopen: each descriptor is closed once, none twice."""
    before = open_fds()
    index = _offset_index(tmp_path, 0)
    index.close_handler()
    assert open_fds() == before
    assert index.entry(0) == (1, 10)  # reopens (untrimmed: Kafka counts its length as entries)
    probe = os.open(tmp_path / "0.index", os.O_RDONLY)  # takes the lowest free number
    try:
        index.close()
        os.fstat(probe)  # not closed by mistake by a stale finalizer
    finally:
        os.close(probe)
    del index
    assert open_fds() == before


def test_closed_segment_releases_every_descriptor(tmp_path):
    before = open_fds()
    segments = [LogSegment.open(tmp_path, i * 100, LogConfig()) for i in range(N)]
    for segment in segments:
        segment.update_txn_index(1, segment.base_offset, segment.base_offset + 1, segment.base_offset + 2)
        segment.close()
    assert open_fds() == before


def test_file_records_dropped_without_close_release_their_descriptor(tmp_path):
    """A FileRecords (and its slices) dropped without close() closes its descriptor when the
    last of them is collected; close() closes it once."""
    from kafkalog import FileRecords

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"")
    gc.collect()
    before = open_fds()
    for _ in range(50):
        fr = FileRecords.open(path)
        view = fr.slice(0, 0)
        del fr, view
    gc.collect()
    assert open_fds() == before
    fr = FileRecords.open(path)
    view = fr.slice(0, 0)
    fr.close()
    del view
    gc.collect()
    assert open_fds() == before
