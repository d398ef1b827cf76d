"""The broker's descriptor budget: how many partitions it may still open, and rate-limited
warnings for the conditions a busy client could otherwise turn into a flood of log lines.

Every open partition holds file descriptors (a segment's ``.log``, ``.index`` and ``.timeindex``,
the log directory lock: five for a fresh partition, about four more per rolled segment), and
every client connection holds one. Without a budget, topic creation fails half-way with
"Too many open files" and the accept loop has no descriptor left for clients. So the broker
refuses a topic whose partitions would bring the process's open descriptors within a reserve
of ``RLIMIT_NOFILE`` (the reserve is for connections and segment rolls), and, when
``max.broker.partitions`` is set (KIP-578's name), one that would take the partition count
past it. Both refusals are Kafka's ``POLICY_VIOLATION``, the code Kafka's controller answers
when a CreateTopics asks for too many partitions.
"""

from __future__ import annotations

import logging
import os
import time

try:
    import resource
except ImportError:  # not POSIX: no descriptor limit to read
    resource = None  # type: ignore[assignment]

#: Descriptors a new partition takes (five measured for a fresh one, one more for its first roll).
DESCRIPTORS_PER_PARTITION = 6
#: Descriptors kept free for connections, segment rolls and the broker's own files: a tenth of
#: the limit, at least this many.
MIN_DESCRIPTOR_RESERVE = 32
_RESERVE_FRACTION = 10
#: Where the kernel lists the process's open descriptors (Linux, then BSD and macOS).
_FD_DIRS = ("/proc/self/fd", "/dev/fd")
#: A repeated warning is logged at most once in this many seconds (the rest at debug level).
WARNING_INTERVAL_S = 60.0


def descriptor_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE``, or None when there is none."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_descriptor_limit() -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one, as the JVM running a Kafka broker does
    at start (HotSpot's ``MaxFDLimit``, on by default); ``(before, after)`` when it changed.
    Only the ``kafkalog broker`` command calls it: a library does not change its process's limits."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # a hard limit above the kernel's nr_open, or not permitted
        return None
    return soft, hard


def descriptor_reserve(limit: int) -> int:
    """Descriptors never given to partitions under ``limit``."""
    return max(MIN_DESCRIPTOR_RESERVE, limit // _RESERVE_FRACTION)


def open_descriptors() -> int | None:
    """How many descriptors the process has open; None when that cannot be read. Out of
    descriptors, listing them fails: that counts as the limit."""
    for path in _FD_DIRS:
        try:
            return len(os.listdir(path)) - 1  # the listing's own descriptor
        except FileNotFoundError:
            continue
        except OSError:
            limit = descriptor_limit()
            return limit
    return None


def partition_refusal(count: int, hosted: int, max_partitions: int | None) -> str | None:
    """Why ``count`` more partitions cannot be opened beside the ``hosted`` ones, or None."""
    if max_partitions is not None and hosted + count > max_partitions:
        return (
            f"Creating {count} partition(s) would exceed max.broker.partitions = {max_partitions} "
            f"({hosted} hosted)"
        )
    limit = descriptor_limit()
    used = open_descriptors()
    if limit is None or used is None:
        return None
    reserve = descriptor_reserve(limit)
    need = count * DESCRIPTORS_PER_PARTITION
    if used + need > limit - reserve:
        return (
            f"Creating {count} partition(s) would exceed this broker's descriptor budget: {used} of "
            f"{limit} descriptors (RLIMIT_NOFILE) in use, about {DESCRIPTORS_PER_PARTITION} needed per "
            f"partition, {reserve} kept for connections; raise the limit (ulimit -n) or set "
            f"max.broker.partitions"
        )
    return None


def startup_refusal(partitions: int) -> str | None:
    """Why the broker cannot open ``partitions`` partitions at start, or None."""
    limit = descriptor_limit()
    if limit is None:
        return None
    need = partitions * DESCRIPTORS_PER_PARTITION + descriptor_reserve(limit)
    if need <= limit:
        return None
    return (
        f"{partitions} partitions need about {need} file descriptors (with the reserve for "
        f"connections) but RLIMIT_NOFILE is {limit}; raise it (ulimit -n)"
    )


class RateLimitedLog:
    """Logs a recurring condition at ``level`` at most once per :data:`WARNING_INTERVAL_S`
    (a client retrying in a loop must not fill the log); the repeats go to debug level."""

    def __init__(self, logger: logging.Logger, level: int = logging.WARNING) -> None:
        self._logger = logger
        self._level = level
        self._last: float | None = None
        self.suppressed = 0

    def __call__(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if self._last is None or now - self._last >= WARNING_INTERVAL_S:
            self._last = now
            if self.suppressed:
                message += " (%d similar messages suppressed)"
                args = (*args, self.suppressed)
            self.suppressed = 0
            self._logger.log(self._level, message, *args)
        else:
            self.suppressed += 1
            self._logger.debug(message, *args)
