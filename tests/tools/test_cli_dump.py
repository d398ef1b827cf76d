"""``kafkalog dump``: Kafka's DumpLogSegments, line for line.

There is no Kafka text output in the corpus, so the expected lines are written here from
DumpLogSegments.scala (Kafka 3.8) string by string, filled with the values of Kafka's own reading
of each corpus file (``tests/data/kafka-3.8/*.expected.jsonl``) or of files built here. Every line
kind is covered: v2 and legacy batch lines, record lines with and without data, their control
tails, index and time-index lines and their reports, trailing bytes, non-consecutive offsets,
snapshots, transaction indexes, checkpoints; then errors, decoders and ``--json``.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import struct
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS

from kafkalog import ControlRecordType, FileRecords, RecordBatchBuilder
from kafkalog import crc as kcrc
from kafkalog import tools as cli
from kafkalog.__main__ import main as entry_point
from kafkalog.tools import _cli, _jvm

CORPUS = DATA / "kafka-3.8"
SEGMENTS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
REAL = DATA / "real"
SHARED_REAL = SHARED_CORPUS / "real"


# -- helpers ------------------------------------------------------------------------------------


def dump(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["dump", *map(str, args)], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def lines(text: str) -> list[str]:
    """Output lines (split on newlines only: keys and values may hold other separators)."""
    assert text == "" or text.endswith("\n")
    return text.split("\n")[:-1]


def jb(value: bool) -> str:
    return "true" if value else "false"


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def corpus_files(segment: str) -> tuple[Path, list[dict]]:
    d = CORPUS / segment
    (log,) = d.glob("*.log")
    plain = d / f"{log.stem}.expected.jsonl"
    return log, read_jsonl(plain if plain.exists() else d / f"{log.stem}.expected.jsonl.gz")


def write_log(path: Path, *batches) -> list[int]:
    """Write built batches to ``path``; return each one's position."""
    positions = []
    with FileRecords.open(path, create=True) as fr:
        for records in batches:
            positions.append(fr.size_in_bytes)
            fr.append(records)
    return positions


def v2(base: int, n: int, ts: int = 1_700_000_000_000, **kw) -> object:
    b = RecordBatchBuilder(2, base_offset=base, **kw)
    for i in range(n):
        b.append(f"k{base + i}".encode(), f"v{base + i}".encode(), timestamp=ts + i)
    return b.build()


def one(key: bytes | None, value: bytes | None, *, offset: int = 0, ts: int = 1_700_000_000_000, **kw) -> object:
    b = RecordBatchBuilder(2, base_offset=offset, **kw)
    b.append(key, value, timestamp=ts)
    return b.build()


def s16(text: str | None) -> bytes:
    """A Kafka non-flexible (int16-length) string."""
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


# What DumpLogSegments.printBatchLevel prints, from Kafka's own reading of a batch.
def kafka_batch_line(b: dict) -> str:
    if b["magic"] >= 2:
        horizon = "OptionalLong.empty" if b["deleteHorizonMs"] is None else f"OptionalLong[{b['deleteHorizonMs']}]"
        head = (
            f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['count']} "
            f"baseSequence: {b['baseSequence']} lastSequence: {b['lastSequence']} producerId: {b['producerId']} "
            f"producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
            f"isTransactional: {jb(b['isTransactional'])} isControl: {jb(b['isControl'])} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {b['lastOffset']}"
    return (
        f"{head} position: {b['position']} {b['timestampType']}: {b['maxTimestamp']} size: {b['sizeInBytes']} "
        f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} isvalid: {jb(b['isValid'])}"
    )


def _text(hex_or_none: str | None) -> str | None:
    return None if hex_or_none is None else bytes.fromhex(hex_or_none).decode("utf-8", "replace")


# What dumpLog prints for a record, from Kafka's own reading of it.
def kafka_record_line(b: dict, r: dict, *, data: bool = False, skip_metadata: bool = False) -> str:
    prefix, out = "| ", ""
    if not skip_metadata:
        key_size = -1 if r["key"] is None else len(r["key"]) // 2
        value_size = -1 if r["value"] is None else len(r["value"]) // 2
        out += f"{prefix}offset: {r['offset']} {b['timestampType']}: {r['timestamp']} "
        out += f"keySize: {key_size} valueSize: {value_size}"
        prefix = " "
        if b["magic"] >= 2:
            out += f" sequence: {r['sequence']} headerKeys: [{','.join(h[0] for h in r['headers'])}]"
        else:
            out += f" isValid: {jb(r['isValid'])} crc: {r['crc']}}}"
        if b["isControl"]:
            out += f" endTxnMarker: {r['controlType']} coordinatorEpoch: {r['coordinatorEpoch']}"
    if data and not b["isControl"]:
        if r["key"] is not None:
            out += f"{prefix}key: {_text(r['key'])}"
        if r["value"] is not None:
            out += f" payload: {_text(r['value'])}"
    return out


def kafka_log_dump(
    log: Path, expected: list[dict], *, deep: bool, data: bool = False, skip_metadata: bool = False
) -> str:
    out = [f"Dumping {log}", f"Log starting offset: {int(log.stem)}"]
    batch = None
    for item in expected:
        if item["type"] == "batch":
            batch = item
            out.append(kafka_batch_line(item))
        elif item["type"] == "record" and deep:
            out.append(kafka_record_line(batch, item, data=data, skip_metadata=skip_metadata))
    return "".join(line + "\n" for line in out)


# -- golden: Kafka 3.8's segments -----------------------------------------------------------------


@pytest.mark.parametrize("segment", SEGMENTS)
def test_batch_lines_match_kafka(segment: str) -> None:
    """Shallow dump of every corpus segment: the v2 and the legacy batch line, field for field."""
    log, expected = corpus_files(segment)
    rc, out, err = dump("--files", log)
    assert (rc, err) == (0, "")
    assert out == kafka_log_dump(log, expected, deep=False)


