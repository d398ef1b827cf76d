"""Segments written by Apache Kafka 3.8.0's own code, read back field for field.

tests/data/kafka-3.8 is a copy of the shared corpus (see its MANIFEST.md): 14 segments, every
magic and codec, each ``.log`` beside ``<name>.expected.jsonl[.gz]``, Kafka's own reading of it
(one ``batch`` line per batch, one ``record`` line per record, a ``summary``). Each segment is
read three ways — ``FileRecords`` shallow, ``FileRecords`` validated, ``MemoryRecords`` — and
every batch and record field must equal Kafka's. The ``.txnindex`` of the transactional segment
is parsed from its raw bytes and checked against Kafka's reading and against the log's ABORT
markers. (Offset and time index cross-checks are left to the index tests.)
"""

from __future__ import annotations

import functools
import gzip
import json
import struct
from pathlib import Path

import pytest
from conftest import DATA

from kafkalog import ControlRecordType, FileRecords, MemoryRecords

CORPUS = DATA / "kafka-3.8"
SEGMENTS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []
READERS = ("file-shallow", "file-validated", "memory")

# Fields of a record line that are bookkeeping, not record content.
_RECORD_BOOKKEEPING = ("type", "batchPosition", "index")


def test_corpus_is_complete() -> None:
    """The copy holds the 14 segments the MANIFEST lists, each with its .log and expectations."""
    assert len(SEGMENTS) == 14, SEGMENTS
    for name in SEGMENTS:
        d = CORPUS / name
        assert len(list(d.glob("*.log"))) == 1, name
        assert _expected_path(d).exists(), name


# -- loading ----------------------------------------------------------------------------------


def _log_path(segment_dir: Path) -> Path:
    (log,) = segment_dir.glob("*.log")
    return log


def _expected_path(segment_dir: Path) -> Path:
    stem = _log_path(segment_dir).stem
    plain = segment_dir / f"{stem}.expected.jsonl"
    return plain if plain.exists() else segment_dir / f"{stem}.expected.jsonl.gz"


def _read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@functools.lru_cache(maxsize=None)
def _expected(segment: str) -> tuple[list[dict], dict[int, list[dict]], dict]:
    """Kafka's reading: batch lines in order, record lines by batch position, the summary."""
    batches: list[dict] = []
    records: dict[int, list[dict]] = {}
    summary = None
    for obj in _read_jsonl(_expected_path(CORPUS / segment)):
        kind = obj["type"]
        if kind == "batch":
            batches.append(obj)
        elif kind == "record":
            records.setdefault(obj["batchPosition"], []).append(obj)
        elif kind == "summary":
            summary = obj
        else:  # pragma: no cover - a corpus format change
            raise AssertionError(f"unknown line type {kind!r}")
    assert summary is not None, f"{segment}: no summary line"
    for recs in records.values():
        assert [r["index"] for r in recs] == list(range(len(recs)))
    return batches, records, summary


# -- views: the library's objects in Kafka's field names ---------------------------------------


def _hex(b) -> str | None:
    return None if b is None else bytes(b).hex()


def _batch_view(batch, position: int | None) -> dict:
    try:
        batch.ensure_valid()
        error = None
    except Exception as e:  # noqa: BLE001 - reported as a field mismatch
        error = f"{type(e).__name__}: {e}"
    return {
        "position": position,
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.count,
        "magic": batch.magic,
        "compression": batch.compression.kafka_name,
        "crc": batch.crc,
        "isValid": batch.is_valid(),
        "sizeInBytes": batch.size_in_bytes,
        "timestampType": batch.timestamp_type.kafka_name,
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "error": error,
    }


def _record_view(record) -> dict:
    view = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "sequence": record.sequence,
        "sizeInBytes": record.size_in_bytes,
        "crc": record.crc,
        # A record that decoded passed every check Kafka's isValid makes: v0/v1 inner
        # messages have their CRC-32 checked while decoding, v2 records are covered by the
        # batch CRC (compared separately).
        "isValid": True,
        "key": _hex(record.key),
        "value": _hex(record.value),
        "headers": [[h.key, _hex(h.value)] for h in record.headers],
    }
    if record.is_control or record.control_type is not None:
        view["controlType"] = None if record.control_type is None else record.control_type.name
        view["coordinatorEpoch"] = record.coordinator_epoch
    return view


_ABSENT = "<absent>"


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 120 else f"{text[:100]}...({len(text)} chars)"


