"""The broker's record requests: Produce, ListOffsets and Fetch, one handler method each, and
the rules they apply (Kafka's ``ProduceRequest.validateRecords``, leader epoch fencing, the
error code of each kafkalog error).

Appends (validation, decompression, fsync under ``flush.messages``) and ListOffsets run on the
thread pool so they never stall the other connections; Fetch reads run on the event loop
because a read is an index lookup plus a few ``pread`` calls of batch headers, and the record
bytes are sent by the kernel (the response keeps them as file slices).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from typing import Any

from .. import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Compression, Log, MemoryRecords
from ..filenames import offset_from_file
from ..log import EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP
from ..producer_state.manager import TransactionCoordinatorFencedError
from ..record import MAGIC_V2
from ..errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkalogError,
    LogClosedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from ..protocol import ErrorCode, Request
from ._limits import RateLimitedLog
from ._state import _BrokerState, _Close, _Partition
from ._upconvert import to_v2

_log = logging.getLogger(__package__)
#: Storage failures (a full disk, no descriptor left) repeat with every retry of every client:
#: logged once a minute at most.
_log_storage_error = RateLimitedLog(_log, logging.ERROR)

#: Produce's acks: none, the leader, all in-sync replicas.
_ACKS = (-1, 0, 1)
_NO_ACKS = 0
_ALL_ACKS = -1
#: A request's replica_id: a consumer's (-1), and OffsetsForLeaderEpoch's "debug" one (-2),
#: which may ask a follower.
_CONSUMER = -1
_DEBUGGING_REPLICA = -2
#: The first Fetch version whose consumer requests carry client metadata (KIP-392: a follower may serve them).
_FETCH_FROM_FOLLOWER_VERSION = 11
#: Fetch and ListOffsets isolation_level read_committed.
_READ_COMMITTED = 1
#: Produce requests may carry zstd batches from this version (KIP-110).
_ZSTD_PRODUCE_VERSION = 7
#: From this version Produce carries exactly one v2 batch a partition; below it, message sets
#: of magic 0 or 1, which are converted to v2 (``_upconvert.py``).
_V2_PRODUCE_VERSION = 3
#: "No leader epoch" in a request (skips fencing) and in a response.
_NO_EPOCH = -1
#: A fetch session epoch meaning "no session", and the one that opens a session (KIP-227).
_FINAL_EPOCH = -1
_INITIAL_EPOCH = 0
#: The targets ListOffsets looks up by name rather than by timestamp.
_SPECIAL_TIMESTAMPS = (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP,
)
_MS_PER_SECOND = 1000
#: An offset or timestamp a response does not know (Kafka's -1), and "no preferred replica".
_UNKNOWN = -1
_NO_REPLICA = -1


class _DataHandlers(_BrokerState):
    """The handlers of the requests that append or read records."""


    async def _produce(self, request: Request) -> dict[str, Any] | None:
        body = request.body or {}
        version = request.api_version
        acks = body["acks"]
        # Kafka: transactional records need an authorised transactional id, and this broker
        # authorises none (it has no transaction coordinator).
        refuse = _has_transactional_records(body)
        if refuse:
            self._unsupported(request.client_id, "transactional produce", "answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        jobs: list[tuple[int, int, _Partition, memoryview]] = []
        results: list[list[dict[str, Any]]] = []
        for ti, t in enumerate(body["topic_data"]):
            topic_results = []
            for pi, p in enumerate(t["partition_data"]):
                result = {"index": p["index"], "error_code": ErrorCode.NONE, "base_offset": _UNKNOWN,
                          "log_append_time_ms": _UNKNOWN, "log_start_offset": _UNKNOWN, "record_errors": [], "error_message": None}
                topic_results.append(result)
                partition = self._partition(t["name"], p["index"])
                if refuse:
                    result["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                elif acks not in _ACKS:
                    result["error_code"] = ErrorCode.INVALID_REQUIRED_ACKS
                elif partition is None:
                    result["error_code"] = self._absent_partition_error(t["name"], p["index"])
                elif not partition.state.is_leader:
                    result["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                elif acks == _ALL_ACKS and len(partition.state.isr) < (
                        min_isr := self.replica_manager.min_insync_replicas(t["name"])):
                    # Kafka's Partition.appendRecordsToLeader: refused before the append.
                    result["error_code"] = ErrorCode.NOT_ENOUGH_REPLICAS
                    result["error_message"] = (
                        f"The size of the current ISR {partition.state.isr} is insufficient to satisfy the min.isr "
                        f"requirement of {min_isr} for partition {t['name']}-{p['index']}")
                else:
                    problem = _check_produce_records(version, p["records"])
                    if problem is not None:
                        result["error_code"], result["error_message"] = problem
                    else:
                        jobs.append((ti, pi, partition, p["records"], partition.state.leader_epoch))
            results.append(topic_results)
        waiting: list[tuple[dict[str, Any], _Partition, int, int]] = []
        if jobs:
            outcomes = await self._in_executor(self._append_all, jobs, version < _V2_PRODUCE_VERSION)
            for (ti, pi, partition, _, epoch), (outcome, next_offset) in zip(jobs, outcomes):
                results[ti][pi].update(outcome)
                if next_offset is not None:
                    self.replica_manager.after_append(partition)
                    if acks == _ALL_ACKS:
                        waiting.append((results[ti][pi], partition, next_offset, epoch))
                partition.notify()
        if waiting:
            codes = await self.replica_manager.await_replication(
                [(partition, required, epoch) for _, partition, required, epoch in waiting], body["timeout_ms"])
            for (result, _, _, _), code in zip(waiting, codes):
                if code != ErrorCode.NONE:
                    result["error_code"] = code
        failed = [r for topic_results in results for r in topic_results if r["error_code"] != ErrorCode.NONE]
        if acks == _NO_ACKS:
            if failed:
                # Kafka closes the connection so that an acks=0 producer notices and refreshes.
                _log.info("closing connection after a failed acks=0 produce: %s",
                          "; ".join(f"{r['error_code']!s}" for r in failed))
                raise _Close()
            return None
        return {
            "responses": [
                {"name": t["name"], "partition_responses": topic_results}
                for t, topic_results in zip(body["topic_data"], results)
            ],
            "throttle_time_ms": 0,
        }

    @staticmethod
    def _append_all(jobs: list[tuple[int, int, _Partition, memoryview, int]], legacy: bool
                    ) -> list[tuple[dict[str, Any], int | None]]:
        """Append each job as the leader (blocking); each outcome with the offset after its last
        record (None when nothing was appended)."""
        outcomes: list[tuple[dict[str, Any], int | None]] = []
        for _, _, partition, records, epoch in jobs:
            try:
                batch = to_v2(records) if legacy else MemoryRecords(records)
                # Kafka appends under the partition's leaderIsrUpdateLock: a role change waits.
                with partition.role_lock:
                    state = partition.state
                    # still the leadership the request found (a later epoch of it, after an ISR
                    # change by the controller, appends in that epoch, as Kafka does)
                    if not state.is_leader or epoch < state.leading_since_epoch:
                        outcomes.append(({"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER}, None))
                        continue
                    info = partition.log.append(batch, leader_epoch=state.leader_epoch)
            except (KafkalogError, OSError) as e:
                code = _error_code(e)
                if code in (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.KAFKA_STORAGE_ERROR):
                    _log_storage_error("append to %s-%d failed: %s", partition.topic, partition.index, e)
                outcomes.append(({"error_code": code, "error_message": str(e)}, None))
                continue
            outcomes.append(({
                "base_offset": info.first_offset,
                "log_append_time_ms": info.log_append_time,
                "log_start_offset": info.log_start_offset,
            }, info.last_offset + 1))
        return outcomes

    # -- ListOffsets ------------------------------------------------------------------------------

    async def _list_offsets(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        seen: dict[tuple[str, int], int] = {}
        for t in body["topics"]:
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                seen[key] = seen.get(key, 0) + 1
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition_index"], "error_code": ErrorCode.NONE, "old_style_offsets": [],
                       "timestamp": _UNKNOWN, "offset": _UNKNOWN, "leader_epoch": _NO_EPOCH}
                partitions.append(out)
                partition = self._partition(t["name"], p["partition_index"])
                if seen[(t["name"], p["partition_index"])] > 1:
                    out["error_code"] = ErrorCode.INVALID_REQUEST
                elif partition is None:
                    out["error_code"] = self._absent_partition_error(t["name"], p["partition_index"])
                elif (code := _leader_error(partition, p["current_leader_epoch"])) is not None:
                    out["error_code"] = code
                else:
                    # Kafka's fetchOffsetForTimestamp: a consumer sees up to the high watermark
                    # (read_committed: the last stable offset), a replica up to the log end.
                    log = partition.log
                    if body["replica_id"] != _CONSUMER:
                        bound = log.log_end_offset
                    elif body["isolation_level"] == _READ_COMMITTED:
                        bound = log.last_stable_offset
                    else:
                        bound = log.high_watermark
                    try:
                        found = await self._in_executor(_offset_for_timestamp, log, p["timestamp"], bound)
                    except (KafkalogError, OSError) as e:
                        out["error_code"] = _error_code(e)
                        continue
                    if found is not None:
                        out["timestamp"], out["offset"] = found.timestamp, found.offset
                        out["leader_epoch"] = _NO_EPOCH if found.leader_epoch is None else found.leader_epoch
            topics.append({"name": t["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    # -- Fetch ------------------------------------------------------------------------------------

    async def _fetch(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        # No fetch sessions (KIP-227): every request is a full fetch and the answer's session id
        # is 0, which tells the client to keep sending full fetches.
        if body["session_id"] != 0 and body["session_epoch"] != _FINAL_EPOCH:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                    "responses": []}
        if body["session_id"] == 0 and body["session_epoch"] not in (_INITIAL_EPOCH, _FINAL_EPOCH):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_FETCH_SESSION_EPOCH, "session_id": 0,
                    "responses": []}
        max_bytes = min(body["max_bytes"], self.config.fetch_max_bytes)
        deadline = time.monotonic() + max(0, body["max_wait_ms"]) / _MS_PER_SECOND
        assert self._loop is not None
        while True:
            responses, size, errors, partitions = self._read_fetch(body, max_bytes, request.api_version)
            remaining = deadline - time.monotonic()
            if size >= body["min_bytes"] or errors or not partitions or remaining <= 0 or self._stopping:
                break
            # Long poll (Kafka's DelayedFetch): wait for an append to any requested partition.
            waiter = self._loop.create_future()
            for partition in partitions:
                partition.waiters.add(waiter)
            try:
                await asyncio.wait({waiter}, timeout=remaining)
            finally:
                for partition in partitions:
                    partition.waiters.discard(waiter)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}

    def _read_fetch(self, body: dict[str, Any], max_bytes: int, version: int) -> tuple[list[dict[str, Any]], int, bool, list[_Partition]]:
        """Read every requested partition (Kafka's ``readFromLocalLog``): each gets at most its
        ``partition_max_bytes`` of what is left of ``max_bytes``, and until one partition has
        returned data the first batch is returned whole even when it is larger."""
        remaining = max_bytes
        min_one = True
        replica_id = body["replica_id"]
        follower = replica_id >= 0
        # Kafka's FetchParams.fetchOnlyLeader: a follower reads the leader only; a consumer too,
        # unless its request carries client metadata (v11+, KIP-392), when any replica serves it
        only_leader = follower or (replica_id == _CONSUMER and version < _FETCH_FROM_FOLLOWER_VERSION)
        read_committed = body["isolation_level"] == _READ_COMMITTED
        total = 0
        errors = False
        responses = []
        partitions = []
        for t in body["topics"]:
            out_partitions = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition"], "error_code": ErrorCode.NONE, "high_watermark": _UNKNOWN,
                       "last_stable_offset": _UNKNOWN, "log_start_offset": _UNKNOWN, "aborted_transactions": None,
                       "preferred_read_replica": _NO_REPLICA, "records": b""}
                out_partitions.append(out)
                partition = self._partition(t["topic"], p["partition"])
                if partition is None:
                    out["error_code"] = self._absent_partition_error(t["topic"], p["partition"])
                    errors = True
                    continue
                code = _leader_error(partition, p["current_leader_epoch"], require_leader=only_leader)
                if code is None and not (partition.state.is_leader or partition.state.is_follower):
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # kept here but no longer a replica
                diverging = None
                if code is None:
                    partitions.append(partition)
                    log = partition.log
                    try:
                        if p["last_fetched_epoch"] >= 0:
                            # KIP-320: a fetcher whose log diverges learns where instead of records.
                            diverging = log.diverging_epoch(p["fetch_offset"], p["last_fetched_epoch"])
                        if diverging is not None:
                            slices, size = [], 0
                        else:
                            # A follower reads to the log end; a consumer below the high watermark
                            # (read_committed: below the last stable offset).
                            if follower:
                                bound = log.log_end_offset
                            elif read_committed:
                                bound = log.last_stable_offset
                            else:
                                bound = log.high_watermark
                            slices, size = _read_partition(log, p["fetch_offset"], max(0, min(p["partition_max_bytes"],
                                                                                             remaining)), bound, min_one)
                            if follower:
                                self.replica_manager.follower_fetched(partition, replica_id, p["fetch_offset"])
                    except OffsetOutOfRangeError:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    except (KafkalogError, OSError) as e:
                        code = _error_code(e)
                        _log_storage_error("fetch from %s-%d failed: %s", partition.topic, partition.index, e)
                if code is not None:
                    out["error_code"] = code
                    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                        out["current_leader"] = {"leader_id": partition.state.leader,
                                                 "leader_epoch": partition.state.leader_epoch}
                    errors = True
                    continue
                if size:
                    min_one = False
                remaining = max(0, remaining - size)
                total += size
                out.update(high_watermark=log.high_watermark, last_stable_offset=log.last_stable_offset,
                           log_start_offset=log.log_start_offset, records=slices)
                if diverging is not None:
                    out["diverging_epoch"] = {"epoch": diverging.leader_epoch, "end_offset": diverging.offset}
                    errors = True  # answered at once, as Kafka does for a diverging fetch
            responses.append({"topic": t["topic"], "partitions": out_partitions})
        return responses, total, errors, partitions

    # -- OffsetsForLeaderEpoch ------------------------------------------------------------------------

    async def _offset_for_leader_epoch(self, request: Request) -> dict[str, Any]:
        """Kafka's ``Partition.lastOffsetForLeaderEpoch``: the end offset of the asked epoch in
        this broker's log (the start of the next epoch, or the log end for the latest; the
        largest known epoch below an unknown one), from the leader unless the request is a
        debugging one (replica id -2, which older versions always are)."""
        body = request.body or {}
        require_leader = body["replica_id"] != _DEBUGGING_REPLICA
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                out = {"error_code": ErrorCode.NONE, "partition": p["partition"], "leader_epoch": _NO_EPOCH,
                       "end_offset": _UNKNOWN}
                partitions.append(out)
                partition = self._partition(t["topic"], p["partition"])
                if partition is None:
                    out["error_code"] = self._absent_partition_error(t["topic"], p["partition"])
                    continue
                code = _leader_error(partition, p["current_leader_epoch"], require_leader=require_leader)
                if code is not None:
                    out["error_code"] = code
                    continue
                try:
                    answer = partition.log.end_offset_for_epoch(p["leader_epoch"])
                except (KafkalogError, OSError) as e:
                    out["error_code"] = _error_code(e)
                    continue
                if answer is not None:
                    out["leader_epoch"], out["end_offset"] = answer.leader_epoch, answer.offset
            topics.append({"topic": t["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}


def _has_transactional_records(body: dict[str, Any]) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: the first batch of any partition."""
    for t in body["topic_data"]:
        for p in t["partition_data"]:
            records = p["records"]
            if records is not None:
                try:
                    first = next(iter(MemoryRecords(records).batches()), None)
                except KafkalogError:
                    continue  # the append reports it
                if first is not None and first.magic >= MAGIC_V2 and first.is_transactional:
                    return True
    return False


