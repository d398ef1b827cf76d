"""``kafkalog groups`` and the committed-offsets API: __consumer_offsets loaded as Kafka's group
coordinator loads it, lag against the partitions beside it, and nothing written."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import ControlRecordType, FileRecords, Log, LogConfig, RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.protocol import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    coordinator_record_schemas,
    write_message,
)
from kafkalog.tools import (
    committed_offsets,
    consumer_group_lag,
    log_end_offset,
    main,
    read_consumer_offsets,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
TS = 1_700_000_000_000
_INT16 = struct.Struct(">h")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def tree_digest(root: Path) -> dict[str, str]:
    """Every file and directory below ``root``: its bytes' digest (directories: "dir")."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


# -- coordinator records, encoded with the protocol package's schemas ---------------------------


def commit_key(group: str, topic: str, partition: int) -> bytes:
    key, _ = coordinator_record_schemas(1)
    return _INT16.pack(1) + write_message(key, {"group": group, "topic": topic, "partition": partition}, 1)


def commit_value(offset: int, *, metadata: str = "", epoch: int = 0, ts: int = TS) -> bytes:
    _, value = coordinator_record_schemas(1)
    fields = {"offset": offset, "leaderEpoch": epoch, "metadata": metadata, "commitTimestamp": ts}
    return _INT16.pack(3) + write_message(value, fields, 3)


def group_key(group: str) -> bytes:
    key, _ = coordinator_record_schemas(2)
    return _INT16.pack(2) + write_message(key, {"group": group}, 2)


def group_value(members: list[tuple[str, str, str, list[tuple[str, list[int]]]]]) -> bytes:
    """A consumer group's metadata (v3): members as (member id, client id, host, assignment)."""
    _, value = coordinator_record_schemas(2)
    encoded = []
    for member_id, client_id, host, assignment in members:
        assigned = _INT16.pack(0) + write_message(
            CONSUMER_PROTOCOL_ASSIGNMENT,
            {"assignedPartitions": [{"topic": t, "partitions": ps} for t, ps in assignment], "userData": None}, 0,
        )
        encoded.append({
            "memberId": member_id, "groupInstanceId": None, "clientId": client_id, "clientHost": host,
            "rebalanceTimeout": 300000, "sessionTimeout": 45000, "subscription": b"", "assignment": assigned,
        })
    fields = {"protocolType": "consumer", "generation": 3, "protocol": "range",
              "leader": members[0][0] if members else None, "currentStateTimestamp": TS, "members": encoded}
    return _INT16.pack(3) + write_message(value, fields, 3)


def batch(*records: tuple[bytes, bytes | None], producer_id: int = -1, transactional: bool = False):
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional)
    for key, value in records:
        b.append(key, value, timestamp=TS)
    return b.build()


def marker(kind: ControlRecordType, producer_id: int):
    return RecordBatchBuilder.end_transaction_marker(kind, producer_id=producer_id, producer_epoch=0,
                                                     coordinator_epoch=0, timestamp=TS)


