"""The formats that need no schema: bytes, string, json (plain and framed), and the JSON output."""

from __future__ import annotations

import base64
import decimal
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import SchemaError, make_decoder
from kafkalog.errors import SchemaDecodeError
from kafkalog.schema_registry import FORMATS, to_json


@pytest.mark.parametrize("fmt", FORMATS)
def test_null_decodes_to_none_in_every_format(fmt):
    store = object() if fmt in ("avro", "protobuf", "registry") else None
    assert make_decoder(fmt, store).decode(None) is None  # type: ignore[arg-type]


@given(st.binary())
def test_bytes_are_themselves_and_json_output_is_base64(data):
    dec = make_decoder("bytes")
    assert dec.decode(data) == data
    assert base64.b64decode(json.loads(dec.decode_to_json(data))) == data


@given(st.text())
def test_string_round_trips(text):
    assert make_decoder("string").decode(text.encode()) == text


def test_invalid_utf8_is_an_error_naming_the_byte():
    with pytest.raises(SchemaDecodeError, match="not UTF-8 at byte 2"):
        make_decoder("string").decode(b"ab\xffcd")


def test_json_plain_and_in_the_wire_format():
    dec = make_decoder("json")
    assert dec.decode(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert dec.decode(b"\x00\x00\x00\x00\x07" + b'{"a": 1}') == {"a": 1}
    with pytest.raises(SchemaDecodeError, match="schema id 7: not JSON"):
        dec.decode(b"\x00\x00\x00\x00\x07{")


def test_unknown_format_and_missing_store():
    with pytest.raises(SchemaError, match="unknown format 'xml'"):
        make_decoder("xml")
    with pytest.raises(SchemaError, match="needs a schema store"):
        make_decoder("avro")


def test_error_located_and_pickled():
    import pickle

    err = SchemaDecodeError("bad", schema_id=3, subject="t-value").at(file="t-0", offset=42)
    assert str(err) == "t-0: offset 42: schema id 3, subject 't-value': bad"
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.schema_id, again.offset) == (SchemaDecodeError, str(err), 3, 42)


def test_json_output_of_decoded_types():
    obj = {"b": b"\x00\x01", "d": decimal.Decimal("1.10"), "n": None}
    assert json.loads(to_json(obj)) == {"b": "AAE=", "d": "1.10", "n": None}
