"""The names ``_dump.py`` decodes KRaft control records by. The record schemas and their
interpreter live in :mod:`kafkalog.protocol`; this module only keeps the dump's old names
working until it imports them from there (``KRAFT_CONTROL_RECORDS``, ``MessageReader``,
``ProtocolError``, ``read_message``, ``to_json``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..protocol import KRAFT_CONTROL_RECORDS as _KRAFT_CONTROL  # noqa: F401
from ..protocol import MessageReader as _Reader  # noqa: F401
from ..protocol import ProtocolError as _ReadError  # noqa: F401
from ..protocol import Field, Struct, to_json
from ..protocol import read_message as _read_message  # noqa: F401


def _to_json(fields: Iterable[Field], values: dict[str, Any], version: int) -> dict[str, Any]:
    """:func:`kafkalog.protocol.to_json` over a message's ``fields``."""
    return to_json(Struct(tuple(fields)), values, version)
