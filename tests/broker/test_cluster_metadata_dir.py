"""A broker started on a KRaft log directory leaves its metadata log alone (issue 27): Kafka's
``LogManager.loadLogs`` does not load ``__cluster_metadata-0`` as a topic, so neither does
``kafkalog broker`` (it would serve it, apply retention to it and write producer snapshots
into it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog.broker import Broker


def write_segment(directory: Path, key: bytes | None) -> None:
    directory.mkdir(parents=True)
    b = RecordBatchBuilder(2)
    for i in range(3):
        b.append(key, b"value-%d" % i, timestamp=1_600_000_000_000 + i)
    with FileRecords.open(directory / "00000000000000000000.log", create=True) as fr:
        fr.append(b.build())


def tree(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(directory.rglob("*"))
    }


def test_the_metadata_log_is_not_loaded_as_a_topic(tmp_path: Path) -> None:
    kraft = tmp_path / "__cluster_metadata-0"
    write_segment(kraft, None)
    (kraft / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":0}')
    renamed = tmp_path / "metadata-0"  # a copy under another name: known by its quorum-state
    write_segment(renamed, None)
    (renamed / "quorum-state").write_text("{}")
    write_segment(tmp_path / "orders-0", b"k")
    before = {d.name: tree(d) for d in (kraft, renamed)}
    with Broker(tmp_path) as broker:
        assert broker.topics == {"orders": 1}
    assert {d.name: tree(d) for d in (kraft, renamed)} == before
