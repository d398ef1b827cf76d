"""PySpark data source ``kafkalog`` (install ``kafkalog[spark]``): Kafka segment directories
read as the DataFrame of Spark's Kafka source, batch or streaming, and DataFrames written back
as partition logs. See docs/spark.md.

    import kafkalog.spark
    kafkalog.spark.register(spark)
    df = spark.read.format("kafkalog").load("/data/kafka-logs")

The public API of this package is what it exports here; its modules are private. Planning
and reading need no pyspark: ``_options`` (read options), ``_discovery`` (partition
directories and segments), ``_partition`` (one partition log's bounds and indexes), ``_plan``
(bounds and input partitions), ``_read`` (a slice on the executor), ``_stats``. The pyspark
side: ``_compat`` (the optional imports), ``_source`` (the data source and batch reader),
``_stream`` (the stream reader), ``_write`` (the writer).
"""

from __future__ import annotations

from ._arrow import SCHEMA_DDL
from ._discovery import INTERNAL_TOPICS
from ._source import KafkalogDataSource, register, verify
from ._stats import scan_stats
from ._write import murmur2

__all__ = ["KafkalogDataSource", "register", "verify", "scan_stats", "murmur2", "SCHEMA_DDL", "INTERNAL_TOPICS"]
