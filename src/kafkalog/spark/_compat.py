"""pyspark and pyarrow, imported once: the optional dependencies of ``kafkalog.spark``, with
the message that says how to install them, and the names newer pyspark versions add (None, or a
stand-in, on older ones). The other modules of the package import these names from here."""

# ruff: noqa: F401  (every name here is imported for the package's other modules)

from __future__ import annotations

try:
    import pyarrow as pa
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f'kafkalog.spark needs pyspark >= 4.0 and pyarrow ({_e}): pip install "kafkalog[spark]"'
    ) from None

try:  # pyspark >= 4.1: Arrow batches for streaming writers (the kafkalog sink)
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

try:  # pyspark >= 4.1: filter pushdown
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )
except ImportError:  # pragma: no cover
    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None  # type: ignore[assignment,misc]

try:  # pyspark >= 4.2: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover
    ReadAllAvailable = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in on pyspark versions without Trigger.AvailableNow for Python sources."""
