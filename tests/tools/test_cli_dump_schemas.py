"""``kafkalog dump --value-decoder avro|protobuf|registry|json`` with Schema Registry's schemas:
the payload printed as JSON in Kafka's ``payload:`` position, a JSON object with ``--json``, a
record that does not decode reported in place (exit status 1), and nothing written."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from kafkalog import tools as cli
from registry_fixtures import registry_data, serve_registry  # noqa: F401

SEGMENT = "00000000000000000000.log"


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def dump(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["dump", *map(str, args)], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def payloads(text: str) -> list[str]:
    return [line.split(" payload: ", 1)[1] for line in text.splitlines() if " payload: " in line]


def test_avro_payloads_from_the_log_directorys_schemas(registry_data):
    before = digest(registry_data.log_dir)
    rc, out, err = dump("--files", registry_data.log_dir / "orders-0" / SEGMENT, "--value-decoder", "avro",
                        "--key-decoder", "string")
    assert (rc, err) == (0, "")
    # each record with its writer's schema (no reader subject in dump)
    assert json.loads(payloads(out)[0]) == {"id": 0, "customer": "c0", "amount": 0.0, "note": "n0", "tags": []}
    assert json.loads(payloads(out)[5])["currency"] == "USD"
    assert "| offset: 0 " in out and "key: k0 payload: {" in out
    assert digest(registry_data.log_dir) == before


@pytest.mark.parametrize("fmt, topic", [("protobuf", "payments"), ("registry", "shipments"), ("json", "events")])
def test_json_output_has_objects(registry_data, fmt, topic):
    rc, out, err = dump("--files", registry_data.log_dir / f"{topic}-0" / SEGMENT, "--value-decoder", fmt,
                        "--schema-registry", registry_data.log_dir, "--json")
    assert (rc, err) == (0, "")
    values = [json.loads(line)["value"] for line in out.splitlines() if json.loads(line)["type"] == "record"]
    expected = json.loads(json.dumps(registry_data.expected[topic], default=lambda b: __import__("base64").b64encode(b).decode()))
    assert values == expected


def test_a_registry_url(registry_data):
    with serve_registry(registry_data.registered) as (url, requests):
        rc, out, _ = dump("--files", registry_data.log_dir / "payments-0" / SEGMENT, "--value-decoder", "registry",
                          "--schema-registry", url)
    assert rc == 0 and json.loads(payloads(out)[2]) == {"payment_id": 1, "reason": "broken"}
    assert any(r.startswith("/schemas/ids/") for r in requests)


def test_records_that_do_not_decode_are_reported_in_place(registry_data):
    before = digest(registry_data.log_dir)
    rc, out, _ = dump("--files", registry_data.log_dir / "bad-0" / SEGMENT, "--value-decoder", "avro")
    assert rc == 1
    lines = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert "Error at offset 0, skipping. schema id 999: not in" in lines[0]
    assert "Error at offset 2, skipping. schema id" in lines[2] and "bytes left after the Avro record" in lines[2]
    assert "unknown magic byte 1" in lines[3]
    assert digest(registry_data.log_dir) == before


def test_no_schemas_is_a_usage_error(tmp_path, registry_data, capsys):
    rc, _, err = dump("--files", registry_data.log_dir / "orders-0" / SEGMENT, "--value-decoder", "avro",
                      "--schema-registry", tmp_path)
    assert rc == 2
    assert "is neither a _schemas partition directory nor a log directory" in err + capsys.readouterr().err
