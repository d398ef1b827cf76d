"""``kafkalog groups``: committed offsets and lag per group, topic and partition, offline --
the counterpart of ``kafka-consumer-groups.sh --describe`` (and ``--members``, ``--state``) and
``kafka-share-groups.sh --describe`` over a broker's log directories.

Groups of the three kinds ``__consumer_offsets`` records are shown: classic groups (their
``GroupMetadataValue``), consumer groups of the KIP-848 protocol and share groups (KIP-932),
each with its type, state, members and their assignments. Consumer and share groups name topics
by id: the names come from the group's own records, else from the ``partition.metadata`` of the
partitions in the log directories (an id shown as is when neither knows it).

The offsets come from ``__consumer_offsets`` (:mod:`._consumer_offsets`); the log end offsets
from the partition directories beside it. Nothing is written.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..filenames import PARTITION_DIR, segment_logs
from ..protocol import GroupMetadata
from ._consumer_offsets import (
    CommittedOffset,
    ConsumerOffsets,
    log_end_offsets,
    read_consumer_offsets,
    read_share_group_state,
    topic_names,
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
    #: "classic", "consumer" (KIP-848) or "share" (KIP-932); the group's state.
    group_type: str = "classic"
    state: str = "Empty"


#: The group kinds, as Kafka 4's ``kafka-groups.sh --list`` names them.
CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass(frozen=True)
class MemberView:
    """A member of a group: ids, client, and its assignment as (topic, partition) pairs (a
    topic known only by id is shown by its id). ``member_epoch`` and ``member_state`` are a
    consumer or share group member's (None for a classic member)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]
    member_epoch: int | None = None
    member_state: str | None = None


@dataclass(frozen=True)
class GroupView:
    """A group as ``--describe --state`` and ``--members`` show it."""

    group: str
    group_type: str
    state: str
    protocol: str | None
    epoch: int | None
    members: tuple[MemberView, ...]


def _classic_view(meta: GroupMetadata) -> GroupView:
    members = tuple(
        MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.assignment)
        for m in meta.members
    )
    # GroupMetadata.loadGroup: a loaded group with members is Stable, without them Empty.
    return GroupView(meta.group, CLASSIC, "Stable" if members else "Empty", meta.protocol, meta.generation, members)


def describe_groups(offsets: ConsumerOffsets, names: dict[str, str] | None = None) -> dict[str, GroupView]:
    """Every group ``offsets`` knows, by id: classic groups with metadata, consumer and share
    groups, and groups that only committed offsets (classic, Empty). ``names`` maps topic ids
    to names for the assignments of consumer and share groups."""
    views = {name: _classic_view(meta) for name, meta in offsets.groups.items()}
    for name, group in offsets.modern_groups.items():
        members = []
        for m in group.members.values():
            assignment = tuple(sorted(
                (group.topic_name(topic_id, names) or topic_id, p)
                for topic_id, partitions in m.assigned.items() for p in partitions
            ))
            members.append(MemberView(m.member_id, m.instance_id, m.client_id, m.client_host, assignment,
                                      m.member_epoch, m.state_name))
        assignors = sorted({a for a in (m.server_assignor for m in group.members.values()) if a})
        views[name] = GroupView(name, group.kind, group.state, ",".join(assignors) or None, group.epoch, tuple(members))
    for name, _, _ in offsets.offsets:
        if name not in views:
            views[name] = GroupView(name, CLASSIC, "Empty", None, None, ())
    return views


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


def group_lag(offsets: ConsumerOffsets, ends: dict[tuple[str, int], int], *, group: str | None = None,
              names: dict[str, str] | None = None,
              share_start_offsets: dict[tuple[str, str, int], int] | None = None) -> list[PartitionLag]:
    """Rows for each group (``group`` only when given): every committed offset and every
    partition a member is assigned, by group, topic and partition. ``names`` maps topic ids to
    names (consumer and share groups' assignments); ``share_start_offsets`` gives a share
    group's position in a partition (its share-partition start offset, by group, topic id and
    partition, from ``__share_group_state``), shown as its current offset."""
    rows: dict[tuple[str, str, int], PartitionLag] = {}
    owners: dict[tuple[str, str, int], tuple[str, str, str]] = {}
    views = describe_groups(offsets, names)
    for name, view in views.items():
        for member in view.members:
            for topic, partition in member.assignment:
                owners[(name, topic, partition)] = (member.member_id, member.host, member.client_id)
    share_positions: dict[tuple[str, str, int], int] = {}
    for (name, topic_id, partition), start in (share_start_offsets or {}).items():
        group_of = offsets.modern_groups.get(name)
        topic = (group_of.topic_name(topic_id, names) if group_of else (names or {}).get(topic_id)) or topic_id
        share_positions[(name, topic, partition)] = start
        views.setdefault(name, GroupView(name, SHARE, "Empty", None, None, ()))
    keys = set(offsets.offsets) | set(owners) | set(share_positions)
    for key in keys:
        name, topic, partition = key
        if group is not None and name != group:
            continue
        commit = offsets.offsets.get(key)
        end = ends.get((topic, partition))
        current = share_positions.get(key) if commit is None else commit.offset
        lag = None if current is None or current < 0 or end is None else end - current
        member_id, host, client_id = owners.get(key, (None, None, None))
        view = views[name]
        rows[key] = PartitionLag(name, topic, partition, current, end, lag, member_id, host, client_id, commit,
                                 view.group_type, view.state)
    return [rows[k] for k in sorted(rows)]


