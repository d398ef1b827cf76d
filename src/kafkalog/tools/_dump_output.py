"""``kafkalog dump`` output: Kafka's text, or JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, NamedTuple

from .. import RecordBatch
from ..producer_state.entry import ProducerStateEntry
from ._decoders import _Parsed
from ._jvm import _jbool, _optional_long, _ScalaHashMap
from ._spool import _PairSpool

# ------------------------------------------------------------------------------------------------
# Output: Kafka's text, or JSON Lines


class _BatchInfo(NamedTuple):
    batch: RecordBatch
    position: int
    codec: str
    valid: bool
    base_offset: int | None  # None for a v0/v1 wrapper whose records were not decoded


class _RecordInfo(NamedTuple):
    offset: int
    timestamp: int
    key_size: int
    value_size: int
    sequence: int | None  # v2 only
    header_keys: tuple[str, ...] | None  # v2 only
    legacy: tuple[bool, int] | None  # (isValid, crc) for v0/v1
    control_text: str  # the control-record tail of the text line
    control: dict  # the same for --json
    parsed: _Parsed | None  # key and value when printing data


class _Output:
    """Receives what the dump finds. Subclasses render Kafka's text or JSON Lines."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self.out, self.err = out, err

    def stderr(self, line: str) -> None:
        self.out.flush()
        self.err.write(line + "\n")
        self.err.flush()

    def fatal(self, display: str, message: str) -> None:
        """A file that cannot be dumped: one line on stderr."""
        self.stderr(f"kafkalog dump: {display}: {message}")

    def finish(self) -> None:
        self.out.flush()


