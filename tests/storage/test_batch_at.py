"""``kafkalog.resync.batch_at``: the one check of a position taken from an index entry (used by the
Spark planner and reader and by ``kafkalog groups``' end offsets) before it is trusted."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog.resync import batch_at


def _segment(path: Path, magic: int, base: int, sizes: list[int]) -> list[tuple[int, int]]:
    """Batches of ``magic`` at offsets from ``base`` (one record each, values of ``sizes``
    bytes of 0xFF, so no value reads as a plausible header); (position, offset field) each."""
    out, data, offset = [], b"", base
    for size in sizes:
        builder = RecordBatchBuilder(magic=magic, base_offset=offset)
        builder.append(b"k", b"\xff" * size, timestamp=1_700_000_000_000)
        out.append((len(data), offset))
        data += bytes(builder.build().buffer)
        offset += 1
    path.write_bytes(data + bytes(40))  # a zero tail, as a preallocated segment has
    return out


@settings(max_examples=30, deadline=None)
@given(magic=st.sampled_from([0, 1, 2]), base=st.integers(0, 2**40), sizes=st.lists(st.integers(0, 64), min_size=1, max_size=5))
def test_batch_starts_are_taken(tmp_path_factory, magic, base, sizes) -> None:
    """Every batch start is taken (and refused when its offset is below ``min_offset``); any
    other position is refused or, the CRC not being checked, at most frames a plausible entry
    inside the file; the zero tail and positions past the end frame nothing."""
    path = tmp_path_factory.mktemp("seg") / "00000000000000000000.log"
    starts = dict(_segment(path, magic, base, sizes))
    with FileRecords.open(path) as records:
        size = records.size_in_bytes
        tail = size - 40
        for position in range(size + 2):
            batch = batch_at(records, position, base)
            if position in starts:
                assert batch is not None and batch.position == position and batch.last_offset == starts[position]
                assert batch_at(records, position, starts[position] + 1) is None  # below the segment's base
            elif position >= tail:
                assert batch is None, position
            elif batch is not None:
                field = batch.base_offset if batch.magic == 2 else batch.last_offset
                assert batch.position == position and position + batch.size_in_bytes <= size and field >= base
