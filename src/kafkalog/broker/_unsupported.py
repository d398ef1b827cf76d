"""One broker log line per client for each unsupported API or feature it asks for.

A client that asks for something this broker does not serve (an API key or version it lacks,
a transactional id, a config resource type...) usually retries, so a line per request would
flood the log while a line per client says what happened: the line names the client id and its
address, and repeats only for another client, address or feature. The handlers do not see the
connection, so the serving task sets :data:`PEER` (a context variable: one per connection task).
"""

from __future__ import annotations

import contextvars
import logging
import struct

_log = logging.getLogger(__package__)

#: The address (``host:port``) of the connection whose request is being handled.
PEER: contextvars.ContextVar[str] = contextvars.ContextVar("kafkalog_broker_peer", default="?")
#: Distinct (client, host, feature) triples remembered; past this the memory starts over (a
#: line may then repeat), so a flood of client ids cannot grow the broker's memory.
_MAX_REMEMBERED = 10_000
#: Request header: api key, api version, correlation id, then the client id (an int16 length).
_CLIENT_ID_AT = 8
_INT16 = struct.Struct(">h")


def client_id_of(frame: bytes | memoryview) -> str | None:
    """The client id of a request header (v1 and v2 both start with it), or None when the
    frame is too short to hold it; read before the body, for requests that cannot be decoded."""
    if len(frame) < _CLIENT_ID_AT + _INT16.size:
        return None
    (n,) = _INT16.unpack_from(frame, _CLIENT_ID_AT)
    start = _CLIENT_ID_AT + _INT16.size
    if n < 0 or start + n > len(frame):
        return None
    return str(bytes(frame[start:start + n]), "utf-8", "replace")


class UnsupportedLog:
    """Logs ``what`` once per client id, client host and feature (at WARNING)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str | None, str, str]] = set()

    def __call__(self, client_id: str | None, feature: str, detail: str = "") -> None:
        """Log that ``client_id`` (at :data:`PEER`) asked for the unsupported ``feature``, unless
        the same client at the same host already did."""
        peer = PEER.get()
        host = peer.rsplit(":", 1)[0]
        key = (client_id, host, feature)
        if key in self._seen:
            return
        if len(self._seen) >= _MAX_REMEMBERED:
            self._seen.clear()
        self._seen.add(key)
        _log.warning("client %r at %s asked for %s, which kafkalog's broker does not support%s "
                     "(logged once per client)", client_id, peer, feature, f": {detail}" if detail else "")
