"""``kafkalog dump``: Kafka's kafka-dump-log.sh (DumpLogSegments) over the public API."""

from __future__ import annotations

import os
import posixpath
import stat
import struct
from typing import NamedTuple

from .. import ControlRecordType, FileRecords, OffsetIndex, Record, RecordBatch, TimeIndex
from ..checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile, OffsetCheckpointFile
from ..location import Location
from ..producer_state.snapshot import decode_snapshot
from ..recordbatch import COMPRESSION_CODEC_MASK
from ..remote import is_remote, normalize_path
from ..resync import next_valid_batch
from ..transaction_index import TXN_INDEX_ENTRY, TXN_INDEX_VERSION
from ..verify.report import OFFSET_CHECKPOINTS
from ..verify.segment_check import first_batch_base
from ..errors import KafkalogError, RemoteReadError
from ..protocol import (
    KRAFT_CONTROL_RECORDS,
    MessageReader,
    ProtocolError,
    read_message,
    to_json,
)
from ._dump_framing import _classify, _looks_foreign
from ._dump_output import _BatchInfo, _JsonOutput, _RecordInfo, _TextOutput
from ._jvm import (
    _BOOTSTRAP_SNAPSHOT,
    _CODEC_NAMES,
    _absolute,
    _jackson,
    _java_path,
    _parse_long,
)
from ._kafka_messages import (
    _kafka_snapshot_problem,
    _offset_index_problem,
    _time_index_problem,
)

# ------------------------------------------------------------------------------------------------
# The dump


class _Options(NamedTuple):
    files: list[str]
    deep: bool
    print_data: bool
    verify_only: bool
    sanity_only: bool
    skip_metadata: bool
    max_message_size: int
    max_bytes: int | None  # None: the whole file (and "invalid bytes at the end" is reported)
    parser: object  # a parser with parse(record) -> _Parsed
    deprecations: list[tuple[str, str]]


_EXPECTED_NAMES = {
    "log": "<offset>.log",
    "kraftSnapshot": "<20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint",
    "offsetIndex": "<offset>.index",
    "timeIndex": "<offset>.timeindex",
    "transactionIndex": "<offset>.txnindex",
}
#: Read-ahead of the ``.log`` lookups an index dump makes (entry by entry, mostly forward).
_LOOKUP_BLOCK = 1 << 20


