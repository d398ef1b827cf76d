"""``kafkalog groups`` over Kafka 4's groups: consumer groups of the KIP-848 protocol and share
groups (KIP-932), from ``__consumer_offsets`` segments written with records encoded by the
test-only schema writer (``kafka_schema_writer``), tombstones included."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_schema_writer import coordinator_record

from kafkalog import FileRecords, Log, LogConfig, RecordBatchBuilder
from kafkalog.checkpoint import PartitionMetadataFile
from kafkalog.protocol import offset_commit_key, offset_commit_value
from kafkalog.tools import consumer_group_lag, main, read_consumer_offsets

TS = 1_700_000_000_000
ORDERS = "b3JkZXJzLXRvcGljLWlkIQ"  # base64 of b"orders-topic-id!"
UNKNOWN_TOPIC = "dW5rbm93bi10b3BpYy1pZA"  # base64 of b"unknown-topic-id"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


# -- the records, by Kafka's schema files ------------------------------------------------------------

def group_epoch(kind: str, group: str, epoch: int | None):
    prefix = "ConsumerGroup" if kind == "consumer" else "ShareGroup"
    return coordinator_record(f"{prefix}MetadataKey", {"groupId": group}, f"{prefix}MetadataValue",
                              None if epoch is None else {"epoch": epoch})


def assignment_epoch(kind: str, group: str, epoch: int | None):
    prefix = "ConsumerGroup" if kind == "consumer" else "ShareGroup"
    return coordinator_record(f"{prefix}TargetAssignmentMetadataKey", {"groupId": group},
                              f"{prefix}TargetAssignmentMetadataValue",
                              None if epoch is None else {"assignmentEpoch": epoch})


def member(kind: str, group: str, member_id: str, client: str | None, host: str = "/10.0.0.1",
           instance: str | None = None):
    """A member's metadata record (None ``client``: its tombstone)."""
    if kind == "consumer":
        value = None if client is None else {
            "instanceId": instance, "rackId": None, "clientId": client, "clientHost": host,
            "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 45000,
            "serverAssignor": "uniform"}
        return coordinator_record("ConsumerGroupMemberMetadataKey", {"groupId": group, "memberId": member_id},
                                  "ConsumerGroupMemberMetadataValue", value)
    value = None if client is None else {"rackId": None, "clientId": client, "clientHost": host,
                                         "subscribedTopicNames": ["orders"]}
    return coordinator_record("ShareGroupMemberMetadataKey", {"groupId": group, "memberId": member_id},
                              "ShareGroupMemberMetadataValue", value)


def current(kind: str, group: str, member_id: str, epoch: int | None, partitions: list[int] = (), *,
            state: int = 0, topic: str = ORDERS):
    """A member's current assignment (None ``epoch``: its tombstone)."""
    key = {"groupId": group, "memberId": member_id}
    if kind == "consumer":
        value = None if epoch is None else {
            "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": state,
            "assignedPartitions": [{"topicId": topic, "partitions": list(partitions)}],
            "partitionsPendingRevocation": []}
        return coordinator_record("ConsumerGroupCurrentMemberAssignmentKey", key,
                                  "ConsumerGroupCurrentMemberAssignmentValue", value)
    value = None if epoch is None else {
        "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": state,
        "assignedPartitions": [{"topicId": topic, "partitions": list(partitions)}]}
    return coordinator_record("ShareGroupCurrentMemberAssignmentKey", key,
                              "ShareGroupCurrentMemberAssignmentValue", value)


def commit(group: str, partition: int, offset: int):
    return offset_commit_key(group, "orders", partition), offset_commit_value(offset, 0, "", TS)


def share_state(kind: str, group: str, partition: int, start: int | None):
    """A ``__share_group_state`` record: a snapshot or update of a share-partition (None
    ``start``: its tombstone)."""
    key = {"groupId": group, "topicId": ORDERS, "partition": partition}
    if kind == "snapshot":
        value = None if start is None else {"snapshotEpoch": 0, "stateEpoch": 1, "leaderEpoch": 0,
                                            "startOffset": start, "stateBatches": []}
        return coordinator_record("ShareSnapshotKey", key, "ShareSnapshotValue", value)
    value = {"snapshotEpoch": 0, "leaderEpoch": 0, "startOffset": start,
             "stateBatches": [{"firstOffset": 6, "lastOffset": 6, "deliveryState": 2, "deliveryCount": 1}]}
    return coordinator_record("ShareUpdateKey", key, "ShareUpdateValue", value)


def write_offsets(root: Path, records: list[tuple[bytes, bytes | None]], topic: str = "__consumer_offsets") -> None:
    directory = root / f"{topic}-0"
    directory.mkdir(parents=True, exist_ok=True)
    with FileRecords.open(directory / "00000000000000000000.log", create=True) as fr:
        for n, (key, value) in enumerate(records):  # one record a batch, as the coordinator appends
            b = RecordBatchBuilder(2, base_offset=n)
            b.append(key, value, timestamp=TS)
            fr.append(b.build())


