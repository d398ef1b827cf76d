"""A Kafka-protocol broker over :class:`kafkalog.Log`: ``kafkalog broker --log-dir DIR``, or
:class:`Broker` in-process.

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ..filenames import validate_topic_name
from ._config import BrokerConfig
from ._main import main
from ._replica_manager import ReplicaManager
from ._server import Broker
from ._state import METADATA_FILE

__all__ = [
    "Broker",
    "BrokerConfig",
    "ReplicaManager",
    "validate_topic_name",
    "main",
    "METADATA_FILE",
]
