"""One partition directory as the driver plans it: the core's read-only
:class:`~kafkalog.partition_view.PartitionView` (segments, bounds, indexes, transactions, times;
live directories tolerated), with the read's options.
"""

from __future__ import annotations

import logging

from ..partition_view import OnCorruption, PartitionView
from ._discovery import _PartitionDir
from ._options import _ReadOptions

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"


class _PartitionLog(PartitionView):
    """A partition directory to read, seen read-only; bad bytes raise, or with
    ``failOnCorruption=false`` end planning's scans with a warning (the reader skips them)."""

    def __init__(self, pdir: _PartitionDir, options: _ReadOptions) -> None:
        super().__init__(
            pdir.path, storage=options.storage, topic_partition=(pdir.topic, pdir.partition),
            on_corruption=OnCorruption.RAISE if options.fail_on_corruption else OnCorruption.SKIP, logger=_log,
        )
        self.dir = pdir
        self.options = options

    @property
    def tp(self) -> str:
        return f"{self.dir.topic}-{self.dir.partition}"
