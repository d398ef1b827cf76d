"""The ``kafkalog`` command and the operator tools' library: verify, salvage, convert,
rebuild-index, the segment summary, committed offsets and consumer lag read from
``__consumer_offsets``, and the command line (dump, stat, retention, compact, demo, groups).

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ..protocol import GroupMember, GroupMetadata
from ._cli import SUBCOMMANDS, main
from ._consumer_offsets import (
    CONSUMER_OFFSETS_TOPIC,
    CommittedOffset,
    ConsumerOffsets,
    committed_offsets,
    log_end_offset,
    log_end_offsets,
    read_consumer_offsets,
)
from ._convert import ConvertReport, convert_path, convert_segment
from ._demo import SAMPLE_PARTITION, build_sample
from ._groups import PartitionLag, consumer_group_lag, group_lag
from ._rebuild import RebuildReport, ensure_not_in_use, rebuild_indexes, rebuild_path
from ._salvage import RepairedBatch, SalvageReport, SkippedRegion, salvage_segment
from ._summary import summarise
from ..transaction_tracker import TransactionTracker, TxnEnd
from ._verify import total_log_bytes, verify_path
from ._verify_report import (
    MAX_PROBLEMS_PER_KIND,
    PartitionReport,
    Problem,
    Progress,
    ProgressTicker,
    SegmentReport,
    VerifyReport,
)
from ._verify_segment import verify_segment

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "MAX_PROBLEMS_PER_KIND",
    "SAMPLE_PARTITION",
    "SUBCOMMANDS",
    "CommittedOffset",
    "ConsumerOffsets",
    "ConvertReport",
    "GroupMember",
    "GroupMetadata",
    "PartitionLag",
    "PartitionReport",
    "Problem",
    "Progress",
    "ProgressTicker",
    "RebuildReport",
    "RepairedBatch",
    "SalvageReport",
    "SegmentReport",
    "SkippedRegion",
    "TransactionTracker",
    "TxnEnd",
    "VerifyReport",
    "build_sample",
    "committed_offsets",
    "consumer_group_lag",
    "convert_path",
    "convert_segment",
    "ensure_not_in_use",
    "group_lag",
    "log_end_offset",
    "log_end_offsets",
    "main",
    "read_consumer_offsets",
    "rebuild_indexes",
    "rebuild_path",
    "salvage_segment",
    "summarise",
    "total_log_bytes",
    "verify_path",
    "verify_segment",
]
