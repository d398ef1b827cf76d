"""A cluster broker's replicas without the replication data plane: the logs of the partitions
assigned to this broker are opened (with the topic id ZooKeeper holds) and a partition's
leader epoch follows its state znode, so the broker serves the partitions it leads; nothing is
copied between brokers. The replica manager (``_replica_manager.py``) replaces it when present.

Not thread-safe: called on the broker's event loop; log opening runs on its thread pool.
"""

from __future__ import annotations

import logging
from typing import Any

from ._state import _BrokerState, _Partition, _Topic

_log = logging.getLogger(__package__)


class LocalReplicas:
    """``apply_partition_state``/``stop_partition`` over the broker's own partition table."""

    def __init__(self, broker: _BrokerState) -> None:
        self._broker = broker

    async def apply_partition_state(self, topic: str, partition: int, *, leader: int, leader_epoch: int,
                                    isr: list[int], replicas: list[int], partition_epoch: int) -> None:
        b = self._broker
        cluster = getattr(b, "_cluster", None)
        assignment = cluster.cache.assignments.get(topic) if cluster is not None else None
        t = b._topics.get(topic)
        if t is None:
            overrides = await b._in_executor(cluster.zk.topic_config, topic) if cluster is not None else {}
            t = _Topic(topic, assignment.topic_id if assignment else None, overrides, [])
            b._topics[topic] = t
        # a topic's partitions are a dense list here: open every index up to this one
        while len(t.partitions) <= partition:
            index = len(t.partitions)
            config = b.config.topic_config(t.overrides)
            log = await b._in_executor(b._open_log, topic, index, config, t.topic_id)
            t.partitions.append(_Partition(topic, index, log))
            await b._in_executor(b._write_metadata, dict(b._topics), b._producer_id_block_end)
        t.partitions[partition].epoch = max(leader_epoch, 0)

    async def stop_partition(self, topic: str, partition: int, delete: bool) -> Any:
        b = self._broker
        t = b._topics.get(topic)
        if t is None or not delete:
            return
        del b._topics[topic]
        for p in t.partitions:
            p.notify()
        doomed = []
        for p in t.partitions:
            try:
                doomed.append(await b._in_executor(p.log.rename_for_delete))
            except Exception as e:  # noqa: BLE001 - one replica's failure is logged, not fatal
                _log.error("deleting %s-%d failed: %s", topic, p.index, e)
        await b._in_executor(b._write_metadata, dict(b._topics), b._producer_id_block_end)
        b._remove_in_background(doomed)  # type: ignore[attr-defined]