class _TextOutput(_Output):
    """DumpLogSegments' lines; its end-of-run reports go to stderr when the run ends."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        super().__init__(out, err)
        self._index_mismatches = _Reports()
        self._time_mismatches = _Reports()
        self._out_of_order = _Reports()
        self._not_found = _Reports()
        self._non_consecutive = _Reports()

    def dumping(self, display: str, kind: str, **info: object) -> None:
        self.out.write(f"Dumping {display}\n")

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def log_header(self, info: dict) -> None:
        if "baseOffset" in info:
            self.line(f"Log starting offset: {info['baseOffset']}")
        elif info.get("bootstrap"):
            self.line("KRaft bootstrap snapshot")
        else:
            self.line(f"Snapshot end offset: {info['snapshotEndOffset']}, epoch: {info['snapshotEpoch']}")

    def deprecated_decoder(self, old: str, new: str) -> None:
        self.line(f"{old} is deprecated. Please use {new} instead")

    def batch(self, display: str, b: _BatchInfo) -> None:
        batch = b.batch
        if batch.magic >= 2:
            head = (
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} isTransactional: "
                f"{_jbool(batch.is_transactional)} isControl: {_jbool(batch.is_control)} "
                f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}"
            )
        else:
            head = f"offset: {batch.last_offset}"
        self.out.write(
            f"{head} position: {b.position} {batch.timestamp_type.kafka_name}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {b.codec} crc: {batch.crc} "
            f"isvalid: {_jbool(b.valid)}\n"
        )

    def record(self, display: str, b: _BatchInfo, r: _RecordInfo, skip_metadata: bool) -> None:
        prefix = "| "
        parts = []
        if not skip_metadata:
            parts.append(
                f"{prefix}offset: {r.offset} {b.batch.timestamp_type.kafka_name}: {r.timestamp} "
                f"keySize: {r.key_size} valueSize: {r.value_size}"
            )
            prefix = " "
            if r.header_keys is not None:
                parts.append(f" sequence: {r.sequence} headerKeys: [{','.join(r.header_keys)}]")
            if r.legacy is not None:
                # Kafka's format string has a stray closing brace here.
                parts.append(f" isValid: {_jbool(r.legacy[0])} crc: {r.legacy[1]}}}")
            parts.append(r.control_text)
        if r.parsed is not None:
            if r.parsed.key is not None:
                parts.append(f"{prefix}key: {r.parsed.key.text}")
            if r.parsed.value is not None:
                parts.append(f" payload: {r.parsed.value.text}")  # always one space, even first
        parts.append("\n")
        self.out.write("".join(parts))

    def trailing(self, display: str, name: str, position: int, size: int) -> None:
        self.line(f"Found {size} invalid bytes at the end of {name}")

    def error(self, display: str, name: str, position: int | None, message: str) -> None:
        where = f"at position {position} of {name}" if position is not None else f"in {name}"
        self.line(f"Error {where}: {message}")

    def skipped(self, display: str) -> None:
        self.dumping(display, "unknown")
        self.stderr(f"Ignoring unknown file {display}")

    def index_empty(self, display: str) -> None:
        self.line(f"{display} is empty.")

    def sanity(self, display: str, message: str | None) -> None:
        if message is None:
            self.line(f"{display} passed sanity check.")
        else:
            self.line(f"{display} failed sanity check: {message}")

    def offset_index_entry(self, display: str, i: int, offset: int, position: int) -> None:
        self.out.write(f"offset: {offset} position: {position}\n")

    def time_index_entry(self, display: str, i: int, timestamp: int, offset: int) -> None:
        self.out.write(f"timestamp: {timestamp} offset: {offset}\n")

    def aborted_txn(self, display: str, fields: tuple[int, int, int, int, int]) -> None:
        version, pid, first, last, lso = fields
        self.line(
            f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}"
        )

    def producer_entry(self, display: str, e: ProducerStateEntry) -> None:
        text = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} lastTimestamp: {e.last_timestamp} "
        )
        if e.batch_metadata:
            m = e.batch_metadata[0]
            text += (
                f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                f"offsetDelta: {m.offset_delta} timestamp: {m.timestamp}"
            )
        self.line(text)

    def snapshot_corrupt(self, display: str, message: str) -> None:
        self.stderr(message)

    def offset_checkpoint_entry(self, display: str, topic: str, partition: int, offset: int) -> None:
        self.line(f"topic: {topic} partition: {partition} offset: {offset}")

    def leader_epoch_entry(self, display: str, epoch: int, start_offset: int) -> None:
        self.line(f"epoch: {epoch} startOffset: {start_offset}")

    # End-of-run reports, keyed by absolute path as Kafka keys them.

    def index_mismatch(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._index_mismatches.add(abs_path, index_offset, log_offset, put_every_time=True)

    def time_mismatch(self, abs_path: str, index_ts: int, log_ts: int) -> None:
        self._time_mismatches.add(abs_path, index_ts, log_ts)

    def time_out_of_order(self, abs_path: str, index_ts: int, previous_ts: int) -> None:
        self._out_of_order.add(abs_path, index_ts, previous_ts)

    def offset_not_found(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._not_found.add(abs_path, index_offset, log_offset)

    def non_consecutive(self, abs_path: str, offset: int, next_offset: int) -> None:
        self._non_consecutive.add(abs_path, offset, next_offset, put_every_time=True)

    def finish(self) -> None:
        self.out.flush()
        err = self.err
        # Offset-index mismatches and non-consecutive offsets are Scala Lists built by prepending:
        # they print newest first. The time-index reports are ArrayBuffers: oldest first.
        for path, pairs in self._index_mismatches.items():
            err.write(f"Mismatches in :{path}\n")
            for a, b in pairs.reversed():
                err.write(f"  Index offset: {a}, log offset: {b}\n")
        for path, pairs in self._time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{path}\n")
            for a, b in pairs:
                err.write(f"  Index timestamp: {a}, log timestamp: {b}\n")
        for path, pairs in self._out_of_order.items():
            err.write(f"Found out of order timestamp in :{path}\n")
            for a, b in pairs:
                err.write(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n")
        for path, pairs in self._not_found.items():
            err.write("The following indexed offsets are not found in the log.\n")
            for a, b in pairs:
                err.write(f"Indexed offset: {a}, found log offset: {b}\n")
        for path, pairs in self._non_consecutive.items():
            err.write(f"Non-consecutive offsets in {path}\n")
            for a, b in pairs.reversed():
                err.write(f"  {a} is followed by {b}\n")
        for reports in (
            self._index_mismatches,
            self._time_mismatches,
            self._out_of_order,
            self._not_found,
            self._non_consecutive,
        ):
            reports.close()
        super().finish()


class _Reports:
    """One of DumpLogSegments' report maps: path -> pairs, iterated in the Scala map's order."""

    def __init__(self) -> None:
        self._map = _ScalaHashMap()
        self._pairs: dict[str, _PairSpool] = {}

    def add(self, path: str, a: int, b: int, *, put_every_time: bool = False) -> None:
        # The offset-index and non-consecutive maps are updated with put() on every entry; the
        # time-index ones only when the file's first entry arrives.
        if put_every_time or path not in self._map:
            self._map.put(path)
        self._pairs.setdefault(path, _PairSpool()).append(a, b)

    def items(self) -> Iterator[tuple[str, _PairSpool]]:
        for path in self._map.keys():
            yield path, self._pairs[path]

    def close(self) -> None:
        for spool in self._pairs.values():
            spool.close()


class _JsonOutput(_Output):
    """One JSON object per line; reports are written where they are found."""

    def _emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    def fatal(self, display: str, message: str) -> None:
        self._emit({"type": "error", "file": display, "position": None, "message": message})
        super().fatal(display, message)

    def dumping(self, display: str, kind: str, **info: object) -> None:
        self._emit({"type": "file", "file": display, "kind": kind, **info})

    def log_header(self, info: dict) -> None:
        pass  # part of the "file" object

    def deprecated_decoder(self, old: str, new: str) -> None:
        pass

    def batch(self, display: str, b: _BatchInfo) -> None:
        batch = b.batch
        self._emit(
            {
                "type": "batch",
                "file": display,
                "position": b.position,
                "baseOffset": b.base_offset,
                "lastOffset": batch.last_offset,
                "count": batch.count,
                "magic": batch.magic,
                "compression": b.codec,
                "crc": batch.crc,
                "isValid": b.valid,
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
            }
        )

    def record(self, display: str, b: _BatchInfo, r: _RecordInfo, skip_metadata: bool) -> None:
        obj: dict = {"type": "record", "file": display, "batchPosition": b.position, "offset": r.offset}
        if not skip_metadata:
            obj["timestamp"] = r.timestamp
            obj["timestampType"] = b.batch.timestamp_type.kafka_name
            obj["keySize"] = r.key_size
            obj["valueSize"] = r.value_size
            if r.header_keys is not None:
                obj["sequence"] = r.sequence
                obj["headerKeys"] = list(r.header_keys)
            if r.legacy is not None:
                obj["isValid"], obj["crc"] = r.legacy
            obj.update(r.control)
        if r.parsed is not None:
            if r.parsed.error is not None:
                obj["decodeError"] = r.parsed.error
            else:
                if r.parsed.key is not None or r.key_size < 0:
                    obj["key"] = None if r.parsed.key is None else r.parsed.key.json
                if r.parsed.value is not None or r.value_size < 0:
                    obj["value"] = None if r.parsed.value is None else r.parsed.value.json
        self._emit(obj)

    def trailing(self, display: str, name: str, position: int, size: int) -> None:
        self._emit({"type": "trailingBytes", "file": display, "position": position, "size": size})

    def error(self, display: str, name: str, position: int | None, message: str) -> None:
        self._emit({"type": "error", "file": display, "position": position, "message": message})

    def skipped(self, display: str) -> None:
        self._emit({"type": "skipped", "file": display, "reason": "unknown file type"})

    def index_empty(self, display: str) -> None:
        self._emit({"type": "indexEmpty", "file": display})

    def sanity(self, display: str, message: str | None) -> None:
        self._emit({"type": "sanityCheck", "file": display, "passed": message is None, "message": message})

    def offset_index_entry(self, display: str, i: int, offset: int, position: int) -> None:
        self._emit({"type": "offsetIndexEntry", "file": display, "i": i, "offset": offset, "position": position})

    def time_index_entry(self, display: str, i: int, timestamp: int, offset: int) -> None:
        self._emit({"type": "timeIndexEntry", "file": display, "i": i, "timestamp": timestamp, "offset": offset})

    def aborted_txn(self, display: str, fields: tuple[int, int, int, int, int]) -> None:
        version, pid, first, last, lso = fields
        self._emit(
            {
                "type": "abortedTxn",
                "file": display,
                "version": version,
                "producerId": pid,
                "firstOffset": first,
                "lastOffset": last,
                "lastStableOffset": lso,
            }
        )

    def producer_entry(self, display: str, e: ProducerStateEntry) -> None:
        m = e.batch_metadata[0] if e.batch_metadata else None
        self._emit(
            {
                "type": "producerSnapshotEntry",
                "file": display,
                "producerId": e.producer_id,
                "producerEpoch": e.producer_epoch,
                "coordinatorEpoch": e.coordinator_epoch,
                "currentTxnFirstOffset": e.current_txn_first_offset,
                "lastTimestamp": e.last_timestamp,
                "firstSequence": None if m is None else m.first_seq,
                "lastSequence": None if m is None else m.last_seq,
                "lastOffset": None if m is None else m.last_offset,
                "offsetDelta": None if m is None else m.offset_delta,
                "timestamp": None if m is None else m.timestamp,
            }
        )

    def snapshot_corrupt(self, display: str, message: str) -> None:
        self.error(display, display, None, message)

    def offset_checkpoint_entry(self, display: str, topic: str, partition: int, offset: int) -> None:
        self._emit(
            {"type": "offsetCheckpointEntry", "file": display, "topic": topic, "partition": partition, "offset": offset}
        )

    def leader_epoch_entry(self, display: str, epoch: int, start_offset: int) -> None:
        self._emit({"type": "leaderEpochEntry", "file": display, "epoch": epoch, "startOffset": start_offset})

    def index_mismatch(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._emit(
            {"type": "offsetIndexMismatch", "file": abs_path, "indexOffset": index_offset, "logOffset": log_offset}
        )

    def time_mismatch(self, abs_path: str, index_ts: int, log_ts: int) -> None:
        self._emit({"type": "timeIndexMismatch", "file": abs_path, "indexTimestamp": index_ts, "logTimestamp": log_ts})

    def time_out_of_order(self, abs_path: str, index_ts: int, previous_ts: int) -> None:
        self._emit(
            {
                "type": "timeIndexOutOfOrder",
                "file": abs_path,
                "indexTimestamp": index_ts,
                "previousIndexTimestamp": previous_ts,
            }
        )

    def offset_not_found(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._emit(
            {"type": "indexedOffsetNotFound", "file": abs_path, "indexOffset": index_offset, "logOffset": log_offset}
        )

    def non_consecutive(self, abs_path: str, offset: int, next_offset: int) -> None:
        self._emit({"type": "nonConsecutiveOffsets", "file": abs_path, "offset": offset, "nextOffset": next_offset})