def write_topic(log_dir: Path, topic: str, partition: int, count: int) -> None:
    with Log.open(log_dir / f"{topic}-{partition}", LogConfig(retention_ms=-1)) as log:
        for n in range(count):
            log.append(batch((b"k%d" % n, b"v")))


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A log directory: topic ``orders`` (10 and 5 records), ``__consumer_offsets-0`` with
    commits, an override, a tombstone, group metadata and transactional commits."""
    root = tmp_path / "kafka-logs"
    write_topic(root, "orders", 0, 10)
    write_topic(root, "orders", 1, 5)
    config = LogConfig(cleanup_policy="compact", segment_bytes=1024, retention_ms=-1)
    with Log.open(root / "__consumer_offsets-0", config) as offsets_log:

        class _Coordinator:  # the group coordinator's appends (markers included)
            @staticmethod
            def append(records):
                return offsets_log.append(records, origin=AppendOrigin.COORDINATOR)

        log = _Coordinator()
        log.append(batch((commit_key("app", "orders", 0), commit_value(3)),
                         (commit_key("app", "orders", 1), commit_value(1))))
        log.append(batch((commit_key("app", "orders", 0), commit_value(7, metadata="m"))))  # the latest wins
        log.append(batch((group_key("app"), group_value([
            ("consumer-1-abc", "consumer-1", "/127.0.0.1", [("orders", [0, 1])]),
        ]))))
        log.append(batch((commit_key("gone", "orders", 0), commit_value(2))))
        log.append(batch((commit_key("gone", "orders", 0), None)))  # a tombstone removes it
        # Transactional commits: producer 5 commits, 6 aborts, 7 has no marker yet.
        log.append(batch((commit_key("txn", "orders", 0), commit_value(9)), producer_id=5, transactional=True))
        log.append(batch((commit_key("txn", "orders", 1), commit_value(4)), producer_id=6, transactional=True))
        log.append(batch((commit_key("txn", "orders", 1), commit_value(2)), producer_id=7, transactional=True))
        log.append(marker(ControlRecordType.COMMIT, 5))
        log.append(marker(ControlRecordType.ABORT, 6))
        # A group with offsets and metadata, then deleted by Kafka's rule (offset tombstones
        # beside the group's); and a group whose metadata alone is deleted: its offsets stay.
        log.append(batch((commit_key("dead", "orders", 0), commit_value(1)), (group_key("dead"), group_value([]))))
        log.append(batch((commit_key("dead", "orders", 0), None), (group_key("dead"), None)))
        log.append(batch((commit_key("simple", "orders", 1), commit_value(5)), (group_key("simple"), group_value([]))))
        log.append(batch((group_key("simple"), None)))
    return root


def test_offsets_load_as_the_coordinator_loads_them(log_dir):
    loaded = read_consumer_offsets(log_dir)
    offsets = {k: v.offset for k, v in loaded.offsets.items()}
    assert offsets == {
        ("app", "orders", 0): 7,
        ("app", "orders", 1): 1,
        ("txn", "orders", 0): 9,  # committed by its marker; 6's aborted, 7's still pending
        ("simple", "orders", 1): 5,  # a group tombstone alone leaves the offsets (Kafka's emptyGroupOffsets)
    }
    commit = loaded.offsets[("app", "orders", 0)]
    assert (commit.metadata, commit.leader_epoch, commit.commit_timestamp, commit.record_partition) == ("m", 0, TS, 0)
    assert loaded.deleted_groups == {"dead", "simple"}
    assert [m.assignment for m in loaded.groups["app"].members] == [(("orders", 0), ("orders", 1))]
    assert committed_offsets(log_dir, group="txn") == {("txn", "orders", 0): loaded.offsets[("txn", "orders", 0)]}


def test_lag_against_the_log_end_offsets_beside(log_dir):
    rows = consumer_group_lag(log_dir, group="app")
    assert [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id, r.host, r.client_id)
            for r in rows] == [
        ("orders", 0, 7, 10, 3, "consumer-1-abc", "/127.0.0.1", "consumer-1"),
        ("orders", 1, 1, 5, 4, "consumer-1-abc", "/127.0.0.1", "consumer-1"),
    ]
    # A __consumer_offsets partition directory given alone: its neighbours give the end offsets.
    alone = consumer_group_lag(log_dir / "__consumer_offsets-0", group="app")
    assert [r.lag for r in alone] == [3, 4]


def test_the_command_prints_kafkas_describe_table(log_dir):
    status, out, err = run("groups", str(log_dir), "--group", "app")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == ""
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    # Kafka's widths: GROUP and TOPIC at least 15, PARTITION 10, the offsets 15.
    assert lines[1].startswith("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG ")
    assert lines[2].split() == ["app", "orders", "0", "7", "10", "3", "consumer-1-abc", "/127.0.0.1", "consumer-1"]
    assert lines[3].split() == ["app", "orders", "1", "1", "5", "4", "consumer-1-abc", "/127.0.0.1", "consumer-1"]
    # docs/cli.md shows this very output.
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    shown = page.split("$ kafkalog groups /var/lib/kafka/data --group app\n", 1)[1].split("```", 1)[0]
    assert out == shown
    status, out, err = run("groups", str(log_dir), "--group", "simple")
    assert status == 0
    assert "Consumer group 'simple' has no active members." in err
    assert out.splitlines()[2].split() == ["simple", "orders", "1", "5", "5", "0", "-", "-", "-"]


def test_json_rows(log_dir):
    status, out, _ = run("groups", str(log_dir), "--json")
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["group"], r["topic"], r["partition"], r["lag"]) for r in rows] == [
        ("app", "orders", 0, 3), ("app", "orders", 1, 4), ("simple", "orders", 1, 0), ("txn", "orders", 0, 1),
    ]
    assert rows[0]["metadata"] == "m" and rows[0]["commitTimestamp"] == TS and rows[0]["consumerId"] == "consumer-1-abc"


def test_unknown_group_and_missing_topic_are_errors(log_dir, tmp_path):
    status, _, err = run("groups", str(log_dir), "--group", "nobody")
    assert status == 1 and "nobody" in err
    status, _, err = run("groups", str(log_dir / "orders-0"))
    assert status == 1 and "__consumer_offsets" in err
    status, _, err = run("groups", str(tmp_path / "missing"))
    assert status == 1 and "No such file" in err


def test_the_command_writes_nothing(log_dir, tmp_path):
    real = tmp_path / "real"
    shutil.copytree(REAL / "NikhilDighe9975__kafka_setup", real)
    for root in (log_dir, real):
        before = tree_digest(root)
        for argv in (("groups", str(root)), ("groups", str(root), "--json"), ("groups", str(root), "--verbose")):
            status, _, err = run(*argv)
            assert status == 0, err
        assert tree_digest(root) == before


def test_real_consumer_offsets_end_with_their_groups_deleted():
    """The real partitions end with Kafka's deletion of the group: a tombstone for each offset
    beside the group's, so nothing is left committed."""
    for repo, group in (("NikhilDighe9975__kafka_setup", "my-group"), ("getachew015__kafka-broker", "myapp-id")):
        loaded = read_consumer_offsets(REAL / repo)
        assert loaded.offsets == {} and loaded.deleted_groups == {group} and loaded.warnings == []
    empty = read_consumer_offsets(REAL / "William0423__kafka")  # a zero-length segment
    assert empty.offsets == {} and empty.groups == {}
    status, out, err = run("groups", str(REAL / "NikhilDighe9975__kafka_setup"))
    assert status == 0 and out == "" and "no committed offsets" in err


