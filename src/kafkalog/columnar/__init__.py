"""Columnar decoding: runs of batches as numpy and Arrow columns, without a Python object per
record (what Spark and bulk tools read).

- :mod:`~kafkalog.columnar.decode`: the driver, :func:`decode_columns`;
- :mod:`~kafkalog.columnar.fast`: the record walk keeping columns over a run of v2 batches;
- :mod:`~kafkalog.columnar.columns`: :class:`RecordColumns`, the column layout;
- :mod:`~kafkalog.columnar.arrow`: Arrow types and arrays built from those columns' buffers.
"""

from __future__ import annotations

from .arrow import COLUMNS, DEFAULT_ARROW_COLUMNS, arrow_schema, arrow_type
from .columns import RecordColumns
from .decode import decode_columns

__all__ = ["COLUMNS", "DEFAULT_ARROW_COLUMNS", "RecordColumns", "arrow_schema", "arrow_type", "decode_columns"]
