"""PySpark data source ``kafkalog`` (install ``kafkalog[spark]``): Kafka segment directories
read as the DataFrame of Spark's Kafka source, batch or streaming, and DataFrames written back
as partition logs. See docs/spark.md.

    import kafkalog.spark
    kafkalog.spark.register(spark)
    df = spark.read.format("kafkalog").load("/data/kafka-logs")

The same reading engine without Spark (docs/reader.md): :func:`read_records`,
:func:`read_columns` and :func:`read_arrow` iterate the records of a partition or log
directory with offset and time bounds, read_committed and corruption handling.

    from kafkalog.spark import read_records
    for record in read_records("/data/kafka-logs", topics=["orders"], start_offsets=100):
        ...

The public API of this package is what it exports here; its modules are private. Planning
and reading need no pyspark: ``_options`` (read options), ``_discovery`` (partition
directories and segments), ``_partition`` (one partition log's bounds and indexes), ``_plan``
(bounds and input partitions), ``_slice_read`` (a slice on the executor), ``_stats``, ``_python_reader``
(the public reader). The pyspark side: ``_compat`` (the optional imports), ``_source`` (the
data source and batch reader), ``_stream`` (the stream reader), ``_write`` (the writer),
``_sink`` (the streaming sink); its
names are imported on first use, so that ``import kafkalog.spark`` and the reader work
without pyspark installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._discovery import INTERNAL_TOPICS
from ._python_reader import (
    PartitionColumns,
    TopicRecord,
    read_arrow,
    read_columns,
    read_records,
)
from ._stats import scan_stats

if TYPE_CHECKING:  # pragma: no cover
    from ._arrow import SCHEMA_DDL
    from ._source import KafkalogDataSource, register, verify
    from ._write import murmur2

__all__ = [
    "INTERNAL_TOPICS",
    "SCHEMA_DDL",
    "KafkalogDataSource",
    "PartitionColumns",
    "TopicRecord",
    "murmur2",
    "read_arrow",
    "read_columns",
    "read_records",
    "register",
    "scan_stats",
    "verify",
]


def __getattr__(name: str) -> Any:
    """The pyspark side's names, imported on first use (they need pyspark and pyarrow; a
    missing one raises ImportError saying how to install it)."""
    if name in ("KafkalogDataSource", "register", "verify"):
        from . import _source as module
    elif name == "murmur2":
        from . import _write as module
    elif name == "SCHEMA_DDL":
        from . import _arrow as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
