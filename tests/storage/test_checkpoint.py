"""Kafka's plain-text checkpoint files: atomic replacement, the offset and leader-epoch
checkpoint formats, partition.metadata, and every real broker-written file.

Attacks the bytes: exact layouts, Kafka's lenient corners (CRLF, version-only and 0-byte files,
extra whitespace, a sign on a number), every malformed variant naming its line, arbitrary and
mutated bytes (only CorruptCheckpointError may escape), and crashes around the rename.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import checkpoint as cp
from kafkalog.checkpoint import (
    METADATA_TOPIC_ID,
    ZERO_TOPIC_ID,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    new_topic_id,
    write_atomically,
)
from kafkalog.errors import CorruptCheckpointError, KafkalogError

COPIES_DIR = DATA / "checkpoints"
REAL = SHARED_CORPUS / "real"
_NO_SHARED = "shared corpus ../shared/corpus/real is absent"

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Kafka's legal topic names (Topic.LEGAL_CHARS, at most 249 characters, not "." or "..").
topics = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True).filter(lambda t: t not in (".", ".."))
partitions = st.integers(0, INT32_MAX)
offsets = st.integers(INT64_MIN, INT64_MAX)


def _read_corrupt(reader, data: bytes, tmp_path: Path) -> CorruptCheckpointError:
    path = tmp_path / "checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as info:
        reader(path).read()
    err = info.value
    assert err.file == str(path)
    assert str(path) in str(err)
    return err


# -- write_atomically ----------------------------------------------------------------------------


def test_write_atomically_creates_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    write_atomically(path, b"first")
    assert path.read_bytes() == b"first"
    write_atomically(path, b"second, longer")
    write_atomically(str(path), b"3")  # a str path works too
    assert path.read_bytes() == b"3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # no .tmp left behind


def test_write_atomically_fsyncs_file_then_renames_then_fsyncs_directory(tmp_path: Path, monkeypatch) -> None:
    """Kafka's order: fsync the temporary file, rename, fsync the parent directory."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append(("fsync", kind))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", f"{Path(src).name}->{Path(dst).name}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomically(tmp_path / "cp", b"0\n0\n")
    assert events == [("fsync", "file"), ("replace", "cp.tmp->cp"), ("fsync", "dir")]


def test_directory_fsync_is_of_the_files_own_directory(tmp_path: Path, monkeypatch) -> None:
    inodes: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st_ = os.fstat(fd)
        if stat.S_ISDIR(st_.st_mode):
            inodes.append(st_.st_ino)
        real_fsync(fd)

    sub = tmp_path / "partition-0"
    sub.mkdir()
    monkeypatch.setattr(os, "fsync", fsync)
    OffsetCheckpointFile(sub / "x").write({("t", 0): 1})
    LeaderEpochCheckpointFile(sub / "y").write([EpochEntry(0, 0)])
    PartitionMetadataFile(sub / "z").write(new_topic_id())
    assert inodes == [sub.stat().st_ino] * 3


