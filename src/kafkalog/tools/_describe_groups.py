"""``kafkalog groups``: committed offsets and lag per group, topic and partition, offline --
the counterpart of ``kafka-consumer-groups.sh --describe`` over a broker's log directories.

The offsets come from ``__consumer_offsets`` (:mod:`._consumer_offsets`); the log end offsets
from the partition directories beside it. Nothing is written.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..filenames import PARTITION_DIR, segment_logs
from ._consumer_offsets import (
    CommittedOffset,
    ConsumerOffsets,
    log_end_offsets,
    read_consumer_offsets,
)
from ._tool import _Tool, _ts

#: What Kafka's tool prints for a value it does not have.
_MISSING = "-"


@dataclass(frozen=True)
class PartitionLag:
    """One row of ``kafka-consumer-groups.sh --describe``: a group's position in a partition.

    ``current_offset`` is None for a partition assigned to a member with no commit yet;
    ``log_end_offset`` None when the partition is not in the log directories; ``lag`` (log end
    minus committed offset, as Kafka computes it) None when either is missing. The member
    fields come from the group's last recorded assignment (None: no member has the partition).
    """

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None
    committed: CommittedOffset | None


def _log_dirs_of(paths: tuple[str | os.PathLike, ...]) -> tuple[str | os.PathLike, ...]:
    """The log directories the end offsets come from: a partition directory stands for its
    parent (its neighbours are the partitions the group consumes)."""
    out = []
    for path in paths:
        p = Path(path)
        if PARTITION_DIR.match(p.name) and p.is_dir() and segment_logs(p):
            out.append(p.parent)
        else:
            out.append(p)
    return tuple(out)


def group_lag(offsets: ConsumerOffsets, ends: dict[tuple[str, int], int], *, group: str | None = None) -> list[PartitionLag]:
    """Rows for each group (``group`` only when given): every committed offset and every
    partition a member is assigned, by group, topic and partition."""
    rows: dict[tuple[str, str, int], PartitionLag] = {}
    owners: dict[tuple[str, str, int], tuple[str, str, str]] = {}
    for name, meta in offsets.groups.items():
        for member in meta.members:
            for topic, partition in member.assignment:
                owners[(name, topic, partition)] = (member.member_id, member.client_host, member.client_id)
    keys = set(offsets.offsets) | set(owners)
    for key in keys:
        name, topic, partition = key
        if group is not None and name != group:
            continue
        commit = offsets.offsets.get(key)
        end = ends.get((topic, partition))
        current = None if commit is None else commit.offset
        lag = None if current is None or current < 0 or end is None else end - current
        member_id, host, client_id = owners.get(key, (None, None, None))
        rows[key] = PartitionLag(name, topic, partition, current, end, lag, member_id, host, client_id, commit)
    return [rows[k] for k in sorted(rows)]


def consumer_group_lag(*log_dirs: str | os.PathLike, group: str | None = None) -> list[PartitionLag]:
    """Committed offsets and lag of every group (``group`` only when given) in the log
    directories, against the log end offsets of the partitions beside ``__consumer_offsets``.

    Read-only. Raises as :func:`read_consumer_offsets`.
    """
    offsets = read_consumer_offsets(*log_dirs)
    return group_lag(offsets, log_end_offsets(*_log_dirs_of(log_dirs)), group=group)


def _row_dict(row: PartitionLag) -> dict:
    c = row.committed
    out = {k: v for k, v in asdict(row).items() if k != "committed"}
    out.update(
        leader_epoch=None if c is None else c.leader_epoch,
        metadata=None if c is None else c.metadata,
        commit_timestamp=None if c is None else c.commit_timestamp,
        expire_timestamp=None if c is None else c.expire_timestamp,
    )
    return out


def _state(offsets: ConsumerOffsets, group: str) -> str:
    meta = offsets.groups.get(group)
    return "Stable" if meta is not None and meta.members else "Empty"


def _run_groups(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        offsets = read_consumer_offsets(*a.dirs)
        ends = log_end_offsets(*_log_dirs_of(tuple(a.dirs)))
        for warning in offsets.warnings:
            tool.err.write(f"kafkalog groups: warning: {warning}\n")
        rows = group_lag(offsets, ends, group=a.group)
        if a.group is not None and not rows and a.group not in offsets.groups:
            tool.fail(f"consumer group '{a.group}' has no committed offsets and no metadata here")
            return
        if not rows and not a.json:
            deleted = ", ".join(sorted(offsets.deleted_groups))
            tool.err.write(
                f"kafkalog groups: no committed offsets in {len(offsets.partitions)} __consumer_offsets partitions"
                + (f" (groups deleted: {deleted})" if deleted else "") + "\n"
            )
            return
        if a.json:
            for row in rows:
                tool.json(_row_dict(row))
            return
        by_group: dict[str, list[PartitionLag]] = {}
        for row in rows:
            by_group.setdefault(row.group, []).append(row)
        for name, group_rows in by_group.items():
            _print_group(tool, name, group_rows, _state(offsets, name), a.verbose)

    tool.guarded(run)


def _print_group(tool: _Tool, name: str, rows: list[PartitionLag], state: str, verbose: bool) -> None:
    """One group as Kafka's ``printOffsets`` prints it: a blank line, the header, the rows,
    columns left-aligned at least 15 wide (PARTITION 10); ``verbose`` adds the commit's
    leader epoch, time and metadata."""
    if state == "Empty":
        tool.err.write(f"\nConsumer group '{name}' has no active members.\n")
        tool.err.flush()

    def text(value: object) -> str:
        return _MISSING if value is None else str(value)

    group_w = max(15, len(name))
    topic_w = max([15, *(len(r.topic) for r in rows)])
    consumer_w = max([15, *(len(text(r.consumer_id)) for r in rows)])
    host_w = max([15, *(len(text(r.host)) for r in rows)])

    def line(cells: list[str]) -> str:
        widths = [group_w, topic_w, 10, 15, 15, 15, consumer_w, host_w]
        padded = [c.ljust(w) for c, w in zip(cells, widths)] + cells[len(widths):]
        return " ".join(padded)

    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    if verbose:
        header[-1] = header[-1].ljust(15)
        header += ["LEADER-EPOCH", "COMMIT-TIMESTAMP".ljust(24), "METADATA"]
    tool.print()
    tool.print(line(header))
    for r in rows:
        cells = [r.group, r.topic, str(r.partition), text(r.current_offset), text(r.log_end_offset), text(r.lag),
                 text(r.consumer_id), text(r.host), text(r.client_id)]
        if verbose:
            c = r.committed
            cells[-1] = cells[-1].ljust(15)
            cells += [
                text(None if c is None else c.leader_epoch).ljust(12),
                (_MISSING if c is None else _ts(c.commit_timestamp)).ljust(24),
                _MISSING if c is None else c.metadata,
            ]
        tool.print(line(cells).rstrip() if verbose else line(cells))
