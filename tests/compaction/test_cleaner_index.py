"""Cleaned segments are indexed as Kafka's ``LogSegment.recover`` would rebuild them.

Every batch a pass rewrites keeps its header's last offset (so the producer's last sequence
survives), so its offset index entry names that offset, not its last kept record's: then
``kafkalog verify`` passes and recovery over a cleaned segment rebuilds the same bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog import Compression, Log, LogSegment
from kafkalog.cleaner import LogCleaner
from kafkalog import verify_path

from .test_cleaner import T0, Clock, compact, kv


def _index_files(directory: Path, base_offset: int) -> tuple[bytes, bytes]:
    name = f"{base_offset:020d}"
    return (directory / f"{name}.index").read_bytes(), (directory / f"{name}.timeindex").read_bytes()


def _recovered_indexes(directory: Path, base_offset: int, config, into: Path) -> tuple[bytes, bytes]:
    """The ``.index`` and ``.timeindex`` bytes recovery rebuilds over a copy of a closed
    segment's ``.log`` (copied after the log is closed, so nothing writes it meanwhile)."""
    into.mkdir()
    name = f"{base_offset:020d}.log"
    shutil.copyfile(directory / name, into / name)
    copy = LogSegment.open(into, base_offset, config)
    try:
        assert copy.recover() == 0  # nothing invalid: only the indexes are rebuilt
        copy.flush()
    finally:
        copy.close()  # trims the indexes, as closing the log trimmed the originals
    return _index_files(into, base_offset)


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(2, Compression.NONE), (2, Compression.GZIP), (2, Compression.ZSTD), (1, Compression.LZ4), (0, Compression.GZIP)],
)
def test_cleaned_segments_index_as_recovery_rebuilds(tmp_path, magic, codec) -> None:
    clock = Clock()
    # A small index interval puts an entry at nearly every batch, so each rewritten batch's
    # entry is checked.
    config = compact(segment_bytes=4096, index_interval_bytes=64)
    log = Log.open(tmp_path / "topic-0", config, clock=clock)
    try:
        for i in range(40):
            # Each batch's last records are overwritten by the next batch, so rewritten
            # batches lose their last records and keep their first.
            pairs = [(b"keep%d" % i, b"v%d" % i), (b"hot%d" % (i % 3), b"a%d" % i), (b"hot%d" % ((i + 1) % 3), b"b%d" % i)]
            log.append(kv(pairs, magic=magic, codec=codec, ts=T0 + (i * 7919) % 1000))
        log.roll()
        cleaner = LogCleaner(dedupe_buffer_size=1 << 20, clock=clock)
        stats = cleaner.clean(log)
        assert stats is not None and stats.batches_rewritten > 0
        inactive = [segment.base_offset for segment in log.segments[:-1]]
    finally:
        log.close()
    assert inactive
    report = verify_path(tmp_path / "topic-0", deep=True)
    assert report.ok, report.problems
    entries = 0
    for base_offset in inactive:
        expected = _recovered_indexes(tmp_path / "topic-0", base_offset, config, tmp_path / f"copy-{base_offset}")
        actual = _index_files(tmp_path / "topic-0", base_offset)
        assert actual == expected, base_offset
        entries += len(actual[0]) // 8
    assert entries >= 3  # several entries, so the comparison says something
