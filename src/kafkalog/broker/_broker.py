"""A single-node Kafka-protocol broker over kafkalog's partition log (a demonstration and test bed).

Unmodified Kafka clients produce to it, fetch from it and list offsets; every partition is a
:class:`~kafkalog.log.Log` in ``<log dir>/<topic>-<partition>``, so what it stores is what a
Kafka broker would store, and Fetch responses carry record bytes straight from the segment files
with ``sendfile``. Single node (node id 0 by default, leader of everything, leader epoch 0), no
consumer groups, no transactions, no TLS or SASL. See ``docs/broker.md``.

Run it with ``kafkalog broker --log-dir DIR [--listen HOST:PORT] [--config key=value ...]``
(:func:`main`), or in-process::

    with Broker("/tmp/kl", port=0) as broker:        # serves from a background thread
        print(broker.bootstrap)                       # "127.0.0.1:40123"

or inside an asyncio program with ``await broker.start()`` / ``await broker.stop()``.

**Requests.** One task per connection reads a request, handles it and writes the reply before
reading the next, so replies go back in request order and one producer's appends stay in order
(Kafka mutes a connection the same way while a request is in flight). Appends (validation,
decompression, fsync under ``flush.messages``), ListOffsets and topic creation run on a thread
pool so they never stall the other connections; Fetch reads run on the event loop because a
read is an index lookup plus a few ``pread`` calls of batch headers, and the record bytes are
sent by the kernel (``loop.sendfile`` after the response headers; :attr:`Broker.sendfile_bytes`
counts them).

**State on disk.** Besides the partition directories (and Log's own checkpoint files), the log
directory holds ``kafkalog-broker.json`` — the cluster id, each topic's id, partition count and
config overrides, and the start of the next block of producer ids — rewritten atomically
(``checkpoint.write_atomically``) on every change, and ``.kafkalog-broker.lock`` (an ``flock``
so two brokers never share a directory; Log's ``.lock`` stays Log's). Producer ids are handed
out in blocks of 1,000 as Kafka's ``ProducerIdManager`` does: the block end is made durable
before an id of it is returned, so ids are never reused after a restart or a crash. A directory
without the file (written by Log directly, or copied from a Kafka broker) is taken as it is:
every ``<topic>-<partition>`` directory becomes a partition, with the broker's default config.

**Shutdown.** :meth:`Broker.stop` (SIGTERM or SIGINT under :func:`main`) stops accepting,
answers the requests in flight (a long-polling Fetch returns at once), closes idle connections,
then closes every log cleanly so the next start skips recovery.

Thread safety: a Broker belongs to the event loop that started it; from other threads use only
the read-only properties, :meth:`log`, and the ``run_in_thread``/``shutdown`` pair.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import functools
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import new_topic_id, write_atomically
from ..config import LogConfig
from ..errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    InvalidConfigError,
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
from ..filenames import offset_from_file, validate_topic_name
from ..log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log
from ..filenames import parse_partition_dir
from ..producer_state import TransactionCoordinatorFencedError
from ..protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    Request,
    ResponseFrame,
    UnsupportedApiError,
    decode_request,
    encode_response,
    supported_api_versions,
)
from ..record import MAGIC_V2
from ..records import MemoryRecords

_log = logging.getLogger(__name__)

#: The broker's own state file in the log directory.
METADATA_FILE = "kafkalog-broker.json"
_LOCK_FILE = ".kafkalog-broker.lock"
_METADATA_VERSION = 0
#: Kafka's ProducerIdManager hands out ids in blocks of this size.
PRODUCER_ID_BLOCK_SIZE = 1000
#: A bound of this demonstration broker (Kafka has none): one CreateTopics cannot ask it to open
#: a million directories.
MAX_PARTITIONS_PER_TOPIC = 10_000
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# KIP-511: ApiVersions v3 names the client; Kafka answers INVALID_REQUEST to other names.
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?", re.ASCII)
_INT32_MIN = -(2**31)
_READ_COMMITTED = 1
_FINAL_EPOCH = -1  # a fetch session epoch meaning "no session"
_INITIAL_EPOCH = 0

# AclOperation codes for the authorized-operations bitfields of Metadata v8 (no authorizer:
# everything a topic or the cluster supports is allowed).
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE..IDEMPOTENT_WRITE


def _collides(a: str, b: str) -> bool:
    """Kafka's ``Topic.hasCollision``: '.' and '_' map to the same metric name."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


# -- configuration ------------------------------------------------------------------------------

# Broker-level names of topic settings (Kafka's ServerTopicConfigSynonyms) -> (topic name, scale).
_BROKER_SYNONYMS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment.bytes", 1),
    "log.roll.ms": ("segment.ms", 1),
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.roll.jitter.ms": ("segment.jitter.ms", 1),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3_600_000),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "log.retention.bytes": ("retention.bytes", 1),
    "log.retention.ms": ("retention.ms", 1),
    "log.retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "message.max.bytes": ("max.message.bytes", 1),
    "log.cleanup.policy": ("cleanup.policy", 0),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 0),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", 1),
    "log.message.timestamp.type": ("message.timestamp.type", 0),
    "log.message.timestamp.difference.max.ms": ("message.timestamp.difference.max.ms", 1),
    "log.message.timestamp.before.max.ms": ("message.timestamp.before.max.ms", 1),
    "log.message.timestamp.after.max.ms": ("message.timestamp.after.max.ms", 1),
    "log.preallocate": ("preallocate", 0),
}
_TOPIC_KEYS = frozenset(LogConfig().to_properties())
# Kafka topic settings accepted and stored but without effect on a single node that never
# recompresses or tiers (compression.type must say "producer": batches are stored as sent).
_ACCEPTED_TOPIC_KEYS = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "min.insync.replicas", "unclean.leader.election.enable", "message.downconversion.enable",
    "message.format.version", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "local.retention.ms", "local.retention.bytes", "remote.storage.enable", "remote.log.copy.disable",
    "remote.log.delete.on.disable",
})


