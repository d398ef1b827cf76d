"""``kafkalog FILE.log``: a one-line-per-batch summary of a segment, and whether every CRC holds.

The summary reads the segment through :meth:`kafkalog.FileRecords.batches` with validation
(CRC, framing, offsets), as recovery does, and stops at the first batch that fails it.
"""

from __future__ import annotations

import sys
from typing import IO

from .. import FileRecords, RecordBatch
from ..errors import KafkalogError

_HEADER = (
    f"{'position':>9} {'offsets':>13} {'magic':>5} {'codec':>6} {'count':>5} {'size':>6} {'timestamp type':>15}  flags"
)


def _batch_line(batch: RecordBatch, count: int) -> str:
    """One batch: where, which offsets, its format and codec, how many records, and its flags."""
    flags = ",".join(
        name for name, on in (("transactional", batch.is_transactional), ("control", batch.is_control)) if on
    )
    offsets = f"{batch.base_offset}..{batch.last_offset}"
    return (
        f"{batch.position:>9} {offsets:>13} {batch.magic:>5} {batch.compression.kafka_name:>6} {count:>5} "
        f"{batch.size_in_bytes:>6} {batch.timestamp_type.kafka_name:>15}  {flags}"
    )


def summarise(path: str, out: IO[str] | None = None) -> bool:
    """Print one line per batch of the segment at ``path`` and a total; False if it is not clean.

    Raises:
        OSError: the file cannot be opened.
    """
    out = out or sys.stdout
    ok = True
    records = batches = 0
    print(path, file=out)
    print(_HEADER, file=out)
    with FileRecords.open(path) as fr:
        try:
            for batch in fr.batches(validate=True, strict=True):
                n = len(batch.records())
                records += n
                batches += 1
                print(_batch_line(batch, n), file=out)
        except KafkalogError as e:
            print(f"error: {e}", file=out)
            ok = False
        valid = "valid" if ok else "NOT valid"
        print(f"{batches} batches, {records} records, {fr.size_in_bytes} bytes, all CRCs {valid}", file=out)
    return ok
