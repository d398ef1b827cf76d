"""A follower's fetcher: one thread per source broker that copies the partitions this broker
follows from their leader there (Kafka's ``AbstractFetcherThread`` and ``ReplicaFetcherThread``).

Each partition is in one of two named states (Kafka's ``PartitionFetchState``):

- **fetching** from ``fetch_offset`` with ``last_fetched_epoch`` (the follower log's latest
  epoch), in Fetch v12 requests with ``replica_id`` = this broker. The leader answers records
  (appended with :func:`kafkalog.follower.append_fetched`, then its high watermark and log start
  offset taken with :func:`kafkalog.follower.apply_leader_offsets`), or a diverging epoch
  (KIP-320: truncate with :func:`kafkalog.follower.truncation_for` and carry on), or
  OFFSET_OUT_OF_RANGE (ask the leader's log start and end with ListOffsets, then
  :func:`kafkalog.follower.fetch_offset_after_out_of_range`);
- **truncating**: a truncation that was not complete (KIP-279: the leader named an epoch this
  log does not know) asks the leader again with OffsetsForLeaderEpoch for the log's now latest
  epoch, until a truncation completes.

A partition whose request failed (a fenced or unknown leader epoch, a leader that moved, a
network error) is **delayed** for ``replica.fetch.backoff.ms`` before the next try.

Thread safety: :meth:`ReplicaFetcher.add_partitions`, :meth:`remove_partitions` and
:meth:`shutdown` may be called from any thread. The fetcher thread holds ``_lock`` while it
writes to a log, so once :meth:`remove_partitions` returns the fetcher no longer touches those
logs (a new leader may then write to them). The thread never waits for another thread while it
holds the lock.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log, MemoryRecords, OffsetAndEpoch
from ..errors import KafkalogError
from ..follower import append_fetched, apply_leader_offsets, fetch_offset_after_out_of_range, truncate, truncation_for
from ..protocol import ApiKey, ErrorCode, ProtocolError, decode_response, encode_request
from ._limits import RateLimitedLog

_log = logging.getLogger(__package__)
#: A failing follower append repeats at every backoff: logged once a minute at most.
_log_append_error = RateLimitedLog(_log, logging.ERROR)
_log_round_error = RateLimitedLog(_log, logging.ERROR)

#: The request versions the fetcher speaks (the ones this broker serves, with KIP-320's fields).
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 5
#: How long a request may take before the connection is dropped (Kafka's
#: ``replica.socket.timeout.ms``, 30 s), on top of the fetch's own wait.
_SOCKET_TIMEOUT_S = 30.0
_MS = 1000
#: Fetch isolation "read uncommitted": a follower's fetch ignores it (replica_id decides).
_READ_UNCOMMITTED = 0
_NO_EPOCH = -1
_SIZE = struct.Struct(">i")
#: The most a response frame may be (a corrupt size prefix is not an allocation request).
_MAX_FRAME = 1 << 30

#: Errors after which a partition waits ``replica.fetch.backoff.ms`` and tries again.
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.LEADER_NOT_AVAILABLE,
})


@dataclass
class FetchState:
    """One followed partition (Kafka's ``PartitionFetchState``)."""

    log: Log
    leader_epoch: int
    fetch_offset: int
    truncating: bool = False
    delayed_until: float = 0.0


@dataclass(frozen=True)
class FetcherSettings:
    """The ``replica.fetch.*`` settings (Kafka's names)."""

    broker_id: int
    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1_000


class _Client:
    """A blocking Kafka-protocol connection to one broker (requests answered in order)."""

    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0

    def call(self, api_key: int, version: int, body: dict[str, Any], client_id: str) -> dict[str, Any]:
        self._correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self._correlation_id, body, client_id=client_id))
        (size,) = _SIZE.unpack(self._exactly(_SIZE.size))
        if not 0 < size <= _MAX_FRAME:
            raise ProtocolError(f"response frame size {size} out of range")
        correlation_id, response = decode_response(api_key, version, self._exactly(size))
        if correlation_id != self._correlation_id:
            raise ProtocolError(f"response to correlation id {correlation_id}, expected {self._correlation_id}")
        return response

    def _exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            read = self.sock.recv_into(view[got:], n - got)
            if not read:
                raise ConnectionError("connection closed by the leader")
            got += read
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class ReplicaFetcher:
    """The fetcher thread for one source broker (see the module docstring).

    Args:
        source: the source broker's id.
        address: returns the source broker's current ``(host, port)``, or None when it is not
            live (the fetcher then backs off).
        settings: this broker's id and the ``replica.fetch.*`` settings.
        on_change: called (from the fetcher thread, without the lock) with the ``(topic,
            partition)`` keys whose logs changed, so the broker can wake waiting requests.
    """

    def __init__(self, source: int, address: Callable[[], tuple[str, int] | None], settings: FetcherSettings,
                 on_change: Callable[[list[tuple[str, int]]], None] | None = None) -> None:
        self.source = source
        self._address = address
        self._settings = settings
        self._on_change = on_change or (lambda keys: None)
        self._partitions: dict[tuple[str, int], FetchState] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopping = False
        self._client: _Client | None = None
        self._client_id = f"broker-{settings.broker_id}-fetcher-{source}"
        self._thread = threading.Thread(target=self._run, name=f"kafkalog-replica-fetcher-{settings.broker_id}-{source}",
                                        daemon=True)
        self._thread.start()

    # -- control (any thread) -----------------------------------------------------------------

    def add_partitions(self, partitions: dict[tuple[str, int], tuple[Log, int]]) -> None:
        """Start following each ``(topic, partition) -> (log, leader_epoch)`` (Kafka's
        ``addPartitions``): from the log end with the log's latest epoch as the last fetched
        epoch, so that the leader's first answer says where the logs diverge (KIP-320). A log
        without epochs (written before KIP-101) is truncated to its high watermark first
        (Kafka's ``truncateToHighWatermark``)."""
        with self._lock:
            for key, (log, leader_epoch) in partitions.items():
                if log.latest_epoch is None and log.log_end_offset > log.high_watermark:
                    truncate(log, truncation_for(log, None, fetch_offset=log.high_watermark))
                self._partitions[key] = FetchState(log, leader_epoch, log.log_end_offset)
            self._wake.notify_all()

    def remove_partitions(self, keys: list[tuple[str, int]]) -> None:
        """Stop following these partitions; returns once the fetcher no longer writes to them."""
        with self._lock:
            for key in keys:
                self._partitions.pop(key, None)

    @property
    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def fetch_state(self, key: tuple[str, int]) -> FetchState | None:
        """A copy of one partition's fetch state (for tests and inspection)."""
        with self._lock:
            state = self._partitions.get(key)
            return None if state is None else FetchState(**vars(state))

    def shutdown(self) -> None:
        """Ask the thread to stop (it closes its connection); :meth:`join` waits for it."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
            client = self._client
        if client is not None:
            client.close()  # a blocked recv returns at once

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopped():
                try:
                    self._do_work()
                except (OSError, ProtocolError) as e:
                    if self._stopped():
                        break
                    _log.info("fetcher %s from broker %d: %s; retrying in %d ms", self._client_id, self.source, e,
                              self._settings.backoff_ms)
                    self._drop_client()
                    self._backoff_all()
                except Exception as e:  # Kafka's fetcher survives any failure of a round, and so does this one
                    if self._stopped():
                        break
                    _log_round_error("fetcher %s from broker %d failed a round (%r); retrying", self._client_id,
                                     self.source, e)
                    self._drop_client()
                    self._backoff_all()
        finally:
            self._drop_client()

    def _stopped(self) -> bool:
        with self._lock:
            return self._stopping

    def _do_work(self) -> None:
        """One round (Kafka's ``doWork``): truncation where needed, then one Fetch."""
        truncating = self._ready(truncating=True)
        if truncating:
            self._truncate_with_epochs(truncating)
        fetching = self._ready(truncating=False)
        if not fetching:
            self._idle()
            return
        client = self._connect()
        if client is None:
            self._backoff_all()
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), state in fetching.items():
            latest = state.log.latest_epoch
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": state.leader_epoch, "fetch_offset": state.fetch_offset,
                "last_fetched_epoch": _NO_EPOCH if latest is None else latest,
                "log_start_offset": state.log.log_start_offset, "partition_max_bytes": self._settings.max_bytes,
            })
        body = {
            "replica_id": self._settings.broker_id, "max_wait_ms": self._settings.wait_max_ms,
            "min_bytes": self._settings.min_bytes, "max_bytes": self._settings.response_max_bytes,
            "isolation_level": _READ_UNCOMMITTED, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": "",
        }
        response = client.call(ApiKey.FETCH, FETCH_VERSION, body, self._client_id)
        if response["error_code"] != ErrorCode.NONE:
            raise ProtocolError(f"fetch answered with error {ErrorCode(response['error_code']).name}")
        changed: list[tuple[str, int]] = []
        out_of_range: dict[tuple[str, int], FetchState] = {}
        with self._lock:
            for t in response["responses"]:
                for p in t["partitions"]:
                    key = (t["topic"], p["partition_index"])
                    state = self._partitions.get(key)
                    if state is None or state is not fetching.get(key) or state.truncating:
                        continue  # removed or re-added meanwhile: this answer is stale
                    code = p["error_code"]
                    if code == ErrorCode.NONE:
                        if self._process(key, state, p):
                            changed.append(key)
                    elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        out_of_range[key] = state
                    else:
                        self._delay(key, state, code)
        if out_of_range:
            self._handle_out_of_range(client, out_of_range)
        if changed:
            self._on_change(changed)

    def _process(self, key: tuple[str, int], state: FetchState, p: dict[str, Any]) -> bool:
        """Take one partition's answer (Kafka's ``processPartitionData``); whether its log changed.
        Called with the lock held."""
        log = state.log
        diverging = p["diverging_epoch"]
        if diverging["epoch"] >= 0:
            # KIP-320: the leader says where this log stops agreeing with its own.
            answer = OffsetAndEpoch(diverging["end_offset"], diverging["epoch"])
            return self._apply_truncation(key, state, answer)
        records = p["records"]
        changed = False
        try:
            if records is not None and len(records):
                for chunk in _segment_sized(records, log.config.segment_bytes):
                    append_fetched(log, chunk)
                changed = True
            moved = apply_leader_offsets(log, high_watermark=p["high_watermark"],
                                         log_start_offset=p["log_start_offset"])
            changed = changed or moved is not None
        except (KafkalogError, OSError) as e:
            _log_append_error("follower append to %s-%d from broker %d failed: %s", key[0], key[1], self.source, e)
            self._delay(key, state, ErrorCode.KAFKA_STORAGE_ERROR)
            return changed
        state.fetch_offset = log.log_end_offset
        return changed

    def _apply_truncation(self, key: tuple[str, int], state: FetchState, answer: OffsetAndEpoch | None) -> bool:
        """Truncate to where the leader's answer says (KIP-101/279); ask again while the
        truncation is not complete. Called with the lock held."""
        log = state.log
        truncation = truncation_for(log, answer, fetch_offset=log.high_watermark)
        try:
            removed = truncate(log, truncation)
        except (KafkalogError, OSError) as e:
            _log.error("truncating %s-%d failed: %s", key[0], key[1], e)
            self._delay(key, state, ErrorCode.KAFKA_STORAGE_ERROR)
            return False
        if removed:
            _log.info("truncated %s-%d to offset %d (leader broker %d, epoch %d)", key[0], key[1], truncation.offset,
                      self.source, state.leader_epoch)
        state.truncating = not truncation.completed
        state.fetch_offset = log.log_end_offset
        return removed

    def _truncate_with_epochs(self, truncating: dict[tuple[str, int], FetchState]) -> None:
        """OffsetsForLeaderEpoch for each truncating partition's latest epoch, then truncate
        (Kafka's ``truncateToEpochEndOffsets``)."""
        client = self._connect()
        if client is None:
            self._backoff_all()
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), state in truncating.items():
            latest = state.log.latest_epoch
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": state.leader_epoch,
                "leader_epoch": _NO_EPOCH if latest is None else latest,
            })
        body = {"replica_id": self._settings.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        _log.debug("asking broker %d where the latest epochs of %s end", self.source, sorted(truncating))
        response = client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body, self._client_id)
        changed = []
        with self._lock:
            for t in response["topics"]:
                for p in t["partitions"]:
                    key = (t["topic"], p["partition"])
                    state = self._partitions.get(key)
                    if state is None or state is not truncating.get(key):
                        continue
                    if p["error_code"] != ErrorCode.NONE:
                        self._delay(key, state, p["error_code"])
                        continue
                    answer = None if p["end_offset"] < 0 else OffsetAndEpoch(p["end_offset"], p["leader_epoch"])
                    if self._apply_truncation(key, state, answer):
                        changed.append(key)
        if changed:
            self._on_change(changed)

    def _handle_out_of_range(self, client: _Client, states: dict[tuple[str, int], FetchState]) -> None:
        """Ask the leader for its log start and end (ListOffsets as a replica), then move the
        fetch offset as Kafka's ``fetchOffsetAndTruncate`` does."""
        ends = {}
        for target in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            topics: dict[str, list[dict[str, Any]]] = {}
            for (topic, index), state in states.items():
                topics.setdefault(topic, []).append({"partition_index": index, "current_leader_epoch": state.leader_epoch,
                                                     "timestamp": target})
            body = {"replica_id": self._settings.broker_id, "isolation_level": _READ_UNCOMMITTED,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            response = client.call(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, self._client_id)
            for t in response["topics"]:
                for p in t["partitions"]:
                    ends.setdefault((t["name"], p["partition_index"]), {})[target] = (p["error_code"], p["offset"])
        changed = []
        with self._lock:
            for key, state in states.items():
                if self._partitions.get(key) is not state:
                    continue
                answers = ends.get(key, {})
                start, end = answers.get(EARLIEST_TIMESTAMP), answers.get(LATEST_TIMESTAMP)
                if start is None or end is None or start[0] != ErrorCode.NONE or end[0] != ErrorCode.NONE:
                    self._delay(key, state, ErrorCode.OFFSET_OUT_OF_RANGE)
                    continue
                try:
                    state.fetch_offset = fetch_offset_after_out_of_range(
                        state.log, leader_log_start_offset=start[1], leader_log_end_offset=end[1])
                except (KafkalogError, OSError) as e:
                    _log.error("resetting %s-%d after OFFSET_OUT_OF_RANGE failed: %s", key[0], key[1], e)
                    self._delay(key, state, ErrorCode.KAFKA_STORAGE_ERROR)
                    continue
                changed.append(key)
        if changed:
            self._on_change(changed)

    # -- helpers -----------------------------------------------------------------------------------

    def _ready(self, *, truncating: bool) -> dict[tuple[str, int], FetchState]:
        now = time.monotonic()
        with self._lock:
            return {k: s for k, s in self._partitions.items() if s.truncating == truncating and s.delayed_until <= now}

    def _delay(self, key: tuple[str, int], state: FetchState, code: int) -> None:
        """Back one partition off for ``replica.fetch.backoff.ms`` (lock held)."""
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        level = logging.DEBUG if code in _RETRIABLE else logging.WARNING
        _log.log(level, "fetch of %s-%d from broker %d: %s; backing off", key[0], key[1], self.source, name)
        state.delayed_until = time.monotonic() + self._settings.backoff_ms / _MS

    def _backoff_all(self) -> None:
        with self._lock:
            for key, state in self._partitions.items():
                state.delayed_until = time.monotonic() + self._settings.backoff_ms / _MS
            self._wake.wait(self._settings.backoff_ms / _MS)

    def _idle(self) -> None:
        """Nothing to fetch now: wait until a partition is added or the earliest delay ends."""
        with self._lock:
            if self._stopping:
                return
            pending = [s.delayed_until for s in self._partitions.values()]
            timeout = max(0.0, min(pending) - time.monotonic()) if pending else self._settings.backoff_ms / _MS
            self._wake.wait(max(timeout, 0.001))

    def _connect(self) -> _Client | None:
        with self._lock:
            client = self._client
        if client is not None:
            return client
        address = self._address()
        if address is None:
            return None
        timeout = _SOCKET_TIMEOUT_S + self._settings.wait_max_ms / _MS
        client = _Client(address, timeout)
        with self._lock:
            if self._stopping:
                client.close()
                return None
            self._client = client
        return client

    def _drop_client(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _segment_sized(records: memoryview, segment_bytes: int) -> list[memoryview]:
    """A fetch answer as runs of whole batches each no larger than a segment: an append larger
    than ``segment.bytes`` is refused (Kafka's ``RecordBatchTooLargeException``), while the
    leader answers up to ``replica.fetch.max.bytes``, which may be larger. A trailing partial
    batch stays in the last run (the append drops it)."""
    if len(records) <= segment_bytes:
        return [records]
    runs: list[memoryview] = []
    start = end = 0
    for batch in MemoryRecords(records).batches():
        size = batch.size_in_bytes
        if end > start and end + size - start > segment_bytes:
            runs.append(records[start:end])
            start = end
        end += size
    runs.append(records[start:])
    return runs