@pytest.mark.parametrize("segment", SEGMENTS)
def test_record_lines_match_kafka(segment: str) -> None:
    """Deep dump: record lines with the v2 tail, the legacy tail (and its stray brace), the
    control tail of transaction markers; offsets in every corpus segment are consecutive."""
    log, expected = corpus_files(segment)
    rc, out, err = dump("--files", log, "--deep-iteration")
    assert (rc, err) == (0, "")
    assert out == kafka_log_dump(log, expected, deep=True)


@pytest.mark.parametrize("segment", ["v0-gzip-random", "v1-none-random", "v2-none-random", "v2-txn-random"])
def test_print_data_log_matches_kafka(segment: str) -> None:
    """--print-data-log with the default StringDecoder: ` key: ` and ` payload: `, nothing for
    control records, nothing for a null key or value."""
    log, expected = corpus_files(segment)
    rc, out, err = dump("--files", log, "--print-data-log")
    assert (rc, err) == (0, "")
    assert out == kafka_log_dump(log, expected, deep=True, data=True)


def test_skip_record_metadata_keeps_kafkas_spacing() -> None:
    """Without metadata a record line is `| key: K payload: V`, ` payload: V` when the key is
    null (Kafka's leading space), and empty for a control record."""
    log, expected = corpus_files("v2-txn-random")
    rc, out, _ = dump("--files", log, "--print-data-log", "--skip-record-metadata")
    assert rc == 0
    assert out == kafka_log_dump(log, expected, deep=True, data=True, skip_metadata=True)
    assert "\n\n" in out  # the empty line of a control record
    rc, out, _ = dump("--files", log, "--deep-iteration", "--skip-record-metadata")
    assert all(line == "" for line in lines(out) if not line.startswith(("Dumping", "Log", "baseOffset")))


def test_null_key_payload_line(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    write_log(path, one(None, b"only a value"), one(b"", None, offset=1))
    rc, out, _ = dump("--files", path, "--print-data-log", "--skip-record-metadata")
    assert lines(out)[3] == " payload: only a value"
    assert lines(out)[5] == "| key: "


@pytest.mark.parametrize("segment", SEGMENTS)
def test_index_lines_match_kafka(segment: str) -> None:
    """Offset and time index entries as Kafka prints them, verified against the log without a
    single report (these indexes are Kafka's own)."""
    d = CORPUS / segment
    (log,) = d.glob("*.log")
    index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
    rc, out, err = dump("--files", f"{index},{timeindex}")
    assert (rc, err) == (0, "")
    want = [f"Dumping {index}"]
    entries = [e for e in read_jsonl(d / f"{log.stem}.index.expected.jsonl") if e["type"] == "offsetIndexEntry"]
    want += [f"offset: {e['offset']} position: {e['position']}" for e in entries] or [f"{index} is empty."]
    want.append(f"Dumping {timeindex}")
    tentries = read_jsonl(d / f"{log.stem}.timeindex.expected.jsonl")
    want += [f"timestamp: {e['timestamp']} offset: {e['offset']}" for e in tentries if e["type"] == "timeIndexEntry"]
    assert lines(out) == want
    rc, out, err = dump("--files", f"{index},{timeindex}", "--verify-index-only")
    assert (rc, lines(out), err) == (0, [f"Dumping {index}", f"Dumping {timeindex}"], "")


def test_txnindex_lines_match_kafka() -> None:
    d = CORPUS / "v2-txn-random"
    txnindex = d / "00000000000000000000.txnindex"
    rc, out, err = dump("--files", txnindex)
    expected = [e for e in read_jsonl(d / "00000000000000000000.txnindex.expected.jsonl") if e["type"] == "abortedTxn"]
    assert (rc, err) == (0, "")
    assert lines(out) == [f"Dumping {txnindex}"] + [
        f"version: 0 producerId: {e['producerId']} firstOffset: {e['firstOffset']} lastOffset: {e['lastOffset']} "
        f"lastStableOffset: {e['lastStableOffset']}"
        for e in expected
    ]


def test_txnindex_unknown_version_stops(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 0, 5, 6) + struct.pack(">hqqqq", 1, 7, 8, 9, 10) + b"\x00" * 5)
    rc, out, _ = dump("--files", path)
    assert rc == 1
    assert lines(out) == [
        f"Dumping {path}",
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 5 lastStableOffset: 6",
        f"Error at position 34 of {path.name}: Unexpected aborted transaction version 1 in transaction index "
        f"{path}, current version is 0",
    ]


# -- reports ----------------------------------------------------------------------------------------


def _segment(tmp_path: Path) -> tuple[Path, list[int]]:
    log = tmp_path / "00000000000000000000.log"
    positions = write_log(log, v2(0, 3, ts=1000), v2(3, 3, ts=2000), v2(6, 3, ts=3000))
    return log, positions


def test_offset_index_mismatches(tmp_path: Path) -> None:
    """Mismatches go to stderr at the end, keyed by the absolute path, newest first (Kafka
    prepends to a Scala List); entry lines stay on stdout."""
    log, (_, p1, p2) = _segment(tmp_path)
    index = log.with_suffix(".index")
    index.write_bytes(struct.pack(">iiii", 4, p1, 7, p2))
    rc, out, err = dump("--files", index)
    assert rc == 0
    assert lines(out) == [f"Dumping {index}", f"offset: 4 position: {p1}", f"offset: 7 position: {p2}"]
    assert lines(err) == [
        f"Mismatches in :{index}",
        "  Index offset: 7, log offset: 8",
        "  Index offset: 4, log offset: 5",
    ]


