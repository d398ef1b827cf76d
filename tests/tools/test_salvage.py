"""``kafkalog.salvage``: every valid batch of a damaged segment is copied out, resynchronising
after each corrupt region; what was skipped is reported; offsets stay monotonic; the source is
never written."""

from __future__ import annotations

import hashlib
import os
import random
import struct
import time
from pathlib import Path

import pytest
from conftest import DATA, examples
from hypothesis import given
from hypothesis import strategies as st
from test_verify import T0, build_partition, plain

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog.errors import KafkalogError
from kafkalog.filenames import segment_logs
from kafkalog.log import Log
from kafkalog import rebuild_path, salvage_segment, verify_path, verify_segment

KAFKA38 = DATA / "kafka-3.8"


def batches_of(path: Path) -> list[tuple[int, bytes]]:
    """(position, bytes) of every batch of a clean file."""
    with FileRecords.open(path) as fr:
        return [(b.position, bytes(b.entry())) for b in fr.batches(validate=True, strict=True)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def segment(tmp_path: Path, n: int = 30, *, base: int = 0) -> Path:
    """A segment of ``n`` batches of varied sizes, magics and codecs, offsets from ``base``."""
    log = tmp_path / f"{base:020d}.log"
    rng = random.Random(n)
    offset = base
    with open(log, "wb") as f:
        for i in range(n):
            magic = 2 if i % 5 else 1
            codec = rng.choice([0, 1, 2, 3] + ([4] if magic == 2 else []))
            b = RecordBatchBuilder(magic, codec, base_offset=offset)
            for j in range(1 + i % 4):
                b.append(b"k%d" % j, rng.randbytes(rng.randrange(5, 300)), timestamp=T0 + i)
            raw = b.build()
            f.write(raw.buffer)
            offset = list(raw.batches())[-1].last_offset + 1 + (i % 3)  # gaps, as after compaction
    return log


def test_a_clean_segment_is_copied_exactly(tmp_path) -> None:
    src = KAFKA38 / "v2-txn-random" / "00000000000000000000.log"
    out = tmp_path / "out"
    out.mkdir()
    report = salvage_segment(src, out)
    copy = out / src.name
    assert report.complete and report.kept_bytes == report.source_size == src.stat().st_size
    assert copy.read_bytes() == src.read_bytes()
    # The indexes rebuilt beside it are Kafka's own.
    for suffix in (".index", ".timeindex", ".txnindex"):
        assert copy.with_suffix(suffix).read_bytes() == src.with_suffix(suffix).read_bytes()
    assert report.indexes is not None and report.indexes.aborted_txns == 7
    assert (report.first_offset, report.last_offset) == (0, 177)


def test_corrupt_middle_region(tmp_path) -> None:
    src = segment(tmp_path)
    original = batches_of(src)
    (p1, b1), (p2, b2) = original[10], original[11]
    data = bytearray(src.read_bytes())
    data[p1 + 30 : p2 + 40] = bytes(len(data[p1 + 30 : p2 + 40]))  # zeros over the end of one and the start of the next
    src.write_bytes(data)
    before = sha(src)
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    report = salvage_segment(src, out)
    assert sha(src) == before
    kept = [b for _, b in batches_of(out)]
    assert kept == [b for i, (_, b) in enumerate(original) if i not in (10, 11)]
    assert [(r.position, r.length) for r in report.skipped] == [(p1, len(b1) + len(b2))]
    assert "crc" in report.skipped[0].reason
    assert report.kept_bytes + report.skipped_bytes == report.source_size
    assert verify_segment(out).problems == []


def test_damaged_size_field_and_torn_tail(tmp_path) -> None:
    src = segment(tmp_path)
    original = batches_of(src)
    data = bytearray(src.read_bytes())
    pos, raw = original[5]
    struct.pack_into(">i", data, pos + 8, 0x3FFFFFFF)  # a size running past the end of the file
    last_pos, last = original[-1]
    data = data[: last_pos + len(last) // 2]  # and a torn last batch
    src.write_bytes(data)
    report = salvage_segment(src, tmp_path / "out.log")
    kept = [b for _, b in batches_of(tmp_path / "out.log")]
    assert kept == [b for i, (_, b) in enumerate(original) if i not in (5, len(original) - 1)]
    assert [r.position for r in report.skipped] == [pos, last_pos]
    assert report.skipped[-1].reason.startswith("a partial batch")
    assert report.indexes is None  # not named like a segment


def test_batches_whose_offsets_go_backwards_are_skipped(tmp_path) -> None:
    src = segment(tmp_path, n=8)
    original = batches_of(src)
    data = src.read_bytes() + original[2][1] + original[3][1]  # a stale copy of earlier batches
    src.write_bytes(data)
    (tmp_path / "out").mkdir()
    report = salvage_segment(src, tmp_path / "out" / "x.log", write_indexes=False)
    assert [b for _, b in batches_of(tmp_path / "out" / "x.log")] == [b for _, b in original]
    assert len(report.skipped) == 2 and all("do not follow" in r.reason for r in report.skipped)


def test_offsets_outside_the_segment_range_are_skipped(tmp_path) -> None:
    src = segment(tmp_path, n=6, base=1000)
    foreign = plain(2, T0)  # offsets 0..1, below the base offset 1000
    src.write_bytes(foreign + src.read_bytes())
    report = salvage_segment(src, tmp_path / "out.log")
    assert report.skipped[0].position == 0 and "below the segment's base offset" in report.skipped[0].reason
    assert report.first_offset == 1000


def test_garbage_and_zero_files(tmp_path) -> None:
    garbage = tmp_path / "00000000000000000000.log"
    garbage.write_bytes(random.Random(3).randbytes(200_000))
    report = salvage_segment(garbage, tmp_path / "g")
    assert report.kept_batches == 0 and [(r.position, r.length) for r in report.skipped] == [(0, 200_000)]
    assert (tmp_path / "g").stat().st_size == 0
    (tmp_path / "src").mkdir()
    zeros = tmp_path / "00000000000000000001.log"
    zeros.write_bytes(segment(tmp_path / "src", n=3, base=1).read_bytes() + bytes(100_000))
    report = salvage_segment(zeros, tmp_path / "z")
    assert report.kept_batches == 3 and "zero bytes" in report.skipped[0].reason


def test_refuses_to_overwrite(tmp_path) -> None:
    src = segment(tmp_path, n=3)
    with pytest.raises(KafkalogError, match="source itself"):
        salvage_segment(src, src)
    with pytest.raises(KafkalogError, match="source itself"):
        salvage_segment(src, tmp_path)
    (tmp_path / "taken.log").write_bytes(b"x")
    with pytest.raises(KafkalogError, match="exists"):
        salvage_segment(src, tmp_path / "taken.log")
    salvage_segment(src, tmp_path / "taken.log", overwrite=True)
    assert (tmp_path / "taken.log").read_bytes() == src.read_bytes()
    with pytest.raises(FileNotFoundError):
        salvage_segment(tmp_path / "missing.log", tmp_path / "o.log")


def test_salvaged_partition_loads_in_log(tmp_path) -> None:
    directory = build_partition(tmp_path / "a")
    log = segment_logs(directory)[1]
    original = batches_of(log)
    data = bytearray(log.read_bytes())
    pos, raw = original[3]
    data[pos + 25] ^= 0xFF
    log.write_bytes(data)
    fixed = tmp_path / "b" / directory.name
    fixed.mkdir(parents=True)
    for other in segment_logs(directory):
        salvage_segment(other, fixed)
    # Each segment's .txnindex was rebuilt alone: transactions that began in an earlier segment
    # are missing until the partition's indexes are rebuilt together.
    assert {p.kind for p in verify_path(fixed).problems} == {"txnindex-mismatch"}
    rebuild_path(fixed)
    assert verify_path(fixed).problems == []
    with Log.open(fixed) as reopened:
        assert reopened.log_end_offset == verify_path(directory).partitions[0].log_end_offset
        assert reopened.load_stats.truncated_bytes == 0


@given(st.data())
@examples(60)
def test_every_intact_batch_survives_a_corrupt_region(tmp_path_factory, data) -> None:
    """Bytes XORed with non-zero noise over a random region (extended so that it never ends
    inside the 17 bytes of a batch header the CRC does not cover): exactly the batches the region
    does not touch come out, in order, and everything else is reported skipped."""
    root = tmp_path_factory.mktemp("salvage")
    src = segment(root, n=data.draw(st.integers(4, 25)))
    original = batches_of(src)
    size = src.stat().st_size
    start = data.draw(st.integers(0, size - 1))
    length = data.draw(st.integers(1, min(2000, size - start)))
    end = start + length
    for pos, raw in original:
        if pos <= end - 1 < pos + 17:  # ends inside a header's uncovered bytes: cover its CRC too
            end = min(size, pos + 21)
    noise = data.draw(st.binary(min_size=end - start, max_size=end - start))
    raw = bytearray(src.read_bytes())
    for i in range(start, end):
        raw[i] ^= (noise[i - start] | 1)
    src.write_bytes(raw)
    out = root / "out.log"
    report = salvage_segment(src, out)
    intact = [b for pos, b in original if pos + len(b) <= start or pos >= end]
    assert [b for _, b in batches_of(out)] == intact
    assert report.kept_bytes + report.skipped_bytes == size
    assert all(r.position < end and r.position + r.length > start for r in report.skipped)


def test_resync_cost_is_bounded(tmp_path) -> None:
    """Eight MB of noise after one good batch: the scan finishes in seconds, not minutes."""
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(plain(3, T0) + os.urandom(8 << 20) + plain(3, T0 + 5).replace(b"\x00" * 8, struct.pack(">q", 3), 1))
    started = time.monotonic()
    report = salvage_segment(src, tmp_path / "out.log")
    assert time.monotonic() - started < 10
    assert report.kept_batches == 2 and len(report.skipped) == 1


# -- a damaged base offset (outside the CRC) ---------------------------------------------------


def contiguous_v2(tmp_path: Path, sizes: list[int]) -> Path:
    """A segment written through ``Log``: one v2 batch of each size, offsets consecutive."""
    directory = tmp_path / "t-0"
    with Log.open(directory) as log:
        for i, n in enumerate(sizes):
            log.append(plain(n, T0 + i, size=20))
    return segment_logs(directory)[0]


def flip(path: Path, position: int, xor: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= xor
    path.write_bytes(data)


def test_a_damaged_base_offset_does_not_drop_the_batches_after_it(tmp_path) -> None:
    """Issue 16, item 6: one flipped byte turns offsets 77..79 into 23117..23119 (the base
    offset is outside the CRC). The 39 batches after it (101 records) are kept, and the damaged
    batch is written back at 77, the only base offset its neighbours leave room for."""
    src = contiguous_v2(tmp_path, [7] * 11 + [3] + [3] * 23 + [2] * 16)
    original = batches_of(src)
    pos, raw = original[11]
    assert struct.unpack_from(">q", raw)[0] == 77
    flip(src, pos + 6, 0x5A)  # 77 + 0x5A00 = 23117
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    report = salvage_segment(src, out)
    assert [b for _, b in batches_of(out)] == [b for _, b in original]
    assert report.complete and report.kept_batches == 51 and report.last_offset == 77 + 3 + 101 - 1
    assert [tuple(r) for r in report.repaired] == [(pos, 23117, 77)]
    assert report.to_dict()["repaired"] == [{"position": pos, "stored_offset": 23117, "offset": 77}]
    assert verify_segment(out).problems == []


def test_salvage_command_names_the_repaired_batches(tmp_path) -> None:
    """``kafkalog salvage`` prints each repaired batch: where it is, and the offset it had and got."""
    import io

    from kafkalog.tools import main

    src = contiguous_v2(tmp_path, [7] * 11 + [3] + [3] * 23 + [2] * 16)
    pos, _ = batches_of(src)[11]
    flip(src, pos + 6, 0x5A)
    out, err = io.StringIO(), io.StringIO()
    status = main(["salvage", str(src), str(tmp_path / "salvaged.log")], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert "repaired 1 batches (their offset field is outside the CRC):" in lines
    assert f"  position {pos}: offset 23117 written as 77" in lines


def test_a_damaged_base_offset_with_no_room_is_skipped_alone(tmp_path) -> None:
    """Compaction left gaps around the damaged batch, so its offsets are ambiguous: it is
    skipped and reported, and every batch around it is kept."""
    src = segment(tmp_path, n=40)  # gaps between batches, v1 every fifth
    original = batches_of(src)
    k = next(i for i in range(10, 30) if original[i][1][16] == 2 and original[i + 1][1][16] == 2)
    pos, raw = original[k]
    flip(src, pos + 5, 0x40)
    report = salvage_segment(src, tmp_path / "out.log")
    assert [b for _, b in batches_of(tmp_path / "out.log")] == [b for i, (_, b) in enumerate(original) if i != k]
    assert [(r.position, r.length) for r in report.skipped] == [(pos, len(raw))]
    assert "do not fit between the batches around it" in report.skipped[0].reason
    assert report.repaired == []


KAFKA_LOGS = sorted(KAFKA38.glob("v[12]-*/*.log")) + [None]  # None: a partition written through Log


@given(st.data())
@examples(60)
def test_every_intact_batch_survives_a_damaged_offset(tmp_path_factory, data) -> None:
    """One byte of one batch's offset field (outside every magic's CRC) XORed with a non-zero
    value, in Kafka-written and Log-written segments: every other batch is kept, unchanged and
    in order, and a v2 batch or an uncompressed v0/v1 message with a successor is written back
    with its original offset (these segments' offsets are consecutive). The last batch may be
    skipped (or, while its offsets still increase, kept as it is). A compressed v0/v1 wrapper
    carries only its last offset, so one whose damaged offset lands among its neighbours' can
    cost one of them."""
    root = tmp_path_factory.mktemp("offset")
    choice = data.draw(st.sampled_from(KAFKA_LOGS))
    if choice is None:
        src = segment_logs(build_partition(root))[data.draw(st.integers(0, 2))]
    else:
        src = root / choice.name
        src.write_bytes(choice.read_bytes())
    original = batches_of(src)
    k = data.draw(st.integers(0, len(original) - 1))
    pos, raw = original[k]
    byte = data.draw(st.integers(0, 7))
    flip(src, pos + byte, data.draw(st.integers(1, 255)))
    damaged = src.read_bytes()[pos : pos + len(raw)]
    out = root / "out" / src.name
    out.parent.mkdir()
    report = salvage_segment(src, out, write_indexes=False)
    kept = [b for _, b in batches_of(out)]
    intact = [b for i, (_, b) in enumerate(original) if i != k]
    assert report.kept_bytes + report.skipped_bytes == report.source_size
    legacy_wrapper = raw[16] < 2 and raw[17] & 0x07
    if legacy_wrapper:  # it may cost one neighbour it now collides with
        skipped = {r.position for r in report.skipped}
        lost = [i for i in (k - 1, k + 1) if 0 <= i < len(original) and original[i][0] in skipped]
        assert len(lost) <= 1
        intact = [b for i, (_, b) in enumerate(original) if i != k and i not in lost]
    assert [b for b in kept if b != damaged and b != raw] == intact
    if not legacy_wrapper and k < len(original) - 1:
        assert kept == [b for _, b in original]