def _first_mismatch(expected: dict, actual: dict, skip: tuple[str, ...] = ("type",)) -> str | None:
    """The first field (in Kafka's order) whose value differs, as a readable line."""
    for key in list(expected) + [k for k in actual if k not in expected]:
        if key in skip:
            continue
        e, a = expected.get(key, _ABSENT), actual.get(key, _ABSENT)
        if e != a or type(e) is bool and type(a) is not bool:
            if isinstance(e, str) and isinstance(a, str) and max(len(e), len(a)) > 120:
                at = next((i for i, (x, y) in enumerate(zip(e, a)) if x != y), min(len(e), len(a)))
                return (
                    f"field {key!r}: differs at character {at} (lengths {len(e)} vs {len(a)}): "
                    f"Kafka has ...{e[max(0, at - 8) : at + 24]!r}, kafkalog has ...{a[max(0, at - 8) : at + 24]!r}"
                )
            return f"field {key!r}: Kafka says {_short(e)}, kafkalog says {_short(a)}"
    return None


# -- reading ---------------------------------------------------------------------------------


def _read_batches(reader: str, log: Path):
    """Yield ``(batch, expected_position)`` for every batch, read the way ``reader`` names."""
    if reader == "memory":
        with open(log, "rb") as fh:
            mr = MemoryRecords(fh.read())
        pos = 0
        for batch in mr.batches():
            assert batch.position is None, "an in-memory batch has no file position"
            yield batch, pos
            pos += batch.size_in_bytes
        return
    with FileRecords.open(log) as fr:
        for batch in fr.batches(validate=reader == "file-validated"):
            yield batch, batch.position


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("segment", SEGMENTS)
def test_batches_and_records_match_kafka(segment: str, reader: str) -> None:
    """Every batch header field and every record field equals Kafka 3.8's own reading."""
    exp_batches, exp_records, summary = _expected(segment)
    log = _log_path(CORPUS / segment)
    n_batches = n_records = 0
    expected_pos = 0
    for i, (batch, position) in enumerate(_read_batches(reader, log)):
        where = f"{segment} [{reader}] batch #{i}"
        assert i < len(exp_batches), f"{where}: Kafka saw only {len(exp_batches)} batches"
        exp = exp_batches[i]
        assert position == expected_pos, f"{where}: at position {position}, expected {expected_pos}"
        where += f" at position {exp['position']} (offset {exp['baseOffset']})"
        diff = _first_mismatch(exp, _batch_view(batch, position))
        assert diff is None, f"{where}: {diff}"

        records = batch.records()
        exp_recs = exp_records.get(exp["position"], [])
        assert len(records) == len(exp_recs), f"{where}: {len(records)} records, Kafka has {len(exp_recs)}"
        for j, (record, exp_rec) in enumerate(zip(records, exp_recs)):
            diff = _first_mismatch(exp_rec, _record_view(record), skip=_RECORD_BOOKKEEPING)
            assert diff is None, f"{where}, record #{j} (offset {exp_rec['offset']}): {diff}"
            assert record.is_control == ("controlType" in exp_rec), f"{where}, record #{j}: is_control"
        n_batches += 1
        n_records += len(records)
        expected_pos += batch.size_in_bytes
    assert n_batches == len(exp_batches) == summary["batches"], f"{segment} [{reader}]: batch count"
    assert n_records == summary["records"], f"{segment} [{reader}]: record count"
    assert expected_pos == summary["bytesInBatches"], f"{segment} [{reader}]: bytes in batches"


@pytest.mark.parametrize("segment", SEGMENTS)
def test_summary_matches_kafka(segment: str) -> None:
    """The summary line: batch and record counts, no trailing bytes, and the segment is ok
    (strict deep validation passes over the file and over memory)."""
    _, _, summary = _expected(segment)
    log = _log_path(CORPUS / segment)
    assert summary["ok"] is True and summary["fatal"] is None
    assert summary["trailingBytes"] == 0 and summary["partialTrailingBatch"] is False
    assert log.stat().st_size == summary["fileSize"]
    with FileRecords.open(log) as fr:
        assert fr.size_in_bytes == summary["fileSize"]
        assert fr.validate(deep=True) == summary["batches"]
        assert fr.valid_bytes == summary["bytesInBatches"]
        assert fr.size_in_bytes - fr.valid_bytes == summary["trailingBytes"]
        assert sum(1 for _ in fr.records()) == summary["records"]
    mr = MemoryRecords(log.read_bytes())
    assert mr.validate(deep=True) == summary["batches"]
    assert mr.valid_bytes == summary["bytesInBatches"]
    assert sum(1 for _ in mr.records()) == summary["records"]
    assert sum(1 for _ in mr.batches(strict=True)) == summary["batches"]