def test_real_consumer_offsets_before_the_deletion(tmp_path):
    """Without the segment holding the deletion, the real partition's last commits are loaded."""
    root = tmp_path / "logs"
    shutil.copytree(REAL / "NikhilDighe9975__kafka_setup", root)
    (root / "__consumer_offsets-12" / "00000000000000000862.log").unlink()
    offsets = {k: (v.offset, v.leader_epoch) for k, v in committed_offsets(root).items()}
    assert offsets[("my-group", "my-second-topic", 0)] == (1, 0)
    assert {v.expire_timestamp for v in committed_offsets(root).values()} == {None}  # version 3 has none
    assert offsets[("my-group", "my-second-topic", 1)] == (0, None)
    assert offsets[("my-group", "my-second-topic", 2)] == (2, 0)
    assert offsets[("my-group", "my-first-topic", 2)] == (2, 0)
    assert {k[:2] for k in offsets} == {("my-group", "my-second-topic"), ("my-group", "my-first-topic")}
    rows = consumer_group_lag(root)
    assert all(r.log_end_offset is None and r.lag is None for r in rows)  # those topics are not in the copy


def test_a_torn_tail_is_a_warning_and_corruption_before_it_an_error(log_dir):
    part = log_dir / "__consumer_offsets-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) > 1  # segment.bytes=1024 rolled it
    with open(logs[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x01\x00garbage")
    status, _, err = run("groups", str(log_dir), "--group", "app")
    assert status == 0 and "warning" in err and str(logs[-1]) in err
    data = bytearray(logs[0].read_bytes())
    data[40] ^= 0xFF  # inside the first batch: its CRC fails
    logs[0].write_bytes(bytes(data))
    status, _, err = run("groups", str(log_dir))
    assert status == 1 and str(logs[0]) in err and "position 0" in err


def test_log_end_offset_reads_the_last_segment(log_dir):
    assert log_end_offset(log_dir / "orders-0") == 10
    with Log.open(log_dir / "orders-0", LogConfig(retention_ms=-1)) as log:
        log.roll()  # an empty active segment: the end is its base offset
    assert log_end_offset(log_dir / "orders-0") == 10
    with FileRecords.open(max((log_dir / "orders-1").glob("*.log")), mutable=True) as records:
        records.append(b"\x00" * 30)  # a torn tail does not count
    assert log_end_offset(log_dir / "orders-1") == 5


# Offset commits and tombstones in random batches: the last record of each key wins.
_OPS = st.lists(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 10**6))),
        min_size=1, max_size=4,
    ),
    min_size=1, max_size=12,
)


@examples(30)
@given(ops=_OPS)
def test_the_last_commit_or_tombstone_of_each_key_wins(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("logs")
    expected: dict[tuple[str, str, int], int] = {}
    with Log.open(root / "__consumer_offsets-3", LogConfig(segment_bytes=512, retention_ms=-1)) as log:
        for records in ops:
            log.append(batch(*((commit_key(g, "t", p), None if o is None else commit_value(o)) for g, p, o in records)),
                       origin=AppendOrigin.COORDINATOR)
            for g, p, o in records:
                if o is None:
                    expected.pop((g, "t", p), None)
                else:
                    expected[(g, "t", p)] = o
    assert {k: v.offset for k, v in committed_offsets(root).items()} == expected
