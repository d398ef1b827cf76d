"""The ``kafkalog`` command and the operator tools' library: verify, salvage, convert,
rebuild-index, the segment summary, and the command line (dump, stat, retention, compact, demo).

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ._cli import SUBCOMMANDS, main
from ._convert import ConvertReport, convert_path, convert_segment
from ._demo import SAMPLE_PARTITION, build_sample
from ._rebuild import RebuildReport, ensure_not_in_use, rebuild_indexes, rebuild_path
from ._salvage import SalvageReport, SkippedRegion, salvage_segment
from ._summary import summarise
from ._txn import TransactionTracker, TxnEnd
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
    "main",
    "SUBCOMMANDS",
    "build_sample",
    "SAMPLE_PARTITION",
    "summarise",
    "verify_path",
    "verify_segment",
    "total_log_bytes",
    "Problem",
    "SegmentReport",
    "PartitionReport",
    "VerifyReport",
    "Progress",
    "ProgressTicker",
    "MAX_PROBLEMS_PER_KIND",
    "TransactionTracker",
    "TxnEnd",
    "salvage_segment",
    "SalvageReport",
    "SkippedRegion",
    "ensure_not_in_use",
    "convert_path",
    "convert_segment",
    "rebuild_path",
    "rebuild_indexes",
    "ConvertReport",
    "RebuildReport",
]
