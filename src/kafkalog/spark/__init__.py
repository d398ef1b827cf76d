"""PySpark data source ``kafkalog`` (install ``kafkalog[spark]``): Kafka segment directories
read as the DataFrame of Spark's Kafka source, batch or streaming, and DataFrames written back
as partition logs. See docs/spark.md.

    import kafkalog.spark
    kafkalog.spark.register(spark)
    df = spark.read.format("kafkalog").load("/data/kafka-logs")

The public API of this package is what it exports here; its modules are private
(``_scan`` plans and reads without pyspark, ``_source`` is the data source).
"""

from __future__ import annotations

from ._scan import INTERNAL_TOPICS, scan_stats
from ._source import SCHEMA_DDL, KafkalogDataSource, murmur2, register, verify

__all__ = ["KafkalogDataSource", "register", "verify", "scan_stats", "murmur2", "SCHEMA_DDL", "INTERNAL_TOPICS"]
