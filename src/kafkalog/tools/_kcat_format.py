"""kcat's output, byte for byte: its ``-f`` format string, its ``-D``/``-K`` delimiters, ``-Z``
and its ``-J`` JSON envelope (kcat 1.7, ``format.c`` and ``json.c``).

Format tokens (``fmt_parse``): ``%s`` value, ``%S`` value size (-1 for null), ``%R`` the same
as a 4-byte big-endian integer, ``%k`` key, ``%K`` key size (-1 for null), ``%t`` topic, ``%p``
partition, ``%o`` offset, ``%T`` timestamp (ms; 0 for a magic 0 message), ``%h`` headers
(``n=v,n=v``; a null value ``NULL``, an empty one nothing), ``%%`` a percent sign; any other
``%x`` is an error. The text between tokens takes kcat's backslash escapes: ``\\n``, ``\\r``,
``\\t``, ``\\xHH`` (hex digits, as many as ``strtoul`` reads, the last byte kept), ``\\NNN``
(decimal, octal with a leading 0, hex with 0x -- ``strtoul`` with base 0), any other
``\\c`` is ``c``; a NUL made this way ends that piece of text (kcat keeps it as a C string).

An empty key or value prints as nothing, like a null one, and as ``-Z``'s ``NULL`` when given
(kcat tests the length). The default format is ``%s`` plus the ``-D`` delimiter (a newline),
with ``-K DELIM`` ``%k DELIM %s``; kcat builds that string in a 64-byte buffer and parses it as
a format, so a ``%`` in a delimiter is a token there too, as here.

``-J`` writes one JSON object per record, as yajl generates it (no spaces; ``"``, ``\\``,
``\\b \\f \\n \\r \\t`` escaped, other bytes below 0x20 as ``\\u00XX``, every other byte --
invalid UTF-8 included -- written as it is), followed by the format's first piece when it is
text (the ``-D`` delimiter by default):
``{"topic":..,"partition":..,"offset":..,"tstype":"create"|"logappend","ts":..,"broker":-1,
"headers":["name","value",..],"key":..,"payload":..}`` -- ``tstype``/``ts`` only when the
message has a timestamp (not magic 0), ``headers`` only when it has headers, a decoded key or
value (``-s``) embedded as JSON with ``key_schema_id``/``value_schema_id`` after it when the
bytes carry a Schema Registry id, or ``null`` and ``key_error``/``payload_error`` when they do
not decode. ``broker`` is -1: no broker served the record.
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Callable, Sequence
from itertools import accumulate
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

from ..columnar import RecordColumns
from ..columnar.interleave import (
    Packed,
    Piece,
    Slices,
    interleave_records,
    json_strings,
)
from ..schema_registry import to_json


class KcatFormatError(ValueError):
    """A format string or a delimiter kcat would refuse (its message, as kcat words it)."""


class Token(enum.Enum):
    """The pieces of a parsed format (kcat's ``fmt_type_t``)."""

    STR = "str"
    OFFSET = "o"
    KEY = "k"
    KEY_LEN = "K"
    PAYLOAD = "s"
    PAYLOAD_LEN = "S"
    PAYLOAD_LEN_BINARY = "R"
    TOPIC = "t"
    PARTITION = "p"
    TIMESTAMP = "T"
    HEADERS = "h"


_TOKENS = {t.value: t for t in Token if t is not Token.STR}
#: kcat's ``tmp_fmt`` buffer: the default format is cut to 63 bytes.
_TMP_FMT_SIZE = 64
_ULONG_MAX = (1 << 64) - 1
_INT32 = struct.Struct(">i")
_HEX = b"0123456789abcdefABCDEF"


def strtoul(s: bytes, i: int, base: int) -> tuple[int, int]:
    """C's ``strtoul(s + i, &end, base)`` over bytes: (value, end index); ``end == i`` when no
    digits were read. Leading white space and a sign are taken; base 0 picks 16 (``0x``), 8
    (a leading ``0``) or 10; base 16 takes an optional ``0x``; overflow gives ULONG_MAX."""
    j, n = i, len(s)
    while j < n and s[j] in b" \t\n\v\f\r":
        j += 1
    negative = False
    if j < n and s[j] in b"+-":
        negative = s[j] == 0x2D
        j += 1
    if base in (0, 16) and j + 1 < n and s[j] == 0x30 and s[j + 1] in b"xX" and j + 2 < n and s[j + 2] in _HEX:
        j += 2
        base = 16
    elif base == 0:
        base = 8 if j < n and s[j] == 0x30 else 10
    start = j
    value = 0
    while j < n:
        c = s[j]
        digit = c - 0x30 if 0x30 <= c <= 0x39 else (c | 0x20) - 0x57 if 0x61 <= (c | 0x20) <= 0x7A else 99
        if digit >= base:
            break
        value = value * base + digit
        j += 1
    if j == start:
        return 0, i
    if value > _ULONG_MAX:
        return _ULONG_MAX, j
    return (-value) & _ULONG_MAX if negative else value, j


def unescape(text: bytes) -> bytes:
    """The text piece of a format with kcat's backslash escapes converted (``fmt_add``)."""
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == 0x5C and i + 1 < n:
            i += 1
            c = text[i]
            base = 0
            if c == 0x74:  # \t
                out.append(0x09)
            elif c == 0x6E:  # \n
                out.append(0x0A)
            elif c == 0x72:  # \r
                out.append(0x0D)
            else:
                if c == 0x78:  # \x: a hex number follows (kcat then reads from the next byte)
                    i += 1
                    base = 16
                    c = text[i] if i < n else 0
                if 0x30 <= c <= 0x39:
                    value, end = strtoul(text, i, base)
                    out.append(value & 0xFF)
                    if end > i:
                        i = end - 1
                elif i < n:
                    out.append(c)
                else:  # "\x" at the very end: kcat copies the string's terminating NUL
                    out.append(0)
        else:
            out.append(c)
        i += 1
    nul = out.find(0)
    return bytes(out if nul < 0 else out[:nul])  # kcat keeps the piece as a C string


def parse_format(fmt: bytes) -> list[tuple[Token, bytes]]:
    """kcat's ``fmt_parse``: the format as (token, text) pieces (text only for ``STR``).

    Raises:
        KcatFormatError: ``Empty formatter`` (a ``%`` at the end) or ``Unsupported formatter: %x``.
    """
    out: list[tuple[Token, bytes]] = []
    i, n = 0, len(fmt)
    while i < n:
        t = fmt.find(b"%", i)
        if t < 0:
            out.append((Token.STR, unescape(fmt[i:])))
            break
        if t > i:
            out.append((Token.STR, unescape(fmt[i:t])))
        if t + 1 >= n:
            raise KcatFormatError("Empty formatter")
        c = fmt[t + 1:t + 2]
        if c == b"%":
            out.append((Token.STR, b"%"))
        elif c.decode("latin-1") in _TOKENS:
            out.append((_TOKENS[c.decode("latin-1")], b""))
        else:
            raise KcatFormatError(f"Unsupported formatter: %{c.decode('latin-1')}")
        i = t + 2
    return out


def parse_delim(text: bytes) -> bytes:
    """kcat's ``parse_delim`` for ``-D`` and ``-K``: ``\\n``, ``\\t`` and ``\\xHH`` replaced,
    repeatedly, first of each kind first.

    Raises:
        KcatFormatError: ``\\x`` without a hex number.
    """
    s = bytearray(text)
    while True:
        t = s.find(b"\\n")
        if t >= 0:
            s[t:t + 2] = b"\n"
            continue
        t = s.find(b"\\t")
        if t >= 0:
            s[t:t + 2] = b"\t"
            continue
        t = s.find(b"\\x")
        if t < 0:
            break
        value, end = strtoul(bytes(s), t + 2, 16)
        if end == t + 2:
            raise KcatFormatError(f"Delimiter {bytes(s[t:]).decode('latin-1')} expects hex number")
        s[t:end] = bytes([value & 0xFF])
    nul = s.find(0)
    return bytes(s if nul < 0 else s[:nul])


def default_format(delim: bytes, key_delim: bytes | None) -> bytes:
    """The format kcat builds without ``-f``: ``%s<delim>``, or ``%k<key delim>%s<delim>``
    (``snprintf`` into 64 bytes)."""
    fmt = b"%k" + key_delim + b"%s" + delim if key_delim is not None else b"%s" + delim
    return fmt[:_TMP_FMT_SIZE - 1]


# -- JSON as yajl writes it -----------------------------------------------------------------------

#: The bytes Python's encoder escapes with a lower-case hex digit (``\\u000b``) where yajl
#: writes upper case (the other control bytes have names or only decimal digits).
_LOWER_HEX = bytes([0x0B, 0x0E, 0x0F, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F])
_HAS_LOWER_HEX = re.compile(b"[" + re.escape(_LOWER_HEX) + b"]")
_HEX_CASE = [(b"\\u00%02x" % c, b"\\u00%02X" % c) for c in _LOWER_HEX]
#: A ``\\u00xx`` escape with a lower-case hex digit whose backslash is not itself escaped.
_LOWER_HEX_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u00(0[bef]|1[a-f])")


def _upper(m: re.Match[bytes]) -> bytes:
    return m.group(1) + b"\\u00" + m.group(2).upper()


def yajl_string(data: bytes) -> bytes:
    """``data`` as yajl's ``yajl_gen_string`` writes it (no UTF-8 validation): ``"`` and ``\\``
    escaped, ``\\b \\f \\n \\r \\t``, other bytes below 0x20 as ``\\u00XX`` (upper-case hex),
    every other byte as it is. Python's JSON string encoder escapes the same set (in C), over
    the bytes read as Latin-1 so that each byte comes back as itself; its lower-case hex is
    then raised (by plain replacement, unless the data itself spells a ``\\u00`` escape)."""
    out = _encode_basestring(data.decode("latin-1")).encode("latin-1")
    if _HAS_LOWER_HEX.search(data) is None:
        return out
    if b"\\\\u00" in out:  # the data's own backslash before "u00": tell escapes from text
        return _LOWER_HEX_ESCAPE.sub(_upper, out)
    for lower, upper in _HEX_CASE:
        out = out.replace(lower, upper)
    return out


def decoded_json(obj: Any) -> bytes:
    """A decoded key or value as compact JSON (UTF-8; the schema decoders' JSON rules)."""
    return to_json(obj).encode("utf-8", "surrogateescape")


def decoded_text(obj: Any) -> bytes:
    """A decoded key or value as ``%k``/``%s`` print it: text as UTF-8, bytes as they are,
    anything else (a record) as compact JSON."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogateescape")
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    return decoded_json(obj)


def schema_id(data: bytes | None) -> int | None:
    """The Schema Registry id in Confluent's wire format (a zero magic byte, then 4 bytes)."""
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return _INT32.unpack_from(data, 1)[0]


# -- kcat's pack formats (-s key=i) ------------------------------------------------------------------

#: The tokens of kcat's ``-s`` pack formats (``pack_check``).
PACK_TOKENS = " <>bBhHiIqQcs$"
_PACK_SIZES = {ord(c): n for c, n in (("b", 1), ("B", 1), ("h", 2), ("H", 2), ("i", 4), ("I", 4), ("q", 8), ("Q", 8))}


class PackError(Exception):
    """A key or value shorter or longer than its pack format: kcat prints what was unpacked
    before the error (``partial``), then reports the message."""

    def __init__(self, partial: bytes, message: str) -> None:
        super().__init__(message)
        self.partial = partial


def check_pack(what: str, fmt: str) -> None:
    """kcat's ``pack_check``.

    Raises:
        KcatFormatError: an empty format, or a token kcat does not know (its words).
    """
    if not fmt:
        raise KcatFormatError(f"{what} pack-format must not be empty")
    for c in fmt:
        if c not in PACK_TOKENS:
            raise KcatFormatError(f"Invalid token '{c}' in {what} pack-format, see -s usage.")


def unpack(fmt: str, data: bytes, what: str) -> bytes:
    """kcat's ``unpack``: ``data`` through a pack format (Python's ``struct`` letters) as text.
    As kcat 1.7 on a little-endian machine does, integers are read big-endian whatever ``<``
    says (its byte swaps go the same way both ways); ``s`` prints the rest up to a NUL byte;
    ``$`` requires the end; bytes left over are ignored.

    Raises:
        PackError: too few bytes for a token (kcat reads past the end for ``c``: an error here),
            or bytes left at ``$``.
    """
    out = bytearray()
    i = 0
    for token in fmt.encode("latin-1"):
        remaining = len(data) - i
        size = _PACK_SIZES.get(token)
        if size is not None:
            if size > remaining:
                raise PackError(bytes(out), f"{what} truncated, expected {size} bytes to unpack {chr(token)} but only "
                                            f"{remaining} bytes remaining")
            out += b"%d" % int.from_bytes(data[i:i + size], "big", signed=chr(token).islower())
            i += size
        elif token == 0x20:
            out += b" "
        elif token == 0x63:  # c
            if remaining < 1:
                raise PackError(bytes(out), f"{what} truncated, expected 1 bytes to unpack c but only 0 bytes remaining")
            out.append(data[i])
            i += 1
        elif token == 0x73:  # s: printf's %.*s stops at a NUL
            out += data[i:].split(b"\0", 1)[0]
            i = len(data)
        elif token == 0x24 and remaining > 0:  # $
            raise PackError(bytes(out), f"expected {what} end-of-input, but {remaining} bytes remaining")
    return bytes(out)


# -- one record ------------------------------------------------------------------------------------

#: A decoder: bytes -> decoded object (raises on bad bytes); None: the bytes as they are.
Decode = Callable[[bytes], Any] | None


class DecodeFailure(Exception):
    """A key or value that did not decode; ``what`` is kcat's wording of the step (none for a
    pack format)."""

    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(f"{what}: {error}" if what else str(error))
        self.what = what
        self.error = error


class KcatOutput:
    """Renders records as kcat prints them (see the module docstring).

    Args:
        fmt: the parsed format (:func:`parse_format`).
        json_envelope: ``-J``.
        null_str: ``-Z``'s ``NULL`` (None: nulls print as nothing).
        key_decoder, value_decoder: ``-s`` decoders (None: bytes as they are).
    """

    def __init__(self, fmt: Sequence[tuple[Token, bytes]], *, json_envelope: bool = False,
                 null_str: bytes | None = None, key_decoder: Decode = None, value_decoder: Decode = None) -> None:
        self.fmt = list(fmt)
        self.json = json_envelope
        self.null_str = null_str
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        # -J: the object is followed by the format's first piece when it is text (kcat's fmt[0].str)
        self.json_trailer = self.fmt[0][1] if self.fmt and self.fmt[0][0] is Token.STR else b""
        tokens = {t for t, _ in self.fmt}
        self.columnar = not json_envelope and key_decoder is None and value_decoder is None
        self.needs_headers = json_envelope or Token.HEADERS in tokens

    # -- many records at once (no Python object per record where the format allows) ---------------

    def render_columns(self, topic: str, partition: int, c: RecordColumns) -> tuple[bytes | memoryview, list[tuple[int, str]]]:
        """The output of every record of ``c`` and the (offset, message) of each decode failure."""
        data, _, failures = self.render_records(topic, partition, c)
        return data, failures

    def render_records(self, topic: str, partition: int,
                       c: RecordColumns) -> tuple[bytes | memoryview, Sequence[int], list[tuple[int, str]]]:
        """:meth:`render_columns`, with where each record's output starts and ends (``n + 1``
        positions)."""
        n = len(c)
        if n == 0:
            return b"", [0], []
        if not self.columnar:
            return self._render_each(topic, partition, c)
        pieces: list[Piece] = []
        for token, text in self.fmt:
            if token is Token.STR:
                if text:
                    pieces.append(text)
            elif token is Token.PAYLOAD or token is Token.KEY:  # kcat: an empty or null one prints -Z's string
                side = "value" if token is Token.PAYLOAD else "key"
                pieces.append(Slices(getattr(c, f"{side}_offsets"), getattr(c, f"{side}_data"), self.null_str))
            elif token in (Token.PAYLOAD_LEN, Token.KEY_LEN, Token.PAYLOAD_LEN_BINARY):
                side = "key" if token is Token.KEY_LEN else "value"
                offsets = getattr(c, f"{side}_offsets")
                lengths = offsets[1:] - offsets[:-1]
                lengths[~getattr(c, f"{side}_valid")] = -1  # kcat: -1 for null
                pieces.append(Packed(lengths.astype(">i4")) if token is Token.PAYLOAD_LEN_BINARY else lengths)
            elif token is Token.OFFSET:
                pieces.append(c.offset)
            elif token is Token.TIMESTAMP:  # librdkafka: 0 for a message without one (magic 0)
                pieces.append(c.timestamp * (c.timestamp_type >= 0))
            elif token is Token.TOPIC:
                pieces.append(topic.encode("utf-8"))
            elif token is Token.PARTITION:
                pieces.append(b"%d" % partition)
            else:  # HEADERS
                pieces.append(_header_texts(c))
        data, bounds = interleave_records(n, pieces)
        return data, bounds, []

    def _render_each(self, topic: str, partition: int,
                     c: RecordColumns) -> tuple[bytes | memoryview, Sequence[int], list[tuple[int, str]]]:
        if self.json and self.key_decoder is None and self.value_decoder is None:
            return (*interleave_records(len(c), self._json_pieces(topic, partition, c)), [])
        keys = _binary_list(c, "key")
        values = _binary_list(c, "value")
        headers = _header_lists(c) if self.needs_headers else None
        offsets, timestamps, types = c.offset.tolist(), c.timestamp.tolist(), c.timestamp_type.tolist()
        out: list[bytes] = []
        failures: list[tuple[int, str]] = []
        for i in range(len(offsets)):
            hs = headers[i] if headers is not None else None
            if self.json:
                data, errors = self.json_record(topic, partition, offsets[i], timestamps[i], types[i], hs, keys[i], values[i])
            else:
                data, errors = self.text_record(topic, partition, offsets[i], timestamps[i], types[i], hs, keys[i],
                                                values[i])
            out.append(data)
            failures.extend((offsets[i], e) for e in errors)
        return b"".join(out), [0, *accumulate(map(len, out))], failures

    def _json_pieces(self, topic: str, partition: int, c: RecordColumns) -> list[Piece]:
        """``-J`` without decoders: :meth:`json_record`'s envelope, rendered a column at a time
        (only keys and values holding bytes JSON escapes are escaped one by one)."""
        pieces: list[Piece] = [b'{"topic":' + yajl_string(topic.encode("utf-8")) + b',"partition":%d,"offset":' % partition,
                               c.offset]
        types = c.timestamp_type
        if (types == 0).all():
            pieces += [b',"tstype":"create","ts":', c.timestamp, b',"broker":-1']
        elif (types == 1).all():
            pieces += [b',"tstype":"logappend","ts":', c.timestamp, b',"broker":-1']
        else:  # magic 0 messages (no timestamp) among others: record by record
            pieces.append([b',"tstype":"%s","ts":%d,"broker":-1' % (b"create" if ty == 0 else b"logappend", ts)
                           if ty >= 0 else b',"broker":-1' for ts, ty in zip(c.timestamp.tolist(), types.tolist())])
        if c.headers_valid is not None and c.headers_valid.any():
            pieces.append([b',"headers":[' + b",".join(yajl_string(name) + b"," + (yajl_string(v) if v is not None else b"null")
                                                       for name, v in hs) + b"]" if hs else b"" for hs in _header_lists(c)])
        pieces.append(b',"key":')
        pieces += json_strings(c.key_offsets, c.key_data, c.key_valid, yajl_string)
        pieces.append(b',"payload":')
        pieces += json_strings(c.value_offsets, c.value_data, c.value_valid, yajl_string)
        pieces.append(b"}" + self.json_trailer)
        return pieces

    # -- one record ---------------------------------------------------------------------------------

    def _side(self, decoder: Decode, data: bytes, what: str, out: bytearray) -> None:
        if decoder is None:
            out += data
            return
        try:
            out += decoded_text(decoder(data))
        except PackError as e:  # kcat printed the tokens before the failing one
            out += e.partial
            raise DecodeFailure("", e) from e
        except Exception as e:
            raise DecodeFailure(what, e) from e

    def text_record(self, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: int,
                    headers: list[tuple[bytes, bytes | None]] | None, key: bytes | None,
                    value: bytes | None) -> tuple[bytes, list[str]]:
        """One record through the format (``fmt_msg_output_str``); a piece that fails to
        decode ends the record's output there, as in kcat, and is reported."""
        out = bytearray()
        for token, text in self.fmt:
            try:
                if token is Token.STR:
                    out += text
                elif token is Token.PAYLOAD or token is Token.KEY:
                    data = value if token is Token.PAYLOAD else key
                    if data:  # kcat: a non-empty key or value; else -Z's string
                        decoder = self.value_decoder if token is Token.PAYLOAD else self.key_decoder
                        what = "message deserialization" if token is Token.PAYLOAD else "key deserialization"
                        self._side(decoder, data, what, out)
                    elif self.null_str is not None:
                        out += self.null_str
                elif token is Token.PAYLOAD_LEN:
                    out += b"%d" % (len(value) if value is not None else -1)
                elif token is Token.KEY_LEN:
                    out += b"%d" % (len(key) if key is not None else -1)
                elif token is Token.PAYLOAD_LEN_BINARY:
                    out += _INT32.pack(len(value) if value is not None else -1)
                elif token is Token.OFFSET:
                    out += b"%d" % offset
                elif token is Token.TIMESTAMP:
                    out += b"%d" % (timestamp if timestamp_type >= 0 else 0)
                elif token is Token.TOPIC:
                    out += topic.encode("utf-8")
                elif token is Token.PARTITION:
                    out += b"%d" % partition
                elif headers:
                    out += _header_text(headers)
            except DecodeFailure as e:
                return bytes(out), [f"Failed to format message in {topic} [{partition}] at offset {offset}: {e}"]
        return bytes(out), []

    def json_record(self, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: int,
                    headers: list[tuple[bytes, bytes | None]] | None, key: bytes | None,
                    value: bytes | None) -> tuple[bytes, list[str]]:
        """One record's JSON envelope (``fmt_msg_output_json``) and its trailer."""
        parts = [b'{"topic":', yajl_string(topic.encode("utf-8")), b',"partition":%d,"offset":%d' % (partition, offset)]
        if timestamp_type >= 0:  # magic 0: no timestamp type, no timestamp
            parts.append(b',"tstype":"%s","ts":%d' % (b"create" if timestamp_type == 0 else b"logappend", timestamp))
        parts.append(b',"broker":-1')
        if headers:
            items = [yajl_string(name) + b"," + (yajl_string(v) if v is not None else b"null") for name, v in headers]
            parts.append(b',"headers":[' + b",".join(items) + b"]")
        errors: list[str] = []
        for name, data, decoder, label, id_name in (
            (b"key", key, self.key_decoder, "key", b"key_schema_id"),
            (b"payload", value, self.value_decoder, "value", b"value_schema_id"),
        ):
            parts.append(b',"' + name + b'":')
            if data is None:
                parts.append(b"null")
            elif decoder is None:
                parts.append(yajl_string(data))
            else:
                try:
                    obj = decoder(data)
                except Exception as e:  # noqa: BLE001 - any decoder's failure is the record's, reported
                    errors.append(f"Failed to deserialize {label} in message in {topic} [{partition}] at offset {offset}: {e}")
                    parts.append(b'null,"' + name + b'_error":' + yajl_string(str(e).encode("utf-8", "replace")))
                    continue
                if isinstance(obj, (bytes, bytearray, memoryview)):
                    parts.append(yajl_string(bytes(obj)))
                else:
                    parts.append(decoded_json(obj))
                sid = schema_id(data)
                if sid is not None:
                    parts.append(b',"' + id_name + b'":%d' % sid)
        parts.append(b"}")
        parts.append(self.json_trailer)
        return b"".join(parts), errors


def _binary_list(c: RecordColumns, side: str) -> list[bytes | None]:
    offsets, data = getattr(c, f"{side}_offsets").tolist(), getattr(c, f"{side}_data").tobytes()
    valid = getattr(c, f"{side}_valid").tolist()
    return [data[a:b] if ok else None for a, b, ok in zip(offsets, offsets[1:], valid)]


def _header_lists(c: RecordColumns) -> list[list[tuple[bytes, bytes | None]] | None]:
    """Each record's headers as (name, value) bytes, None when it has none."""
    if c.header_offsets is None:
        return [None] * len(c)
    runs, valid = c.header_offsets.tolist(), c.headers_valid.tolist()
    ko, kd = c.header_key_offsets.tolist(), c.header_key_data.tobytes()
    vo, vd, vv = c.header_value_offsets.tolist(), c.header_value_data.tobytes(), c.header_value_valid.tolist()
    out: list[list[tuple[bytes, bytes | None]] | None] = []
    for i in range(len(valid)):
        if not valid[i] or runs[i] == runs[i + 1]:
            out.append(None)
            continue
        out.append([(kd[ko[h]:ko[h + 1]], vd[vo[h]:vo[h + 1]] if vv[h] else None) for h in range(runs[i], runs[i + 1])])
    return out


def _header_text(headers: list[tuple[bytes, bytes | None]]) -> bytes:
    """kcat's ``print_headers``: ``name=value`` joined by commas; a null value ``NULL``."""
    return b",".join(name + b"=" + (b"NULL" if v is None else v) for name, v in headers)


def _header_texts(c: RecordColumns) -> list[bytes]:
    return [_header_text(h) if h else b"" for h in _header_lists(c)]