class _Dump:
    """Dumps each file in turn (``DumpLogSegments.main``)."""

    def __init__(self, options: _Options, out: _TextOutput | _JsonOutput) -> None:
        self.o = options
        self.out = out
        self.failed = False
        self._dirs: dict[str, Location] = {}  # a remote directory: its listing serves its files

    def _at(self, display: str) -> Location:
        """The file ``display`` names, where it is: a local path as given, a URL read in place
        (the files of one remote directory share its listing)."""
        if not is_remote(display):
            return Location(display)
        parent = posixpath.dirname(display)
        if parent not in self._dirs:
            self._dirs[parent] = Location.of(parent)
        return self._dirs[parent] / posixpath.basename(display)

    @staticmethod
    def _abs(display: str) -> str:
        """How Kafka's reports name the file: absolute (a URL is)."""
        return display if is_remote(display) else _absolute(display)

    def run(self) -> int:
        try:
            for arg in self.o.files:
                self._file(arg)
        finally:
            self.out.finish()
        return 1 if self.failed else 0

    # -- dispatch ----------------------------------------------------------------------------------

    def _file(self, arg: str) -> None:
        if is_remote(arg) or arg.startswith("file://"):  # file://: a local path, named as one
            try:
                display = normalize_path(arg)
            except KafkalogError as e:
                self._fail(arg, e.reason)
                return
        else:
            display = _java_path(arg)
        name = display.rsplit("/", 1)[-1]
        dot = name.rfind(".")
        suffix = name[dot:] if dot >= 0 else None
        handlers = {
            ".log": (self._log, "log"),
            ".checkpoint": (self._log, "kraftSnapshot"),
            ".index": (self._offset_index, "offsetIndex"),
            ".timeindex": (self._time_index, "timeIndex"),
            ".snapshot": (self._producer_snapshot, "producerSnapshot"),
            ".txnindex": (self._txn_index, "transactionIndex"),
        }
        if suffix in handlers:
            handler, kind = handlers[suffix]
        elif suffix is None and name in OFFSET_CHECKPOINTS:  # kafkalog extension
            handler, kind = self._offset_checkpoint, "offsetCheckpoint"
        elif suffix is None and name == LEADER_EPOCH_CHECKPOINT:  # kafkalog extension
            handler, kind = self._leader_epoch_checkpoint, "leaderEpochCheckpoint"
        elif self._at(display).is_dir():
            # A directory is what a new user often gives (Kafka's tool fails on its name).
            self.out.dumping(display, "unknown")
            self._fail(
                display,
                f"Is a directory: dump takes files (--files {display}/*.log dumps its segments; "
                f"kafkalog stat {display} describes them)",
            )
            return
        else:
            self.out.skipped(display)
            return
        info = self._header_info(kind, name)
        if info is None and kind == "log":
            info = self._base_from_first_batch(display)
        if info is None:
            self.out.dumping(display, kind)
            self._fail(display, f"not a Kafka file name: expected {_EXPECTED_NAMES[kind]}")
            return
        self.out.dumping(display, kind, **info)
        problem = _unreadable(self._at(display))
        if problem is not None:
            self._fail(display, problem)
            return
        try:
            handler(display, name, info)
        except BrokenPipeError:
            raise
        except RemoteReadError as e:  # a request failed: where, and why
            self._fail(display, f"position {e.position}: {e.reason}" if e.position is not None else e.reason)
        except OSError as e:
            self._fail(display, e.strerror or str(e))
        except KafkalogError as e:
            self._fail(display, e.reason)

    @staticmethod
    def _header_info(kind: str, name: str) -> dict | None:
        """What the file name says (Kafka parses it, and fails on a name it cannot parse)."""
        prefix = name.split(".")[0]
        if kind == "kraftSnapshot":
            if name == _BOOTSTRAP_SNAPSHOT:
                return {"bootstrap": True}
            # Snapshots.parse: a 20-digit end offset, '-', a 10-digit epoch.
            if len(name) < 31:
                return None
            offset, epoch = _parse_long(name[:20]), _parse_long(name[21:31])
            if offset is None or epoch is None or not -(2**31) <= epoch < 2**31:
                return None
            return {"snapshotEndOffset": offset, "snapshotEpoch": epoch}
        if kind in ("log", "offsetIndex", "timeIndex", "transactionIndex"):
            base = _parse_long(prefix)
            return None if base is None else {"baseOffset": base}
        return {}

    def _base_from_first_batch(self, display: str) -> dict | None:
        """A ``.log`` not named ``<offset>.log`` (``salvage`` output, say; Kafka's tool refuses
        it): its first batch's base offset, with a note on stderr; None when it has no valid batch."""
        base = first_batch_base(self._at(display))
        if base is None:
            return None
        self.out.stderr(
            f"kafkalog dump: note: {display} is not named <offset>.log; its base offset {base} is taken from its "
            f"first batch"
        )
        return {"baseOffset": base, "baseOffsetFrom": "firstBatch"}

    def _fail(self, display: str, message: str) -> None:
        self.failed = True
        self.out.fatal(display, message)

    def _error(self, display: str, name: str, position: int | None, message: str) -> None:
        """Corruption Kafka's tool would stop on: reported where it is; the dump goes on."""
        self.failed = True
        self.out.error(display, name, position, message)

    # -- .log and KRaft .checkpoint ----------------------------------------------------------------

    def _log(self, display: str, name: str, info: dict) -> None:
        # Kafka builds its decoders (printing any deprecation note) before dumpLog prints its header.
        for old, new in self.o.deprecations:
            self.out.deprecated_decoder(old, new)
        self.out.log_header(info)
        abs_path = self._abs(display)
        max_bytes = self.o.max_bytes
        limited = max_bytes is not None
        where = self._at(display)
        # Remote: read ahead in bounded blocks, never past the bytes dumped (--max-bytes).
        window = None if not where.is_remote else where.size() if max_bytes is None else min(where.size(), max_bytes)
        with where.open_records(end=window) as fr:
            end = fr.size_in_bytes if max_bytes is None else min(fr.size_in_bytes, max_bytes)
            state = _LogState(abs_path)
            pos = 0
            batches = 0
            while pos < end:
                failure: str | None = None
                it = fr.slice(pos, end - pos).batches()
                while True:
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    except RemoteReadError:
                        raise  # the read failed, not the bytes: not a finding about them
                    except KafkalogError as e:
                        failure = e.reason
                        break
                    self._batch(display, name, batch, state)
                    batches += 1
                    pos = batch.position + batch.size_in_bytes  # type: ignore[operator]
                if pos >= end:
                    break
                stop = _classify(fr, pos, end, failure)
                if limited and stop.tail:
                    break  # a batch cut by --max-bytes
                resync = next_valid_batch(fr, pos + 1, end, max_batch_size=self.o.max_message_size)
                if resync is None:
                    if batches == 0 and pos == 0 and _looks_foreign(fr, end):
                        self._fail(display, f"not a Kafka log: no valid batch in its {end} bytes")
                        return
                    if not stop.tail:
                        self._error(display, name, pos, stop.reason)
                    if not limited:
                        self.out.trailing(display, name, pos, end - pos)
                    return
                found = resync.position
                skipped = f"skipped {found - pos} bytes to the next valid batch at position {found}"
                self._error(display, name, pos, f"{stop.reason}; {skipped}")
                pos = found

    def _batch(self, display: str, name: str, batch: RecordBatch, state: _LogState) -> None:
        position: int = batch.position  # type: ignore[assignment]
        codec_id = batch.attributes & COMPRESSION_CODEC_MASK
        if codec_id >= len(_CODEC_NAMES):  # CompressionType.forId throws
            self._error(display, name, position, f"unknown compression codec id {codec_id} in the batch attributes")
            return
        try:
            valid = batch.compute_crc() == batch.crc
        except RemoteReadError:
            raise  # the read failed, not the bytes: not a finding about them
        except KafkalogError as e:
            self._error(display, name, position, e.reason)
            return
        records: list[Record] | None = None
        failure: KafkalogError | None = None
        if self.o.deep:
            try:
                records = batch.records()
            except RemoteReadError:
                raise  # the read failed, not the bytes: not a finding about them
            except KafkalogError as e:
                failure = e
        # A v0/v1 wrapper's base offset is its first inner offset: known once it is decoded.
        base_offset = batch.base_offset if batch.magic >= 2 or codec_id == 0 or records else None
        info = _BatchInfo(batch, position, _CODEC_NAMES[codec_id], valid, base_offset)
        self.out.batch(display, info)
        if failure is not None:
            self._error(display, name, failure.position if failure.position is not None else position, failure.reason)
        if not records:
            return
        v2 = batch.magic >= 2
        control = batch.is_control
        legacy_valid = valid if _CODEC_NAMES[codec_id] == "none" else True
        for record in records:
            state.next_offset(record.offset, self.out)
            control_text, control_json, control_error = ("", {}, None)
            if control and not self.o.skip_metadata:
                control_text, control_json, control_error = _control_tail(record)
            parsed = None
            if self.o.print_data and not control:
                parsed = self.o.parser.parse(record)  # type: ignore[attr-defined]
            self.out.record(
                display,
                info,
                _RecordInfo(
                    record.offset,
                    record.timestamp,
                    -1 if record.key is None else len(record.key),
                    -1 if record.value is None else len(record.value),
                    record.sequence if v2 else None,
                    tuple(h.key for h in record.headers) if v2 else None,
                    None if v2 else (legacy_valid, record.crc),  # type: ignore[arg-type]
                    control_text,
                    control_json,
                    parsed,
                ),
                self.o.skip_metadata,
            )
            if control_error is not None:
                self._error(display, name, position, f"control record at offset {record.offset}: {control_error}")
            if parsed is not None and parsed.kafka_fails:
                self.failed = True

    # -- .index --------------------------------------------------------------------------------------

    def _offset_index(self, display: str, name: str, info: dict) -> None:
        base = info["baseOffset"]
        data = self._at(display).read_bytes()  # one request when remote
        length = len(data)
        entries = length // OffsetIndex.DTYPE.itemsize
        if entries == 0:
            self.out.index_empty(display)
            return
        index = OffsetIndex.from_bytes(data, base, path=display)
        try:
            if self.o.sanity_only:
                self._sanity(display, _offset_index_problem(index, self._abs(display), length))
                return
            log_display = _sibling(display, name, ".log")
            problem = _unreadable(self._at(log_display))
            if problem is not None:
                self._fail(display, f"cannot verify against {log_display}: {problem}")
                return
            abs_path = self._abs(display)
            with self._at(log_display).open_records(block_size=_LOOKUP_BLOCK) as fr:
                log_name = log_display.rsplit("/", 1)[-1]
                for i in range(entries):
                    entry = index.entry(i)
                    # A crash can leave zero entries in the sparse file: stop at the first one.
                    if entry.offset == base and i > 0:
                        break
                    last = self._first_batch_last_offset(display, log_name, fr, entry.position, i)
                    if last is not None and last != entry.offset:
                        self.out.index_mismatch(abs_path, entry.offset, last)
                    if not self.o.verify_only:
                        self.out.offset_index_entry(display, i, entry.offset, entry.position)
        finally:
            index.close()

    def _first_batch_last_offset(
        self, display: str, log_name: str, fr: FileRecords, position: int, i: int
    ) -> int | None:
        """The last offset of the batch at ``position`` read within --max-message-size bytes."""
        if position < 0 or position >= fr.size_in_bytes:
            beyond = f"index entry {i} points beyond the end of the log ({fr.size_in_bytes} bytes)"
            self._error(display, log_name, position, beyond)
            return None
        try:
            batch = next(fr.slice(position, self.o.max_message_size).batches(), None)
        except RemoteReadError:
            raise  # the read failed, not the bytes: not a finding about them
        except KafkalogError as e:
            self._error(display, log_name, position, f"index entry {i}: {e.reason}")
            return None
        if batch is None:
            too_big = f"no whole batch within --max-message-size ({self.o.max_message_size}) bytes"
            self._error(display, log_name, position, f"index entry {i}: {too_big}")
            return None
        return batch.last_offset

    def _sanity(self, display: str, problem: str | None) -> None:
        if problem is not None:
            self.failed = True
        self.out.sanity(display, problem)

    # -- .timeindex ----------------------------------------------------------------------------------

    def _time_index(self, display: str, name: str, info: dict) -> None:
        base = info["baseOffset"]
        data = self._at(display).read_bytes()
        length = len(data)
        entries = length // TimeIndex.DTYPE.itemsize
        tindex = TimeIndex.from_bytes(data, base, path=display)
        try:
            if self.o.sanity_only:
                self._sanity(display, _time_index_problem(tindex, self._abs(display), length))
                return
            if entries == 0:
                return
            log_display = _sibling(display, name, ".log")
            index_display = _sibling(display, name, ".index")
            for needed in (log_display, index_display):
                problem = _unreadable(self._at(needed))
                if problem is not None:
                    self._fail(display, f"cannot verify against {needed}: {problem}")
                    return
            oindex = OffsetIndex.from_bytes(self._at(index_display).read_bytes(), base, path=index_display)
            try:
                with self._at(log_display).open_records(block_size=_LOOKUP_BLOCK) as fr:
                    self._time_entries(display, log_display.rsplit("/", 1)[-1], tindex, oindex, fr, entries)
            finally:
                oindex.close()
        finally:
            tindex.close()

    def _time_entries(
        self, display: str, log_name: str, tindex: TimeIndex, oindex: OffsetIndex, fr: FileRecords, entries: int
    ) -> None:
        abs_path = self._abs(display)
        previous = -1  # RecordBatch.NO_TIMESTAMP
        for i in range(entries):
            timestamp, offset = tindex.entry(i)
            if offset == tindex.base_offset and i > 0:
                break
            position = oindex.lookup(offset).position
            found = self._batch_holding(display, log_name, fr, position, offset)
            if found is not False:
                if found is None:
                    self.out.offset_not_found(abs_path, offset, -1)
                elif found.last_offset != offset:
                    self.out.offset_not_found(abs_path, offset, found.last_offset)
                else:
                    try:
                        max_ts = max((r.timestamp for r in found.records()), default=-1)
                        max_ts = max(max_ts, -1)
                    except RemoteReadError:
                        raise  # the read failed, not the bytes: not a finding about them
                    except KafkalogError as e:
                        self._error(display, log_name, found.position, e.reason)
                    else:
                        if max_ts != timestamp:
                            self.out.time_mismatch(abs_path, timestamp, max_ts)
                        if previous >= timestamp:
                            self.out.time_out_of_order(abs_path, timestamp, previous)
            if not self.o.verify_only:
                self.out.time_index_entry(display, i, timestamp, offset)
            previous = timestamp

    def _batch_holding(self, display: str, log_name: str, fr: FileRecords, position: int, offset: int):
        """The first batch from ``position`` whose last offset is >= ``offset``; None if there
        is none, False if the log could not be read there (reported)."""
        if position < 0 or position > fr.size_in_bytes:
            beyond = f"time index lookup of offset {offset} points beyond the end of the log"
            self._error(display, log_name, position, beyond)
            return False
        try:
            for batch in fr.slice(position).batches():
                if batch.last_offset >= offset:
                    return batch
        except RemoteReadError:
            raise  # the read failed, not the bytes: not a finding about them
        except KafkalogError as e:
            self._error(display, log_name, e.position, f"looking for offset {offset}: {e.reason}")
            return False
        return None

    # -- .txnindex -----------------------------------------------------------------------------------

    def _txn_index(self, display: str, name: str, info: dict) -> None:
        entry = TXN_INDEX_ENTRY
        position = 0
        data = self._at(display).read_bytes()
        whole = len(data) - len(data) % entry.size  # a partial last entry is ignored, as Kafka's iterator does
        for fields in entry.iter_unpack(memoryview(data)[:whole]):
            if fields[0] > TXN_INDEX_VERSION:  # AbortedTxn.CURRENT_VERSION
                self._error(
                    display,
                    name,
                    position,
                    f"Unexpected aborted transaction version {fields[0]} in transaction index "
                    f"{self._abs(display)}, current version is 0",
                )
                return
            self.out.aborted_txn(display, fields)
            position += entry.size

    # -- producer .snapshot --------------------------------------------------------------------------

    def _producer_snapshot(self, display: str, name: str, info: dict) -> None:
        data = self._at(display).read_bytes()
        problem = _kafka_snapshot_problem(data)
        if problem is None:
            try:
                entries = decode_snapshot(data, file=display)
            except KafkalogError as e:
                problem = e.reason
        if problem is not None:
            self.failed = True
            self.out.snapshot_corrupt(display, problem)
            return
        for entry in entries:
            self.out.producer_entry(display, entry)

    # -- text checkpoints (kafkalog extension) -------------------------------------------------------

    def _offset_checkpoint(self, display: str, name: str, info: dict) -> None:
        try:
            offsets = OffsetCheckpointFile(display).parse(self._at(display).read_bytes())
        except KafkalogError as e:
            self._error(display, name, e.position, e.reason)
            return
        for (topic, partition), offset in offsets.items():
            self.out.offset_checkpoint_entry(display, topic, partition, offset)

    def _leader_epoch_checkpoint(self, display: str, name: str, info: dict) -> None:
        try:
            entries = LeaderEpochCheckpointFile(display).parse(self._at(display).read_bytes())
        except KafkalogError as e:
            self._error(display, name, e.position, e.reason)
            return
        for epoch, start_offset in entries:
            self.out.leader_epoch_entry(display, epoch, start_offset)