# -- the transaction index ---------------------------------------------------------------------

_ABORTED_TXN = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
assert _ABORTED_TXN.size == 34
TXN_SEGMENTS = [s for s in SEGMENTS if list((CORPUS / s).glob("*.txnindex"))]


def _parse_txnindex(raw: bytes) -> list[dict]:
    assert len(raw) % _ABORTED_TXN.size == 0, f"{len(raw)} bytes is not a whole number of 34-byte entries"
    out = []
    for pos in range(0, len(raw), _ABORTED_TXN.size):
        version, pid, first, last, lso = _ABORTED_TXN.unpack_from(raw, pos)
        assert version == 0, f"entry at byte {pos}: version {version}"
        out.append(
            {"type": "abortedTxn", "producerId": pid, "firstOffset": first, "lastOffset": last, "lastStableOffset": lso}
        )
    return out


def _aborted_txns_from_log(log: Path) -> list[dict]:
    """Replay the log as Kafka's recovery does: an ongoing transaction per producer starts at
    its first transactional data batch; an ABORT marker completes it, and its last stable
    offset is the first offset of the earliest transaction still ongoing for another producer
    (or the marker's offset + 1 when there is none)."""
    ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
    aborted = []
    with FileRecords.open(log) as fr:
        for batch in fr.batches(validate=True):
            if not batch.is_transactional:
                continue
            pid = batch.producer_id
            if not batch.is_control:
                ongoing.setdefault(pid, batch.base_offset)
                continue
            (marker,) = batch.records()
            assert marker.control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)
            assert pid in ongoing, f"marker at offset {marker.offset} for producer {pid} with no open transaction"
            first = ongoing.pop(pid)
            if marker.control_type is ControlRecordType.ABORT:
                lso = min(ongoing.values(), default=marker.offset + 1)
                aborted.append(
                    {
                        "type": "abortedTxn",
                        "producerId": pid,
                        "firstOffset": first,
                        "lastOffset": marker.offset,
                        "lastStableOffset": lso,
                    }
                )
    return aborted


@pytest.mark.parametrize("segment", TXN_SEGMENTS)
def test_txnindex_bytes_match_kafka(segment: str) -> None:
    """The raw .txnindex (34-byte entries) parses to exactly Kafka's abortedTxn lines."""
    d = CORPUS / segment
    (index,) = d.glob("*.txnindex")
    lines = _read_jsonl(index.with_name(index.name + ".expected.jsonl"))
    expected = [o for o in lines if o["type"] == "abortedTxn"]
    (summary,) = [o for o in lines if o["type"] == "summary"]
    raw = index.read_bytes()
    assert len(raw) == summary["fileSize"]
    entries = _parse_txnindex(raw)
    assert len(entries) == summary["entries"] == len(expected)
    for i, (e, a) in enumerate(zip(expected, entries)):
        diff = _first_mismatch(e, a)
        assert diff is None, f"{segment} txnindex entry #{i}: {diff}"


@pytest.mark.parametrize("segment", TXN_SEGMENTS)
def test_txnindex_agrees_with_abort_markers(segment: str) -> None:
    """Each aborted transaction in the index ends at an ABORT marker of that producer, starts
    at that producer's first transactional batch, every ABORT marker is indexed, and the last
    stable offsets follow from replaying the log."""
    d = CORPUS / segment
    (index,) = d.glob("*.txnindex")
    log = _log_path(d)
    entries = _parse_txnindex(index.read_bytes())

    aborts = {}  # offset -> producer id of every ABORT marker
    with FileRecords.open(log) as fr:
        for batch in fr.batches():
            if batch.is_control:
                for r in batch.records():
                    if r.control_type is ControlRecordType.ABORT:
                        aborts[r.offset] = batch.producer_id
    assert aborts, "the transactional segment has ABORT markers"
    for e in entries:
        assert aborts.get(e["lastOffset"]) == e["producerId"], (
            f"aborted txn {e}: offset {e['lastOffset']} is not an ABORT marker of producer {e['producerId']}"
        )
        assert e["firstOffset"] <= e["lastOffset"]
    assert sorted(e["lastOffset"] for e in entries) == sorted(aborts), "every ABORT marker is indexed once"

    replayed = _aborted_txns_from_log(log)
    for i, (e, a) in enumerate(zip(entries, replayed)):
        diff = _first_mismatch(e, a)
        assert diff is None, f"{segment} txnindex entry #{i} vs the log replay: {diff}"
    assert len(entries) == len(replayed)
