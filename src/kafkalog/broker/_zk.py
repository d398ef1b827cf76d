"""ZooKeeper-mode Kafka's znodes, their JSON, and the one client that reads and writes them
(Kafka 3.x ``kafka.zk.ZkData`` and ``KafkaZkClient``), over kazoo. The only module that
imports kazoo.

Layout (paths below the chroot of ``zookeeper.connect``), byte for byte as Kafka writes it::

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /brokers/ids/<id>              (ephemeral)    {"version":5,"host":..,"port":..,"jmx_port":-1,
                                                   "timestamp":"<ms>","endpoints":["PLAINTEXT://h:p"],
                                                   "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                                   "features":{}}
    /controller                    (ephemeral)    {"version":2,"brokerid":N,"timestamp":"<ms>",
                                                   "kraftControllerEpoch":-1}
    /controller_epoch                             "<epoch>" (a decimal string)
    /brokers/topics/<t>                           {"version":3,"partitions":{"0":[1,2,3]},
                                                   "adding_replicas":{},"removing_replicas":{},
                                                   "topic_id":"<base64 uuid>"}
    /brokers/topics/<t>/partitions/<p>/state      {"controller_epoch":..,"leader":..,"version":1,
                                                   "leader_epoch":..,"isr":[..]}
    /config/topics/<t>                            {"version":1,"config":{"k":"v"}}
    /admin/delete_topics/<t>                      (empty: a deletion request)
    /admin/preferred_replica_election             {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /latest_producer_id_block                     {"version":1,"broker":N,"block_start":"0","block_end":"999"}
    /kafkalog/controlled_shutdown/<id> (ephemeral) kafkalog's own: see docs/broker.md
    /kafkalog/unclean_leader_election             kafkalog's own: ElectLeaders UNCLEAN's request, in
                                                   /admin/preferred_replica_election's JSON

Every change of shared state is a conditional write: the controller's writes carry a check of
``/controller_epoch``'s version in the same multi-op (Kafka's ``checkedEpoch`` fencing of a
zombie controller), and a partition state's znode version is its partition epoch (Kafka's
``zkVersion``). kazoo's exceptions never leave this module: a lost check returns None or False,
an unreachable ensemble raises :class:`~kafkalog.errors.KafkalogError`.

Thread-safety: a :class:`ZkClient` may be used from any thread; watch callbacks run on kazoo's
callback thread and must not block for long.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidConfigError, KafkalogError

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import (
        BadVersionError,
        KazooException,
        NodeExistsError,
        NoNodeError,
        NotEmptyError,
        RolledBackError,
    )
    from kazoo.handlers.threading import KazooTimeoutError
except ImportError:  # pragma: no cover - exercised only without the extra
    KazooClient = None  # type: ignore[assignment,misc]

_log = logging.getLogger(__package__)

CLUSTER_ID_PATH = "/cluster/id"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_TOPICS_PATH = "/config/topics"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_ELECTION_PATH = "/admin/preferred_replica_election"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
#: kafkalog's own: a broker's request to move leadership away before it stops.
CONTROLLED_SHUTDOWN_PATH = "/kafkalog/controlled_shutdown"
#: kafkalog's own: an ElectLeaders UNCLEAN request (Kafka's admin client asks the controller by RPC).
UNCLEAN_ELECTION_PATH = "/kafkalog/unclean_leader_election"
#: The persistent paths Kafka creates at start (``KafkaZkClient.createTopLevelPaths``).
_PERSISTENT_PATHS = ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/changes",
                     "/admin/delete_topics", "/isr_change_notification", "/cluster",
                     CONTROLLED_SHUTDOWN_PATH)
#: Kafka's "no leader" (``LeaderAndIsr.NoLeader``).
NO_LEADER = -1
#: The first controller epoch (``KafkaController.InitialControllerEpoch`` + 1).
_FIRST_CONTROLLER_EPOCH = 1
_BROKER_VERSION = 5
_CONTROLLER_VERSION = 2
_TOPIC_VERSION = 3
_PRODUCER_ID_BLOCK_VERSION = 1


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def _election_path(unclean: bool) -> str:
    return UNCLEAN_ELECTION_PATH if unclean else PREFERRED_ELECTION_PATH


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _json(value: Mapping[str, Any]) -> bytes:
    # Kafka's Json.encodeAsBytes: compact, no spaces.
    return json.dumps(value, separators=(",", ":")).encode()


def _parse(path: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise KafkalogError(f"znode {path} does not hold JSON: {e}") from None


@dataclass(frozen=True)
class PartitionState:
    """A partition's ``state`` znode (Kafka's ``LeaderIsrAndControllerEpoch``) and its znode
    version, the partition epoch of a versioned write (``zkVersion``)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def encode(self) -> bytes:
        return _json({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                      "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, path: str, data: bytes, zk_version: int) -> PartitionState:
        raw = _parse(path, data)
        try:
            return cls(int(raw["leader"]), int(raw["leader_epoch"]), tuple(int(b) for b in raw["isr"]),
                       int(raw["controller_epoch"]), zk_version)
        except (KeyError, TypeError, ValueError) as e:
            raise KafkalogError(f"znode {path} is not a partition state: missing or bad {e}") from None


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's znode: its id and each partition's replicas in preference order."""

    topic_id: str | None
    partitions: Mapping[int, tuple[int, ...]]
    zk_version: int = -1

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "version": _TOPIC_VERSION,
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "adding_replicas": {}, "removing_replicas": {},
        }
        if self.topic_id is not None:
            body["topic_id"] = self.topic_id
        return _json(body)

    @classmethod
    def decode(cls, path: str, data: bytes, zk_version: int) -> TopicAssignment:
        raw = _parse(path, data)
        try:
            parts = {int(p): tuple(int(b) for b in r) for p, r in raw["partitions"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise KafkalogError(f"znode {path} is not a topic assignment: missing or bad {e}") from None
        return cls(raw.get("topic_id"), parts, zk_version)


def broker_json(host: str, port: int) -> bytes:
    """``/brokers/ids/<id>`` version 5 (``BrokerIdZNode.encode``), one PLAINTEXT listener."""
    return _json({"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                  "endpoints": [f"PLAINTEXT://{host}:{port}"], "jmx_port": -1, "port": port, "host": host,
                  "version": _BROKER_VERSION, "timestamp": _now_ms()})


def parse_broker(path: str, data: bytes) -> tuple[str, int]:
    """The (host, port) of a broker's registration: its first endpoint, else host and port."""
    raw = _parse(path, data)
    try:
        for endpoint in raw.get("endpoints") or ():
            _, _, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            return host.strip("[]"), int(port)
        return str(raw["host"]), int(raw["port"])
    except (KeyError, TypeError, ValueError) as e:
        raise KafkalogError(f"znode {path} is not a broker registration: missing or bad {e}") from None


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port[,host:port...][/chroot]`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts or any(not h.rpartition(":")[2].isdigit() for h in hosts.split(",")):
        raise InvalidConfigError(f"zookeeper.connect = {connect}: expected HOST:PORT[,HOST:PORT...][/chroot]")
    return hosts, (slash + chroot).rstrip("/")


class ZkClient:
    """A session with the ZooKeeper ensemble and Kafka's znodes (``KafkaZkClient``).

    Args:
        connect: ``zookeeper.connect`` (``host:port[/chroot]``; the chroot is created if absent,
            as Kafka does).
        session_timeout_ms: ``zookeeper.session.timeout.ms``.
        connection_timeout_ms: ``zookeeper.connection.timeout.ms``: how long :meth:`start` waits.

    Raises:
        KafkalogError: kazoo is not installed (the ``kafkalog[cluster]`` extra).
    """

    def __init__(self, connect: str, *, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        if KazooClient is None:
            raise KafkalogError('cluster mode needs kazoo: pip install "kafkalog[cluster]"')
        hosts, chroot = split_connect(connect)
        self.connect = connect
        self._chroot = chroot
        self._hosts = hosts
        self._connection_timeout = connection_timeout_ms / 1000
        self._zk = KazooClient(hosts=hosts + chroot, timeout=session_timeout_ms / 1000,
                               connection_retry={"max_tries": -1, "max_delay": 1})
        self._session_listeners: list[Callable[[str], None]] = []
        self._session_id: int | None = None
        self._closed = False
        self._zk.add_listener(self._on_state)

    # -- session --------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (bounded by the connection timeout) and create Kafka's top-level paths.

        Raises:
            KafkalogError: the ensemble did not answer in time.
        """
        if self._chroot:
            # Kafka creates a missing chroot itself (KafkaServer.initZkClient).
            root = KazooClient(hosts=self._hosts, timeout=self._zk._session_timeout / 1000)
            try:
                root.start(timeout=self._connection_timeout)
                root.ensure_path(self._chroot)
            except KazooTimeoutError:
                raise KafkalogError(f"ZooKeeper at {self.connect} did not answer within "
                                    f"{self._connection_timeout:g} s (zookeeper.connection.timeout.ms)") from None
            finally:
                root.stop()
                root.close()
        try:
            self._zk.start(timeout=self._connection_timeout)
        except KazooTimeoutError:
            self.stop()
            raise KafkalogError(f"ZooKeeper at {self.connect} did not answer within "
                                f"{self._connection_timeout:g} s (zookeeper.connection.timeout.ms)") from None
        self._session_id = self.session_id
        for path in _PERSISTENT_PATHS:
            self._zk.ensure_path(path)

    def stop(self) -> None:
        """Close the session: this broker's ephemeral znodes vanish at once."""
        if self._closed:
            return
        self._closed = True
        self._zk.stop()
        self._zk.close()

    @property
    def session_id(self) -> int | None:
        ids = self._zk.client_id
        return ids[0] if ids else None

    def on_session(self, listener: Callable[[str], None]) -> None:
        """Call ``listener("lost")`` when the session expires and ``listener("new")`` once a new
        session is established (on kazoo's event thread: it must only hand the news on)."""
        self._session_listeners.append(listener)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_id = None
            for listener in self._session_listeners:
                listener("lost")
        elif state == KazooState.CONNECTED:
            # a reconnect inside the same session changes nothing; a new session id means
            # every ephemeral node and watch of the old one is gone (Kafka's SessionExpiration).
            self._zk.handler.spawn(self._check_new_session)

    def _check_new_session(self) -> None:
        sid = self.session_id
        if sid is not None and sid != self._session_id:
            # the first session after a loss (None before), or a new id after a reconnect
            self._session_id = sid
            for listener in self._session_listeners:
                listener("new")

    def expire_session_for_test(self) -> None:
        """Close this client's session from a second connection with the same credentials
        (the way ZooKeeper's own tests expire a session)."""
        sid, password = self._zk.client_id
        other = KazooClient(hosts=self._hosts + self._chroot, client_id=(sid, password))
        other.start(timeout=self._connection_timeout)
        other.stop()
        other.close()

    # -- the cluster id and brokers ----------------------------------------------------------------

    def cluster_id(self, proposed: str) -> str:
        """The cluster's id (``/cluster/id``), created with ``proposed`` by the first broker."""
        try:
            self._zk.create(CLUSTER_ID_PATH, _json({"version": "1", "id": proposed}))
            return proposed
        except NodeExistsError:
            data, _ = self._zk.get(CLUSTER_ID_PATH)
            return str(_parse(CLUSTER_ID_PATH, data)["id"])

    def register_broker(self, broker_id: int, host: str, port: int) -> None:
        """Create ``/brokers/ids/<id>`` (ephemeral).

        Raises:
            KafkalogError: another live broker has this id (Kafka's NodeExistsException).
        """
        path = f"{BROKER_IDS_PATH}/{broker_id}"
        try:
            self._zk.create(path, broker_json(host, port), ephemeral=True)
        except NodeExistsError:
            # our own node from a session that is being replaced: Kafka checks the owner too
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner != self.session_id:
                raise KafkalogError(f"broker.id {broker_id} is already registered in ZooKeeper at "
                                    f"{self.connect}{path} by another live broker") from None

    def brokers(self) -> dict[int, tuple[str, int]]:
        """Live broker id -> advertised (host, port), from ``/brokers/ids``."""
        out = {}
        for child in self._children(BROKER_IDS_PATH):
            if child.isdigit():
                got = self._get(f"{BROKER_IDS_PATH}/{child}")
                if got is not None:
                    out[int(child)] = parse_broker(f"{BROKER_IDS_PATH}/{child}", got[0])
        return out

    # -- the controller ------------------------------------------------------------------------------

    def controller(self) -> int | None:
        """The controller's broker id, or None while there is none."""
        got = self._get(CONTROLLER_PATH)
        if got is None:
            return None
        try:
            return int(_parse(CONTROLLER_PATH, got[0])["brokerid"])
        except (KeyError, TypeError, ValueError):
            return None

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create ``/controller`` and increment ``/controller_epoch`` in one multi-op, as
        ``KafkaZkClient.registerControllerAndIncrementControllerEpoch`` does; (epoch, epoch
        znode version) on success, None when another broker is the controller."""
        for _ in range(10):  # bounded: only a concurrent epoch bump makes it retry
            got = self._get(CONTROLLER_EPOCH_PATH)
            if got is None:
                try:
                    self._zk.create(CONTROLLER_EPOCH_PATH, b"0")
                except NodeExistsError:
                    pass
                continue
            epoch = int(got[0] or b"0")
            tx = self._zk.transaction()
            tx.check(CONTROLLER_EPOCH_PATH, got[1].version)
            tx.create(CONTROLLER_PATH, _json({"version": _CONTROLLER_VERSION, "brokerid": broker_id,
                                              "timestamp": _now_ms(), "kraftControllerEpoch": -1}), ephemeral=True)
            tx.set_data(CONTROLLER_EPOCH_PATH, str(epoch + 1).encode(), version=got[1].version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return epoch + 1, got[1].version + 1
            if isinstance(results[1], NodeExistsError):
                return None
        return None

    def held_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, epoch znode version) when ``/controller`` belongs to this session, else None
        (a node of this broker's previous session is not ours: it vanishes with that session)."""
        got = self._get(CONTROLLER_PATH)
        if got is None or got[1].ephemeralOwner != self.session_id:
            return None
        epoch = self._get(CONTROLLER_EPOCH_PATH)
        return None if epoch is None else (int(epoch[0] or b"0"), epoch[1].version)

    def resign(self, broker_id: int) -> None:
        """Delete ``/controller`` if this broker holds it."""
        got = self._get(CONTROLLER_PATH)
        if got is not None and got[1].ephemeralOwner == self.session_id:
            try:
                self._zk.delete(CONTROLLER_PATH, version=got[1].version)
            except (NoNodeError, BadVersionError):
                pass

    # -- topics -------------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        return sorted(self._children(TOPICS_PATH))

    def assignment(self, topic: str) -> TopicAssignment | None:
        got = self._get(topic_path(topic))
        if got is None:
            return None
        return TopicAssignment.decode(topic_path(topic), got[0], got[1].version)

    def topic_config(self, topic: str) -> dict[str, str]:
        path = f"{CONFIG_TOPICS_PATH}/{topic}"
        got = self._get(path)
        if got is None:
            return {}
        raw = _parse(path, got[0])
        return {str(k): str(v) for k, v in (raw.get("config") or {}).items()}

    def create_topic(self, topic: str, assignment: TopicAssignment, config: Mapping[str, str]) -> bool:
        """Write ``/config/topics/<t>`` then ``/brokers/topics/<t>`` (AdminZkClient's order);
        False when the topic exists already."""
        try:
            self._zk.create(f"{CONFIG_TOPICS_PATH}/{topic}", _json({"version": 1, "config": dict(config)}),
                            makepath=True)
        except NodeExistsError:
            self._zk.set(f"{CONFIG_TOPICS_PATH}/{topic}", _json({"version": 1, "config": dict(config)}))
        try:
            self._zk.create(topic_path(topic), assignment.encode(), makepath=True)
        except NodeExistsError:
            return False
        return True

    def set_assignment(self, topic: str, assignment: TopicAssignment) -> bool:
        """A versioned rewrite of the topic's znode (partition addition); False on a conflict."""
        try:
            self._zk.set(topic_path(topic), assignment.encode(), version=assignment.zk_version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    def mark_for_deletion(self, topic: str) -> None:
        try:
            self._zk.create(f"{DELETE_TOPICS_PATH}/{topic}", b"", makepath=True)
        except NodeExistsError:
            pass

    def topics_to_delete(self) -> list[str]:
        return sorted(self._children(DELETE_TOPICS_PATH))

    def delete_topic(self, topic: str, epoch_version: int) -> bool:
        """Remove a topic's znodes (the controller, fenced by its epoch); False if fenced."""
        if not self._epoch_is(epoch_version):
            return False
        for path in (topic_path(topic), f"{CONFIG_TOPICS_PATH}/{topic}", f"{DELETE_TOPICS_PATH}/{topic}"):
            try:
                self._zk.delete(path, recursive=True)
            except (NoNodeError, NotEmptyError):
                pass
        return True

    # -- partition states ---------------------------------------------------------------------------

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        path = state_path(topic, partition)
        got = self._get(path)
        if got is None:
            return None
        return PartitionState.decode(path, got[0], got[1].version)

    def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                               epoch_version: int) -> int | None:
        """Create a new partition's state znode (the controller: NewPartition -> Online),
        checked against the controller epoch; its version (0) or None."""
        path = state_path(topic, partition)
        self._zk.ensure_path(path.rsplit("/", 1)[0])
        tx = self._zk.transaction()
        tx.check(CONTROLLER_EPOCH_PATH, epoch_version)
        tx.create(path, state.encode())
        results = tx.commit()
        return None if any(isinstance(r, Exception) for r in results) else 0

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               epoch_version: int | None = None) -> int | None:
        """Write ``state`` if the znode is still at ``state.zk_version`` (and, for the controller,
        ``/controller_epoch`` at ``epoch_version``); the new version, or None if either moved."""
        path = state_path(topic, partition)
        if epoch_version is None:
            try:
                return self._zk.set(path, state.encode(), version=state.zk_version).version
            except (BadVersionError, NoNodeError):
                return None
        tx = self._zk.transaction()
        tx.check(CONTROLLER_EPOCH_PATH, epoch_version)
        tx.set_data(path, state.encode(), version=state.zk_version)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            return None
        return state.zk_version + 1

    # -- admin requests ---------------------------------------------------------------------------

    def request_election(self, partitions: Sequence[tuple[str, int]], *, unclean: bool = False) -> bool:
        """Create ``/admin/preferred_replica_election`` (with ``unclean``:
        ``/kafkalog/unclean_leader_election``); False while one is in progress."""
        body = {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        try:
            self._zk.create(_election_path(unclean), _json(body), makepath=True)
        except NodeExistsError:
            return False
        return True

    def election_request(self, *, unclean: bool = False) -> list[tuple[str, int]] | None:
        """The partitions of the pending preferred (or unclean) election request, or None."""
        path = _election_path(unclean)
        got = self._get(path)
        if got is None:
            return None
        raw = _parse(path, got[0])
        return [(str(e["topic"]), int(e["partition"])) for e in raw.get("partitions", [])]

    def finish_election(self, *, unclean: bool = False) -> None:
        self._delete(_election_path(unclean))

    def wait_absent(self, path: str, timeout_s: float) -> bool:
        """Wait (bounded) until ``path`` does not exist, on an exists-watch; whether it is gone.
        Watch events of one session arrive in order, so what the deleter wrote before is seen."""
        deadline = time.monotonic() + timeout_s
        while True:
            changed = threading.Event()
            if self._zk.exists(path, watch=lambda event, changed=changed: changed.set()) is None:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or not changed.wait(left):
                return False

    def request_controlled_shutdown(self, broker_id: int) -> None:
        path = f"{CONTROLLED_SHUTDOWN_PATH}/{broker_id}"
        try:
            self._zk.create(path, _json({"version": 1, "broker": broker_id, "remaining": None}), ephemeral=True)
        except NodeExistsError:
            pass

    def controlled_shutdowns(self) -> list[int]:
        return sorted(int(c) for c in self._children(CONTROLLED_SHUTDOWN_PATH) if c.isdigit())

    def answer_controlled_shutdown(self, broker_id: int, remaining: Sequence[tuple[str, int]]) -> None:
        """The controller's answer: the partitions it could not move (Kafka's
        ControlledShutdownResponse ``remaining_partitions``)."""
        body = {"version": 1, "broker": broker_id,
                "remaining": [{"topic": t, "partition": p} for t, p in remaining]}
        try:
            self._zk.set(f"{CONTROLLED_SHUTDOWN_PATH}/{broker_id}", _json(body))
        except NoNodeError:
            pass

    def await_controlled_shutdown_answer(self, broker_id: int, timeout_s: float) -> list[tuple[str, int]] | None:
        """The controller's answer to this broker's controlled shutdown (the partitions it could
        not move), waited for on a data watch (bounded); None when none came in ``timeout_s``
        or the request node is gone."""
        path = f"{CONTROLLED_SHUTDOWN_PATH}/{broker_id}"
        deadline = time.monotonic() + timeout_s
        while True:
            changed = threading.Event()
            try:
                data, _ = self._zk.get(path, watch=lambda event, changed=changed: changed.set())
            except NoNodeError:
                return None
            remaining = _parse(path, data).get("remaining")
            if remaining is not None:
                return [(str(e["topic"]), int(e["partition"])) for e in remaining]
            left = deadline - time.monotonic()
            if left <= 0 or not changed.wait(left):
                return None

    def finish_controlled_shutdown(self, broker_id: int) -> None:
        self._delete(f"{CONTROLLED_SHUTDOWN_PATH}/{broker_id}")

    def allocate_producer_ids(self, broker_id: int, block_size: int) -> tuple[int, int]:
        """The next block of producer ids, [start, end], claimed with a versioned write of
        ``/latest_producer_id_block`` (``ZkProducerIdManager.getNewProducerIdBlock``)."""
        for _ in range(100):  # bounded: each retry means another broker took a block
            got = self._get(PRODUCER_ID_BLOCK_PATH)
            start = 0 if got is None or not got[0] else int(_parse(PRODUCER_ID_BLOCK_PATH, got[0])["block_end"]) + 1
            end = start + block_size - 1
            body = _json({"version": _PRODUCER_ID_BLOCK_VERSION, "broker": broker_id,
                          "block_start": str(start), "block_end": str(end)})
            try:
                if got is None:
                    self._zk.create(PRODUCER_ID_BLOCK_PATH, body)
                else:
                    self._zk.set(PRODUCER_ID_BLOCK_PATH, body, version=got[1].version)
                return start, end
            except (NodeExistsError, BadVersionError):
                continue
        raise KafkalogError(f"could not claim a producer id block in {PRODUCER_ID_BLOCK_PATH} after 100 tries")

    # -- watches ------------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> None:
        """Call ``callback(children)`` now and on every change (kazoo's ChildrenWatch, which
        re-arms itself across reconnects of one session)."""
        self._zk.ensure_path(path)
        self._zk.ChildrenWatch(path, callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], Any]) -> None:
        """Call ``callback(data, version)`` now and on every change; (None, None) when the znode
        is absent. Returning False from the callback ends the watch (kazoo's DataWatch)."""

        def on_change(data: bytes | None, stat: Any) -> Any:
            return callback(data, None if stat is None else stat.version)

        self._zk.DataWatch(path, on_change)

    # -- helpers -----------------------------------------------------------------------------------

    def _epoch_is(self, epoch_version: int) -> bool:
        got = self._get(CONTROLLER_EPOCH_PATH)
        return got is not None and got[1].version == epoch_version

    def _children(self, path: str) -> list[str]:
        try:
            return self._zk.get_children(path)
        except NoNodeError:
            return []

    def _get(self, path: str) -> tuple[bytes, Any] | None:
        try:
            return self._zk.get(path)
        except NoNodeError:
            return None

    def _delete(self, path: str) -> None:
        try:
            self._zk.delete(path)
        except NoNodeError:
            pass


#: What the broker catches from ZooKeeper calls (a lost connection in the middle of a call).
ZK_ERRORS: tuple[type[BaseException], ...] = (KafkalogError,) + (
    (KazooException, RolledBackError) if KazooClient is not None else ()
)
