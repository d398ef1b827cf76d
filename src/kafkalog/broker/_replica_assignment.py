"""Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokersRackUnaware``).

The first replica of partition ``p`` is broker ``(p + start) % n`` of the sorted broker list;
the others follow it at a shift that grows by one every ``n`` partitions, so that leaders and
followers both spread evenly. ``start`` and the initial shift are random unless fixed (Kafka
fixes them when partitions are added to a topic: the start is where partition 0's first
replica sits).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..errors import InvalidConfigError


def assign_replicas(partitions: int, replication_factor: int, brokers: Sequence[int], *,
                    fixed_start_index: int = -1, start_partition: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Partition id -> replicas (preferred leader first), for ``partitions`` partitions from
    ``start_partition`` (0 when negative).

    Raises:
        InvalidConfigError: replication factor below 1, partitions below 1, or more replicas
            than brokers (Kafka's InvalidReplicationFactorException message).
    """
    if partitions <= 0:
        raise InvalidConfigError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidConfigError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidConfigError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    ids = sorted(brokers)
    n = len(ids)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition)
    out: dict[int, list[int]] = {}
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out[partition] = replicas
        partition += 1
    return out


def _replica_index(first: int, second_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_shift + index) % (n - 1)
    return (first + shift) % n


def start_index_for_added(brokers: Sequence[int], first_replica_of_partition0: int) -> int:
    """Where CreatePartitions starts (``AdminZkClient.createPartitions``): the index of the
    first broker at or above partition 0's first replica."""
    ids = sorted(brokers)
    for i, b in enumerate(ids):
        if b >= first_replica_of_partition0:
            return i
    return 0