def check_topic_configs(configs: Mapping[str, str | None]) -> LogConfig:
    """Validate topic settings as CreateTopics does and build their :class:`LogConfig`.

    Raises:
        InvalidConfigError: an unknown name, a null or out-of-range value, or a compression.type
            other than ``producer``.
    """
    for key, value in configs.items():
        if key not in _TOPIC_KEYS and key not in _ACCEPTED_TOPIC_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {key}")
    codec = configs.get("compression.type", "producer")
    if codec != "producer":
        raise InvalidConfigError(
            f"compression.type = {codec}: kafkalog's broker stores batches as the producer compressed them; "
            "only 'producer' is supported"
        )
    return LogConfig.from_properties({k: v for k, v in configs.items() if k in _TOPIC_KEYS})


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, under Kafka's names.

    Broker settings: ``node.id``/``broker.id`` (0), ``auto.create.topics.enable`` (true),
    ``num.partitions`` (1), ``default.replication.factor`` (1, the only value a single node
    allows), ``socket.request.max.bytes`` (100 MiB), ``fetch.max.bytes`` (55 MiB),
    ``num.io.threads`` (8, the thread pool for appends), ``log.retention.check.interval.ms``
    (5 minutes), ``producer.id.expiration.ms`` (1 day), ``advertised.host.name`` (the listen
    address), ``cluster.id`` (generated once and kept). Every topic setting (``flush.messages``,
    ``segment.bytes``, ...) and its broker synonym (``log.flush.interval.messages``,
    ``log.segment.bytes``, ...) sets the default for every topic.
    """

    node_id: int = 0
    auto_create_topics: bool = True
    num_partitions: int = 1
    socket_request_max_bytes: int = 104_857_600
    fetch_max_bytes: int = 57_671_680
    num_io_threads: int = 8
    retention_check_interval_ms: int = 300_000
    producer_id_expiration_ms: int = 86_400_000
    advertised_host: str | None = None
    cluster_id: str | None = None
    topic_defaults: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_properties(cls, properties: Mapping[str, str] | None) -> BrokerConfig:
        """Parse ``--config`` pairs; unknown names are logged and ignored, as Kafka does.

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, Any] = {}
        topic: dict[str, str] = {}
        ints = {
            "node.id": ("node_id", 0), "broker.id": ("node_id", 0), "num.partitions": ("num_partitions", 1),
            "socket.request.max.bytes": ("socket_request_max_bytes", 1), "fetch.max.bytes": ("fetch_max_bytes", 1024),
            "num.io.threads": ("num_io_threads", 1),
            "log.retention.check.interval.ms": ("retention_check_interval_ms", 1),
            "producer.id.expiration.ms": ("producer_id_expiration_ms", 1),
        }
        for key, raw in (properties or {}).items():
            value = str(raw).strip()
            if key in ints:
                name, low = ints[key]
                fields[name] = _parse_int(key, value, low)
            elif key == "auto.create.topics.enable":
                fields["auto_create_topics"] = _parse_bool(key, value)
            elif key == "default.replication.factor":
                if _parse_int(key, value, 1) != 1:
                    raise InvalidConfigError(f"{key} = {value}: a single-node broker only has replication factor 1")
            elif key == "advertised.host.name":
                fields["advertised_host"] = value
            elif key == "cluster.id":
                fields["cluster_id"] = value
            elif key in _TOPIC_KEYS or key in _ACCEPTED_TOPIC_KEYS:
                topic[key] = value
            elif key in _BROKER_SYNONYMS:
                name, scale = _BROKER_SYNONYMS[key]
                topic[name] = str(_parse_int(key, value, -(2**63)) * scale) if scale > 1 else value
            else:
                _log.warning("the configuration '%s' was supplied but isn't a known config", key)
        check_topic_configs(topic)
        return cls(**fields, topic_defaults=tuple(sorted(topic.items())))

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The :class:`LogConfig` of a topic: the broker's defaults, then the topic's overrides."""
        return check_topic_configs({**dict(self.topic_defaults), **(overrides or {})})


def _parse_int(key: str, value: str, low: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidConfigError(f"{key} = {value!r}: expected an integer") from None
    if number < low:
        raise InvalidConfigError(f"{key} = {number}: must be at least {low}")
    return number


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise InvalidConfigError(f"{key} = {value!r}: expected true or false")
    return value.lower() == "true"


# -- state ---------------------------------------------------------------------------------------


class _Partition:
    """One partition: its log, its leader epoch and the fetches waiting for its next append."""

    __slots__ = ("topic", "index", "log", "epoch", "waiters")

    def __init__(self, topic: str, index: int, log: Log) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        latest = log.latest_epoch
        self.epoch = latest if latest is not None and latest > 0 else 0
        self.waiters: set[asyncio.Future] = set()

    def notify(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


@dataclass
class _Topic:
    name: str
    topic_id: str | None
    overrides: dict[str, str]
    partitions: list[_Partition]


class _FdFile:
    """What ``loop.sendfile`` wants of a file: a descriptor (and a ``seek`` it may call)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class _Connection:
    __slots__ = ("peer", "writer", "task", "idle")

    def __init__(self, peer: str, writer: asyncio.StreamWriter, task: asyncio.Task | None) -> None:
        self.peer = peer
        self.writer = writer
        self.task = task
        self.idle = True


