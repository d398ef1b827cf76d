"""A Kafka-protocol broker over :class:`kafkalog.Log`: ``kafkalog broker --log-dir DIR``, or
:class:`Broker` in-process.

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ._broker import Broker, BrokerConfig, METADATA_FILE, main, validate_topic_name

__all__ = [
    "Broker",
    "BrokerConfig",
    "validate_topic_name",
    "main",
    "METADATA_FILE",
]