class _LogState:
    """Per-log state of deep iteration: the last offset seen, for the non-consecutive report."""

    __slots__ = ("abs_path", "last")

    def __init__(self, abs_path: str) -> None:
        self.abs_path = abs_path
        self.last = -1

    def next_offset(self, offset: int, out: _TextOutput | _JsonOutput) -> None:
        # As Kafka: -1 means "none yet", so the first offset is never compared.
        if self.last != -1 and offset != self.last + 1:
            out.non_consecutive(self.abs_path, self.last, offset)
        self.last = offset


def _control_tail(record: Record) -> tuple[str, dict, str | None]:
    """The control-record part of a record line: text, --json fields, and an error if the
    record does not decode (Kafka's tool would stop there)."""
    key = record.key or b""
    type_id = struct.unpack_from(">h", key, 2)[0] if len(key) >= 4 else -1
    ctype = ControlRecordType.parse(type_id)
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        epoch = record.coordinator_epoch
        return (
            f" endTxnMarker: {ctype.name} coordinatorEpoch: {epoch}",
            {"controlType": ctype.name, "coordinatorEpoch": epoch},
            None,
        )
    if ctype in KRAFT_CONTROL_RECORDS:
        label, message = KRAFT_CONTROL_RECORDS[ctype]
        try:
            if record.value is None:
                raise ProtocolError("the record has no value")
            # ControlRecordUtils reads version 0; the JSON is written at the record's own
            # "version" field, which must therefore be 0 too.
            values = read_message(message, MessageReader(record.value), 0)
            if values["version"] != 0:
                raise ProtocolError(f"Can't write version {values['version']} of {message.name}")
        except ProtocolError as e:
            return "", {"controlType": ctype.name}, str(e)
        data = to_json(message, values, 0)
        return f" {label} {_jackson(data)}", {"controlType": ctype.name, "control": data}, None
    return f" controlType: {ctype.name}({type_id})", {"controlType": ctype.name, "controlTypeId": type_id}, None


def _sibling(display: str, name: str, suffix: str) -> str:
    """The file of the same segment with another suffix (Kafka: ``name.split("\\\\.")(0) + suffix``
    in the absolute parent directory)."""
    parent = display.rsplit("/", 1)[0] if "/" in display else ""
    stem = name.split(".")[0] + suffix
    return f"{parent}/{stem}" if parent or display.startswith("/") else stem


def _unreadable(where: Location) -> str | None:
    """Why ``where`` cannot be dumped (missing, a directory, not readable), or None."""
    if where.is_remote:  # what the listings say; a read that fails later is reported then
        if where.is_file():
            return None
        return "Is a directory" if where.is_dir() else "No such file or directory"
    path = str(where)
    try:
        st = os.stat(path)
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return "Is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "Permission denied"
    return None