class _Close(Exception):
    """Close this connection without answering (acks=0 produce that failed, as Kafka does)."""


# -- the broker ----------------------------------------------------------------------------------


class Broker:
    """A single-node Kafka-protocol broker serving the logs under ``log_dir``.

    Args:
        log_dir: the log directory (created if absent).
        host: the address to bind (loopback by default).
        port: the port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        config: Kafka-named settings (:class:`BrokerConfig`), e.g. ``{"flush.messages": "1"}``.

    Raises:
        InvalidConfigError: a bad setting.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.config = BrokerConfig.from_properties(config)
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._topics: dict[str, _Topic] = {}
        self._cluster_id = self.config.cluster_id or ""
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._executor: ThreadPoolExecutor | None = None
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: set[_Connection] = set()
        self._lock_fd: int | None = None
        self._admin_lock: asyncio.Lock | None = None
        self._stopping = False
        self._stopped: asyncio.Event | None = None
        self._retention_task: asyncio.Task | None = None
        self._thread: threading.Thread | None = None
        #: Record bytes sent with sendfile (zero copy) since start.
        self.sendfile_bytes = 0
        #: Record bytes that had to be copied because sendfile was not available.
        self.copied_bytes = 0
        #: Requests answered (or, for acks=0, handled) since start.
        self.requests = 0
        self._handlers: dict[int, Callable[[Request], Any]] = {
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.METADATA: self._metadata,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
        }

    # -- facts ---------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The address the broker listens on."""
        return self._host

    @property
    def port(self) -> int:
        """The port the broker listens on (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the broker is not started")
        return self._port

    @property
    def advertised_host(self) -> str:
        """The host name Metadata responses give clients."""
        if self.config.advertised_host:
            return self.config.advertised_host
        return self._host if self._host not in ("", "0.0.0.0", "::") else "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        host = self.advertised_host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def topics(self) -> dict[str, int]:
        """Topic name -> number of partitions."""
        return {name: len(t.partitions) for name, t in self._topics.items()}

    def log(self, topic: str, partition: int) -> Log:
        """The :class:`Log` of one partition (for inspection; the broker owns it).

        Raises:
            KeyError: no such partition.
        """
        t = self._topics[topic]
        if not 0 <= partition < len(t.partitions):
            raise KeyError(f"{topic}-{partition}")
        return t.partitions[partition].log

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the log directory (every partition, recovering after a crash) and start
        listening. Returns once connections are accepted.

        Raises:
            KafkalogError: the directory is in use by another broker, or a log cannot be opened.
            OSError: the address cannot be bound.
        """
        self._loop = asyncio.get_running_loop()
        self._admin_lock = asyncio.Lock()
        self._stopped = asyncio.Event()
        self._executor = ThreadPoolExecutor(self.config.num_io_threads, thread_name_prefix="kafkalog-broker")
        try:
            await self._loop.run_in_executor(self._executor, self._load)
            self._server = await asyncio.start_server(
                self._on_connection, self._host, self._requested_port, limit=1 << 20
            )
        except BaseException:
            await self._loop.run_in_executor(self._executor, self._close_logs)
            self._executor.shutdown(wait=True)
            raise
        self._port = self._server.sockets[0].getsockname()[1]
        self._retention_task = asyncio.create_task(self._retention_loop())
        _log.info("kafkalog broker serving %s on %s (%d topics)", self.log_dir, self.bootstrap, len(self._topics))

    async def stop(self) -> None:
        """Stop accepting, answer the requests in flight, close every connection and every log."""
        if self._stopping or self._loop is None:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._stopping = True
        assert self._server is not None and self._executor is not None and self._stopped is not None
        self._server.close()
        if self._retention_task is not None:
            self._retention_task.cancel()
        for topic in self._topics.values():
            for partition in topic.partitions:
                partition.notify()  # long polls answer now
        for conn in list(self._connections):
            if conn.idle and conn.task is not None:
                conn.task.cancel()
        busy = [c.task for c in self._connections if c.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=30)
        await self._loop.run_in_executor(self._executor, self._close_logs)
        self._executor.shutdown(wait=True)
        self._stopped.set()
        _log.info("kafkalog broker stopped; every log closed")

    async def wait_stopped(self) -> None:
        """Return once :meth:`stop` has finished."""
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()

    def run_in_thread(self) -> Broker:
        """Start the broker on its own event loop in a daemon thread; return once it listens.

        Raises:
            Whatever :meth:`start` raised.
        """
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            async def main() -> None:
                try:
                    await self.start()
                except BaseException as e:
                    failure.append(e)
                    return
                finally:
                    ready.set()
                await self.wait_stopped()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, name=f"kafkalog-broker-{self.log_dir.name}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        return self

    def shutdown(self, timeout: float | None = 60) -> None:
        """Stop a broker started with :meth:`run_in_thread` and wait for its thread."""
        if self._thread is None or self._loop is None:
            return
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(timeout)
            self._thread.join(timeout)

    def __enter__(self) -> Broker:
        return self.run_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- loading and the metadata file ------------------------------------------------------------

    def _take_lock(self) -> None:
        fd = os.open(self.log_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # not POSIX: no cross-process protection
            pass
        except OSError:
            os.close(fd)
            raise KafkalogError("the log directory is in use by another broker", file=str(self.log_dir)) from None
        self._lock_fd = fd

    def _read_metadata(self) -> dict[str, Any]:
        path = self.log_dir / METADATA_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        hint = "; delete it to rediscover the topics from their directories with the default config"
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptCheckpointError(f"not JSON ({e}){hint}", file=str(path)) from None
        if not isinstance(data, dict) or data.get("version") != _METADATA_VERSION:
            raise CorruptCheckpointError(f"not a version-{_METADATA_VERSION} broker metadata file{hint}", file=str(path))
        topics = data.get("topics", {})
        block = data.get("next_producer_id_block", 0)
        ok = (
            isinstance(topics, dict)
            and isinstance(block, int) and not isinstance(block, bool) and block >= 0
            and isinstance(data.get("cluster_id", ""), str)
        )
        for name, t in topics.items() if ok else ():
            ok = (
                validate_topic_name(name) is None
                and isinstance(t, dict)
                and isinstance(t.get("partitions"), int)
                and 0 < t["partitions"] <= MAX_PARTITIONS_PER_TOPIC
                and isinstance(t.get("configs", {}), dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in t.get("configs", {}).items())
                and (t.get("topic_id") is None or isinstance(t.get("topic_id"), str))
            )
            if not ok:
                break
        if not ok:
            raise CorruptCheckpointError(f"malformed broker metadata{hint}", file=str(path))
        return data

    def _write_metadata(self, topics: Mapping[str, _Topic], block_end: int) -> None:
        data = {
            "version": _METADATA_VERSION,
            "cluster_id": self._cluster_id,
            "next_producer_id_block": block_end,
            "topics": {
                name: {"topic_id": t.topic_id, "partitions": len(t.partitions), "configs": t.overrides}
                for name, t in sorted(topics.items())
            },
        }
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1, sort_keys=True).encode() + b"\n")

    def _load(self) -> None:
        """Lock the directory, read the metadata file, open every partition (blocking)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        meta = self._read_metadata()
        if not self._cluster_id:
            self._cluster_id = meta.get("cluster_id") or _new_cluster_id()
        found: dict[str, set[int]] = {}
        for entry in os.scandir(self.log_dir):
            if not entry.is_dir():
                continue
            try:
                topic, partition = parse_partition_dir(entry.name)
            except InvalidConfigError:
                continue  # not a partition directory (Kafka's "-delete"/"-future" ones included)
            if validate_topic_name(topic) is None:
                found.setdefault(topic, set()).add(partition)
        declared = meta.get("topics", {})
        for name, partitions in found.items():
            if max(partitions) >= MAX_PARTITIONS_PER_TOPIC:
                raise KafkalogError(
                    f"partition directory {name}-{max(partitions)} is beyond this broker's limit of "
                    f"{MAX_PARTITIONS_PER_TOPIC} partitions a topic", file=str(self.log_dir)
                )
        for name in sorted(set(found) | set(declared)):
            spec = declared.get(name, {})
            count = max(spec.get("partitions", 0), max(found.get(name, {-1})) + 1)
            overrides = dict(spec.get("configs", {}))
            topic_id = spec.get("topic_id")
            config = self.config.topic_config(overrides)
            topic = _Topic(name, topic_id, overrides, [])
            self._topics[name] = topic
            for index in range(count):
                topic.partitions.append(_Partition(name, index, self._open_log(name, index, config, topic_id)))
        max_seen = -1
        for topic in self._topics.values():
            for partition in topic.partitions:
                ids = partition.log.producer_state.active_producers
                if ids:
                    max_seen = max(max_seen, max(ids))
        start = max(int(meta.get("next_producer_id_block", 0)), max_seen + 1)
        self._next_producer_id = self._producer_id_block_end = start
        if not meta or found.keys() - declared.keys() or meta.get("cluster_id") != self._cluster_id:
            self._write_metadata(self._topics, start)

    def _open_log(self, topic: str, index: int, config: LogConfig, topic_id: str | None) -> Log:
        try:
            return Log.open(
                self.log_dir / f"{topic}-{index}",
                config,
                topic_id=topic_id,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
        except InvalidConfigError:
            # partition.metadata names another topic id (a directory from elsewhere): keep its own.
            return Log.open(self.log_dir / f"{topic}-{index}", config,
                            producer_id_expiration_ms=self.config.producer_id_expiration_ms)

    def _close_logs(self) -> None:
        for topic in self._topics.values():
            for partition in topic.partitions:
                try:
                    partition.log.close()
                except (KafkalogError, OSError):
                    _log.exception("closing %s-%d failed", topic.name, partition.index)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _create_topic_blocking(self, name: str, count: int, overrides: dict[str, str], config: LogConfig) -> _Topic:
        topic = _Topic(name, new_topic_id(), overrides, [])
        # Declare first: a crash between the two steps leaves a topic whose directories the next
        # start creates, never directories the metadata does not know.
        self._write_metadata({**self._topics, name: _topic_with_count(topic, count)}, self._producer_id_block_end)
        try:
            for index in range(count):
                topic.partitions.append(_Partition(name, index, self._open_log(name, index, config, topic.topic_id)))
        except BaseException:
            for partition in topic.partitions:
                with contextlib.suppress(KafkalogError, OSError):
                    partition.log.close()
            with contextlib.suppress(OSError):
                self._write_metadata(self._topics, self._producer_id_block_end)
            raise
        return topic

    async def _create_topic(self, name: str, count: int, overrides: dict[str, str], config: LogConfig) -> None:
        assert self._loop is not None
        topic = await self._loop.run_in_executor(
            self._executor, self._create_topic_blocking, name, count, overrides, config
        )
        self._topics[name] = topic
        _log.info("created topic %s with %d partitions", name, count)

    def _topic_error(self, name: str) -> tuple[ErrorCode, str] | None:
        """Why ``name`` cannot be created, or None."""
        reason = validate_topic_name(name)
        if reason is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in self._topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        for existing in self._topics:
            if _collides(name, existing):
                return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {existing}"
        return None

    async def _retention_loop(self) -> None:
        assert self._loop is not None
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            for topic in list(self._topics.values()):
                for partition in topic.partitions:
                    try:
                        await self._loop.run_in_executor(self._executor, partition.log.delete_old_segments)
                    except (KafkalogError, OSError):
                        _log.exception("retention of %s-%d failed", topic.name, partition.index)

    def _partition(self, topic: str, index: int) -> _Partition | None:
        t = self._topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # -- connections ------------------------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = _Connection(f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer), writer,
                           asyncio.current_task())
        if self._stopping:
            writer.close()
            return
        self._connections.add(conn)
        max_size = self.config.socket_request_max_bytes
        try:
            while not self._stopping:
                conn.idle = True
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        _log.warning("closing connection from %s: it ended inside a request size", conn.peer)
                    break
                size = int.from_bytes(head, "big", signed=True)
                if size < 0 or size > max_size:
                    # Kafka's InvalidReceiveException: the connection goes, nothing is allocated.
                    _log.warning("closing connection from %s: request size %d outside [0, %d] "
                                 "(socket.request.max.bytes)", conn.peer, size, max_size)
                    break
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    _log.warning("closing connection from %s: it ended %d bytes into a %d-byte request",
                                 conn.peer, len(e.partial), size)
                    break
                conn.idle = False
                try:
                    await self._handle(conn, frame)
                except ProtocolError as e:
                    _log.warning("closing connection from %s: %s", conn.peer, e)
                    break
                except _Close:
                    break
        except (ConnectionError, OSError) as e:
            _log.debug("connection from %s lost: %s", conn.peer, e)
        except asyncio.CancelledError:
            pass  # stop() closes idle connections
        except Exception:  # a bug must cost one connection, never the broker
            _log.exception("closing connection from %s after an unexpected error", conn.peer)
        finally:
            self._connections.discard(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, conn: _Connection, frame: bytes) -> None:
        try:
            request = decode_request(frame)
        except UnsupportedApiError as e:
            raise ProtocolError(
                f"{e.reason} (correlation id {e.correlation_id}); Kafka closes the connection on it"
            ) from None
        self.requests += 1
        handler = self._handlers[request.api_key]
        body = await handler(request)
        if body is None:  # acks=0: no response
            return
        version = 0 if request.unsupported_api_versions else request.api_version
        response = encode_response(request.api_key, version, request.correlation_id, body)
        await self._send(conn, response)

    async def _send(self, conn: _Connection, response: ResponseFrame) -> None:
        writer = conn.writer
        for part in response.parts:
            if isinstance(part, bytes):
                writer.write(part)
            else:
                await self._sendfile(conn, part)
        await writer.drain()

    async def _sendfile(self, conn: _Connection, part: Any) -> None:
        """Send a file slice with sendfile; the descriptor is duplicated first so a segment the
        log closes meanwhile (retention, shutdown) cannot hand its number to another file."""
        assert self._loop is not None
        size = part.size_in_bytes
        try:
            fd = os.dup(part.fileno())
        except LogClosedError as e:
            raise _CloseWithLog(conn, f"the segment was closed before its bytes were sent ({e})") from None
        try:
            if os.fstat(fd).st_size < part.end:
                raise _CloseWithLog(conn, f"{part.path} shrank below {part.end} bytes before it was sent")
            try:
                sent = await self._loop.sendfile(conn.writer.transport, _FdFile(fd), part.start, size, fallback=False)
            except asyncio.SendfileNotAvailableError:
                sent = await self._copy_slice(conn, fd, part.start, size)
                self.copied_bytes += sent
            except RuntimeError as e:  # "Transport is closing": the client went away
                raise ConnectionError(str(e)) from None
            else:
                self.sendfile_bytes += sent
            if sent != size:
                raise _CloseWithLog(conn, f"{part.path} ended after {sent} of {size} bytes of a response")
        finally:
            os.close(fd)

    async def _copy_slice(self, conn: _Connection, fd: int, start: int, size: int) -> int:
        done = 0
        while done < size:
            data = os.pread(fd, min(1 << 20, size - done), start + done)
            if not data:
                break
            conn.writer.write(data)
            await conn.writer.drain()
            done += len(data)
        return done

    async def _in_executor(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._loop is not None
        return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args))

    # -- ApiVersions, FindCoordinator, InitProducerId ---------------------------------------------

    async def _api_versions(self, request: Request) -> dict[str, Any]:
        if request.unsupported_api_versions:
            # KIP-511: the v0 layout with only ApiVersions' own range, so the client retries.
            spec = [v for v in supported_api_versions() if v["api_key"] == ApiKey.API_VERSIONS]
            return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": spec}
        body = request.body or {}
        if request.api_version >= 3 and not (
            _SOFTWARE_NAME.fullmatch(body["client_software_name"] or "")
            and _SOFTWARE_NAME.fullmatch(body["client_software_version"] or "")
        ):
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
        return {"error_code": ErrorCode.NONE, "api_keys": supported_api_versions(), "throttle_time_ms": 0}

    async def _find_coordinator(self, request: Request) -> dict[str, Any]:
        kind = "transaction" if request.body and request.body["key_type"] == 1 else "group"
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "error_message": f"kafkalog's broker has no {kind} coordinator",
            "node_id": -1,
            "host": "",
            "port": -1,
        }

    async def _init_producer_id(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        if body["transactional_id"] is not None:
            _log.warning("refusing InitProducerId for transactional id %r: kafkalog's broker has no transactions",
                         body["transactional_id"])
            return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1, "producer_epoch": -1}
        assert self._admin_lock is not None
        async with self._admin_lock:
            if self._next_producer_id >= self._producer_id_block_end:
                end = self._producer_id_block_end + PRODUCER_ID_BLOCK_SIZE
                # The block end is durable before any id of the block is handed out.
                await self._in_executor(self._write_metadata, dict(self._topics), end)
                self._producer_id_block_end = end
            producer_id = self._next_producer_id
            self._next_producer_id += 1
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}

    # -- Metadata and CreateTopics ----------------------------------------------------------------

    async def _metadata(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        version = request.api_version
        requested = body["topics"]
        all_topics = requested is None or (version == 0 and not requested)
        if all_topics:
            names = sorted(self._topics)
        else:
            names = list(dict.fromkeys(t["name"] for t in requested))
        may_create = (
            self.config.auto_create_topics and (version < 4 or body["allow_auto_topic_creation"]) and not all_topics
        )
        topics = []
        for name in names:
            error = ErrorCode.NONE
            if name not in self._topics:
                problem = self._topic_error(name) if may_create else None
                if validate_topic_name(name) is not None:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif not may_create:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif problem is not None:
                    error = problem[0]  # a name colliding with an existing topic
                else:
                    assert self._admin_lock is not None
                    async with self._admin_lock:
                        if name not in self._topics:
                            try:
                                await self._create_topic(name, self.config.num_partitions, {}, self.config.topic_config())
                            except (KafkalogError, OSError) as e:
                                _log.error("auto-creating topic %s failed: %s", name, e)
                                error = ErrorCode.KAFKA_STORAGE_ERROR
            topic = self._topics.get(name)
            partitions = []
            if topic is not None and error is ErrorCode.NONE:
                for p in topic.partitions:
                    node = [self.config.node_id]
                    partitions.append({
                        "error_code": 0, "partition_index": p.index, "leader_id": self.config.node_id,
                        "leader_epoch": p.epoch, "replica_nodes": node, "isr_nodes": node, "offline_replicas": [],
                    })
            topics.append({
                "error_code": error,
                "name": name,
                "is_internal": name in _INTERNAL_TOPICS,
                "partitions": partitions,
                "topic_authorized_operations": _TOPIC_OPERATIONS if body["include_topic_authorized_operations"]
                else _INT32_MIN,
            })
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": self.config.node_id, "host": self.advertised_host, "port": self.port, "rack": None}],
            "cluster_id": self._cluster_id,
            "controller_id": self.config.node_id,
            "topics": topics,
            "cluster_authorized_operations": _CLUSTER_OPERATIONS if body["include_cluster_authorized_operations"]
            else _INT32_MIN,
        }

    async def _create_topics(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        counts: dict[str, int] = {}
        for t in body["topics"]:
            counts[t["name"]] = counts.get(t["name"], 0) + 1
        results = []
        assert self._admin_lock is not None
        async with self._admin_lock:
            for t in body["topics"]:
                code, message = await self._create_one(t, counts, body["validate_only"])
                results.append({"name": t["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "topics": results}

    async def _create_one(self, t: dict[str, Any], counts: dict[str, int], validate_only: bool
                          ) -> tuple[ErrorCode, str | None]:
        name = t["name"]
        if counts[name] > 1:
            return ErrorCode.INVALID_REQUEST, f"Create topics request contains multiple entries for the topic {name}"
        problem = self._topic_error(name)
        if problem is not None:
            return problem
        partitions, replication, assignments = t["num_partitions"], t["replication_factor"], t["assignments"]
        if assignments:
            if partitions != -1 or replication != -1:
                return ErrorCode.INVALID_REQUEST, (
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at "
                    "the same time."
                )
            indexes = sorted(a["partition_index"] for a in assignments)
            if indexes != list(range(len(indexes))):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence"
            for a in assignments:
                if a["broker_ids"] != [self.config.node_id]:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                        f"Replica assignment {a['broker_ids']} of partition {a['partition_index']} names brokers "
                        f"other than this single node ({self.config.node_id})"
                    )
            partitions = len(assignments)
        else:
            if partitions == -1:
                partitions = self.config.num_partitions
            if partitions <= 0:
                return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            if partitions > MAX_PARTITIONS_PER_TOPIC:
                return ErrorCode.INVALID_PARTITIONS, (
                    f"Number of partitions {partitions} is above this broker's limit of {MAX_PARTITIONS_PER_TOPIC}"
                )
            if replication == -1:
                replication = 1
            if replication <= 0:
                return ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            if replication > 1:
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"Replication factor: {replication} larger than available brokers: 1."
                )
        overrides = {c["name"]: c["value"] for c in t["configs"]}
        try:
            config = self.config.topic_config(overrides)
        except InvalidConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        if validate_only:
            return ErrorCode.NONE, None
        try:
            await self._create_topic(name, partitions, overrides, config)  # type: ignore[arg-type]
        except (KafkalogError, OSError) as e:
            _log.error("creating topic %s failed: %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        return ErrorCode.NONE, None

    # -- Produce --------------------------------------------------------------------------------

    async def _produce(self, request: Request) -> dict[str, Any] | None:
        body = request.body or {}
        version = request.api_version
        acks = body["acks"]
        # Kafka: transactional records need an authorised transactional id, and this broker
        # authorises none (it has no transaction coordinator).
        refuse = _has_transactional_records(body)
        jobs: list[tuple[int, int, _Partition, memoryview]] = []
        results: list[list[dict[str, Any]]] = []
        for ti, t in enumerate(body["topic_data"]):
            topic_results = []
            for pi, p in enumerate(t["partition_data"]):
                result = {"index": p["index"], "error_code": ErrorCode.NONE, "base_offset": -1,
                          "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [], "error_message": None}
                topic_results.append(result)
                partition = self._partition(t["name"], p["index"])
                if refuse:
                    result["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                elif acks not in (-1, 0, 1):
                    result["error_code"] = ErrorCode.INVALID_REQUIRED_ACKS
                elif partition is None:
                    result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    problem = _check_produce_records(version, p["records"])
                    if problem is not None:
                        result["error_code"], result["error_message"] = problem
                    else:
                        jobs.append((ti, pi, partition, p["records"]))
            results.append(topic_results)
        if jobs:
            outcomes = await self._in_executor(self._append_all, jobs)
            for (ti, pi, partition, _), outcome in zip(jobs, outcomes):
                results[ti][pi].update(outcome)
                partition.notify()
        failed = [r for topic_results in results for r in topic_results if r["error_code"] != ErrorCode.NONE]
        if acks == 0:
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
    def _append_all(jobs: list[tuple[int, int, _Partition, memoryview]]) -> list[dict[str, Any]]:
        outcomes = []
        for _, _, partition, records in jobs:
            try:
                info = partition.log.append(MemoryRecords(records), leader_epoch=partition.epoch)
            except (KafkalogError, OSError) as e:
                code = _error_code(e)
                if code in (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.KAFKA_STORAGE_ERROR):
                    _log.error("append to %s-%d failed: %s", partition.topic, partition.index, e)
                outcomes.append({"error_code": code, "error_message": str(e)})
                continue
            outcomes.append({
                "base_offset": info.first_offset,
                "log_append_time_ms": info.log_append_time,
                "log_start_offset": info.log_start_offset,
            })
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
                       "timestamp": -1, "offset": -1, "leader_epoch": -1}
                partitions.append(out)
                partition = self._partition(t["name"], p["partition_index"])
                if seen[(t["name"], p["partition_index"])] > 1:
                    out["error_code"] = ErrorCode.INVALID_REQUEST
                elif partition is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (code := _check_epoch(p["current_leader_epoch"], partition.epoch)) is not None:
                    out["error_code"] = code
                else:
                    try:
                        found = await self._in_executor(_offset_for_timestamp, partition.log, p["timestamp"])
                    except (KafkalogError, OSError) as e:
                        out["error_code"] = _error_code(e)
                        continue
                    if found is not None:
                        out["timestamp"], out["offset"] = found.timestamp, found.offset
                        out["leader_epoch"] = -1 if found.leader_epoch is None else found.leader_epoch
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
        deadline = time.monotonic() + max(0, body["max_wait_ms"]) / 1000
        assert self._loop is not None
        while True:
            responses, size, errors, partitions = self._read_fetch(body, max_bytes)
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

    def _read_fetch(self, body: dict[str, Any], max_bytes: int) -> tuple[list[dict[str, Any]], int, bool, list[_Partition]]:
        """Read every requested partition (Kafka's ``readFromLocalLog``): each gets at most its
        ``partition_max_bytes`` of what is left of ``max_bytes``, and until one partition has
        returned data the first batch is returned whole even when it is larger."""
        remaining = max_bytes
        min_one = True
        total = 0
        errors = False
        responses = []
        partitions = []
        for t in body["topics"]:
            out_partitions = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition"], "error_code": ErrorCode.NONE, "high_watermark": -1,
                       "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                       "preferred_read_replica": -1, "records": b""}
                out_partitions.append(out)
                partition = self._partition(t["topic"], p["partition"])
                if partition is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    errors = True
                    continue
                code = _check_epoch(p["current_leader_epoch"], partition.epoch)
                if code is None:
                    partitions.append(partition)
                    log = partition.log
                    try:
                        hw = log.high_watermark
                        slices, size = _read_partition(log, p["fetch_offset"], max(0, min(p["partition_max_bytes"],
                                                                                         remaining)), hw, min_one)
                    except OffsetOutOfRangeError:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    except (KafkalogError, OSError) as e:
                        code = _error_code(e)
                        _log.error("fetch from %s-%d failed: %s", partition.topic, partition.index, e)
                if code is not None:
                    out["error_code"] = code
                    errors = True
                    continue
                if size:
                    min_one = False
                remaining = max(0, remaining - size)
                total += size
                # No transactions are written here: the last stable offset is the high watermark.
                out.update(high_watermark=hw, last_stable_offset=hw, log_start_offset=log.log_start_offset,
                           records=slices)
            responses.append({"topic": t["topic"], "partitions": out_partitions})
        return responses, total, errors, partitions


# -- helpers -------------------------------------------------------------------------------------


class _CloseWithLog(ConnectionError):
    def __init__(self, conn: _Connection, reason: str) -> None:
        _log.error("closing connection from %s: %s", conn.peer, reason)
        super().__init__(reason)


def _new_cluster_id() -> str:
    return new_topic_id()  # Kafka's cluster ids are random UUIDs in the same base64 form


def _topic_with_count(topic: _Topic, count: int) -> _Topic:
    """A stand-in with ``count`` partitions for the metadata file, before the logs exist."""
    return _Topic(topic.name, topic.topic_id, topic.overrides, [None] * count)  # type: ignore[list-item]


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
    """Kafka's ``ProduceRequest.validateRecords`` for v3+: exactly one v2 batch, zstd from v7."""
    if records is None:
        return ErrorCode.INVALID_RECORD, "Produce request with null records"
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
        if version < 7 and codec.kafka_name == "zstd":
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


def _error_code(e: BaseException) -> ErrorCode:
    """The Kafka error code for a kafkalog error raised by an append or a read."""
    if isinstance(e, InvalidTimestampError):
        return ErrorCode.INVALID_TIMESTAMP
    if isinstance(e, (CorruptRecordError, TruncatedRecordError)):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(e, InvalidRecordError):
        return ErrorCode.INVALID_RECORD
    if isinstance(e, RecordTooLargeError):
        return ErrorCode.RECORD_LIST_TOO_LARGE if "segment size" in str(e) else ErrorCode.MESSAGE_TOO_LARGE
    if isinstance(e, UnsupportedCodecError):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if isinstance(e, InvalidProducerEpochError):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if isinstance(e, OutOfOrderSequenceError):
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    if isinstance(e, TransactionCoordinatorFencedError):
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED
    if isinstance(e, InvalidTxnStateError):
        return ErrorCode.INVALID_TXN_STATE
    if isinstance(e, OffsetOutOfRangeError):
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if isinstance(e, LogClosedError):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # shutting down: retriable
    if isinstance(e, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _check_epoch(requested: int, current: int) -> ErrorCode | None:
    """Kafka's leader epoch fencing: -1 skips the check."""
    if requested == -1 or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def _offset_for_timestamp(log: Log, timestamp: int) -> Any:
    if timestamp >= 0 or timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, -3, -4, -5):
        return log.offset_for_timestamp(timestamp)
    # Any other negative target: Kafka searches for the first record at or after it.
    for segment in log.segments:
        if segment.largest_timestamp >= timestamp:
            return segment.find_offset_by_timestamp(timestamp, log.log_start_offset)
    return None


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


# -- command line --------------------------------------------------------------------------------


def _parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _parse_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, not {text!r}")
    return key.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    """``kafkalog broker --log-dir DIR [--listen HOST:PORT] [--config key=value ...]``.

    Prints ``listening on HOST:PORT`` (one line, flushed) once clients can connect, logs to
    stderr, and on SIGTERM or SIGINT shuts down cleanly and returns 0; 1 on a startup error.
    """
    parser = argparse.ArgumentParser(prog="kafkalog broker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log-dir", required=True, help="the log directory (one <topic>-<partition> per partition)")
    parser.add_argument("--listen", type=_parse_listen, default=("127.0.0.1", 9092),
                        help="HOST:PORT to listen on (default 127.0.0.1:9092; port 0 picks a free one)")
    parser.add_argument("--config", type=_parse_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka broker or topic setting, e.g. flush.messages=1 (repeatable)")
    parser.add_argument("--log-level", default="INFO", help="logging level for stderr (default INFO)")
    args = parser.parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, port = args.listen
    try:
        broker = Broker(args.log_dir, host=host, port=port, config=dict(args.config))
    except KafkalogError as e:
        print(f"kafkalog broker: {e}", file=sys.stderr)
        return 1

    async def serve() -> int:
        try:
            await broker.start()
        except (KafkalogError, OSError) as e:
            print(f"kafkalog broker: {e}", file=sys.stderr)
            return 1
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
        print(f"listening on {_address(host, broker.port)}", flush=True)
        await broker.wait_stopped()
        return 0

    return asyncio.run(serve())


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


if __name__ == "__main__":
    sys.exit(main())