def test_offset_index_stops_at_zero_entry_and_reports_bad_positions(tmp_path: Path) -> None:
    log, (_, p1, _) = _segment(tmp_path)
    index = log.with_suffix(".index")
    # A zero entry after the first ends the dump (a preallocated tail after a crash).
    index.write_bytes(struct.pack(">ii", 5, p1) + bytes(16))
    rc, out, err = dump("--files", index)
    assert (rc, lines(out), err) == (0, [f"Dumping {index}", f"offset: 5 position: {p1}"], "")
    # A position past the end of the log: Kafka throws; kafkalog reports it and goes on.
    index.write_bytes(struct.pack(">iiii", 5, 999_999, 8, 0))
    rc, out, err = dump("--files", index)
    assert rc == 1
    assert lines(out)[1].startswith(f"Error at position 999999 of {log.name}: index entry 0 points beyond the end")
    assert lines(out)[2:] == ["offset: 5 position: 999999", "offset: 8 position: 0"]
    assert lines(err) == [f"Mismatches in :{index}", "  Index offset: 8, log offset: 2"]


def test_time_index_reports(tmp_path: Path) -> None:
    """Timestamp mismatches, out-of-order timestamps and indexed offsets not found, in Kafka's
    order and wording."""
    log, _ = _segment(tmp_path)
    log.with_suffix(".index").write_bytes(b"")
    timeindex = log.with_suffix(".timeindex")
    entries = [(1002, 2), (2500, 5), (2400, 8), (3500, 7), (3600, 100)]
    timeindex.write_bytes(b"".join(struct.pack(">qi", ts, off) for ts, off in entries))
    rc, out, err = dump("--files", timeindex)
    assert rc == 0
    assert lines(out) == [f"Dumping {timeindex}"] + [f"timestamp: {ts} offset: {off}" for ts, off in entries]
    assert lines(err) == [
        f"Found timestamp mismatch in :{timeindex}",
        "  Index timestamp: 2500, log timestamp: 2002",
        "  Index timestamp: 2400, log timestamp: 3002",
        f"Found out of order timestamp in :{timeindex}",
        "  Index timestamp: 2400, Previously indexed timestamp: 2500",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 7, found log offset: 8",
        "Indexed offset: 100, found log offset: -1",
    ]


def test_non_consecutive_offsets(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    write_log(log, v2(0, 3), v2(10, 2), v2(20, 1))
    rc, out, err = dump("--files", log, "--deep-iteration")
    assert rc == 0
    assert lines(err) == [f"Non-consecutive offsets in {log}", "  11 is followed by 20", "  2 is followed by 10"]
    rc, out, err = dump("--files", log)  # shallow iteration does not look at records
    assert err == ""


def test_relative_paths_are_reported_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "00000000000000000000.log"
    write_log(log, v2(0, 1), v2(5, 1))
    monkeypatch.chdir(tmp_path)
    rc, out, err = dump("--files", ".//00000000000000000000.log/", "--deep-iteration")
    assert lines(out)[0] == "Dumping ./00000000000000000000.log"  # java.io.File's normalisation
    assert lines(err)[0] == f"Non-consecutive offsets in {os.getcwd()}/./00000000000000000000.log"


# -- trailing and corrupt bytes -----------------------------------------------------------------------


def test_partial_last_batch(tmp_path: Path) -> None:
    log, positions = _segment(tmp_path)
    whole = log.read_bytes()
    log.write_bytes(whole + whole[:30])
    rc, out, err = dump("--files", log)
    assert (rc, err) == (0, "")
    assert lines(out)[-1] == f"Found 30 invalid bytes at the end of {log.name}"


def test_zero_filled_tail(tmp_path: Path) -> None:
    """Kafka throws on a size below 14; kafkalog says so where it is, then counts the bytes."""
    log, _ = _segment(tmp_path)
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + bytes(100))
    rc, out, err = dump("--files", log)
    assert rc == 1
    assert lines(out)[-2:] == [
        f"Error at position {size} of {log.name}: record size 0 is smaller than the minimum record overhead (14)",
        f"Found 100 invalid bytes at the end of {log.name}",
    ]
    # The last 17 bytes are too few for Kafka to read a header: a plain tail, no error.
    log.write_bytes(log.read_bytes()[: size + 17])
    rc, out, err = dump("--files", log)
    assert (rc, lines(out)[-1]) == (0, f"Found 17 invalid bytes at the end of {log.name}")


def test_corrupt_batch_is_skipped_and_the_dump_goes_on(tmp_path: Path) -> None:
    log, (_, p1, p2) = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, p1 + 8, 5)  # an impossible size field in the second batch
    log.write_bytes(bytes(data))
    rc, out, err = dump("--files", log, "--deep-iteration")
    assert rc == 1
    text = lines(out)
    error = (
        f"Error at position {p1} of {log.name}: record size 5 is smaller than the minimum record overhead (14); "
        f"skipped {p2 - p1} bytes to the next valid batch at position {p2}"
    )
    assert text[2:] == [
        text[2],
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 1 CreateTime: 1001 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 2 CreateTime: 1002 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        error,
        text[7],
        "| offset: 6 CreateTime: 3000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 7 CreateTime: 3001 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 8 CreateTime: 3002 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
    ]
    assert text[7].startswith("baseOffset: 6 ") and f" position: {p2} " in text[7]
    assert lines(err) == [f"Non-consecutive offsets in {log}", "  2 is followed by 6"]


