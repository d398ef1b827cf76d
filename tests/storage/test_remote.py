"""``kafkalog.remote``: path normalisation, and the RangeReader's block cache over a stand-in
remote filesystem (any read returns the file's bytes; a sequential walk fetches each byte once;
nothing past the window is fetched; at most a fixed number of blocks is held)."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.remote import RangeReader, Storage, is_remote, normalize_path
from kafkalog.remote import _CACHE_BLOCKS


class FakeStore(Storage):
    """A remote filesystem of one file held in memory, counting the ranges asked."""

    def __init__(self, data: bytes) -> None:
        super().__init__("fake")
        self.data = data
        self.ranges: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def size(self, path: str) -> int:
        return len(self.data)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        with self.lock:
            self.ranges.append((start, end))
        return self.data[start:end]


def test_is_remote():
    assert is_remote("s3://b/k") and is_remote("gs://b") and is_remote("hdfs://nn/x")
    assert not is_remote("/data") and not is_remote("file:///data") and not is_remote("rel/x")


def test_normalize_keeps_globs_and_strips_slashes():
    assert normalize_path("s3://b/a//b/") == "s3://b/a/b"
    assert normalize_path("abfs://c@acct/x/../y") == "abfs://c@acct/y"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_reads_return_the_files_bytes(data):
    blob = data.draw(st.binary(min_size=1, max_size=5000))
    block = data.draw(st.integers(1, 700))
    store = FakeStore(blob)
    reader = RangeReader(store, "fake://b/f", block_size=block)
    for _ in range(data.draw(st.integers(1, 20))):
        pos = data.draw(st.integers(0, len(blob) + 10))
        size = data.draw(st.integers(0, 900))
        assert reader.pread(size, pos) == blob[pos:pos + size]
        assert len(reader._blocks) <= _CACHE_BLOCKS
    reader.close()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_walk_of_a_window_fetches_each_byte_once_and_nothing_past_it(data):
    blob = bytes(range(256)) * 40
    block = data.draw(st.integers(64, 2048))
    start = data.draw(st.integers(0, len(blob) // 2))
    end = data.draw(st.integers(start + 1, len(blob)))
    store = FakeStore(blob)
    reader = RangeReader(store, "fake://b/f", block_size=block, window_end=end)
    pos = start
    while pos < end:  # headers read, bodies skipped, then read as a run (the reader's pattern)
        step = data.draw(st.integers(1, 300))
        assert reader.pread(min(20, end - pos), pos) == blob[pos:pos + min(20, end - pos)]
        assert reader.pread(min(step, end - pos), pos) == blob[pos:min(pos + step, end)]
        pos += step
    if reader._pending is not None:
        reader._pending[2].join()
    assert all(e <= end for _, e in store.ranges), store.ranges
    fetched = sum(e - s for s, e in store.ranges)
    assert fetched <= (end - start) + block  # each byte once, but for a prefetch cut short


def test_remove_on_the_local_filesystem(tmp_path):
    store = Storage()
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "f").write_bytes(b"x")
    (tmp_path / "one").write_bytes(b"y")
    store.remove(str(tmp_path / "one"))
    store.remove(str(tmp_path / "tree"), recursive=True)
    store.remove(str(tmp_path / "missing"))  # a missing one is fine
    store.remove(str(tmp_path / "missing"), recursive=True)
    assert list(tmp_path.iterdir()) == []


def test_put_bytes_and_remove_on_an_fsspec_filesystem():
    import uuid

    store = Storage("memory")
    root = f"memory://kafkalog-test-{uuid.uuid4().hex}"
    store.put_bytes(f"{root}/a/state.json", b"one")
    store.put_bytes(f"{root}/a/state.json", b"two")  # replaced whole
    assert store.read_bytes(f"{root}/a/state.json") == b"two"
    store.put_bytes(f"{root}/b/x", b"x")
    store.remove(f"{root}/a/state.json")
    store.remove(f"{root}/a/state.json")  # a missing one is fine
    store.remove(f"{root}/b", recursive=True)
    assert not store.exists(f"{root}/a/state.json") and not store.exists(f"{root}/b/x")


def test_put_bytes_refuses_a_local_path(tmp_path):
    import pytest

    from kafkalog.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="write_atomically"):
        Storage().put_bytes(str(tmp_path / "state.json"), b"x")
    assert list(tmp_path.iterdir()) == []