def write_topic(root: Path, partition: int, count: int) -> None:
    directory = root / f"orders-{partition}"
    with Log.open(directory, LogConfig(retention_ms=-1)) as log:
        for n in range(count):
            b = RecordBatchBuilder()
            b.append(b"k%d" % n, b"v", timestamp=TS)
            log.append(b.build())
    PartitionMetadataFile(directory / "partition.metadata").write(ORDERS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """``orders`` (10 and 5 records, topic id ORDERS) and the groups of Kafka 4."""
    root = tmp_path / "kafka-logs"
    write_topic(root, 0, 10)
    write_topic(root, 1, 5)
    c, s = "consumer", "share"
    write_offsets(root, [
        # cg: two members reconciled to assignment epoch 5 -> Stable; named by partition.metadata
        group_epoch(c, "cg", 5), member(c, "cg", "m1", "c1"), member(c, "cg", "m2", "c2", "/10.0.0.2", "i2"),
        assignment_epoch(c, "cg", 5), current(c, "cg", "m1", 5, [0]), current(c, "cg", "m2", 5, [1]),
        commit("cg", 0, 7), commit("cg", 1, 2),
        # a member that joined then left (its assignment's tombstone, then its metadata's)
        member(c, "cg", "m3", "c3"), current(c, "cg", "m3", 5, []), current(c, "cg", "m3", None),
        member(c, "cg", "m3", None),
        # a member still revoking partitions -> Reconciling; a group epoch ahead -> Assigning
        group_epoch(c, "rec", 3), assignment_epoch(c, "rec", 3), member(c, "rec", "r1", "c1"),
        current(c, "rec", "r1", 3, [0], state=1),
        group_epoch(c, "asg", 4), assignment_epoch(c, "asg", 3), member(c, "asg", "a1", "c1"),
        current(c, "asg", "a1", 3, [1], topic=UNKNOWN_TOPIC),
        # a group deleted by its tombstones
        group_epoch(c, "gone", 1), member(c, "gone", "g1", "c1"), current(c, "gone", "g1", 1, [0]),
        current(c, "gone", "g1", None), member(c, "gone", "g1", None), group_epoch(c, "gone", None),
        # share groups: one with a member, one whose member left
        group_epoch(s, "sg", 2), member(s, "sg", "sm1", "share-c1"), current(s, "sg", "sm1", 2, [0, 1]),
        group_epoch(s, "sg-empty", 1), member(s, "sg-empty", "x", "share-c2"), current(s, "sg-empty", "x", 1, [0]),
        current(s, "sg-empty", "x", None), member(s, "sg-empty", "x", None),
    ])
    # The share group's progress: orders-0 moved by an update, orders-1 not (start offset -1),
    # and a share-partition whose state was deleted.
    write_offsets(root, [
        share_state("snapshot", "sg", 0, 4), share_state("snapshot", "sg", 1, 2), share_state("update", "sg", 0, 6),
        share_state("update", "sg", 1, -1), share_state("snapshot", "sg", 2, 1), share_state("snapshot", "sg", 2, None),
    ], topic="__share_group_state")
    return root


def test_groups_types_states_and_members(log_dir: Path) -> None:
    offsets = read_consumer_offsets(log_dir)
    assert offsets.warnings == []
    groups = offsets.modern_groups
    assert {name: (g.kind, g.state) for name, g in groups.items()} == {
        "cg": ("consumer", "Stable"), "rec": ("consumer", "Reconciling"), "asg": ("consumer", "Assigning"),
        "sg": ("share", "Stable"), "sg-empty": ("share", "Empty"),
    }
    assert sorted(groups["cg"].members) == ["m1", "m2"]  # m3 left
    assert "gone" in offsets.deleted_groups


def test_lag_rows_with_members_of_a_consumer_group(log_dir: Path) -> None:
    rows = {(r.group, r.topic, r.partition): r for r in consumer_group_lag(log_dir)}
    r0, r1 = rows[("cg", "orders", 0)], rows[("cg", "orders", 1)]
    assert (r0.current_offset, r0.log_end_offset, r0.lag, r0.consumer_id, r0.client_id, r0.host) == (
        7, 10, 3, "m1", "c1", "/10.0.0.1")
    assert (r1.current_offset, r1.log_end_offset, r1.lag, r1.consumer_id) == (2, 5, 3, "m2")
    assert (r0.group_type, r0.state) == ("consumer", "Stable")
    share0, share1 = rows[("sg", "orders", 0)], rows[("sg", "orders", 1)]
    # A share group's position is its share-partition start offset from __share_group_state.
    assert (share0.group_type, share0.current_offset, share0.log_end_offset, share0.lag, share0.consumer_id) == (
        "share", 6, 10, 4, "sm1")
    assert (share1.current_offset, share1.lag) == (2, 3)
    assert ("sg", "orders", 2) not in rows
    # A topic id no record and no partition.metadata names is shown as the id.
    assert rows[("asg", UNKNOWN_TOPIC, 1)].consumer_id == "a1"
    assert not any(g == "gone" for g, _, _ in rows)


def test_text_describe(log_dir: Path) -> None:
    status, out, err = run("groups", str(log_dir), "--group", "cg")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [line.split() for line in lines[2:]] == [
        ["cg", "orders", "0", "7", "10", "3", "m1", "/10.0.0.1", "c1"],
        ["cg", "orders", "1", "2", "5", "3", "m2", "/10.0.0.2", "c2"],
    ]
    assert err == ""
    _, _, err = run("groups", str(log_dir), "--group", "rec")
    assert "Warning: Consumer group 'rec' is rebalancing." in err
    status, _, err = run("groups", str(log_dir), "--group", "gone")
    assert status == 1 and "gone" in err
    status, out, _ = run("groups", str(log_dir), "--group", "sg")
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        ["sg", "orders", "0", "6", "10", "4", "sm1", "/10.0.0.1", "share-c1"],
        ["sg", "orders", "1", "2", "5", "3", "sm1", "/10.0.0.1", "share-c1"],
    ]