def test_resync_over_zeros_and_garbage(tmp_path: Path) -> None:
    """A batch overwritten with zeros, or with bytes that look like headers but fail their CRC:
    the dump resumes at the next whole batch whose CRC matches."""
    log, (_, p1, p2) = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    data[p1:p2] = bytes(p2 - p1)
    log.write_bytes(bytes(data))
    rc, out, _ = dump("--files", log)
    assert rc == 1
    assert lines(out)[3] == (
        f"Error at position {p1} of {log.name}: record size 0 is smaller than the minimum record overhead (14); "
        f"skipped {p2 - p1} bytes to the next valid batch at position {p2}"
    )
    assert lines(out)[4].startswith("baseOffset: 6 ")
    # An entry that frames (a v0 message with a wrong CRC) is printed as Kafka prints it; the
    # bytes after it (a size of -1) are skipped.
    fake = struct.pack(">qiIbbii", 0, 14, 0, 0, 0, -1, -1)
    data[p1 : p1 + len(fake)] = fake
    data[p1 + len(fake) : p2] = b"\xff" * (p2 - p1 - len(fake))
    log.write_bytes(bytes(data))
    rc, out, _ = dump("--files", log)
    after = p1 + len(fake)
    assert lines(out)[3:6] == [
        f"offset: 0 position: {p1} NoTimestampType: -1 size: 26 magic: 0 compresscodec: none crc: 0 isvalid: false",
        f"Error at position {after} of {log.name}: record size -1 is smaller than the minimum record overhead (14); "
        f"skipped {p2 - after} bytes to the next valid batch at position {p2}",
        lines(out)[5],
    ]
    assert lines(out)[5].startswith("baseOffset: 6 ")


def test_bad_crc_is_a_finding_not_an_error(tmp_path: Path) -> None:
    log, (_, p1, _) = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    data[p1 + 70] ^= 0xFF  # a record byte of the second batch
    log.write_bytes(bytes(data))
    rc, out, _ = dump("--files", log)
    assert rc == 0
    assert [line.rsplit(" ", 1)[-1] for line in lines(out)[2:]] == ["true", "false", "true"]


def test_undecodable_records_are_reported_after_the_batch_line(tmp_path: Path) -> None:
    log, (_, p1, _) = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    data[p1 + 61] = 0x7F  # the first record's length varint: far past the batch
    log.write_bytes(bytes(data))
    rc, out, _ = dump("--files", log, "--deep-iteration")
    assert rc == 1
    text = lines(out)
    (at,) = [i for i, line in enumerate(text) if line.startswith("Error ")]
    assert text[at - 1].startswith("baseOffset: 3 ") and text[at + 1].startswith("baseOffset: 6 ")
    assert text[at].startswith(f"Error at position {p1 + 61} of {log.name}: v2 batch at offset 3: record 0")


def test_max_bytes(tmp_path: Path) -> None:
    log, (_, p1, _) = _segment(tmp_path)
    rc, out, _ = dump("--files", log, "--max-bytes", p1 + 10)
    assert rc == 0
    assert len(lines(out)) == 3  # header lines and the first batch; no "invalid bytes" line


# -- errors ---------------------------------------------------------------------------------------------


def test_missing_directory_and_unknown_files(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    directory = tmp_path / "00000000000000000001.log"
    directory.mkdir()
    unknown = tmp_path / "partition.metadata"
    unknown.write_text("version: 0\n")
    rc, out, err = dump("--files", f"{missing},{directory},{unknown}")
    assert rc == 1
    assert lines(out) == [f"Dumping {missing}", f"Dumping {directory}", f"Dumping {unknown}"]
    assert lines(err) == [
        f"kafkalog dump: {missing}: No such file or directory",
        f"kafkalog dump: {directory}: Is a directory",
        f"Ignoring unknown file {unknown}",
    ]
    rc, _, err = dump("--files", unknown)
    assert (rc, lines(err)) == (0, [f"Ignoring unknown file {unknown}"])


def test_foreign_files(tmp_path: Path) -> None:
    text = tmp_path / "00000000000000000000.log"
    text.write_text("2024-01-01 INFO this is an application log, not a Kafka segment\n" * 20)
    named = tmp_path / "app.log"
    named.write_bytes(b"")
    rc, out, err = dump("--files", f"{text},{named}")
    assert rc == 1
    assert lines(out) == [f"Dumping {text}", "Log starting offset: 0", f"Dumping {named}"]
    assert lines(err) == [
        f"kafkalog dump: {text}: not a Kafka log: no valid batch in its {text.stat().st_size} bytes",
        f"kafkalog dump: {named}: not a Kafka file name: expected <offset>.log",
    ]


def test_usage_errors() -> None:
    assert dump()[0] == 2  # --files is required
    assert dump("--files", "x.log", "--key-decoder-class", "com.example.MyDecoder")[0] == 2
    assert dump("--files", "x.log", "--key-decoder", "hex", "--key-decoder-class")[0] == 2


# -- index sanity check ------------------------------------------------------------------------------


def test_index_sanity_check(tmp_path: Path) -> None:
    corpus_index = CORPUS / "v2-none-random" / "00000000000000000000.index"
    rc, out, _ = dump("--files", corpus_index, "--index-sanity-check")
    assert (rc, lines(out)) == (0, [f"Dumping {corpus_index}", f"{corpus_index} passed sanity check."])

    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(struct.pack(">ii", -5, 0))
    rc, out, _ = dump("--files", index, "--index-sanity-check")
    assert rc == 1
    assert lines(out)[1] == (
        f"{index} failed sanity check: Corrupt index found, index file {index} has non-zero size but the last "
        "offset is 95 which is less than the base offset 100"
    )
    index.write_bytes(struct.pack(">iii", 1, 0, 0))
    assert lines(dump("--files", index, "--index-sanity-check")[1])[1] == (
        f"{index} failed sanity check: Index file {index} is corrupt, found 12 bytes which is neither positive nor "
        "a multiple of 8"
    )
    index.write_bytes(b"\x00" * 5)  # no whole entry: Kafka says "empty" before checking anything
    assert lines(dump("--files", index, "--index-sanity-check")[1])[1] == f"{index} is empty."

    timeindex = tmp_path / "00000000000000000100.timeindex"
    timeindex.write_bytes(struct.pack(">qiqi", 50, 1, 40, 2))
    rc, out, _ = dump("--files", timeindex, "--index-sanity-check")
    assert lines(out)[1] == (
        f"{timeindex} failed sanity check: Corrupt time index found, time index file ({timeindex}) has non-zero "
        "size but the last timestamp is 40 which is less than the first timestamp 50"
    )
    timeindex.write_bytes(b"")
    assert lines(dump("--files", timeindex, "--index-sanity-check")[1])[1] == f"{timeindex} passed sanity check."


# -- snapshots -----------------------------------------------------------------------------------------


def _snapshot_lines(data: bytes) -> list[str]:
    """DumpLogSegments.dumpProducerIdSnapshot, from the raw v1 snapshot layout."""
    (count,) = struct.unpack_from(">i", data, 6)
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn = struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)
        txn_text = "OptionalLong.empty" if txn < 0 else f"OptionalLong[{txn}]"
        line = (
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} currentTxnFirstOffset: {txn_text} "
            f"lastTimestamp: {ts} "
        )
        if last_offset >= 0:
            first_seq = last_seq - delta if last_seq >= delta else 2**31 - 1 - (delta - last_seq) + 1
            line += (
                f"firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} offsetDelta: {delta} "
                f"timestamp: {ts}"
            )
        out.append(line)
    return out