def consumer_group_lag(*log_dirs: str | os.PathLike, group: str | None = None) -> list[PartitionLag]:
    """Committed offsets and lag of every group (``group`` only when given) in the log
    directories, against the log end offsets of the partitions beside ``__consumer_offsets``.

    Read-only. Raises as :func:`read_consumer_offsets`.
    """
    offsets = read_consumer_offsets(*log_dirs)
    dirs = _log_dirs_of(log_dirs)
    return group_lag(offsets, log_end_offsets(*dirs), group=group, names=topic_names(*dirs),
                     share_start_offsets=read_share_group_state(*dirs, warnings=offsets.warnings))


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


def _group_dict(view: GroupView) -> dict:
    """A group for ``--members``/``--state --json``: its fields and members, assignments as
    ``{"topic":..,"partition":..}``."""
    out = asdict(view)
    out["members"] = [
        {**asdict(m), "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]} for m in view.members
    ]
    return out


def _state_note(tool: _Tool, view: GroupView) -> None:
    """``shouldPrintMemberState``'s note on stderr: an empty group, a rebalancing one."""
    kind = "Share group" if view.group_type == SHARE else "Consumer group"
    if view.state == "Empty":
        tool.err.write(f"\n{kind} '{view.group}' has no active members.\n")
    elif view.state in ("Assigning", "Reconciling", "PreparingRebalance", "CompletingRebalance"):
        tool.err.write(f"\nWarning: {kind} '{view.group}' is rebalancing.\n")
    tool.err.flush()


def _run_groups(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        offsets = read_consumer_offsets(*a.dirs)
        dirs = _log_dirs_of(tuple(a.dirs))
        ends = log_end_offsets(*dirs)
        names = topic_names(*dirs)
        share = read_share_group_state(*dirs, warnings=offsets.warnings)
        for warning in offsets.warnings:
            tool.err.write(f"kafkalog groups: warning: {warning}\n")
        views = describe_groups(offsets, names)
        if a.group is not None and a.group not in views:
            tool.fail(f"group '{a.group}' has no committed offsets and no metadata here")
            return
        chosen = [views[g] for g in sorted(views) if a.group is None or g == a.group]

        def nothing(what: str) -> None:
            deleted = ", ".join(sorted(offsets.deleted_groups))
            tool.err.write(
                f"kafkalog groups: no {what} in {len(offsets.partitions)} __consumer_offsets partitions"
                + (f" (groups deleted: {deleted})" if deleted else "") + "\n"
            )

        if a.state or a.members:
            if not chosen and not a.json:
                nothing("groups")
            _print_views(tool, chosen, members=a.members, verbose=a.verbose)
            return
        rows = group_lag(offsets, ends, group=a.group, names=names, share_start_offsets=share)
        if not rows and not a.json:
            nothing("committed offsets")
            return
        if a.json:
            for row in rows:
                tool.json(_row_dict(row))
            return
        by_group: dict[str, list[PartitionLag]] = {}
        for row in rows:
            by_group.setdefault(row.group, []).append(row)
        for name, group_rows in by_group.items():
            view = views.get(name) or GroupView(name, SHARE, "Empty", None, None, ())
            _state_note(tool, view)
            _print_group(tool, name, group_rows, a.verbose, share=view.group_type == SHARE)

    tool.guarded(run)


def _print_views(tool: _Tool, views: list[GroupView], *, members: bool, verbose: bool) -> None:
    """``--state`` (one line per group: type, assignment strategy, state, members) or
    ``--members`` (one line per member, with ``--verbose`` its assignment), as Kafka's
    ``printStates``/``printMembers`` lay them out (without the coordinator, which a log
    directory does not name)."""
    if tool.args.json:
        for view in views:
            tool.json(_group_dict(view))
        return
    for view in views:
        if not members:
            strategy = view.protocol or ""
            tool.print()
            tool.print(f"{'GROUP':<25} {'TYPE':<10} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} #MEMBERS")
            tool.print(f"{view.group:<25} {view.group_type:<10} {strategy:<20} {view.state:<15} {len(view.members)}")
            continue
        _state_note(tool, view)
        instance = any(m.group_instance_id for m in view.members)
        widths = [
            max([15, len(view.group)]),
            max([15, *(len(m.member_id) for m in view.members)]),
            max([17, *(len(m.group_instance_id or "") for m in view.members)]),
            max([15, *(len(m.host) for m in view.members)]),
            max([15, *(len(m.client_id) for m in view.members)]),
            15,
        ]
        if not instance:
            del widths[2]

        def line(cells: list[str], tail: str) -> str:
            return " ".join(c.ljust(w) for c, w in zip(cells, widths)) + " " + tail

        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if not instance:
            del header[2]
        tool.print()
        tool.print(line(header, "ASSIGNMENT" if verbose else "").rstrip())
        for m in view.members:
            cells = [view.group, m.member_id, m.group_instance_id or "", m.host, m.client_id, str(len(m.assignment))]
            if not instance:
                del cells[2]
            tool.print(line(cells, _assignment_text(m.assignment) if verbose else "").rstrip())


def _assignment_text(assignment: tuple[tuple[str, int], ...]) -> str:
    """A member's partitions as ``topic(0,1), other(2)`` (``-`` for none)."""
    if not assignment:
        return _MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items()))


def _print_group(tool: _Tool, name: str, rows: list[PartitionLag], verbose: bool, *, share: bool = False) -> None:
    """One group as Kafka's ``printOffsets`` prints it: a blank line, the header, the rows,
    columns left-aligned at least 15 wide (PARTITION 10); ``verbose`` adds the commit's
    leader epoch, time and metadata. A share group's position is its share-partition start
    offset (``kafka-share-groups.sh``'s START-OFFSET)."""

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

    header = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET" if share else "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]
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