def test_state_view(log_dir: Path) -> None:
    status, out, _ = run("groups", str(log_dir), "--state")
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("GROUP")]
    assert rows == [
        ["asg", "consumer", "uniform", "Assigning", "1"],
        ["cg", "consumer", "uniform", "Stable", "2"],
        ["rec", "consumer", "uniform", "Reconciling", "1"],
        ["sg", "share", "Stable", "1"],
        ["sg-empty", "share", "Empty", "0"],
    ]
    status, out, _ = run("groups", str(log_dir), "--state", "--json")
    objects = {o["group"]: o for o in map(json.loads, out.splitlines())}
    assert objects["sg"]["groupType"] == "share" and objects["sg"]["state"] == "Stable"
    assert objects["sg"]["members"][0]["assignment"] == [{"topic": "orders", "partition": 0},
                                                          {"topic": "orders", "partition": 1}]
    assert objects["cg"]["members"][1]["groupInstanceId"] == "i2"


def test_members_view(log_dir: Path) -> None:
    status, out, err = run("groups", str(log_dir), "--members", "--verbose", "--group", "cg")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                "ASSIGNMENT"]
    assert lines[2].split() == ["cg", "m1", "/10.0.0.1", "c1", "1", "orders(0)"]
    assert lines[3].split() == ["cg", "m2", "i2", "/10.0.0.2", "c2", "1", "orders(1)"]
    status, out, err = run("groups", str(log_dir), "--members", "--group", "sg-empty")
    assert status == 0 and "Share group 'sg-empty' has no active members." in err


def test_the_command_writes_nothing(log_dir: Path) -> None:
    def digest() -> dict[str, str]:
        out = {}
        for dirpath, _, filenames in os.walk(log_dir):
            for name in filenames:
                path = os.path.join(dirpath, name)
                out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return out

    before = digest()
    for argv in ((), ("--json",), ("--members", "--verbose"), ("--state", "--json")):
        assert run("groups", str(log_dir), *argv)[0] == 0
    assert digest() == before


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans()), max_size=12))
def test_members_are_those_whose_last_record_is_not_a_tombstone(tmp_path_factory, events) -> None:
    """A member joins (metadata + current assignment) or leaves (Kafka's order: the assignment's
    tombstone, then the metadata's); the group shows exactly the members whose last event is a join."""
    root = tmp_path_factory.mktemp("logs")
    records = [group_epoch("consumer", "g", 1), assignment_epoch("consumer", "g", 1)]
    present: set[str] = set()
    for member_id, joins in events:
        if joins:
            records += [member("consumer", "g", member_id, "client"), current("consumer", "g", member_id, 1, [0])]
            present.add(member_id)
        else:
            records += [current("consumer", "g", member_id, None), member("consumer", "g", member_id, None)]
            present.discard(member_id)
    write_offsets(root, records)
    group = read_consumer_offsets(root).modern_groups["g"]
    assert set(group.members) == present
    assert group.state == ("Stable" if present else "Empty")


def test_state_and_members_text_as_docs_show(log_dir: Path) -> None:
    """The exact lines of docs/cli.md's ``--state`` and ``--members --verbose`` example."""
    _, out, _ = run("groups", str(log_dir), "--state", "--group", "cg")
    assert out.splitlines() == [
        "",
        "GROUP                     TYPE       ASSIGNMENT-STRATEGY  STATE           #MEMBERS",
        "cg                        consumer   uniform              Stable          2",
    ]
    _, out, _ = run("groups", str(log_dir), "--members", "--verbose", "--group", "cg")
    assert out.splitlines() == [
        "",
        "GROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT",
        "cg              m1                                /10.0.0.1       c1              1               orders(0)",
        "cg              m2              i2                /10.0.0.2       c2              1               orders(1)",
    ]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for line in out.splitlines()[1:]:
        assert line in docs
