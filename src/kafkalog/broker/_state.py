"""The broker's state: its topics and partitions (each a :class:`~kafkalog.Log`), the log
directory's lock and the broker's metadata file, topic creation and retention.

**State on disk.** Besides the partition directories (and Log's own checkpoint files), the log
directory holds ``kafkalog-broker.json`` — the cluster id, each topic's id, partition count and
config overrides, the start of the next block of producer ids, and the topics being deleted
(see ``_admin_topics.py``) — rewritten atomically
(:func:`kafkalog.durable.write_atomically`) on every change, and ``.kafkalog-broker.lock`` (an
``flock`` so two brokers never share a directory; Log's ``.lock`` stays Log's). Producer ids are handed
out in blocks of 1,000 as Kafka's ``ProducerIdManager`` does: the block end is made durable
before an id of it is returned, so ids are never reused after a restart or a crash. A directory
without the file (written by Log directly, or copied from a Kafka broker) is taken as it is:
every ``<topic>-<partition>`` directory becomes a partition, with the broker's default config.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import Log, LogConfig
from ..checkpoint import new_topic_id
from ..durable import lock_directory, write_atomically
from ..filenames import cluster_metadata_marker, parse_partition_dir, validate_topic_name
from ..errors import CorruptCheckpointError, InvalidConfigError, KafkalogError
from ..protocol import ErrorCode
from ._config import BrokerConfig
from ._deletion import finish_renames, is_delete_dir
from ._limits import RateLimitedLog, partition_refusal, startup_refusal
from ._partition_state import PartitionState
from ._replica_manager import AlterIsrFn, BrokersFn, ReplicaManager
from ._unsupported import UnsupportedLog

_log = logging.getLogger(__package__)

#: The broker's own state file in the log directory.
METADATA_FILE = "kafkalog-broker.json"
_METADATA_VERSION = 0
#: The broker's lock on the log directory (Log's ``.lock`` stays Log's).
_LOCK_FILE = ".kafkalog-broker.lock"
#: Kafka's ProducerIdManager hands out ids in blocks of this size.
PRODUCER_ID_BLOCK_SIZE = 1000
#: A bound of this demonstration broker (Kafka has none): one CreateTopics cannot ask it to open
#: a million directories.
MAX_PARTITIONS_PER_TOPIC = 10_000


def _collides(a: str, b: str) -> bool:
    """Kafka's ``Topic.hasCollision``: '.' and '_' map to the same metric name."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


