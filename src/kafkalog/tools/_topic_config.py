"""A topic's effective settings for the operator tools, and where each came from: ``--config``,
the cluster's KRaft metadata log (its topic ``ConfigRecord``s), the settings Kafka creates its
internal topics with, or Kafka's defaults. So an operator does not retype what the cluster
recorded, and the tools cannot apply delete retention to a topic Kafka keeps compacted, nor compact
one Kafka never compacts. (The KRaft metadata log is no topic: the tools leave it alone, see
``_tool._left_alone``.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import FileRecords, LogConfig
from ..filenames import CLUSTER_METADATA_TOPIC, KRAFT_SNAPSHOT_FILE, parse_partition_dir
from ..errors import KafkalogError
from ..protocol import (
    CONFIG_RESOURCE_TOPIC,
    METADATA_FRAME_VERSION,
    METADATA_RECORDS,
    MessageReader,
    ProtocolError,
    read_message,
)

METADATA_DIR = f"{CLUSTER_METADATA_TOPIC}-0"
KAFKA_DEFAULT = "Kafka default"
INTERNAL_DEFAULT = "internal topic default"
CLI = "--config"
ALLOW_COMPACTED = "--allow-compacted"

#: What Kafka (and Schema Registry) create their internal topics with; docs/cli.md "Internal
#: topics" gives the rule of each. Only the properties :class:`LogConfig` knows are applied.
INTERNAL_TOPICS: dict[str, dict[str, str]] = {
    # GroupCoordinatorService.groupMetadataTopicConfigs: compacted, 100 MiB segments.
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"},
    # TransactionLog.transactionTopicConfigs.
    "__transaction_state": {
        "cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false", "min.insync.replicas": "1",
    },
    # ShareCoordinatorService.shareGroupStateTopicConfigs (KIP-932): delete policy but no time
    # limit; the share coordinator trims it with DeleteRecords (the log start offset) itself.
    "__share_group_state": {
        "cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "104857600",
        "compression.type": "producer", "min.insync.replicas": "1",
    },
    # TopicBasedRemoteLogMetadataManager.createRemoteLogMetadataTopicRequest (KIP-405):
    # remote.log.metadata.topic.retention.ms, -1 by default.
    "__remote_log_metadata": {"cleanup.policy": "delete", "retention.ms": "-1", "remote.storage.enable": "false"},
    # Schema Registry's KafkaStore creates its store compacted, and refuses to start otherwise.
    "_schemas": {"cleanup.policy": "compact"},
}
#: The internal topics Kafka never compacts, and what compacting one would lose (``kafkalog
#: compact`` refuses them: it implies ``cleanup.policy=compact`` for any other topic).
NEVER_COMPACTED: dict[str, str] = {
    "__share_group_state": (
        "Kafka never compacts it (cleanup.policy=delete, KIP-932): each ShareUpdate record counts only "
        "after the ShareSnapshot before it, and the share coordinator trims the log itself"
    ),
    "__remote_log_metadata": (
        "Kafka never compacts it (cleanup.policy=delete, KIP-405), and its records have no key: "
        "compaction would remove every one"
    ),
}
#: The settings that make retention delete by time or size.
_RETENTION_KEYS = ("retention.ms", "retention.bytes")
_TOPIC_RECORD, _CONFIG_RECORD, _REMOVE_TOPIC_RECORD = 2, 4, 9


@dataclass
class TopicSettings:
    """A partition's effective topic settings: the config, each explicitly set property's
    source, and why a deletion the operator asked for was refused (None when not)."""

    topic: str | None
    config: LogConfig
    sources: dict[str, str] = field(default_factory=dict)
    refused: str | None = None

    def source(self, key: str) -> str:
        return self.sources.get(key, KAFKA_DEFAULT)

    def describe(self, keys: Iterable[str]) -> str:
        props = self.config.to_properties()
        return " ".join(f"{k}={props[k]} ({self.source(k)})" for k in keys)

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {k: {"value": v, "source": self.source(k)} for k, v in self.config.to_properties().items()}


class MetadataConfigs:
    """The topic ``ConfigRecord``s of a KRaft metadata log: the newest snapshot (``*.checkpoint``)
    replayed, then the log's records after it. Read-only; a damaged tail ends the reading (as
    Kafka's recovery would truncate it)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.topics: dict[str, dict[str, tuple[str, str]]] = {}  # topic -> key -> (value, source)
        self._names: dict[str, str] = {}  # topic id -> name
        self._replay()

    def for_topic(self, topic: str) -> dict[str, tuple[str, str]]:
        return dict(self.topics.get(topic, {}))

    def _replay(self) -> None:
        snapshots = sorted(p for p in self.directory.iterdir() if KRAFT_SNAPSHOT_FILE.match(p.name))
        start = 0
        if snapshots:
            newest = snapshots[-1]
            start = int(KRAFT_SNAPSHOT_FILE.match(newest.name).group(1))  # type: ignore[union-attr]
            self._read(newest, 0, f"metadata snapshot {newest}")
        for log in sorted(self.directory.glob("*.log")):
            self._read(log, start, f"metadata log {log}")

    def _read(self, path: Path, start: int, label: str) -> None:
        with FileRecords.open(path) as fr:
            try:
                for batch in fr.batches(validate=True):
                    if batch.is_control or batch.last_offset < start:
                        continue
                    for record in batch.records():
                        if record.offset >= start and record.value is not None:
                            self._apply(bytes(record.value), f"{label} offset {record.offset}")
            except KafkalogError:
                return  # the valid prefix is what Kafka would keep

    def _apply(self, value: bytes, source: str) -> None:
        r = MessageReader(value)
        try:
            if r.uvarint("frame version") != METADATA_FRAME_VERSION:
                return
            api_key, version = r.uvarint("type"), r.uvarint("version")
            if api_key not in (_TOPIC_RECORD, _CONFIG_RECORD, _REMOVE_TOPIC_RECORD):
                return
            data = read_message(METADATA_RECORDS[api_key][1], r, version)
        except ProtocolError:
            return  # not a record these settings come from
        if api_key == _TOPIC_RECORD:
            self._names[data["topicId"]] = data["name"]
        elif api_key == _REMOVE_TOPIC_RECORD:  # a deleted topic's configs go with it
            self.topics.pop(self._names.pop(data["topicId"], ""), None)
        elif data["resourceType"] == CONFIG_RESOURCE_TOPIC:
            settings = self.topics.setdefault(data["resourceName"], {})
            if data["value"] is None:  # the override is removed
                settings.pop(data["name"], None)
            else:
                settings[data["name"]] = (data["value"], source)