def _snapshot(entries: list[tuple]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, kcrc.crc32c(body)) + body


def test_producer_snapshot(tmp_path: Path) -> None:
    real = DATA / "snapshots" / "NikhilDighe9975__kafka_setup" / "nikhilDemo-0" / "00000000000000000003.snapshot"
    rc, out, err = dump("--files", real)
    assert (rc, err) == (0, "")
    assert lines(out) == [f"Dumping {real}"] + _snapshot_lines(real.read_bytes())
    assert len(lines(out)) == 3

    path = tmp_path / "00000000000000000009.snapshot"
    path.write_bytes(_snapshot([(5, 1, 9, 40, 4, 123, 2, 37), (6, 0, -1, -1, 0, 99, -1, -1)]))
    rc, out, _ = dump("--files", path)
    assert lines(out)[1:] == [
        "producerId: 5 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong[37] lastTimestamp: 123 "
        "firstSequence: 5 lastSequence: 9 lastOffset: 40 offsetDelta: 4 timestamp: 123",
        "producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 99 ",
    ]


def test_corrupt_producer_snapshots(tmp_path: Path) -> None:
    """Kafka's CorruptSnapshotException messages, on stderr."""
    path = tmp_path / "00000000000000000009.snapshot"
    good = _snapshot([(5, 1, 9, 40, 4, 123, 2, 37)])
    cases = {
        good[:-1] + bytes([good[-1] ^ 1]): "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
        "Computed crc: {computed}",
        struct.pack(">h", 2) + good[2:]: "Snapshot contained an unknown file version 2",
        good[:8]: "Snapshot failed schema validation: Error reading field 'producer_entries': "
        "java.nio.BufferUnderflowException",
        good[:30]: "Snapshot failed schema validation: Error reading field 'producer_entries': Error reading field "
        "'last_offset': java.nio.BufferUnderflowException",
        good[:6] + struct.pack(">i", 99) + good[10:]: "Snapshot failed schema validation: Error reading field "
        "'producer_entries': Error reading array of size 99, only 46 bytes available",
    }
    for data, message in cases.items():
        path.write_bytes(data)
        stored = struct.unpack_from(">I", data, 2)[0] if len(data) >= 6 else 0
        rc, out, err = dump("--files", path)
        assert (rc, lines(out)) == (1, [f"Dumping {path}"])
        assert lines(err) == [message.format(stored=stored, computed=kcrc.crc32c(data[6:]))]


def _control(control_type: int, value: bytes, *, offset: int = 0) -> object:
    b = RecordBatchBuilder(2, base_offset=offset, is_control=True)
    b.append(struct.pack(">hh", 0, control_type), value, timestamp=1_700_000_000_000)
    return b.build()


def test_kraft_snapshot_and_control_records(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100-0000000005.checkpoint"
    header = struct.pack(">hq", 0, 1_699_999_999_999) + b"\x00"  # flexible v0: no tagged fields
    footer = struct.pack(">h", 0) + b"\x00"
    kraft_version = struct.pack(">hh", 0, 1) + b"\x00"
    write_log(
        path,
        _control(ControlRecordType.SNAPSHOT_HEADER, header),
        one(None, b"a metadata record", offset=1),
        _control(ControlRecordType.LEADER_CHANGE, b"\x00" * 8, offset=2),
        _control(ControlRecordType.KRAFT_VERSION, kraft_version, offset=3),
        _control(99, b"", offset=4),
        _control(ControlRecordType.SNAPSHOT_FOOTER, footer, offset=5),
    )
    rc, out, err = dump("--files", path, "--print-data-log")
    assert (rc, err) == (0, "")
    text = lines(out)
    assert text[:2] == [f"Dumping {path}", "Snapshot end offset: 100, epoch: 5"]
    base = "CreateTime: 1700000000000 keySize: 4"
    assert text[3] == f"| offset: 0 {base} valueSize: 11 sequence: -1 headerKeys: [] SnapshotHeader " + '{"version":0,"lastContainedLogTimestamp":1699999999999}'
    assert text[5] == "| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: 17 sequence: -1 headerKeys: [] payload: a metadata record"
    assert text[7] == f"| offset: 2 {base} valueSize: 8 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)"
    assert text[9] == f"| offset: 3 {base} valueSize: 5 sequence: -1 headerKeys: [] KRaftVersion " + '{"version":0,"kRaftVersion":1}'
    assert text[11] == f"| offset: 4 {base} valueSize: 0 sequence: -1 headerKeys: [] controlType: UNKNOWN(99)"
    assert text[13] == f"| offset: 5 {base} valueSize: 3 sequence: -1 headerKeys: [] SnapshotFooter " + '{"version":0}'

    bootstrap = tmp_path / "bootstrap.checkpoint"
    bootstrap.write_bytes(path.read_bytes())
    assert lines(dump("--files", bootstrap)[1])[1] == "KRaft bootstrap snapshot"
    assert dump("--files", tmp_path / "foo.checkpoint")[2].endswith(
        "expected <20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint\n"
    )


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason="shared corpus not present")
def test_real_kraft_snapshots() -> None:
    snapshots = sorted(SHARED_REAL.glob("*/__cluster_metadata-0/*.checkpoint"))
    assert snapshots
    for path in snapshots:
        rc, out, err = dump("--files", path, "--deep-iteration")
        assert (rc, err) == (0, ""), path
        text = lines(out)
        assert text[1].startswith("Snapshot end offset: ")
        assert " SnapshotHeader {\"version\":0,\"lastContainedLogTimestamp\":" in text[3]
        assert text[-1].endswith(' SnapshotFooter {"version":0}')