class _Partition:
    """One hosted partition: its log, its replication state (role, leader epoch, ISR: see
    ``_partition_state.py``) and the requests waiting for it to change (long-polling fetches
    and acks=all produces, woken by appends, high watermark moves and role changes)."""

    __slots__ = ("topic", "index", "log", "state", "waiters", "role_lock")

    def __init__(self, topic: str, index: int, log: Log, state: PartitionState) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.state = state
        self.waiters: set[asyncio.Future] = set()
        #: Held by a leader append (on the thread pool) and by a role change (on the event loop),
        #: so no append runs as leader once the partition has become a follower (Kafka's
        #: ``leaderIsrUpdateLock``).
        self.role_lock = threading.Lock()

    @property
    def epoch(self) -> int:
        """The leader epoch this broker knows (requests carrying another are fenced)."""
        return self.state.leader_epoch

    def notify(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


@dataclass
class _Topic:
    """A topic: its id, its config overrides and its open partitions."""

    name: str
    topic_id: str | None
    overrides: dict[str, str]
    partitions: list[_Partition]
    #: While the topic is being created: the partitions it will have (their logs not yet open).
    planned: int = 0

    @property
    def partition_count(self) -> int:
        return max(len(self.partitions), self.planned)


class _Close(Exception):
    """Close this connection without answering (acks=0 produce that failed, as Kafka does)."""


class _BrokerState:
    """The topics, partitions and metadata of a :class:`~kafkalog.broker.Broker`, and the
    event loop and thread pool it runs on; the request handlers and the server build on it.

    Not thread-safe: it belongs to the event loop that started the broker; blocking work
    (opening logs, writing the metadata file) runs on the thread pool.
    """

    def __init__(self, log_dir: str | os.PathLike, *, host: str, port: int,
                 config: Mapping[str, str] | None, brokers: BrokersFn | None = None,
                 alter_isr: AlterIsrFn | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.config = BrokerConfig.from_properties(config)
        if brokers is None and alter_isr is None:
            brokers, alter_isr = self._coordination()  # zookeeper.connect: the cluster's callables
        #: The partitions' roles, the follower fetchers and the leader's replication rules.
        self.replica_manager = ReplicaManager(self, brokers=brokers, alter_isr=alter_isr)
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._topics: dict[str, _Topic] = {}
        self._cluster_id = self.config.cluster_id or ""
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock_fd: int | None = None
        self._admin_lock: asyncio.Lock | None = None
        self._stopping = False
        #: Refused creations and refused connections are warned about once a minute at most.
        self._warn_refusal = RateLimitedLog(_log)
        self._warn_accept = RateLimitedLog(_log)
        #: Topics whose partition directories are being renamed for deletion (DeleteTopics):
        #: kept in the metadata file until every rename is durable, so a restart finishes them.
        self._deleting: set[str] = set()
        #: ``-delete`` directories found at start, removed in the background once serving.
        self._doomed_dirs: list[Path] = []
        #: Requests for unsupported APIs and features: one log line per client and feature.
        self._unsupported = UnsupportedLog()

    def _coordination(self) -> tuple[BrokersFn | None, AlterIsrFn | None]:
        """The coordination layer's ``brokers`` and ``alter_isr`` (``_cluster_requests.py``
        gives ZooKeeper's when ``zookeeper.connect`` is set); none on a single node."""
        return None, None

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

    # -- loading and the metadata file ------------------------------------------------------------

    def _take_lock(self) -> None:
        # A lock file of the broker's own: every Log of this process already holds ".lock" (one
        # flock on the log directory), and a second flock of that file would conflict.
        self._lock_fd = lock_directory(self.log_dir, "the log directory is in use by another broker", name=_LOCK_FILE)

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
            and isinstance(data.get("deleting", []), list)
            and all(isinstance(n, str) and validate_topic_name(n) is None for n in data.get("deleting", []))
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
                name: {"topic_id": t.topic_id, "partitions": t.partition_count, "configs": t.overrides}
                for name, t in sorted(topics.items())
            },
        }
        if self._deleting:
            data["deleting"] = sorted(self._deleting)
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1, sort_keys=True).encode() + b"\n")

    def _load(self) -> None:
        """Lock the directory, read the metadata file, open every partition (blocking)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        meta = self._read_metadata()
        if not self._cluster_id:
            self._cluster_id = meta.get("cluster_id") or _new_cluster_id()
        found: dict[str, set[int]] = {}
        deleting = set(meta.get("deleting", []))
        undeleted: list[Path] = []
        for entry in os.scandir(self.log_dir):
            if not entry.is_dir():
                continue
            if is_delete_dir(entry.name):
                self._doomed_dirs.append(Path(entry.path))
                continue
            if cluster_metadata_marker(entry.path) is not None:
                continue  # KRaft's metadata log is no topic (Kafka's LogManager.loadLogs skips it too)
            try:
                topic, partition = parse_partition_dir(entry.name)
            except InvalidConfigError:
                continue  # not a partition directory (Kafka's "-future"/"-stray" ones included)
            if topic in deleting:
                undeleted.append(Path(entry.path))  # a DeleteTopics interrupted before this rename
            elif validate_topic_name(topic) is None:
                found.setdefault(topic, set()).add(partition)
        if deleting:
            self._doomed_dirs.extend(finish_renames(self.log_dir, undeleted))
            # the file is rewritten below, without the deleting list
        declared = meta.get("topics", {})
        for name, partitions in found.items():
            if max(partitions) >= MAX_PARTITIONS_PER_TOPIC:
                raise KafkalogError(
                    f"partition directory {name}-{max(partitions)} is beyond this broker's limit of "
                    f"{MAX_PARTITIONS_PER_TOPIC} partitions a topic", file=str(self.log_dir)
                )
        planned = {
            name: max(declared.get(name, {}).get("partitions", 0), max(found.get(name, {-1})) + 1)
            for name in set(found) | set(declared)
        }
        refusal = startup_refusal(sum(planned.values()))
        if refusal is not None:
            raise KafkalogError(refusal, file=str(self.log_dir))
        for name in sorted(planned):
            spec = declared.get(name, {})
            count = planned[name]
            overrides = dict(spec.get("configs", {}))
            topic_id = spec.get("topic_id")
            config = self.config.topic_config(overrides)
            topic = _Topic(name, topic_id, overrides, [])
            self._topics[name] = topic
            for index in range(count):
                topic.partitions.append(self._new_partition(name, index, self._open_log(name, index, config, topic_id)))
        max_seen = -1
        for topic in self._topics.values():
            for partition in topic.partitions:
                ids = partition.log.producer_state.active_producers
                if ids:
                    max_seen = max(max_seen, max(ids))
        start = max(int(meta.get("next_producer_id_block", 0)), max_seen + 1)
        self._next_producer_id = self._producer_id_block_end = start
        if not meta or deleting or found.keys() - declared.keys() or meta.get("cluster_id") != self._cluster_id:
            self._write_metadata(self._topics, start)

    def _open_log(self, topic: str, index: int, config: LogConfig, topic_id: str | None) -> Log:
        # A broker with a coordination layer keeps replicas: Kafka's high watermark and checkpoint.
        replicated = self.replica_manager.replicated
        try:
            return Log.open(
                self.log_dir / f"{topic}-{index}",
                config,
                topic_id=topic_id,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                replicated=replicated,
            )
        except InvalidConfigError:
            # partition.metadata names another topic id (a directory from elsewhere): keep its own.
            return Log.open(self.log_dir / f"{topic}-{index}", config,
                            producer_id_expiration_ms=self.config.producer_id_expiration_ms, replicated=replicated)

    def _new_partition(self, topic: str, index: int, log: Log) -> _Partition:
        return _Partition(topic, index, log, self.replica_manager.initial_state(topic, index, log.latest_epoch))

    def _hosted_partitions(self) -> list[_Partition]:
        """Every open partition (a snapshot: safe while topics change)."""
        return [p for t in list(self._topics.values()) for p in t.partitions]

    async def _ensure_partition(self, topic: str, index: int) -> _Partition:
        """The partition, its log opened (and its topic created with the broker's defaults, or
        given more partitions) when it is not hosted yet: a coordination layer assigned it here.

        Raises:
            KafkalogError, OSError: a log could not be opened or the metadata not written.
        """
        assert self._admin_lock is not None
        async with self._admin_lock:
            t = self._topics.get(topic)
            if t is None:
                overrides, topic_id = await self._assigned_topic(topic)
                await self._create_topic(topic, index + 1, overrides, self.config.topic_config(overrides),
                                         topic_id=topic_id)
            elif index >= len(t.partitions):
                await self._in_executor(self._add_partitions_blocking, t, index + 1, dict(self._topics))
        partition = self._partition(topic, index)
        assert partition is not None
        return partition

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

    async def _assigned_topic(self, topic: str) -> tuple[dict[str, str], str | None]:
        """A topic a coordination layer assigned here: its config overrides and its id (the
        cluster's, from ZooKeeper: ``_cluster_requests.py``); none and a new id by default."""
        return {}, None

    def _create_topic_blocking(self, name: str, count: int, overrides: dict[str, str], config: LogConfig,
                               topic_id: str | None = None) -> _Topic:
        topic = _Topic(name, topic_id or new_topic_id(), overrides, [])
        # Declare first: a crash between the two steps leaves a topic whose directories the next
        # start creates, never directories the metadata does not know.
        declared = _Topic(name, topic.topic_id, overrides, [], planned=count)
        self._write_metadata({**self._topics, name: declared}, self._producer_id_block_end)
        try:
            for index in range(count):
                topic.partitions.append(self._new_partition(name, index, self._open_log(name, index, config,
                                                                                        topic.topic_id)))
        except BaseException:
            for partition in topic.partitions:
                with contextlib.suppress(KafkalogError, OSError):
                    partition.log.close()
            with contextlib.suppress(OSError):
                self._write_metadata(self._topics, self._producer_id_block_end)
            raise
        return topic

    async def _create_topic(self, name: str, count: int, overrides: dict[str, str], config: LogConfig, *,
                            topic_id: str | None = None) -> None:
        assert self._loop is not None
        topic = await self._loop.run_in_executor(
            self._executor, self._create_topic_blocking, name, count, overrides, config, topic_id
        )
        self._topics[name] = topic
        _log.info("created topic %s with %d partitions", name, count)

    def _partition_refusal(self, count: int) -> str | None:
        """Why ``count`` more partitions cannot be opened (the descriptor budget or
        ``max.broker.partitions``: see ``_limits.py``), or None; a refusal is also logged,
        rate-limited."""
        hosted = sum(t.partition_count for t in self._topics.values())
        refusal = partition_refusal(count, hosted, self.config.max_broker_partitions)
        if refusal is not None:
            self._warn_refusal("refusing a topic: %s", refusal)
        return refusal

    def _topic_error(self, name: str) -> tuple[ErrorCode, str] | None:
        """Why ``name`` cannot be created, or None."""
        reason = validate_topic_name(name)
        if reason is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in self._topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        if name in self._deleting:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion."
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
                    if partition.log.closed:
                        continue  # its topic was deleted meanwhile
                    try:
                        await self._loop.run_in_executor(self._executor, partition.log.delete_old_segments)
                    except (KafkalogError, OSError):
                        _log.exception("retention of %s-%d failed", topic.name, partition.index)

    def _partition(self, topic: str, index: int) -> _Partition | None:
        t = self._topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def _absent_partition_error(self, topic: str, index: int) -> ErrorCode:
        """The error for a partition this broker has no replica of (Kafka's
        ``ReplicaManager.getPartitionOrError``): NOT_LEADER_OR_FOLLOWER when the cluster has
        it (another broker hosts it), else UNKNOWN_TOPIC_OR_PARTITION. A single node knows only
        its own partitions; the cluster handlers override this."""
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def _in_executor(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._loop is not None
        return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args))


def _new_cluster_id() -> str:
    return new_topic_id()  # Kafka's cluster ids are random UUIDs in the same base64 form
