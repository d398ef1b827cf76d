"""A classic consumer group as the coordinator keeps it (Kafka's ``GroupMetadata`` and
``MemberMetadata``): its state, generation, protocol, leader, members with the requests they
have in flight, static members, pending member ids and committed offsets, and the rules that
only look at the group (Kafka's ``supportsProtocols`` and ``selectProtocol``). The coordinator
(``_coordinator.py``) moves groups between the states."""

from __future__ import annotations

import asyncio
import struct

from ..protocol import (
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CommittedOffset,
    MessageReader,
    ProtocolError,
    read_message,
)

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
#: The ``consumer`` protocol type, whose metadata is a ConsumerProtocolSubscription.
CONSUMER_PROTOCOL_TYPE = "consumer"
#: The int16 version before a ConsumerProtocolSubscription, and the newest version declared.
_SUBSCRIPTION_VERSION = struct.Struct(">h")
_SUBSCRIPTION_MAX_VERSION = 3


class _Member:
    """A member of a classic group, with the requests it has in flight."""

    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "heartbeat",
        "instance_id",
        "is_new",
        "join_waiter",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout",
        "session_timeout",
        "sync_waiter",
    )

    def __init__(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout: int, session_timeout: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout = rebalance_timeout
        self.session_timeout = session_timeout
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_waiter: asyncio.Future | None = None
        self.sync_waiter: asyncio.Future | None = None
        self.heartbeat: asyncio.TimerHandle | None = None
        self.is_new = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""


class _Group:
    """A classic group: its state, generation, members and committed offsets."""

    def __init__(self, group_id: str, now: int) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.generation = 0
        self.leader: str | None = None
        self.members: dict[str, _Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id -> member id
        self.pending: dict[str, asyncio.TimerHandle] = {}  # member ids handed out by MEMBER_ID_REQUIRED
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.state_timestamp = now
        self.join_timer: asyncio.TimerHandle | None = None
        self.initial_delay = False
        self.new_member_added = False

    def transition(self, state: str, now: int) -> None:
        self.state = state
        self.state_timestamp = now

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            own = {n for n, _ in m.protocols}
            names = own if names is None else names & own
        return names or set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty protocol list; a
        group with members needs the same type and a protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & {n for n, _ in protocols}
        )

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: among the protocols all members support, the one most
        members list first (ties: the earliest member's preference)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a ``consumer`` group subscribe to (None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.members:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            data = m.metadata(self.protocol)
            try:
                reader = MessageReader(data)
                version = reader.fixed(_SUBSCRIPTION_VERSION, "version")
                # Kafka's ConsumerProtocol reads a newer version as its newest (fields appended).
                version = min(version, _SUBSCRIPTION_MAX_VERSION)
                topics.update(read_message(CONSUMER_PROTOCOL_SUBSCRIPTION, reader, version)["topics"] or ())
            except (ProtocolError, ValueError):
                return None
        return topics
