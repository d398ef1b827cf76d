"""The schema stores: ``_schemas`` replayed offline (Schema Registry's record semantics, read-only)
and a registry's REST API (cached, bounded, clear errors)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import SHARED_CORPUS
from kafkalog import SchemaError, open_schema_store
from kafkalog.errors import UnknownSchemaError
from kafkalog.schema_registry import RegistrySchemaStore, Schema, SchemaReference, TopicSchemaStore
from registry_fixtures import registry_data, registry_url, schema_record  # noqa: F401


def digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_the_schemas_topic_is_replayed_read_only(registry_data):
    before = digest(registry_data.log_dir)
    for location in (registry_data.log_dir, registry_data.schemas_dir):
        store = open_schema_store(location)
        assert isinstance(store, TopicSchemaStore)
        assert store.subjects() == ["address", "common.proto", "events-value", "orders-value", "payments-value",
                                    "shipments-value"]
        assert store.versions("orders-value") == [1, 2]
        assert store.configs[None] == {"compatibilityLevel": "BACKWARD"}
    assert digest(registry_data.log_dir) == before


def test_schema_values_as_the_registry_wrote_them(registry_data):
    store = open_schema_store(registry_data.log_dir)
    ids = registry_data.ids
    latest = store.subject_version("orders-value")
    assert (latest.id, latest.version, latest.schema_type) == (ids["orders-value"][2], 2, "AVRO")
    assert store.schema(ids["orders-value"][1]).version == 1
    shipment = store.subject_version("shipments-value", 1)
    assert shipment.references == (SchemaReference("com.example.Address", "address", 1),)
    assert [t.subject for _, t in store.references(shipment)] == ["address"]
    assert store.subject_version("payments-value").schema_type == "PROTOBUF"


def test_soft_and_hard_deletes(registry_data):
    store = open_schema_store(registry_data.schemas_dir)
    gone, dropped = registry_data.ids["gone-value"][1], registry_data.ids["dropped-value"][1]
    # DELETE_SUBJECT: the subject is gone, its schema still readable by id (consumers need it)
    assert "gone-value" not in store.subjects()
    assert store.schema(gone).deleted
    with pytest.raises(UnknownSchemaError, match="subject 'gone-value': no version .*every version is deleted"):
        store.subject_version("gone-value")
    # a tombstone after the soft delete: gone for good
    with pytest.raises(UnknownSchemaError, match=f"schema id {dropped}: not in .*hard-deleted"):
        store.schema(dropped)


def _rec(keytype, value=None, **key):
    return (json.dumps({"keytype": keytype, **key}).encode(), None if value is None else json.dumps(value).encode())


def test_clear_subject_forgets_only_soft_deleted_versions():
    s1 = Schema(1, '"string"', subject="t-value", version=1)
    s2 = Schema(2, '"long"', subject="t-value", version=2)
    store = TopicSchemaStore.from_records([
        schema_record(s1), schema_record(s2),
        _rec("DELETE_SUBJECT", {"subject": "t-value", "version": 1}, subject="t-value", magic=0),
        _rec("CLEAR_SUBJECT", {"subject": "t-value"}, subject="t-value", magic=0),
    ])
    assert store.versions("t-value") == [2]
    with pytest.raises(UnknownSchemaError):
        store.schema(1)
    assert store.schema(2).schema == '"long"'


def test_records_the_registry_could_not_read_are_skipped():
    store = TopicSchemaStore.from_records([
        (b"not json", b"{}"), _rec("CONTEXT", {}, context="."), _rec("NOOP", magic=0),
        (_rec("SCHEMA", subject="s", version=1, magic=1)[0], b'{"subject": "s"}'),  # no id
        _rec("MODE", {"mode": "READONLY"}, subject=None, magic=0),
    ])
    assert store.skipped == 3 and store.subjects() == [] and store.modes[None] == {"mode": "READONLY"}


def test_a_directory_without_schemas_is_an_error(tmp_path):
    with pytest.raises(SchemaError, match="neither a _schemas partition directory nor a log directory"):
        open_schema_store(tmp_path)
    with pytest.raises(SchemaError, match="no such directory"):
        open_schema_store(tmp_path / "missing")


def test_the_real_corpus_schemas_topic():
    """Danielowo2000's ``_schemas-0`` (a Confluent 7.x registry's, NOOP records only): an empty
    store. Tested from the shared corpus: the repository has no licence to copy its files."""
    directory = SHARED_CORPUS / "real" / "Danielowo2000__BigDataTechnologies-Version-2"
    if not directory.exists():
        pytest.skip("the shared corpus is not here")
    before = digest(directory)
    store = open_schema_store(directory)
    assert store.subjects() == [] and store.skipped == 0
    with pytest.raises(UnknownSchemaError, match="schema id 1: not in .*_schemas-0"):
        store.schema(1)
    assert digest(directory) == before


def test_registry_url_is_asked_once_per_path(registry_data, registry_url):
    url, requests = registry_url
    store = open_schema_store(url)
    assert isinstance(store, RegistrySchemaStore)
    orders = registry_data.ids["orders-value"]
    assert store.schema(orders[1]).schema_type == "AVRO"
    store.schema(orders[1])
    assert store.subject_version("orders-value").id == orders[2]
    assert store.subject_version("orders-value", 1).id == orders[1]
    assert store.versions("orders-value") == [1, 2]
    assert "orders-value" in store.subjects()
    assert requests.count(f"/schemas/ids/{orders[1]}") == 1
    with pytest.raises(UnknownSchemaError, match="schema id 999: not found at .*Schema not found .*40403"):
        store.schema(999)
    with pytest.raises(UnknownSchemaError, match="subject 'nope': not found"):
        store.subject_version("nope")


def test_unreachable_registry_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    store = open_schema_store(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(SchemaError, match=f"schema id 1: cannot reach the schema registry at http://127.0.0.1:{port}"):
        store.schema(1)


def test_a_registry_that_does_not_answer_in_time(registry_data):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)  # accepts, never answers
        store = RegistrySchemaStore(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=0.5)
        with pytest.raises(SchemaError, match="cannot reach the schema registry.*timed out"):
            store.schema(1)

_OPS = st.lists(st.tuples(st.sampled_from(["register", "soft", "tombstone", "delete_subject", "clear"]),
                          st.sampled_from(["a-value", "b-value"]), st.integers(1, 3)), max_size=25)


@given(_OPS)
def test_replay_matches_the_registrys_rules(ops):
    """Any sequence of registrations, soft deletes, tombstones, DELETE_SUBJECT and CLEAR_SUBJECT
    leaves what the registry's cache would hold: live versions per subject, ids readable while
    any version (deleted or not) keeps them."""
    model: dict[tuple[str, int], tuple[int, bool]] = {}
    records = []
    for op, subject, version in ops:
        schema_id = 100 + version + (10 if subject == "b-value" else 0)
        schema = Schema(schema_id, f'"v{version}"', subject=subject, version=version)
        if op == "register":
            records.append(schema_record(schema))
            model[(subject, version)] = (schema_id, False)
        elif op == "soft":
            records.append(schema_record(schema, deleted=True))
            model[(subject, version)] = (schema_id, True)
        elif op == "tombstone":
            records.append((schema_record(schema)[0], None))
            model.pop((subject, version), None)
        elif op == "delete_subject":
            records.append(_rec("DELETE_SUBJECT", {"subject": subject, "version": version}, subject=subject, magic=0))
            for (s, v), (i, _) in list(model.items()):
                if s == subject and v <= version:
                    model[(s, v)] = (i, True)
        else:
            records.append(_rec("CLEAR_SUBJECT", {"subject": subject}, subject=subject, magic=0))
            model = {k: v for k, v in model.items() if not (k[0] == subject and v[1])}
    store = TopicSchemaStore.from_records(records)
    for subject in ("a-value", "b-value"):
        live = sorted(v for (s, v), (_, deleted) in model.items() if s == subject and not deleted)
        assert store.versions(subject) == live
        if live:
            assert store.subject_version(subject).version == live[-1]
        else:
            with pytest.raises(UnknownSchemaError):
                store.subject_version(subject)
    for schema_id in {100 + v + d for v in (1, 2, 3) for d in (0, 10)}:
        kept = [k for k, (i, _) in model.items() if i == schema_id]
        if kept:
            assert store.schema(schema_id).id == schema_id
        else:
            with pytest.raises(UnknownSchemaError):
                store.schema(schema_id)


def test_another_topic_is_not_taken_for_schemas(registry_data):
    with pytest.raises(SchemaError, match="orders-0 is not a Schema Registry topic: none of its 7 records"):
        open_schema_store(registry_data.log_dir / "orders-0")
