"""``verify``: a read-only fsck of Kafka log files, partition directories and log directories,
local or remote (what ``kafkalog verify`` and ``kafkalog stat`` report, and Spark's
distributed ``verify``).

- :mod:`~kafkalog.verify.paths`: :func:`verify_path`, a file, a partition directory (segments in
  order, snapshots, checkpoints, leftovers) or a log directory (its offset checkpoints too);
- :mod:`~kafkalog.verify.segment_check`: :func:`verify_segment`, one ``.log`` checked as Kafka's
  recovery checks it (:class:`kafkalog.segment_recovery.RecoveryStep`), its indexes beside it;
- :mod:`~kafkalog.verify.index_check`: the offset, time and transaction index checks;
- :mod:`~kafkalog.verify.report`: :class:`VerifyReport`, :class:`SegmentReport`,
  :class:`PartitionReport`, :class:`Problem`.
"""

from __future__ import annotations

from .paths import total_log_bytes, verify_path
from .report import MAX_PROBLEMS_PER_KIND, PartitionReport, Problem, SegmentReport, VerifyReport
from .segment_check import verify_segment

__all__ = [
    "MAX_PROBLEMS_PER_KIND",
    "PartitionReport",
    "Problem",
    "SegmentReport",
    "VerifyReport",
    "total_log_bytes",
    "verify_path",
    "verify_segment",
]
