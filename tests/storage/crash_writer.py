"""The writer that ``test_log_crash.py`` kills: it opens a partition log and appends, flushes,
rolls and applies retention until it is killed (or, rarely, until it finishes and closes).

Usage: ``python crash_writer.py <partition dir> <side file> <seed> <run> <config json>``

Content is a function of the offset (:func:`record_key`, :func:`record_value`,
:func:`record_timestamp`), so a checker can tell any record's expected bytes from its offset
alone, however many runs and crashes produced the log. Each run is a new producer session: its
run number is both the leader epoch stamped on its batches and the epoch of its idempotent
producer, whose sequences start again at 0.

The side file gets one line per event, written with ``os.write`` (and fsynced where it
matters) so that a line present after a SIGKILL describes something that happened:

* ``A <end>`` before an append: the log end offset will be at most ``end`` afterwards;
* ``F <offset>`` after ``flush()`` returned (or the recovery point moved): every offset below
  it is durable;
* ``O <end>`` after ``Log.open`` returned (diagnostics only).

Its stdout gets ``opening`` before ``Log.open`` and ``ready`` after, so the parent can aim its
kill at recovery or at the writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys

#: Kafka's idempotent producer id used by the writer.
PRODUCER_ID = 4242
CODECS = ("NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD")


def record_key(offset: int) -> bytes:
    return b"k%d" % offset


def record_value(offset: int) -> bytes:
    """Between 0 and 599 bytes, incompressible, different for every offset."""
    size = (offset * 7919) % 600
    seed = hashlib.sha256(b"v%d" % offset).digest()
    return (seed * (size // len(seed) + 1))[:size]


def record_timestamp(offset: int, base_timestamp: int) -> int:
    """Mostly increasing, sometimes a little backwards (so max timestamps are not the last).
    The base is the checker's choice (near its start time, so producers never expire)."""
    return base_timestamp + offset * 3 + (offset * 7) % 11 - 5


def build_batch(
    first_offset: int,
    count: int,
    codec_name: str,
    base_timestamp: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
):
    """The batch the writer appends when the log end is ``first_offset`` (offsets from 0; the
    log assigns them)."""
    from kafkalog import Compression, RecordBatchBuilder

    builder = RecordBatchBuilder(
        magic=2,
        compression=Compression[codec_name],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i in range(count):
        offset = first_offset + i
        builder.append(record_key(offset), record_value(offset), timestamp=record_timestamp(offset, base_timestamp))
    return builder.build()


def _note(fd: int, line: str, *, sync: bool = False) -> None:
    os.write(fd, line.encode("ascii") + b"\n")
    if sync:
        os.fsync(fd)


def main(argv: list[str]) -> int:
    directory, side_path, seed, run, config_json = argv[1:6]
    run = int(run)
    rng = random.Random(int(seed) * 1_000_003 + run)
    options = json.loads(config_json)
    max_ops = options.pop("_max_ops", 400)
    base_timestamp = options.pop("_base_timestamp")

    from kafkalog.log_config import LogConfig
    from kafkalog.log import Log

    config = LogConfig(**options)
    side = os.open(side_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("opening", flush=True)
    log = Log.open(directory, config)
    _note(side, f"O {log.log_end_offset}")
    print("ready", flush=True)
    sequence = 0
    reported = log.recovery_point
    for _ in range(max_ops):
        choice = rng.random()
        moves_start = False
        if choice < 0.75:
            end = log.log_end_offset
            count = rng.randint(1, 25)
            idempotent = rng.random() < 0.5
            records = build_batch(
                end,
                count,
                rng.choice(CODECS),
                base_timestamp,
                producer_id=PRODUCER_ID if idempotent else -1,
                producer_epoch=run if idempotent else -1,
                base_sequence=sequence if idempotent else -1,
            )
            _note(side, f"A {end + count}")
            info = log.append(records, leader_epoch=run)
            if info.first_offset != end or info.last_offset != end + count - 1:
                raise AssertionError(f"append at {end} got offsets {info.first_offset}..{info.last_offset}")
            if idempotent:
                sequence += count
        elif choice < 0.88:
            log.flush()
            reported = max(reported, log.log_end_offset)
            _note(side, f"F {log.log_end_offset}", sync=True)
        elif choice < 0.93:
            log.roll()
            if rng.random() < 0.3:
                log.roll()  # rolling an empty active segment replaces it (KAFKA-6388)
        elif choice < 0.97:
            log.delete_old_segments()
            moves_start = True
        else:
            start, end = log.log_start_offset, log.log_end_offset
            log.delete_records(rng.randint(start, end))
            moves_start = True
        point = log.recovery_point
        # The flush policy or the flush after a roll moved it (a new log start offset moves it
        # too, without a flush: that is no durability claim).
        if moves_start:
            reported = max(reported, point)
        elif point > reported:
            reported = point
            _note(side, f"F {point}", sync=True)
    log.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