# -- decoders --------------------------------------------------------------------------------------------


def test_decoder_classes_and_deprecation_notes(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    write_log(log, one(struct.pack(">i", 42), struct.pack(">q", -7)))
    rc, out, _ = dump(
        "--files", log, "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
        "--value-decoder-class", "kafka.serializer.LongDecoder",
    )
    assert rc == 0
    text = lines(out)
    # The decoders are built (and the deprecation noted) before dumpLog prints its header.
    assert text[:3] == [
        f"Dumping {log}",
        "kafka.serializer.LongDecoder is deprecated. Please use org.apache.kafka.tools.api.LongDecoder instead",
        "Log starting offset: 0",
    ]
    assert text[4].endswith("headerKeys: [] key: 42 payload: -7")
    # A decoder class option alone implies --print-data-log; its value defaults to StringDecoder.
    rc, out, _ = dump("--files", log, "--key-decoder-class")
    assert lines(out)[3].endswith(" key: \x00\x00\x00* payload: " + struct.pack(">q", -7).decode("utf-8", "replace"))
    # IntegerDecoder on too few bytes: Kafka throws; kafkalog reports it in place of the key.
    int_values = ("--value-decoder-class", "kafka.serializer.IntegerDecoder", "--key-decoder", "none")
    rc, out, _ = dump("--files", log, *int_values)
    assert rc == 0
    write_log(log, one(b"k", b"ab", offset=1))
    rc, out, _ = dump("--files", log, *int_values)
    assert rc == 1
    assert lines(out)[-1].endswith(" key: Error at offset 1, skipping. IntegerDecoder needs 4 bytes, the data has 2")


def test_shorthand_decoders(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    write_log(log, one(b"\x00\xffk", b'{"a": [1, 2.5, "\\u0001"]}'), one(b"k", b"not json", offset=1))
    out = lines(dump("--files", log, "--key-decoder", "hex", "--value-decoder", "json")[1])
    assert out[3].endswith(' key: 00ff6b payload: {"a":[1,2.5,"\\u0001"]}')
    assert out[5].endswith(" key: 6b payload: not json")
    out = lines(dump("--files", log, "--key-decoder", "base64", "--value-decoder", "none")[1])
    assert out[3].endswith(" key: " + base64.b64encode(b"\x00\xffk").decode())


# __consumer_offsets records, encoded here from the message schemas.
_COMMIT_KEY = struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 3)
_COMMIT_V3 = struct.pack(">hqi", 3, 42, 7) + s16('q"\x1f') + struct.pack(">q", 1_700_000_000_000)
_COMMIT_V1 = struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1_700_000_000_000, 1_700_086_400_000)
_COMMIT_V4 = struct.pack(">hqi", 4, 43, 8) + bytes([3]) + b"md" + struct.pack(">q", 5) + b"\x00"
_SUBSCRIPTION = struct.pack(">hi", 1, 1) + s16("t") + b32(None) + struct.pack(">i", 0)
_ASSIGNMENT = struct.pack(">hi", 0, 1) + s16("t") + struct.pack(">iii", 2, 0, 1) + b32(None)
_GROUP_KEY = struct.pack(">h", 2) + s16("g")
_GROUP_V3 = (
    struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range") + s16("m1") + struct.pack(">q", 9)
    + struct.pack(">i", 1) + s16("m1") + s16(None) + s16("c") + s16("/10.0.0.1") + struct.pack(">ii", 300000, 45000)
    + b32(_SUBSCRIPTION) + b32(b"\x00\x09junk")
)


def test_offsets_decoder(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    write_log(
        log,
        one(_COMMIT_KEY, _COMMIT_V3),
        one(_COMMIT_KEY, _COMMIT_V1, offset=1),
        one(_COMMIT_KEY, _COMMIT_V4, offset=2),
        one(_GROUP_KEY, _GROUP_V3, offset=3),
        one(_GROUP_KEY, None, offset=4),
        one(struct.pack(">h", 42) + s16("x"), b"", offset=5),
        one(_COMMIT_KEY, _COMMIT_V3[:12], offset=6),
        RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=3, timestamp=1, base_offset=7
        ),
    )
    rc, out, err = dump("--files", log, "--offsets-decoder")
    assert (rc, err) == (0, "")
    records = [line.split("headerKeys: [] ", 1)[1] for line in lines(out) if line.startswith("| ")]
    key = 'key: {"type":"1","data":{"group":"grp","topic":"topic","partition":3}}'
    assert records[0] == key + ' payload: {"version":"3","data":{"offset":42,"leaderEpoch":7,"metadata":"q\\"\\u001F","commitTimestamp":1700000000000}}'
    assert records[1] == key + ' payload: {"version":"1","data":{"offset":42,"metadata":"","commitTimestamp":1700000000000,"expireTimestamp":1700086400000}}'
    assert records[2] == key + ' payload: {"version":"4","data":{"offset":43,"leaderEpoch":8,"metadata":"md","commitTimestamp":5}}'
    junk = base64.b64encode(b"\x00\x09junk").decode()
    assert records[3] == (
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        '"generation":5,"protocol":"range","leader":"m1","currentStateTimestamp":9,"members":[{"memberId":"m1",'
        '"groupInstanceId":null,"clientId":"c","clientHost":"/10.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":45000,"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[]},'
        f'"assignment":"{junk}"}}]}}}}'
    )
    assert records[4] == 'key: {"type":"2","data":{"group":"g"}} payload: <DELETE>'
    assert records[5] == "key: Unknown record type 42 at offset 5, skipping."
    assert records[6] == (
        "key: Error at offset 6, skipping. Could not read record with version 3 from value's buffer due to: null."
    )
    assert records[7] == "endTxnMarker: COMMIT coordinatorEpoch: 3"  # control records print no data

    write_log(log, one(None, _COMMIT_V3, offset=8))  # Kafka's parser throws on a missing key
    rc, out, _ = dump("--files", log, "--offsets-decoder")
    assert rc == 1
    assert lines(out)[-1].endswith(
        "key: Error at offset 8, skipping. Failed to decode message at offset 8 using offset topic decoder "
        "(message had a missing key)"
    )


