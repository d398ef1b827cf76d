"""The coordinator's answers for a failed ``__consumer_offsets`` append, as Kafka's
``GroupMetadataManager`` maps them (``maybeConvertOffsetCommitError``; ``storeGroup``'s callback)."""

from __future__ import annotations

import pytest

from kafkalog.broker._offsets_topic import commit_error, store_group_error
from kafkalog.protocol import ErrorCode as E


@pytest.mark.parametrize(("append", "commit", "sync"), [
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
    (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS),
    (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE, E.UNKNOWN_SERVER_ERROR),
])
def test_append_errors_map_as_kafka_maps_them(append, commit, sync) -> None:
    assert commit_error(append) is commit
    assert store_group_error(append) is sync
