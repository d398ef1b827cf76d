"""``verify``'s index checks: the offset and time index entries checked against the batches as they
stream past, and the transaction index read and checked entry by entry."""

from __future__ import annotations

from ..index import OffsetIndex, TimeIndex
from ..location import Location
from ..transaction_index import TXN_INDEX_ENTRY, TXN_INDEX_VERSION, AbortedTxn
from .report import ProblemList

# ------------------------------------------------------------------------------------------------
# Index checks (streamed beside the batches)


def entries_text(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def used_entries(data: bytes, entry_size: int) -> int:
    """Entries of an index file's content ``data`` before the trailing run of all-zero
    entries (a preallocated, untrimmed index)."""
    whole = len(data) - len(data) % entry_size
    last_byte = len(data[:whole].rstrip(b"\x00"))  # one past the last non-zero byte
    return -(-last_byte // entry_size)


class _IndexCheck:
    """The entries of an index (the first ``used``), pulled one at a time as the batches stream
    past; problems are reported against the index file, entry by entry."""

    def __init__(self, index: OffsetIndex | TimeIndex, used: int, path: str, problems: ProblemList) -> None:
        self._index = index
        self._n = used
        self._i = 0
        self._path = path
        self._p = problems
        self._prev: tuple[int, int] | None = None  # the last entry that kept the rule

    def _add(self, entry: int, kind: str, message: str) -> None:
        self._p.add(self._path, entry, kind, f"entry {entry}: {message}")


class OffsetIndexCheck(_IndexCheck):
    """Kafka's offset index rule checked entry by entry as the batches stream past."""

    def __init__(self, index: OffsetIndex, used: int, path: str, problems: ProblemList) -> None:
        super().__init__(index, used, path, problems)
        self._pending: tuple[int, int, int] | None = None  # (entry, offset, position)
        self._next = self._pull()

    def _pull(self) -> tuple[int, int, int] | None:
        base = self._index.base_offset
        while self._i < self._n:
            i = self._i
            self._i += 1
            offset, position = self._index.entry(i)
            prev = self._prev
            if prev is not None and (offset <= prev[0] or position <= prev[1]):
                self._add(
                    i,
                    "index-not-monotonic",
                    f"(offset {offset}, position {position}) does not follow (offset {prev[0]}, position {prev[1]})",
                )
                continue
            if offset < base or position < 0:
                self._add(i, "index-mismatch", f"(offset {offset}, position {position}) is outside the segment")
                continue
            self._prev = (offset, position)
            return i, offset, position
        return None

    def _unmatched(self, pending: tuple[int, int, int], until: str) -> None:
        i, offset, position = pending
        self._add(i, "index-mismatch", f"(offset {offset}, position {position}): no batch from position {position} {until} ends at offset {offset}")

    def on_batch(self, position: int, last_offset: int) -> None:
        entry = self._next
        while entry is not None and entry[2] <= position:
            if self._pending is not None:
                self._unmatched(self._pending, f"to {entry[2]}")
                self._pending = None
            i, offset, at = entry
            if at < position:
                self._add(i, "index-mismatch", f"(offset {offset}, position {at}): position {at} is inside a batch, not the start of one")
            elif last_offset > offset:
                self._add(i, "index-mismatch", f"(offset {offset}, position {at}): the batch at position {at} ends at offset {last_offset}")
            elif last_offset < offset:
                self._pending = entry  # an append of several batches: a later one must end at offset
            entry = self._pull()
        self._next = entry
        pending = self._pending
        if pending is not None and pending[2] < position:
            if last_offset == pending[1]:
                self._pending = None
            elif last_offset > pending[1]:
                self._unmatched(pending, f"to {position}")
                self._pending = None

    def finish(self, valid_bytes: int, size: int) -> None:
        # Entries into bytes after damage are a consequence of it, reported once: recovery
        # truncates those bytes and rebuilds the index.
        beyond: list[int] = []
        if self._pending is not None:
            if valid_bytes < size:
                beyond.append(self._pending[0])
            else:
                self._unmatched(self._pending, "to the end of the log")
        entry = self._next
        while entry is not None:
            i, offset, position = entry
            if position >= size:
                self._add(i, "index-mismatch", f"(offset {offset}, position {position}) points past the end of the file")
            else:
                beyond.append(i)
            entry = self._pull()
        if beyond:
            self._p.add(
                self._path, beyond[0], "index-mismatch",
                f"{entries_text(len(beyond))} from entry {beyond[0]} on point past the valid data (which ends at byte "
                f"{valid_bytes}); Kafka's recovery rebuilds the index",
                "warning",
            )


class TimeIndexCheck(_IndexCheck):
    """Kafka's time index rule checked entry by entry as the batches stream past."""

    def __init__(self, index: TimeIndex, used: int, path: str, problems: ProblemList) -> None:
        super().__init__(index, used, path, problems)
        self._next = self._pull()

    def _pull(self) -> tuple[int, int, int] | None:
        while self._i < self._n:
            i = self._i
            self._i += 1
            timestamp, offset = self._index.entry(i)
            prev = self._prev
            if prev is not None and (timestamp <= prev[0] or offset < prev[1]):
                self._add(
                    i,
                    "timeindex-not-monotonic",
                    f"(timestamp {timestamp}, offset {offset}) does not follow (timestamp {prev[0]}, offset {prev[1]})",
                )
                continue
            if offset < self._index.base_offset:
                self._add(i, "timeindex-mismatch", f"(timestamp {timestamp}, offset {offset}) is below the base offset")
                continue
            self._prev = (timestamp, offset)
            return i, timestamp, offset
        return None

    def on_batch(self, first_offset: int, last_offset: int, largest: tuple[int, int]) -> None:
        """Check the entries up to ``last_offset``; ``largest`` is (the largest batch max
        timestamp so far, the last offset of its batch), as recovery follows it."""
        entry = self._next
        while entry is not None and entry[2] <= last_offset:
            i, timestamp, offset = entry
            if offset < first_offset:
                self._add(i, "timeindex-mismatch", f"(timestamp {timestamp}, offset {offset}): no batch holds offset {offset}")
            elif (timestamp, last_offset) != largest:
                self._add(
                    i,
                    "timeindex-mismatch",
                    f"(timestamp {timestamp}, offset {offset}): the largest timestamp up to offset {last_offset} is "
                    f"{largest[0]} (in the batch ending at offset {largest[1]})",
                )
            entry = self._pull()
        self._next = entry

    def finish(self, last_offset: int | None, damaged: bool) -> None:
        beyond: list[int] = []
        entry = self._next
        while entry is not None:
            i, timestamp, offset = entry
            if damaged:
                beyond.append(i)
            else:
                self._add(
                    i,
                    "timeindex-mismatch",
                    f"(timestamp {timestamp}, offset {offset}) points past the last batch"
                    + ("" if last_offset is None else f" (offset {last_offset})"),
                )
            entry = self._pull()
        if beyond:
            self._p.add(
                self._path, beyond[0], "timeindex-mismatch",
                f"{entries_text(len(beyond))} from entry {beyond[0]} on point past the last valid batch"
                + ("" if last_offset is None else f" (offset {last_offset})")
                + "; Kafka's recovery rebuilds the index",
                "warning",
            )


def read_txn_index(path: Location, problems: ProblemList, base_offset: int) -> list[tuple[int, AbortedTxn]]:
    """The entries of a ``.txnindex`` as (entry number, txn); malformed ones are reported."""
    data = path.read_bytes()
    name = str(path)
    if len(data) % TXN_INDEX_ENTRY.size:
        problems.add(
            name, None, "txnindex-corrupt", f"{len(data)} bytes is not a whole number of {TXN_INDEX_ENTRY.size}-byte entries"
        )
    out = []
    last = None
    for i, pos in enumerate(range(0, len(data) - TXN_INDEX_ENTRY.size + 1, TXN_INDEX_ENTRY.size)):
        version, pid, first, last_offset, lso = TXN_INDEX_ENTRY.unpack_from(data, pos)
        if version != TXN_INDEX_VERSION:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: unknown version {version} (Kafka writes 0)")
            continue
        if last_offset < base_offset:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: last offset {last_offset} is below the base offset {base_offset}")
            continue
        if last is not None and last_offset <= last:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: last offset {last_offset} does not follow {last}")
            continue
        if lso > last_offset + 1 or first > last_offset:
            problems.add(
                name, i, "txnindex-corrupt",
                f"entry {i}: first offset {first}, last offset {last_offset} and last stable offset {lso} are out of order",
            )
            continue
        last = last_offset
        out.append((i, AbortedTxn(pid, first, last_offset, lso)))
    return out