def test_offsets_decoder_consumer_assignment(tmp_path: Path) -> None:
    value = _GROUP_V3[: -len(b32(b"\x00\x09junk"))] + b32(_ASSIGNMENT)
    log = tmp_path / "00000000000000000000.log"
    write_log(log, one(_GROUP_KEY, value))
    out = lines(dump("--files", log, "--offsets-decoder")[1])
    assert out[3].endswith('"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0,1]}],"userData":null}}]}}')


def test_offsets_decoder_on_real_consumer_offsets() -> None:
    d = REAL / "NikhilDighe9975__kafka_setup" / "__consumer_offsets-12"
    logs = f"{d / '00000000000000000000.log'},{d / '00000000000000000862.log'}"
    rc, out, err = dump("--files", logs, "--offsets-decoder")
    assert (rc, err) == (0, "")
    records = [line for line in lines(out) if line.startswith("| ")]
    assert len(records) == 862 + 7
    assert all(' key: {"type":"' in line and " payload: {" in line or "<DELETE>" in line for line in records)
    assert sum(line.endswith("payload: <DELETE>") for line in records) == 7
    assert records[0].endswith(
        '"subscription":{"topics":["my-first-topic","my-second-topic"],"userData":null,"ownedPartitions":[]},'
        '"assignment":{"assignedPartitions":[{"topic":"my-second-topic","partitions":[0,1,2]},'
        '{"topic":"my-first-topic","partitions":[0,1,2]}],"userData":null}}]}}'
    )


_TXN_KEY = struct.pack(">h", 0) + s16("my-txn")


def _txn_value(status: int, partitions: list[tuple[str, list[int]]] | None) -> bytes:
    parts = b32(None)[:4] if partitions is None else struct.pack(">i", len(partitions)) + b"".join(
        s16(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids) for topic, ids in partitions
    )
    return struct.pack(">hqhib", 0, 42, 3, 60000, status) + parts + struct.pack(">qq", 1700, 1600)


def test_transaction_log_decoder(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    flexible = (  # v1: compact strings and arrays, tagged fields after each struct
        struct.pack(">hqhib", 1, 42, 3, 60000, 4) + bytes([2, 2]) + b"u" + bytes([2]) + struct.pack(">i", 9)
        + b"\x00" + struct.pack(">qq", 1800, 1600) + b"\x00"
    )
    write_log(
        log,
        one(_TXN_KEY, _txn_value(1, [("t", [0, 1, 2])])),
        one(_TXN_KEY, _txn_value(0, [("t", [0])]), offset=1),
        one(_TXN_KEY, flexible, offset=2),
        one(_TXN_KEY, None, offset=3),
        one(struct.pack(">h", 5), b"", offset=4),
    )
    rc, out, err = dump("--files", log, "--transaction-log-decoder")
    assert (rc, err) == (0, "")
    records = [line.split("headerKeys: [] ", 1)[1] for line in lines(out) if line.startswith("| ")]
    # Kafka 4's TransactionLogMessageParser (TransactionCoordinatorRecordSerde and the generated
    # JSON converters): the coordinators' JSON, the status as its id, partitions as written.
    key = 'key: {"type":"0","data":{"transactionalId":"my-txn"}}'

    def value(version: int, status: int, partitions: str, updated: int) -> str:
        return (
            f' payload: {{"version":"{version}","data":{{"producerId":42,"producerEpoch":3,'
            f'"transactionTimeoutMs":60000,"transactionStatus":{status},"transactionPartitions":{partitions},'
            f'"transactionLastUpdateTimestampMs":{updated},"transactionStartTimestampMs":1600}}}}'
        )

    assert records[0] == key + value(0, 1, '[{"topic":"t","partitionIds":[0,1,2]}]', 1700)
    assert records[1] == key + value(0, 0, '[{"topic":"t","partitionIds":[0]}]', 1700)
    assert records[2] == key + value(1, 4, '[{"topic":"u","partitionIds":[9]}]', 1800)
    assert records[3] == key + " payload: <DELETE>"
    assert records[4] == "key: Unknown record type 5 at offset 4, skipping."


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason="shared corpus not present")
def test_transaction_log_decoder_on_real_transaction_state() -> None:
    (log,) = SHARED_REAL.glob("*/__transaction_state-44/00000000000000000000.log")
    rc, out, err = dump("--files", log, "--transaction-log-decoder", "--json")
    assert (rc, err) == (0, "")
    values = [o["value"] for o in map(json.loads, lines(out)) if o["type"] == "record"]
    # Empty, Ongoing, PrepareCommit, CompleteCommit (TransactionState ids)
    assert [v["data"]["transactionStatus"] for v in values] == [0, 1, 2, 4]
    assert values[1]["data"]["transactionPartitions"] == [
        {"topic": "_confluent-ksql-default__command_topic", "partitionIds": [0]}
    ]


def test_scala_hash_orders() -> None:
    """Kafka's report maps iterate by bucket of the (improved) String hash, not by insertion."""
    m = _jvm._ScalaHashMap()
    for key in ("b", "a", "b"):  # "a" hashes to 97 (bucket 1), "b" to 98 (bucket 2)
        m.put(key)
    assert m.keys() == ["a", "b"]


