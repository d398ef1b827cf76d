"""KRaft metadata: ``dump --cluster-metadata-decoder`` (Kafka 3.8's ``ClusterMetadataLogMessageParser``)
on built records of every metadata record type and on the real ``__cluster_metadata`` logs and KRaft
snapshots of the shared corpus."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest
from conftest import SHARED_CORPUS

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.protocol import METADATA_RECORDS, write_message
from kafkalog.protocol._codec import uvarint

SHARED_REAL = SHARED_CORPUS / "real"
DANIEL = SHARED_REAL / "Danielowo2000__BigDataTechnologies-Version-2" / "__cluster_metadata-0"


def dump(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["dump", *map(str, args)], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def framed(api_key: int, version: int, body: bytes, frame: int = 1) -> bytes:
    """A metadata record value as ``MetadataRecordSerde`` writes it."""
    return uvarint(frame) + uvarint(api_key) + uvarint(version) + body


def write_values(path: Path, values: list[bytes | None]) -> None:
    b = RecordBatchBuilder(2, base_offset=0)
    for value in values:
        b.append(None, value, timestamp=1_700_000_000_000)
    with FileRecords.open(path, create=True) as fr:
        fr.append(b.build())


def payloads(path: Path) -> list[dict]:
    rc, out, err = dump("--files", path, "--cluster-metadata-decoder", "--json")
    assert (rc, err) == (0, "")
    return [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]


def test_every_record_type_round_trips(tmp_path: Path) -> None:
    """Each of Kafka 3.8's metadata record types, at its highest version with default values,
    dumps under its MetadataRecordType name."""
    log = tmp_path / "00000000000000000000.log"
    expected = []
    values = []
    for api_key, (type_name, message) in sorted(METADATA_RECORDS.items()):
        version = message.versions[1]
        values.append(framed(api_key, version, write_message(message, {}, version)))
        expected.append((type_name, version))
    write_values(log, values)
    records = payloads(log)
    assert [(r["value"]["type"], r["value"]["version"]) for r in records] == expected
    assert all("decodeError" not in r for r in records)
    assert len(expected) == 26  # every record type of metadata/src/main/resources/common/metadata (4.0: 3.8 + ClearElrRecord)


def test_text_line_and_tagged_fields(tmp_path: Path) -> None:
    """The text form is DumpLogSegments' ``payload: {"type":..,"version":..,"data":..}`` with no key;
    tagged fields at their default are left out, others are written."""
    log = tmp_path / "00000000000000000000.log"
    _, change = METADATA_RECORDS[5]
    body = write_message(change, {"partitionId": 3, "topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "isr": [1, 2]}, 0)
    _, topic = METADATA_RECORDS[2]
    write_values(log, [
        framed(2, 0, write_message(topic, {"name": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAAAQ"}, 0)),
        framed(5, 0, body),
    ])
    rc, out, _ = dump("--files", log, "--cluster-metadata-decoder")
    assert rc == 0
    lines = out.splitlines()
    assert lines[3].endswith(
        'sequence: -1 headerKeys: [] payload: {"type":"TOPIC_RECORD","version":0,'
        '"data":{"name":"orders","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}'
    )
    assert " key: " not in lines[3]
    assert lines[4].endswith(
        'payload: {"type":"PARTITION_CHANGE_RECORD","version":0,'
        '"data":{"partitionId":3,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","isr":[1,2]}}'
    )


def test_client_quota_double_printed_as_java_does(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    body = (
        uvarint(2) + uvarint(len("user") + 1) + b"user" + uvarint(len("alice") + 1) + b"alice" + uvarint(0)
        + uvarint(len("producer_byte_rate") + 1) + b"producer_byte_rate"
        + struct.pack(">d", 1e7) + b"\x00" + uvarint(0)
    )
    write_values(log, [framed(14, 0, body)])
    rc, out, _ = dump("--files", log, "--cluster-metadata-decoder")
    assert rc == 0
    assert out.splitlines()[3].endswith(
        'payload: {"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
        '"entityName":"alice"}],"key":"producer_byte_rate","value":1.0E7,"remove":false}}'
    )
    assert payloads(log)[0]["value"]["data"]["value"] == 1e7


def test_bad_values_are_reported_and_skipped(tmp_path: Path) -> None:
    """As Kafka: ``Error at OFFSET, skipping. MESSAGE`` in place of the payload, and the dump goes on."""
    log = tmp_path / "00000000000000000000.log"
    _, noop = METADATA_RECORDS[20]
    write_values(log, [
        framed(20, 0, b"\x00", frame=0),
        framed(20, 0, b"\x00", frame=2),
        framed(99, 0, b"\x00"),
        framed(20, 0, b"\x00\xff\xff"),
        framed(2, 0, b"\x05ab"),  # a truncated TopicRecord
        b"\x01\x80",  # the type's varint ends early
        framed(20, 0, write_message(noop, {}, 0)),
    ])
    rc, out, _ = dump("--files", log, "--cluster-metadata-decoder")
    assert rc == 0
    tails = [line.split(" payload: ", 1)[1] for line in out.splitlines()[3:]]
    assert tails == [
        (
            "Error at 0, skipping. Could not deserialize metadata record with frame version 0. Note that upgrades "
            "from the preview release of KRaft in 2.8 to newer versions are not supported."
        ),
        (
            "Error at 1, skipping. Could not deserialize metadata record due to unknown frame version 2"
            "(only frame version 1 is supported)"
        ),
        "Error at 2, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 99",
        "Error at 3, skipping. Found 2 byte(s) of garbage after 20",
        "Error at 4, skipping. Failed to deserialize record with type 2",
        "Error at 5, skipping. Error while reading type",
        '{"type":"NO_OP_RECORD","version":0,"data":{}}',
    ]
    records = payloads(log)
    assert [("decodeError" in r) for r in records] == [True] * 6 + [False]
    assert records[4]["decodeError"].startswith("Error at 4, skipping. Failed to deserialize record with type 2 (")


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason="shared corpus not present")
@pytest.mark.parametrize("pattern", ["*/__cluster_metadata-0/*.log", "*/__cluster_metadata-0/*.checkpoint",
                                     "*/bootstrap.checkpoint"])
@pytest.mark.timeout_guard(120)  # four real metadata logs of 16k-30k records each, deep
def test_real_metadata_logs_decode_without_error(pattern: str) -> None:
    paths = sorted(SHARED_REAL.glob(pattern))
    assert paths
    for path in paths:
        records = payloads(path)
        data = [r for r in records if "controlType" not in r]
        assert data, path
        assert all("decodeError" not in r and r["value"]["type"].endswith("_RECORD") for r in data), path


@pytest.mark.skipif(not DANIEL.is_dir(), reason="shared corpus not present")
def test_real_snapshot_contents() -> None:
    """The MANIFEST's figures for a KRaft 3.5 snapshot: 61 records, header and footer control records."""
    records = payloads(DANIEL / "00000000000000007334-0000000001.checkpoint")
    assert len(records) == 61
    types = [r["value"]["type"] for r in records if r.get("value")]
    assert types.count("PARTITION_RECORD") == 51 and types.count("CONFIG_RECORD") == 4
    topics = {r["value"]["data"]["name"] for r in records if r.get("value") and r["value"]["type"] == "TOPIC_RECORD"}
    assert topics == {"_schemas", "__consumer_offsets"}
    configs = [r["value"]["data"] for r in records if r.get("value") and r["value"]["type"] == "CONFIG_RECORD"]
    assert {"resourceType": 2, "resourceName": "__consumer_offsets", "name": "cleanup.policy",
            "value": "compact"} in configs
