"""``kafkalog retention`` cannot delete what Kafka keeps: topic settings come from ``--config``,
the KRaft metadata log's ConfigRecords, or Kafka's defaults with the internal topics compacted;
a compacted topic is not deleted from by age or size without ``--allow-compacted``."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

from conftest import DATA

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.protocol import METADATA_RECORDS, write_message
from kafkalog.protocol._codec import uvarint

OFFSETS = DATA / "real" / "NikhilDighe9975__kafka_setup" / "__consumer_offsets-12"
NOW = 1_800_000_000_000
OLD = 1_700_000_000_000


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["retention", *map(str, args)], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def checksums(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def offsets_copy(tmp_path: Path) -> Path:
    target = tmp_path / "__consumer_offsets-28"
    shutil.copytree(OFFSETS, target)
    return target


def test_committed_offsets_are_not_deleted_by_retention_bytes(tmp_path: Path) -> None:
    """The issue's case: ``retention DIR/__consumer_offsets-28 --config retention.bytes=100000``
    deleted every committed offset; now it deletes nothing and says why."""
    part = offsets_copy(tmp_path)
    before = checksums(part)
    rc, out, err = run(part, "--config", "retention.bytes=100", "--now", NOW)
    assert (rc, err) == (0, "")
    assert checksums(part) == before
    assert "cleanup.policy=compact (internal topic default)" in out
    assert "refused: topic __consumer_offsets is compacted" in out and "--allow-compacted" in out
    assert "nothing to delete" in out


def test_internal_topic_without_config_keeps_everything(tmp_path: Path) -> None:
    part = offsets_copy(tmp_path)
    before = checksums(part)
    rc, out, _ = run(part, "--now", NOW, "--json")
    assert rc == 0
    report = json.loads(out)
    assert report["settings"]["cleanup.policy"] == {"value": "compact", "source": "internal topic default"}
    assert report["refused"] is None
    assert not any(s["delete"] for s in report["segments"])
    assert checksums(part) == before


def test_allow_compacted_proceeds(tmp_path: Path) -> None:
    part = offsets_copy(tmp_path)
    rc, out, _ = run(part, "--config", "retention.bytes=100", "--allow-compacted", "--now", NOW)
    assert rc == 0
    assert "cleanup.policy=compact,delete (--allow-compacted)" in out
    assert "deleted      00000000000000000000.log" in out
    assert not (part / "00000000000000000000.log").exists()


def metadata_value(api_key: int, values: dict) -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(0) + write_message(METADATA_RECORDS[api_key][1], values, 0)


def write_batch(path: Path, base: int, values: list[tuple[bytes | None, bytes | None]], ts: int) -> None:
    b = RecordBatchBuilder(2, base_offset=base)
    for key, value in values:
        b.append(key, value, timestamp=ts)
    with FileRecords.open(path, create=True) as fr:
        fr.append(b.build())


def kraft_log_dir(tmp_path: Path) -> Path:
    """A log directory with a metadata log (orders: compact; events: retention.ms=1000, a
    retention.bytes set then removed) and two old one-segment partitions."""
    logdir = tmp_path / "logs"
    meta = logdir / "__cluster_metadata-0"
    meta.mkdir(parents=True)
    records = [
        metadata_value(2, {"name": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAAAg"}),
        metadata_value(4, {"resourceType": 2, "resourceName": "orders", "name": "cleanup.policy", "value": "compact"}),
        metadata_value(4, {"resourceType": 2, "resourceName": "events", "name": "retention.ms", "value": "1000"}),
        metadata_value(4, {"resourceType": 2, "resourceName": "events", "name": "retention.bytes", "value": "1"}),
        metadata_value(4, {"resourceType": 2, "resourceName": "events", "name": "retention.bytes", "value": None}),
    ]
    write_batch(meta / "00000000000000000000.log", 0, [(None, v) for v in records], OLD)
    for topic in ("orders", "events"):
        part = logdir / f"{topic}-0"
        part.mkdir()
        write_batch(part / "00000000000000000000.log", 0, [(b"k", b"v")] * 3, OLD)
        write_batch(part / "00000000000000000003.log", 3, [(b"k", b"v")], OLD)
    return logdir


def test_config_records_from_the_metadata_log_are_applied(tmp_path: Path) -> None:
    logdir = kraft_log_dir(tmp_path)
    before = {p.name: checksums(p) for p in logdir.iterdir()}
    rc, out, err = run(logdir, "--dry-run", "--now", NOW, "--json")
    assert (rc, err) == (0, "")
    reports = {Path(r["partition"]).name: r for r in map(json.loads, out.splitlines())}
    meta_log = logdir / "__cluster_metadata-0" / "00000000000000000000.log"
    orders, events = reports["orders-0"], reports["events-0"]
    assert orders["settings"]["cleanup.policy"] == {"value": "compact", "source": f"metadata log {meta_log} offset 1"}
    assert not any(s["delete"] for s in orders["segments"])
    assert events["settings"]["retention.ms"] == {"value": "1000", "source": f"metadata log {meta_log} offset 2"}
    assert events["settings"]["retention.bytes"]["source"] == "Kafka default"  # set, then removed
    assert [s["delete"] for s in events["segments"]] == [True, True]
    assert {p.name: checksums(p) for p in logdir.iterdir()} == before  # a dry run changes nothing


def test_config_overrides_the_metadata_log_and_a_path_can_be_given(tmp_path: Path) -> None:
    logdir = kraft_log_dir(tmp_path)
    moved = tmp_path / "metadata" / "__cluster_metadata-0"
    moved.parent.mkdir()
    (logdir / "__cluster_metadata-0").rename(moved)
    rc, out, _ = run(logdir / "events-0", "--dry-run", "--now", NOW, "--json")
    assert json.loads(out)["settings"]["retention.ms"]["source"] == "Kafka default"
    rc, out, _ = run(logdir / "events-0", "--dry-run", "--now", NOW, "--json", "--metadata-log", moved,
                     "--config", "retention.ms=-1")
    assert rc == 0
    report = json.loads(out)
    assert report["settings"]["retention.ms"] == {"value": "-1", "source": "--config"}
    assert not any(s["delete"] for s in report["segments"])
    rc, out, _ = run(logdir / "orders-0", "--dry-run", "--now", NOW, "--metadata-log", moved,
                     "--config", "cleanup.policy=delete")
    assert "refused: topic orders is compacted" in out and "would delete" not in out


def test_compact_reads_the_recorded_settings_too(tmp_path: Path) -> None:
    """``kafkalog compact`` resolves a topic's settings as retention does: the metadata log's
    ConfigRecords, then compaction itself (the command implies it), then ``--config``."""
    logdir = kraft_log_dir(tmp_path)
    meta = logdir / "__cluster_metadata-0"
    write_batch(meta / "00000000000000000005.log", 5, [(None, metadata_value(
        4, {"resourceType": 2, "resourceName": "orders", "name": "delete.retention.ms", "value": "5000"}))], OLD)
    before = {p.name: checksums(p) for p in logdir.iterdir()}
    out, err = io.StringIO(), io.StringIO()
    args = ["compact", str(logdir / "orders-0"), "--dry-run", "--json", "--now-ms", str(NOW),
            "--config", "min.compaction.lag.ms=7"]
    assert (cli.main(args, stdout=out, stderr=err), err.getvalue()) == (0, "")
    settings = json.loads(out.getvalue())["settings"]
    meta_log = meta / "00000000000000000005.log"
    assert settings["delete.retention.ms"] == {"value": "5000", "source": f"metadata log {meta_log} offset 5"}
    assert settings["cleanup.policy"] == {"value": "compact", "source": "the compact command"}
    assert settings["min.compaction.lag.ms"] == {"value": "7", "source": "--config"}
    assert {p.name: checksums(p) for p in logdir.iterdir()} == before  # a dry run changes nothing
