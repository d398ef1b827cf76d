"""Producer state: idempotence and transactions as Kafka's ``ProducerStateManager`` keeps them for
one partition.

- :mod:`~kafkalog.producer_state.manager`: :class:`ProducerStateManager` and the append checks;
- :mod:`~kafkalog.producer_state.entry`: one producer's state (``ProducerStateEntry``) and the
  sequence arithmetic;
- :mod:`~kafkalog.producer_state.snapshot`: the ``<offset>.snapshot`` file's layout and codec.
"""

from __future__ import annotations

from .entry import ProducerStateEntry
from .manager import (
    AppendOrigin,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
)
from .snapshot import decode_snapshot

__all__ = ["AppendOrigin", "ProducerStateEntry", "ProducerStateManager", "TransactionCoordinatorFencedError", "decode_snapshot"]
