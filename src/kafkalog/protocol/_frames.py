"""Request and response frames of the APIs in ``_apis.py``, through the interpreter in
``_codec.py``.

**Framing.** A request is ``size:int32`` then the header then the body. Request header v1:
``api_key:int16, api_version:int16, correlation_id:int32, client_id:nullable string
(int16 length)``; header v2 (flexible request versions) adds tagged fields after it — the
client id keeps its int16 length. A response is ``size:int32``, ``correlation_id:int32``
(response header v0; v1 adds tagged fields for flexible versions, but an ApiVersions response
always uses v0 so that any client can read it), then the body.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._apis import (
    APIS,
    REQUEST_HEADER_V1,
    REQUEST_HEADER_V2,
    RESPONSE_HEADER_V1,
    ApiKey,
    ApiSpec,
    request_header_version,
    response_header_version,
)
from ._codec import (
    Reader,
    Writer,
    decode_struct,
    encode_struct,
    encode_value,
    is_bytes_like,
    uvarint,
)
from ._types import (
    INT16,
    INT32,
    STRING,
    Field,
    ProtocolError,
    Struct,
    UnsupportedApiError,
)

_I16 = INT16.fmt
_I32 = INT32.fmt
#: The 4-byte size prefix of every frame, filled in once the frame is complete.
_SIZE_PREFIX = bytes(_I32.size)
#: A header's tagged fields: none (a zero count).
_NO_TAGGED_FIELDS = uvarint(0)


def _spec(api_key: int, version: int, *, correlation_id: int | None = None) -> ApiSpec:
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedApiError(f"unknown API key {api_key}", api_key=api_key, api_version=version,
                                  correlation_id=correlation_id)
    if not spec.min_version <= version <= spec.max_version:
        raise UnsupportedApiError(
            f"{spec.key.name} version {version} is not supported (versions {spec.min_version}-{spec.max_version})",
            api_key=api_key, api_version=version, correlation_id=correlation_id,
        )
    return spec


def decode_body(api_key: int, version: int, data: bytes | bytearray | memoryview, *, response: bool = False,
                offset: int = 0) -> dict[str, Any]:
    """Decode a request (or with ``response`` a response) body of ``api_key`` at ``version``
    from ``data[offset:]``; bytes after the body are ignored, as Kafka ignores them.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: the bytes do not hold a well-formed body.
    """
    spec = _spec(api_key, version)
    r = Reader(data, offset)
    schema = spec.response if response else spec.request
    return decode_struct(r, schema, version, spec.flexible(version), spec.key.name)


class Request(NamedTuple):
    """A decoded request frame.

    Attributes:
        api_key, api_version, correlation_id, client_id: the header (a null client id reads as
            "", as Kafka reads it).
        body: the decoded body, or None for an ApiVersions request of a version above the
            newest served (Kafka answers those in the v0 layout without reading the body).
        header_size: bytes of the header.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: dict[str, Any] | None
    header_size: int

    @property
    def unsupported_api_versions(self) -> bool:
        """An ApiVersions request above the newest version served (KIP-511)."""
        return self.body is None


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a request frame (without its 4-byte size prefix): header, then body.

    Raises:
        UnsupportedApiError: an unknown API key, or a version not served (except ApiVersions,
            whose unsupported versions decode with ``body=None``).
        ProtocolError: a malformed header or body.
    """
    r = Reader(frame)
    api_key = r.fixed(_I16, "request header api_key")
    api_version = r.fixed(_I16, "request header api_version")
    correlation_id = r.fixed(_I32, "request header correlation_id")
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedApiError(f"unknown API key {api_key}", api_key=api_key, api_version=api_version,
                                  correlation_id=correlation_id)
    # The client id keeps its int16 length even in header v2 (older brokers must read it).
    client_id = r.string(True, False, "request header client_id")
    if spec.flexible(api_version):
        r.tagged_fields("request header")
    header_size = r.pos
    if api_key == ApiKey.API_VERSIONS and not spec.min_version <= api_version <= spec.max_version:
        return Request(api_key, api_version, correlation_id, client_id or "", None, header_size)
    _spec(api_key, api_version, correlation_id=correlation_id)
    body = decode_struct(r, spec.request, api_version, spec.flexible(api_version), spec.key.name)
    return Request(api_key, api_version, correlation_id, client_id or "", body, header_size)


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (without its size prefix): ``(correlation_id, body)``.

    Raises:
        UnsupportedApiError, ProtocolError: as :func:`decode_body`.
    """
    spec = _spec(api_key, version)
    r = Reader(frame)
    correlation_id = r.fixed(_I32, "response header correlation_id")
    if response_header_version(api_key, version) >= RESPONSE_HEADER_V1:
        r.tagged_fields("response header")
    return correlation_id, decode_struct(r, spec.response, version, spec.flexible(version), spec.key.name)