def test_failed_rename_keeps_old_content_and_cleans_up(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    ckpt = OffsetCheckpointFile(path)
    ckpt.write({("t", 0): 5})
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("simulated failure before the rename")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        ckpt.write({("t", 0): 6})
    assert path.read_bytes() == before
    assert ckpt.read() == {("t", 0): 5}
    assert not (tmp_path / (path.name + ".tmp")).exists()


def test_failed_fsync_keeps_old_content(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    ckpt = LeaderEpochCheckpointFile(path)
    ckpt.write([EpochEntry(0, 0)])

    def boom(fd):
        raise OSError("simulated fsync failure")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="simulated"):
        ckpt.write([EpochEntry(0, 0), EpochEntry(1, 10)])
    monkeypatch.undo()
    assert ckpt.read() == [EpochEntry(0, 0)]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_write_into_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no-such-dir" / "f", b"x")


def test_crash_before_rename_leaves_old_file_and_a_stray_tmp_that_is_ignored(tmp_path: Path) -> None:
    """A process that dies between writing the temporary file and the rename (os._exit: no
    cleanup runs) leaves the old checkpoint intact; readers ignore the .tmp, the next write
    overwrites it."""
    path = tmp_path / "replication-offset-checkpoint"
    OffsetCheckpointFile(path).write({("topic", 0): 100})
    old = path.read_bytes()
    script = textwrap.dedent(
        f"""
        import os
        from kafkalog.checkpoint import OffsetCheckpointFile
        os.replace = lambda src, dst: os._exit(9)  # the power fails here
        OffsetCheckpointFile({str(path)!r}).write({{("topic", 0): 200, ("other", 3): 7}})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 9, proc.stderr.decode()
    tmp = tmp_path / (path.name + ".tmp")
    assert tmp.read_bytes() == b"0\n2\ntopic 0 200\nother 3 7\n"  # complete, but never renamed
    assert path.read_bytes() == old
    assert OffsetCheckpointFile(path).read() == {("topic", 0): 100}
    OffsetCheckpointFile(path).write({("topic", 0): 300})
    assert OffsetCheckpointFile(path).read() == {("topic", 0): 300}
    assert not tmp.exists()


def test_partial_stray_tmp_is_ignored_and_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    ckpt = LeaderEpochCheckpointFile(path)
    ckpt.write([EpochEntry(1, 0)])
    tmp = tmp_path / "leader-epoch-checkpoint.tmp"
    tmp.write_bytes(b"0\n3\n1 0\n2 5" + b"garbage" * 100)  # a torn write of the next version
    assert ckpt.read() == [EpochEntry(1, 0)]
    ckpt.write([EpochEntry(1, 0), EpochEntry(2, 5)])
    assert path.read_bytes() == b"0\n2\n1 0\n2 5\n"
    assert not tmp.exists()


def test_missing_files_read_as_empty_and_are_not_created(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "a").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "b").read() == []
    assert not OffsetCheckpointFile(tmp_path / "a").exists()
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writes_through_one_object_never_tear(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    ckpt = OffsetCheckpointFile(path)
    versions = [{(f"t{i}", p): i * 1000 + p for p in range(i % 7 + 1)} for i in range(40)]
    errors: list[BaseException] = []

    def writer(chunk):
        try:
            for v in chunk:
                ckpt.write(v)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(100):
                got = ckpt.read()
                assert got == {} or got in versions
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(versions[i::4],)) for i in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert ckpt.read() in versions


# -- offset checkpoints --------------------------------------------------------------------------


def test_offset_checkpoint_layout_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    mapping = {("orders", 0): 42, ("__consumer_offsets", 13): 0, ("a.b-c_D9", INT32_MAX): INT64_MAX}
    OffsetCheckpointFile(path).write(mapping)
    assert path.read_bytes() == (
        b"0\n3\norders 0 42\n__consumer_offsets 13 0\na.b-c_D9 2147483647 9223372036854775807\n"
    )
    got = OffsetCheckpointFile(path).read()
    assert list(got.items()) == list(mapping.items())


def test_empty_offset_checkpoint_layout(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({})
    assert path.read_bytes() == b"0\n0\n"  # what real brokers write (4 bytes)
    assert OffsetCheckpointFile(path).read() == {}


@pytest.mark.parametrize(
    "data",
    [b"", b"0", b"0\n", b"0\r\n", b"0\n0", b"0\n0\n", b"00\n+0\n"],
    ids=["zero-bytes", "version-no-newline", "version-only", "version-crlf", "count-no-newline", "empty", "signed"],
)
def test_offset_checkpoint_kafka_reads_as_empty(data: bytes, tmp_path: Path) -> None:
    """CheckpointReadBuffer: no version line, or no count line, means no entries (brokers leave
    0-byte cleaner-offset-checkpoint files: CheckpointFile creates the file when it opens it)."""
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_bytes(data)
    assert OffsetCheckpointFile(path).read() == {}


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"0\r\n1\r\nt 0 5\r\n", {("t", 0): 5}),  # readLine ends lines at \r\n ...
        (b"0\r1\rt 0 5\r", {("t", 0): 5}),  # ... and at a lone \r
        (b"0\n1\nt 0 5", {("t", 0): 5}),  # last line without a newline
        (b"0\n1\nt \t 0\x0b\x0c 5 \t\n", {("t", 0): 5}),  # runs of Java whitespace; trailing ignored
        (b"0\n1\nt +0 +5\n", {("t", 0): 5}),  # Integer.parseInt takes a sign
        (b"0\n1\nt 0 -1\n", {("t", 0): -1}),  # Kafka's reader takes negative offsets
        (b"0\n2\nt 0 5\nt 0 6\n", {("t", 0): 6}),  # a repeated partition keeps the last (HashMap)
        (b"0\n1\nt 0 -9223372036854775808\n", {("t", 0): INT64_MIN}),
    ],
)
def test_offset_checkpoint_kafka_lenient_corners(data: bytes, expected: dict, tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(data)
    assert OffsetCheckpointFile(path).read() == expected


# (content, line reported, what the message says)
OFFSET_MALFORMED = [
    (b"1\n0\n", 1, "unrecognised version 1"),
    (b"-1\n0\n", 1, "unrecognised version -1"),
    (b"x\n0\n", 1, "not a decimal integer"),
    (b" 0\n0\n", 1, "not a decimal integer"),
    (b"0 \n0\n", 1, "not a decimal integer"),
    (b"\xef\xbb\xbf0\n0\n", 1, "not a decimal integer"),  # a UTF-8 BOM is not whitespace to Java
    (b"2147483648\n0\n", 1, "does not fit in 32 bits"),
    (b"0\nx\n", 2, "entry count 'x'"),
    (b"0\n1_0\n", 2, "not a decimal integer"),  # Python's int() would take this
    (b"0\n-1\n", 2, "negative entry count"),
    (b"0\n2\nt 0 1\n", 2, "says 2 entries but 1 follow"),
    (b"0\n0\nt 0 1\n", 2, "says 0 entries but 1 follow"),
    (b"0\n1\nt 0 1\nu 0 2\n", 2, "says 1 entries but 2 follow"),
    (b"0\n1\nt 0\n", 3, "expected 3 fields"),
    (b"0\n1\nt 0 1 2\n", 3, "expected 3 fields"),
    (b"0\n1\n\n", 3, "expected 3 fields"),
    (b"0\n1\n \n", 3, "expected 3 fields"),
    (b"0\n1\nmy topic 0 1\n", 3, "expected 3 fields"),  # a space cannot be in a topic name
    (b"0\n2\nt 0 1\n\n", 4, "expected 3 fields"),  # a blank line is a malformed entry
    (b"0\n1\n t 0 1\n", 3, "found 4"),  # leading whitespace makes an empty first field ...
    (b"0\n1\n 0 1\n", 3, "illegal topic name ''"),  # ... which Kafka would take as a topic
    (b"0\n1\nt/x 0 1\n", 3, "illegal topic name"),
    (b"0\n1\n.. 0 1\n", 3, "illegal topic name"),
    (b"0\n1\nt\xc3\xa9 0 1\n", 3, "illegal topic name"),  # UTF-8, but not a legal character
    (b"0\n1\nt\xc3 0 1\n", 3, "not UTF-8"),
    (b"0\n1\nt x 1\n", 3, "partition 'x'"),
    (b"0\n1\nt 0x1 1\n", 3, "partition '0x1'"),
    (b"0\n1\nt -1 1\n", 3, "negative partition -1"),
    (b"0\n1\nt 2147483648 1\n", 3, "partition 2147483648 does not fit in 32 bits"),
    (b"0\n1\nt 0 1.5\n", 3, "offset '1.5'"),
    (b"0\n1\nt 0 1e3\n", 3, "offset '1e3'"),
    (b"0\n1\nt 0 \xd9\xa1\n", 3, "not a decimal integer"),  # an Arabic-Indic digit
    (b"0\n1\nt 0 9223372036854775808\n", 3, "does not fit in 64 bits"),
    (b"0\n1\nt 0 --1\n", 3, "offset '--1'"),
]


@pytest.mark.parametrize("data, line, says", OFFSET_MALFORMED, ids=[repr(c)[2:40] for c, _, _ in OFFSET_MALFORMED])
def test_offset_checkpoint_malformed(data: bytes, line: int, says: str, tmp_path: Path) -> None:
    err = _read_corrupt(OffsetCheckpointFile, data, tmp_path)
    assert err.reason.startswith(f"line {line}: "), err.reason
    assert says in err.reason, err.reason
    # The byte position is where that line starts (or, for bad UTF-8, the bad byte).
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    assert err.position is not None and starts[line - 1] <= err.position < max(len(data), 1)


def test_malformed_error_message_names_file_position_and_line(tmp_path: Path) -> None:
    err = _read_corrupt(OffsetCheckpointFile, b"0\n2\na 0 1\nb zero 2\n", tmp_path)
    assert err.position == 10
    assert str(err) == f"{tmp_path / 'checkpoint'}: position 10: line 4: partition 'zero' is not a decimal integer"
    assert isinstance(err, KafkalogError)


@pytest.mark.parametrize(
    "mapping, error",
    [
        ({("my topic", 0): 1}, ValueError),
        ({("", 0): 1}, ValueError),
        ({(".", 0): 1}, ValueError),
        ({("..", 0): 1}, ValueError),
        ({("tópico", 0): 1}, ValueError),
        ({("t" * 250, 0): 1}, ValueError),
        ({("t", -1): 1}, ValueError),
        ({("t", 2**31): 1}, ValueError),
        ({("t", 0): 2**63}, ValueError),
        ({("t", 0): -(2**63) - 1}, ValueError),
        ({("t", 0): 1.0}, TypeError),
        ({("t", True): 1}, TypeError),
        ({(b"t", 0): 1}, ValueError),
    ],
)
def test_offset_checkpoint_writer_refuses_what_kafka_cannot_hold(mapping, error, tmp_path: Path) -> None:
    path = tmp_path / "cp"
    ckpt = OffsetCheckpointFile(path)
    ckpt.write({("ok", 0): 1})
    with pytest.raises(error):
        ckpt.write(mapping)
    assert ckpt.read() == {("ok", 0): 1}  # nothing was written


def test_longest_legal_topic_round_trips(tmp_path: Path) -> None:
    ckpt = OffsetCheckpointFile(tmp_path / "cp")
    mapping = {("x" * 249, 0): 1, ("._-", 1): 2}
    ckpt.write(mapping)
    assert ckpt.read() == mapping


@examples(150)
@given(mapping=st.dictionaries(st.tuples(topics, partitions), offsets, max_size=30))
def test_offset_checkpoint_round_trip(mapping: dict, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("offsets") / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write(mapping)
    expected = f"0\n{len(mapping)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in mapping.items())
    data = path.read_bytes()
    assert data == expected.encode("ascii")
    got = OffsetCheckpointFile(path).read()
    assert list(got.items()) == list(mapping.items())  # same entries in the same order
    OffsetCheckpointFile(path).write(got)
    assert path.read_bytes() == data


@given(data=st.binary(max_size=200))
def test_offset_checkpoint_arbitrary_bytes_only_raise_corrupt(data: bytes, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "cp"
    path.write_bytes(data)
    try:
        got = OffsetCheckpointFile(path).read()
    except CorruptCheckpointError as err:
        assert err.reason.startswith("line ")
    else:
        assert isinstance(got, dict)


@examples(120)
@given(
    mapping=st.dictionaries(st.tuples(topics.map(lambda t: t[:20]), partitions), offsets, min_size=1, max_size=5),
    where=st.data(),
)
def test_offset_checkpoint_mutated_byte_reads_or_raises_corrupt(mapping, where, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("mutate") / "cp"
    OffsetCheckpointFile(path).write(mapping)
    data = bytearray(path.read_bytes())
    i = where.draw(st.integers(0, len(data) - 1))
    data[i] = where.draw(st.integers(0, 255))
    path.write_bytes(bytes(data))
    try:
        got = OffsetCheckpointFile(path).read()
    except CorruptCheckpointError:
        return
    # Whatever still parses is a plain mapping of legal values.
    for (topic, partition), offset in got.items():
        assert topic and 0 <= partition <= INT32_MAX and INT64_MIN <= offset <= INT64_MAX


# -- leader-epoch-checkpoint ------------------------------------------------------------------


def test_leader_epoch_checkpoint_layout_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    ckpt = LeaderEpochCheckpointFile(path)
    ckpt.write([EpochEntry(0, 0), EpochEntry(1, 9), (3, 10), EpochEntry(INT32_MAX, INT64_MAX)])
    assert path.read_bytes() == b"0\n4\n0 0\n1 9\n3 10\n2147483647 9223372036854775807\n"
    got = ckpt.read()
    assert got == [(0, 0), (1, 9), (3, 10), (INT32_MAX, INT64_MAX)]
    assert all(type(e) is EpochEntry for e in got)
    assert got[1].epoch == 1 and got[1].start_offset == 9


def test_leader_epoch_checkpoint_reads_as_written_without_reordering(tmp_path: Path) -> None:
    """The file object reads what is there; keeping epochs monotonic is the cache's job."""
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n5 10\n2 20\n5 5\n")
    assert LeaderEpochCheckpointFile(path).read() == [(5, 10), (2, 20), (5, 5)]


@pytest.mark.parametrize("data", [b"", b"0\n", b"0\n0\n", b"0\r\n0\r\n"])
def test_leader_epoch_checkpoint_empty_variants(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    assert LeaderEpochCheckpointFile(path).read() == []


EPOCH_MALFORMED = [
    (b"1\n0\n", 1, "unrecognised version 1"),
    (b"0\n1\n0\n", 3, "expected 2 fields (epoch startOffset)"),
    (b"0\n1\n0 0 0\n", 3, "expected 2 fields"),
    (b"0\n1\n-1 0\n", 3, "negative leader epoch entry (-1, 0)"),
    (b"0\n1\n0 -1\n", 3, "negative leader epoch entry (0, -1)"),
    (b"0\n1\n2147483648 0\n", 3, "leader epoch 2147483648 does not fit in 32 bits"),
    (b"0\n1\n0 9223372036854775808\n", 3, "does not fit in 64 bits"),
    (b"0\n1\nx 0\n", 3, "leader epoch 'x'"),
    (b"0\n2\n0 0\n", 2, "says 2 entries but 1 follow"),
    (b"0\n2\n0 0\n1 5\n2 7\n", 2, "says 2 entries but 3 follow"),
]


@pytest.mark.parametrize("data, line, says", EPOCH_MALFORMED, ids=[repr(c)[2:40] for c, _, _ in EPOCH_MALFORMED])
def test_leader_epoch_checkpoint_malformed(data: bytes, line: int, says: str, tmp_path: Path) -> None:
    err = _read_corrupt(LeaderEpochCheckpointFile, data, tmp_path)
    assert err.reason.startswith(f"line {line}: "), err.reason
    assert says in err.reason, err.reason


@pytest.mark.parametrize(
    "entries, error",
    [
        ([(-1, 0)], ValueError),
        ([(0, -1)], ValueError),
        ([(2**31, 0)], ValueError),
        ([(0, 2**63)], ValueError),
        ([(0, "1")], TypeError),
    ],
)
def test_leader_epoch_checkpoint_writer_refuses_invalid_entries(entries, error, tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    with pytest.raises(error):
        LeaderEpochCheckpointFile(path).write(entries)
    assert not path.exists()


@examples(100)
@given(entries=st.lists(st.tuples(st.integers(0, INT32_MAX), st.integers(0, INT64_MAX)), max_size=20))
def test_leader_epoch_checkpoint_round_trip(entries, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write(entries)
    expected = f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
    assert path.read_bytes() == expected.encode()
    assert LeaderEpochCheckpointFile(path).read() == entries


@given(data=st.binary(max_size=120) | st.text("0123456789 -\n\r\t", max_size=40).map(str.encode))
def test_leader_epoch_checkpoint_arbitrary_bytes_only_raise_corrupt(data: bytes, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "leader-epoch-checkpoint"
    path.write_bytes(data)
    try:
        got = LeaderEpochCheckpointFile(path).read()
    except CorruptCheckpointError:
        return
    assert all(e.epoch >= 0 and e.start_offset >= 0 for e in got)


# -- partition.metadata -----------------------------------------------------------------------


def test_partition_metadata_layout_byte_for_byte(tmp_path: Path) -> None:
    """Kafka's PartitionMetadata.encode: two lines and *no* final newline (as the 43-byte
    files real brokers write)."""
    path = tmp_path / "partition.metadata"
    PartitionMetadataFile(path).write("nigi0dJNRASJVYh5eRn0Vg")
    assert path.read_bytes() == b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg"
    assert len(path.read_bytes()) == 43
    assert PartitionMetadataFile(path).read() == "nigi0dJNRASJVYh5eRn0Vg"


@pytest.mark.parametrize(
    "data",
    [
        b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg\n",  # a final newline
        b"version: 0\r\ntopic_id: nigi0dJNRASJVYh5eRn0Vg\r\n",  # CRLF
        b"version:  0\ntopic_id:\tnigi0dJNRASJVYh5eRn0Vg",  # ":\s+" takes any run of whitespace
        b"version: +0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg",  # Integer.parseInt takes a sign
        b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg==",  # Uuid.fromString takes padding
        b"version: 1\ntopic_id: nigi0dJNRASJVYh5eRn0Vg\nfuture: field\n",  # newer versions read (downgrade)
    ],
    ids=["final-newline", "crlf", "whitespace", "sign", "padded", "newer-version"],
)
def test_partition_metadata_kafka_lenient_corners(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(data)
    assert PartitionMetadataFile(path).read() == "nigi0dJNRASJVYh5eRn0Vg"


METADATA_MALFORMED = [
    (b"", 1, "empty file"),
    (b"version: 0", 2, "missing the 'topic_id"),
    (b"version: 0\n", 2, "missing the 'topic_id"),
    (b"version 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "expected 'version: <value>'"),
    (b"version:0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "expected 'version: <value>'"),
    (b"vers: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "expected 'version: <value>'"),
    (b"version: x\ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "version 'x'"),
    (b"version: 0 \ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "version '0 '"),
    (b"version: -1\ntopic_id: nigi0dJNRASJVYh5eRn0Vg", 1, "unrecognised version -1"),
    (b"version: 0\ntopic_id:nigi0dJNRASJVYh5eRn0Vg", 2, "expected 'topic_id: <value>'"),
    (b"version: 0\ntopicid: nigi0dJNRASJVYh5eRn0Vg", 2, "expected 'topic_id: <value>'"),
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0V", 2, "is not a 16-byte"),  # 21 characters
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vgg", 2, "is not a 16-byte"),  # 23 characters
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg=", 2, "is not a 16-byte"),
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0V+", 2, "is not a 16-byte"),  # not url-safe
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg ", 2, "is not a 16-byte"),
    (b"version: 0\ntopic_id: 9a3f5c2e-8d1b-4c7a-9e6f-1b2c3d4e5f60", 2, "is not a 16-byte"),  # Java UUID text
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2, "the zero UUID"),
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg\n\n", 3, "unexpected content"),
    (b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg\nextra: 1", 3, "unexpected content"),
    (b"version: 0\ntopic_id: nigi\xff0dJNRASJVYh5eRn0Vg", 2, "not UTF-8"),
]


@pytest.mark.parametrize("data, line, says", METADATA_MALFORMED, ids=[repr(c)[2:44] for c, _, _ in METADATA_MALFORMED])
def test_partition_metadata_malformed(data: bytes, line: int, says: str, tmp_path: Path) -> None:
    err = _read_corrupt(PartitionMetadataFile, data, tmp_path)
    assert err.reason.startswith(f"line {line}: "), err.reason
    assert says in err.reason, err.reason


def test_partition_metadata_missing_file_raises(tmp_path: Path) -> None:
    meta = PartitionMetadataFile(tmp_path / "partition.metadata")
    assert not meta.exists()
    with pytest.raises(FileNotFoundError):
        meta.read()


@pytest.mark.parametrize(
    "topic_id",
    [
        "",
        "nigi0dJNRASJVYh5eRn0V",
        "nigi0dJNRASJVYh5eRn0Vg=",
        "nigi0dJNRASJVYh5eRn0V+",
        ZERO_TOPIC_ID,
        None,
        b"nigi0dJNRASJVYh5eRn0Vg",
    ],
)
def test_partition_metadata_writer_refuses_bad_ids(topic_id, tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    with pytest.raises(ValueError):
        PartitionMetadataFile(path).write(topic_id)
    assert not path.exists()


def test_partition_metadata_writes_canonical_form(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    PartitionMetadataFile(path).write("nigi0dJNRASJVYh5eRn0Vg==")
    assert path.read_bytes() == b"version: 0\ntopic_id: nigi0dJNRASJVYh5eRn0Vg"


def test_reserved_topic_ids() -> None:
    assert ZERO_TOPIC_ID == "AAAAAAAAAAAAAAAAAAAAAA"
    assert METADATA_TOPIC_ID == "AAAAAAAAAAAAAAAAAAAAAQ"  # KRaft's __cluster_metadata (real files hold it)


def test_metadata_topic_id_is_readable(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    PartitionMetadataFile(path).write(METADATA_TOPIC_ID)
    assert PartitionMetadataFile(path).read() == METADATA_TOPIC_ID


def test_new_topic_id_is_kafkas_uuid_string(tmp_path: Path) -> None:
    ids = {new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        assert len(text) == 22 and "=" not in text
        assert not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16
        assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text
        u = uuid.UUID(bytes=raw)
        assert u.version == 4 and u.variant == uuid.RFC_4122  # java.util.UUID.randomUUID
    path = tmp_path / "partition.metadata"
    one = next(iter(ids))
    PartitionMetadataFile(path).write(one)
    assert PartitionMetadataFile(path).read() == one


def test_new_topic_id_skips_ids_starting_with_a_dash(monkeypatch) -> None:
    """Kafka's Uuid.randomUuid draws again when the string would start with '-' (0xF8-0xFB)."""
    dashed = uuid.UUID(bytes=b"\xf8" + bytes(14) + b"\x01")
    plain = uuid.UUID(bytes=b"\x10" + bytes(14) + b"\x01")
    drawn = iter([dashed, plain])
    assert base64.urlsafe_b64encode(dashed.bytes).startswith(b"-")
    monkeypatch.setattr(cp.uuid, "uuid4", lambda: next(drawn))
    assert new_topic_id() == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()


@given(raw=st.binary(min_size=16, max_size=16).filter(any))
def test_partition_metadata_round_trip(raw: bytes, tmp_path_factory) -> None:
    text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    path = tmp_path_factory.mktemp("meta") / "partition.metadata"
    PartitionMetadataFile(path).write(text)
    assert path.read_bytes() == f"version: 0\ntopic_id: {text}".encode()
    assert PartitionMetadataFile(path).read() == text


@given(data=st.binary(max_size=80) | st.text("versiontopc_d: 0AQg\n\r=-", max_size=60).map(str.encode))
def test_partition_metadata_arbitrary_bytes_only_raise_corrupt(data: bytes, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "partition.metadata"
    path.write_bytes(data)
    try:
        got = PartitionMetadataFile(path).read()
    except CorruptCheckpointError:
        return
    assert len(got) == 22


# -- real broker-written files --------------------------------------------------------------------

_READERS = {
    "recovery-point-offset-checkpoint": OffsetCheckpointFile,
    "log-start-offset-checkpoint": OffsetCheckpointFile,
    "replication-offset-checkpoint": OffsetCheckpointFile,
    "cleaner-offset-checkpoint": OffsetCheckpointFile,
    "leader-epoch-checkpoint": LeaderEpochCheckpointFile,
    "partition.metadata": PartitionMetadataFile,
}


def _check_real_file(path: Path, tmp_path: Path):
    """Read a broker's file, write back what was read, compare the bytes; return what was read."""
    reader = _READERS[path.name]
    got = reader(path).read()
    copy = tmp_path / path.name
    reader(copy).write(got)
    original = path.read_bytes()
    if original:
        assert copy.read_bytes() == original, f"{path}: writing back what was read changed the bytes"
    else:
        # A 0-byte file (created by CheckpointFile's constructor, never written) reads as empty;
        # Kafka itself would rewrite it as an empty checkpoint, "0\n0\n".
        assert not got
        assert copy.read_bytes() == b"0\n0\n"
    return got


# Each copy in tests/data/checkpoints: (sha256, what it reads as).
COPIES = {
    "BiggerBrain__kafka/lsx1-0/leader-epoch-checkpoint": (
        "f2c301bcb6ea6b7e0f636628976df702a70a29d67dce413a7a894157ffa3426b",
        [(0, 0), (1, 9), (3, 10), (5, 12), (6, 13), (7, 14)],
    ),
    "BiggerBrain__kafka/lsx1-0/partition.metadata": (
        "42b99b349758655f28f028f7ffff994e559e87bfd7ff7c34bddf22f29e6cfead",
        "nigi0dJNRASJVYh5eRn0Vg",
    ),
    "getachew015__kafka-broker/cleaner-offset-checkpoint": (
        "61c6713681ef8677b0ba46d05ceafd784a328659a4d0cf52c45dad54b684e190",
        {("__consumer_offsets", 13): 0},
    ),
    "William0423__kafka/cleaner-offset-checkpoint": (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        {},
    ),
}


@pytest.mark.parametrize("rel", sorted(COPIES))
def test_copied_real_file(rel: str, tmp_path: Path) -> None:
    path = COPIES_DIR / rel
    sha256, expected = COPIES[rel]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256, "the copy is not byte-for-byte"
    assert _check_real_file(path, tmp_path) == expected


def test_copies_are_all_listed() -> None:
    present = {str(p.relative_to(COPIES_DIR)) for p in COPIES_DIR.rglob("*") if p.is_file() and p.name in _READERS}
    assert present == set(COPIES)


def _shared_files() -> list[str]:
    if not REAL.is_dir():
        return []
    return sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file() and p.name in _READERS)


SHARED_FILES = _shared_files()


@pytest.mark.parametrize("rel", SHARED_FILES or [None], ids=lambda r: r or "absent")
def test_shared_real_file(rel: str | None, tmp_path: Path) -> None:
    """Every checkpoint and partition.metadata a real broker wrote reads without error and
    writes back byte for byte."""
    if rel is None:
        pytest.skip(_NO_SHARED)
    _check_real_file(REAL / rel, tmp_path)


def test_shared_corpus_has_the_expected_files() -> None:
    if not SHARED_FILES:
        pytest.skip(_NO_SHARED)
    names = [Path(rel).name for rel in SHARED_FILES]
    assert names.count("partition.metadata") >= 20
    assert names.count("leader-epoch-checkpoint") >= 25
    assert sum(n.endswith("offset-checkpoint") for n in names) >= 50
    # The copies for CI are byte-for-byte copies of shared files.
    for rel in COPIES:
        assert (REAL / rel).read_bytes() == (COPIES_DIR / rel).read_bytes()
