"""CRC-32 and CRC-32C: known vectors, every backend agrees, and the library works on each."""

from __future__ import annotations

import zlib

import pytest
from conftest import DATA
from hypothesis import given
from hypothesis import strategies as st

import kafkalog.crc as crc
from kafkalog import FileRecords, MemoryRecords, RecordBatchBuilder

BACKENDS = crc.available_backends()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, monkeypatch):
    """Run a test with each CRC-32C backend installed as kafkalog's (the plain twin too)."""
    monkeypatch.setattr(crc, "crc32c", BACKENDS[request.param])
    return request.param


def test_both_backends_present():
    """The hardware backend and the crcmod fallback are both installed and tested."""
    assert {"crc32c", "crcmod"} <= set(BACKENDS)
    assert crc.BACKEND in BACKENDS


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_crc32c_check_value(name):
    """The CRC-32C check value of '123456789' is 0xE3069283."""
    assert BACKENDS[name](b"123456789") == 0xE3069283
    assert BACKENDS[name](b"") == 0


def test_crc32_check_value():
    assert crc.crc32(b"123456789") == 0xCBF43926 == zlib.crc32(b"123456789")


@given(st.binary(max_size=5000), st.integers(0, 64))
def test_backends_agree_on_memoryview_slices(data, skip):
    """Every backend gives the same value, including on a memoryview slice (no copy)."""
    view = memoryview(data)[min(skip, len(data)) :]
    values = {name: fn(view) for name, fn in BACKENDS.items()}
    assert len(set(values.values())) == 1, values


def test_crc32c_of_a_kafka_written_batch(backend):
    """The first batch of Kafka 3.8's transactional segment carries CRC 489746229 (its reading)."""
    with FileRecords.open(DATA / "kafka-3.8/v2-txn-random/00000000000000000000.log") as fr:
        batch = next(fr.batches())
        assert batch.crc == 489746229
        assert batch.compute_crc() == 489746229
        assert batch.is_valid()


def test_build_and_validate_with_each_backend(backend, magic_codec):
    """Batches built and validated under each backend are valid under the other."""
    magic, codec = magic_codec
    builder = RecordBatchBuilder(magic, codec)
    for i in range(20):
        builder.append(b"k%d" % i, b"v" * i, timestamp=1000 + i)
    records = builder.build()
    assert records.validate(deep=True) >= 1
    for fn in BACKENDS.values():
        for batch in MemoryRecords(records.buffer).batches():
            if batch.magic == 2:
                assert fn(batch.entry()[21:]) == batch.crc