# -- checkpoints (kafkalog extension) ------------------------------------------------------------------


def test_text_checkpoints() -> None:
    epochs = DATA / "checkpoints" / "BiggerBrain__kafka" / "lsx1-0" / "leader-epoch-checkpoint"
    cleaner = DATA / "checkpoints" / "getachew015__kafka-broker" / "cleaner-offset-checkpoint"
    rc, out, err = dump("--files", f"{epochs},{cleaner}")
    assert (rc, err) == (0, "")
    assert lines(out) == [
        f"Dumping {epochs}",
        *(f"epoch: {e} startOffset: {o}" for e, o in ((0, 0), (1, 9), (3, 10), (5, 12), (6, 13), (7, 14))),
        f"Dumping {cleaner}",
        "topic: __consumer_offsets partition: 13 offset: 0",
    ]


# -- JSON Lines -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("segment", SEGMENTS)
def test_json_batches_and_records_match_kafkas_reading(segment: str) -> None:
    """--json batch objects carry Kafka's own reading of every batch under the corpus's names;
    record objects its offsets, timestamps, sequences, sizes and CRCs."""
    log, expected = corpus_files(segment)
    rc, out, err = dump("--files", log, "--deep-iteration", "--json")
    assert (rc, err) == (0, "")
    objects = [json.loads(line) for line in lines(out)]
    assert objects[0] == {"type": "file", "file": str(log), "kind": "log", "baseOffset": int(log.stem)}
    got_batches = [o for o in objects if o["type"] == "batch"]
    want_batches = [e for e in expected if e["type"] == "batch"]
    assert len(got_batches) == len(want_batches)
    for got, want in zip(got_batches, want_batches):
        assert got.pop("file") == str(log)
        assert got == {k: v for k, v in want.items() if k != "error"}
    got_records = [o for o in objects if o["type"] == "record"]
    want_records = [e for e in expected if e["type"] == "record"]
    assert len(got_records) == len(want_records)
    for got, want in zip(got_records, want_records):
        assert got["batchPosition"] == want["batchPosition"]
        assert (got["offset"], got["timestamp"]) == (want["offset"], want["timestamp"])
        assert got["keySize"] == (-1 if want["key"] is None else len(want["key"]) // 2)
        assert got["valueSize"] == (-1 if want["value"] is None else len(want["value"]) // 2)
        if "sequence" in got:
            assert (got["sequence"], got["headerKeys"]) == (want["sequence"], [h[0] for h in want["headers"]])
        else:
            assert (got["isValid"], got["crc"]) == (want["isValid"], want["crc"])
        if "controlType" in want:
            assert (got["controlType"], got["coordinatorEpoch"]) == (want["controlType"], want["coordinatorEpoch"])


def test_json_shallow_legacy_wrapper_and_data(tmp_path: Path) -> None:
    log, expected = corpus_files("v1-gzip-random")
    first = json.loads(lines(dump("--files", log, "--json")[1])[1])
    assert (first["type"], first["baseOffset"], first["lastOffset"]) == ("batch", None, 17)

    path = tmp_path / "00000000000000000000.log"
    write_log(path, one(_COMMIT_KEY, _COMMIT_V3), one(None, None, offset=1))
    objects = [json.loads(line) for line in lines(dump("--files", path, "--offsets-decoder", "--json")[1])]
    record = objects[2]
    assert record["key"] == {"type": "1", "data": {"group": "grp", "topic": "topic", "partition": 3}}
    assert record["value"]["data"]["metadata"] == 'q"\x1f'
    assert "decodeError" in objects[4]
    out = dump("--files", path, "--print-data-log", "--json", "--skip-record-metadata")[1]
    objects = [json.loads(line) for line in lines(out)]
    position = objects[3]["position"]
    assert objects[4] == {
        "type": "record", "file": str(path), "batchPosition": position, "offset": 1, "key": None, "value": None
    }


def test_json_indexes_reports_and_errors(tmp_path: Path) -> None:
    log, (_, p1, p2) = _segment(tmp_path)
    index = log.with_suffix(".index")
    index.write_bytes(struct.pack(">iiii", 4, p1, 8, p2))
    missing = tmp_path / "00000000000000000042.txnindex"
    rc, out, err = dump("--files", f"{index},{missing},{tmp_path / 'x.json'}", "--json")
    assert rc == 1
    assert [json.loads(line) for line in lines(out)] == [
        {"type": "file", "file": str(index), "kind": "offsetIndex", "baseOffset": 0},
        {"type": "offsetIndexMismatch", "file": str(index), "indexOffset": 4, "logOffset": 5},
        {"type": "offsetIndexEntry", "file": str(index), "i": 0, "offset": 4, "position": p1},
        {"type": "offsetIndexEntry", "file": str(index), "i": 1, "offset": 8, "position": p2},
        {"type": "file", "file": str(missing), "kind": "transactionIndex", "baseOffset": 42},
        {"type": "error", "file": str(missing), "position": None, "message": "No such file or directory"},
        {"type": "skipped", "file": str(tmp_path / "x.json"), "reason": "unknown file type"},
    ]
    assert lines(err) == [f"kafkalog dump: {missing}: No such file or directory"]


# -- entry points ----------------------------------------------------------------------------------------


def test_python_dash_m_dispatch(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m kafkalog dump ...` goes to kafkalog.cli; `python -m kafkalog FILE.log` still
    goes to the summary."""
    log, _ = corpus_files("v2-txn-random")
    assert entry_point(["dump", "--files", str(log)]) == 0
    assert capsys.readouterr().out.startswith(f"Dumping {log}\nLog starting offset: 0\nbaseOffset: 0 ")
    summarised = []
    monkeypatch.setattr(_cli, "summarise", lambda path, out=None: summarised.append(path) or True)
    assert entry_point([str(log)]) == 0
    assert summarised == [str(log)]