def _check_produce_records(version: int, records: memoryview | None) -> tuple[ErrorCode, str] | None:
    """Kafka's ``ProduceRequest.validateRecords`` for v3+: exactly one v2 batch, zstd from v7
    (v0-2 carry message sets, converted and checked at the append)."""
    if records is None:
        return ErrorCode.INVALID_RECORD, "Produce request with null records"
    if version < _V2_PRODUCE_VERSION:
        return None
    try:
        batches = iter(MemoryRecords(records).batches())
        first = next(batches, None)
        if first is None:
            return ErrorCode.INVALID_RECORD, (
                f"Produce requests with version {version} must have at least one record batch per partition"
            )
        if first.magic != MAGIC_V2:
            return ErrorCode.INVALID_RECORD, (
                f"Produce requests with version {version} are only allowed to contain record batches with magic "
                "version 2"
            )
        codec = first.compression
        if version < _ZSTD_PRODUCE_VERSION and codec is Compression.ZSTD:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, (
                f"Produce requests with version {version} are not allowed to use ZStandard compression"
            )
        if next(batches, None) is not None:
            return ErrorCode.INVALID_RECORD, (
                f"Produce requests with version {version} are only allowed to contain exactly one record batch per "
                "partition"
            )
    except KafkalogError as e:
        return _error_code(e), str(e)
    return None