def find_metadata_log(partition: Path, given: str | None) -> Path | None:
    """The metadata log directory: ``given`` (a directory, or a file in one), else
    ``__cluster_metadata-0`` beside the partition, else none."""
    if given is not None:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", given)
        return path if path.is_dir() else path.parent
    beside = partition.parent / METADATA_DIR
    return beside if beside.is_dir() else None


def resolve(
    partition: Path,
    cli: Mapping[str, str],
    *,
    metadata: MetadataConfigs | None,
    allow_compacted: bool = False,
    implied: Mapping[str, tuple[str, str]] | None = None,
) -> TopicSettings:
    """The effective settings of ``partition``'s topic: Kafka's defaults, then the internal
    topic's creation settings or the metadata log's recorded ones, then ``implied`` (what the
    command itself implies), then ``--config``. When the topic is compact-only before
    ``--config`` and ``--config`` asks for time or size retention, the compact policy is kept
    unless ``allow_compacted`` -- Kafka never deletes a compacted topic's records by age or size.

    Raises:
        KafkalogError: a recorded value that is not a valid topic setting.
    """
    try:
        topic: str | None = parse_partition_dir(partition)[0]
    except (KafkalogError, ValueError):
        topic = None
    known = LogConfig().to_properties()
    chosen: dict[str, tuple[str, str]] = {}
    if topic in INTERNAL_TOPICS:
        chosen.update((k, (v, INTERNAL_DEFAULT)) for k, v in INTERNAL_TOPICS[topic].items() if k in known)
    if metadata is not None and topic is not None:
        chosen.update((k, vs) for k, vs in metadata.for_topic(topic).items() if k in known)
    chosen.update(implied or {})
    recorded_value, recorded_source = chosen.get("cleanup.policy", (known["cleanup.policy"], KAFKA_DEFAULT))
    recorded_policy = _policy(recorded_value)
    chosen.update((k, (v, CLI)) for k, v in cli.items())
    refused = None
    if "delete" not in recorded_policy:
        asked = [k for k in _RETENTION_KEYS if k in cli]
        if "cleanup.policy" in cli and "delete" in _policy(cli["cleanup.policy"]):
            asked.append(f"cleanup.policy={cli['cleanup.policy']}")
        if asked and not allow_compacted:
            chosen["cleanup.policy"] = (recorded_value, recorded_source)
            refused = (
                f"topic {topic} is compacted (cleanup.policy={','.join(recorded_policy)}, {recorded_source}): "
                f"Kafka never deletes its records by age or size, so {', '.join(asked)} is not applied; "
                f"pass {ALLOW_COMPACTED} to delete from it anyway"
            )
        elif asked and "cleanup.policy" not in cli:
            chosen["cleanup.policy"] = (",".join((*recorded_policy, "delete")), ALLOW_COMPACTED)
    try:
        config = LogConfig.from_properties({k: v for k, (v, _) in chosen.items()})
    except KafkalogError as e:
        raise KafkalogError(f"topic settings: {e}", file=str(partition)) from None
    return TopicSettings(topic, config, {k: s for k, (_, s) in chosen.items()}, refused)


def _policy(text: str) -> tuple[str, ...]:
    return tuple(sorted({p.strip() for p in text.split(",") if p.strip()}))


class SettingsReader:
    """The effective settings of each partition one command visits (:func:`resolve`), with
    every metadata log read once however many partitions it serves."""

    def __init__(
        self,
        cli: Mapping[str, str],
        metadata_log: str | None,
        *,
        implied: Mapping[str, tuple[str, str]] | None = None,
        allow_compacted: bool = False,
    ) -> None:
        self._cli = cli
        self._given = metadata_log
        self._implied = implied
        self._allow_compacted = allow_compacted
        self._logs: dict[Path, MetadataConfigs] = {}

    def __call__(self, partition: Path) -> TopicSettings:
        where = find_metadata_log(partition, self._given)
        metadata = None
        if where is not None:
            metadata = self._logs.get(where)
            if metadata is None:
                metadata = self._logs[where] = MetadataConfigs(where)
        return resolve(
            partition, self._cli, metadata=metadata, allow_compacted=self._allow_compacted, implied=self._implied
        )
