"""The ``kafkalog`` command and the tools' library: convert, the segment summary, committed
offsets, groups (classic, consumer and share) and their lag read from ``__consumer_offsets``, and the command line (dump, verify,
stat, salvage, rebuild-index, retention, compact, demo, groups). Verify, salvage and index
rebuilding are library capabilities of the core (``kafkalog.verify_path``,
``kafkalog.salvage_segment``, ``kafkalog.rebuild_path``); the commands render them.

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ..protocol import GroupMember, GroupMetadata, ModernGroup, ModernMember
from ._cli import SUBCOMMANDS, main
from ._consumer_offsets import (
    CONSUMER_OFFSETS_TOPIC,
    CommittedOffset,
    ConsumerOffsets,
    committed_offsets,
    log_end_offset,
    log_end_offsets,
    read_consumer_offsets,
    read_share_group_state,
    topic_names,
)
from ._convert import ConvertReport, convert_path, convert_segment
from ._demo import SAMPLE_PARTITION, build_sample
from ._describe_groups import GroupView, MemberView, PartitionLag, consumer_group_lag, describe_groups, group_lag
from ._summary import summarise

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "SAMPLE_PARTITION",
    "SUBCOMMANDS",
    "CommittedOffset",
    "ConsumerOffsets",
    "ConvertReport",
    "GroupMember",
    "GroupMetadata",
    "GroupView",
    "MemberView",
    "ModernGroup",
    "ModernMember",
    "PartitionLag",
    "build_sample",
    "committed_offsets",
    "consumer_group_lag",
    "convert_path",
    "convert_segment",
    "describe_groups",
    "group_lag",
    "log_end_offset",
    "log_end_offsets",
    "main",
    "read_consumer_offsets",
    "read_share_group_state",
    "summarise",
    "topic_names",
]