#: The Kafka error code of each kafkalog error an append or a read raises, first match wins
#: (a record set too large for a segment is RECORD_LIST_TOO_LARGE, see :func:`_error_code`).
_ERROR_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ErrorCode], ...] = (
    (InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    ((CorruptRecordError, TruncatedRecordError), ErrorCode.CORRUPT_MESSAGE),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (UnsupportedCodecError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (LogClosedError, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # shutting down: retriable
    (OSError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def _error_code(e: BaseException) -> ErrorCode:
    """The Kafka error code for a kafkalog error raised by an append or a read."""
    for types, code in _ERROR_CODES:
        if isinstance(e, types):
            if code is ErrorCode.MESSAGE_TOO_LARGE and "segment size" in str(e):
                return ErrorCode.RECORD_LIST_TOO_LARGE
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _check_epoch(requested: int, current: int) -> ErrorCode | None:
    """Kafka's leader epoch fencing: -1 skips the check."""
    if requested == _NO_EPOCH or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def _leader_error(partition: _Partition, requested_epoch: int, *, require_leader: bool = True) -> ErrorCode | None:
    """Kafka's ``Partition.getLocalLog``: the epoch fencing first (KIP-320), then leadership."""
    code = _check_epoch(requested_epoch, partition.epoch)
    if code is None and require_leader and not partition.state.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


def _offset_for_timestamp(log: Log, timestamp: int, bound: int) -> Any:
    """ListOffsets' lookup, with offsets at or past ``bound`` (the last fetchable offset) out of
    sight: LATEST answers ``bound`` itself."""
    if timestamp == LATEST_TIMESTAMP:
        found = log.offset_for_timestamp(timestamp)
        if found is None or found.offset == bound:
            return found
        return found._replace(offset=bound, leader_epoch=log.leader_epoch_cache.epoch_for_offset(bound))
    if timestamp >= 0 or timestamp in _SPECIAL_TIMESTAMPS:
        found = log.offset_for_timestamp(timestamp)
    else:
        # Any other negative target: Kafka searches for the first record at or after it.
        found = None
        for segment in log.segments:
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, log.log_start_offset)
                break
    if found is not None and timestamp >= 0 and found.offset >= bound:
        return None
    return found


def _read_partition(log: Log, offset: int, max_bytes: int, high_watermark: int, min_one: bool) -> tuple[list, int]:
    """Up to ``max_bytes`` from ``offset``, below the high watermark, as file slices — from
    several segments when one ends before the budget does (Kafka stops at a segment's end)."""
    slices: list = []
    total = 0
    while True:
        try:
            records = log.read(offset, max_bytes - total, max_offset=high_watermark,
                               min_one_message=min_one and not slices)
        except KafkalogError:
            if not slices:
                raise
            break  # the next segment went meanwhile (retention): send what was read
        size = records.size_in_bytes
        if not size:
            break
        slices.append(records)
        total += size
        if total >= max_bytes:
            break
        following = _next_segment_base(log, records)
        if following is None or following >= high_watermark:
            break
        offset = following
    return slices, total


def _next_segment_base(log: Log, records: Any) -> int | None:
    """The base offset of the segment after the one ``records`` ends, if it ends that segment."""
    if records.path == log.active_segment.log.path:
        return None  # the usual case, a read at the head of the log: no list to build
    segments = log.segments
    try:
        base = offset_from_file(records.path)
    except ValueError:
        return None
    bases = [s.base_offset for s in segments]
    i = bisect.bisect_left(bases, base)
    if i + 1 >= len(segments) or bases[i] != base or records.end < segments[i].size:
        return None
    return bases[i + 1]