def encode_body(api_key: int, version: int, body: dict[str, Any], *, response: bool = False) -> bytes:
    """Encode a request (or response) body; file-slice records are read into the result.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: a value that does not fit its field.
    """
    spec = _spec(api_key, version)
    w = Writer()
    encode_struct(w, spec.response if response else spec.request, body, version, spec.flexible(version),
                  spec.key.name)
    return _join(*w.finish())


def encode_request(api_key: int, version: int, correlation_id: int, body: dict[str, Any], *,
                   client_id: str | None = "kafkalog") -> bytes:
    """A whole request frame, size prefix included (for clients, tests and benchmarks)."""
    spec = _spec(api_key, version)
    w = Writer()
    w.buf += _SIZE_PREFIX
    w.buf += _I16.pack(api_key) + _I16.pack(version) + _I32.pack(correlation_id)
    # The client id keeps header v1's int16 length whatever the header version.
    encode_value(w, STRING, client_id, True, REQUEST_HEADER_V1, False, "request header client_id")
    if request_header_version(api_key, version) >= REQUEST_HEADER_V2:
        w.buf += _NO_TAGGED_FIELDS
    encode_struct(w, spec.request, body, version, spec.flexible(version), spec.key.name)
    frame = bytearray(_join(*w.finish()))
    _I32.pack_into(frame, 0, len(frame) - _I32.size)
    return bytes(frame)


def _join(parts: list[Any], size: int) -> bytes:
    out = bytearray()
    for part in parts:
        out += part if is_bytes_like(part) else _read_part(part)
    return bytes(out)


def _read_part(part: Any) -> bytes:
    fd, start, size = part.fileno(), part.start, part.size_in_bytes
    chunks = []
    got = 0
    while got < size:
        data = os.pread(fd, size - got, start + got)
        if not data:
            raise ProtocolError(f"file slice {part!r} ended after {got} of {size} bytes")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


@dataclass
class ResponseFrame:
    """An encoded response: ``parts`` are byte chunks and file slices (objects with ``fileno()``,
    ``start`` and ``size_in_bytes``) to send in order; ``size`` counts every byte including the
    4-byte size prefix at the start of the first chunk."""

    parts: list[Any]
    size: int

    @property
    def file_bytes(self) -> int:
        """Bytes carried by file slices (sent with sendfile)."""
        return sum(p.size_in_bytes for p in self.parts if not is_bytes_like(p))

    def to_bytes(self) -> bytes:
        """The whole frame in memory (file slices read with ``pread``)."""
        return _join(self.parts, self.size)


def encode_response(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> ResponseFrame:
    """A response frame, size prefix included; ``records`` fields given as file slices stay
    out of line in :attr:`ResponseFrame.parts` so they can be sent with sendfile.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: a value that does not fit its field.
    """
    spec = _spec(api_key, version)
    w = Writer()
    w.buf += _SIZE_PREFIX
    w.buf += _I32.pack(correlation_id)
    if response_header_version(api_key, version) >= RESPONSE_HEADER_V1:
        w.buf += _NO_TAGGED_FIELDS
    encode_struct(w, spec.response, body, version, spec.flexible(version), spec.key.name)
    parts, size = w.finish()
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, size - _I32.size)
    parts[0] = bytes(first)
    return ResponseFrame(parts, size)


def iter_fields(struct_: Struct, version: int) -> Iterable[Field]:
    """The fields of ``struct_`` present at ``version`` (for tests and tools)."""
    return [f for f in struct_.fields if f.present(version)]
