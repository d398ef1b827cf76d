"""A consumer-group member for tests/broker/test_groups_clients.py, run as its own process so that a
test can SIGKILL it (a member that stops heartbeating). One client library per run:

    python group_member.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS

CLIENT is kafka-python, confluent or aiokafka. It subscribes to TOPIC in GROUP (offsets from the
earliest, no auto-commit) and writes JSON lines to stdout: {"assigned": [partitions]} whenever
its assignment changes, {"msg": [partition, offset, value]} per message, {"committed": true}
and {"closed": true}. It reads commands from stdin: "commit" (a synchronous commit of what it
consumed) and "close" (leave the group and exit).

For the cluster tests (tests/broker/test_cluster_clients.py) it also produces, with the same
library, acks=all and idempotent: "produce START COUNT PARTITIONS" sends the values mSTART..
to partition i % PARTITIONS in the background and then writes {"produced": {"acked": [i, ...],
"failed": [i, ...]}}. A commit commits the next offset of each partition consumed so far and
writes {"committed": {partition: offset}}, or {"commit_failed": "why"} when the client gives up
(a coordinator moving): the test decides whether to retry.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading

HEARTBEAT_MS = 200
POLL_S = 0.1


_emit_lock = threading.Lock()


def emit(**event) -> None:
    with _emit_lock:  # the producer's thread writes too
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def produce_command(command: str) -> tuple[int, int, int] | None:
    """(start, count, partitions) of a "produce START COUNT PARTITIONS" command, else None."""
    words = command.split()
    if len(words) != 4 or words[0] != "produce":
        return None
    return int(words[1]), int(words[2]), int(words[3])


def index_of(value: bytes) -> int:
    return int(value.decode()[1:])


def commands() -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            q.put(line.strip())
        q.put("close")

    threading.Thread(target=read, daemon=True).start()
    return q


def run_sync(client: str, bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    todo = commands()
    if client == "confluent":
        from confluent_kafka import Consumer

        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": session_ms, "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": 30000, "fetch.wait.max.ms": 50, "log_level": 3,
        })
        consumer.subscribe([topic])

        def poll():
            return [(m.partition(), m.offset(), m.value().decode()) for m in consumer.consume(500, POLL_S)
                    if m.error() is None]

        def assignment():
            return sorted(tp.partition for tp in consumer.assignment())

        def commit(offsets: dict[int, int]) -> None:
            from confluent_kafka import TopicPartition

            consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)

        def produce(start: int, count: int, partitions: int) -> None:
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 5, "log_level": 3})
            acked: list[int] = []
            failed: list[int] = []

            def report(err, msg) -> None:
                (acked if err is None else failed).append(index_of(msg.value()))

            for i in range(start, start + count):
                producer.produce(topic, f"m{i}".encode(), partition=i % partitions, on_delivery=report)
            producer.flush(300)  # message.timeout.ms (300 s) bounds each message
            emit(produced={"acked": acked, "failed": failed})
    else:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=30000, fetch_max_wait_ms=50, request_timeout_ms=31000,
        )
        # Subscribed, then the topic's metadata fetched, before the first poll(). kafka-python
        # 3.0.12 rebuilds its "metadata snapshot" only when metadata arrives: a leader that joins
        # before a metadata update has seen the subscription assigns with a stale snapshot, and
        # the next update makes it rejoin -- a rejoin it starts without setting its own
        # rejoin_needed flag. When a poll() times out while that JoinGroup/SyncGroup is in flight
        # (slow replies on a busy machine), the leader's new assignment makes need_rejoin()
        # false before the next poll awaits the finished join, so no poll ever completes it:
        # heartbeats stay disabled, no partition is assigned, the broker expires the member
        # after its session timeout and it never rejoins. (A client-side race, reproduced under
        # CPU load; fetching the metadata after subscribe() makes the snapshot right before
        # the first join, so that rejoin never happens.)
        consumer.subscribe([topic])
        if not consumer.partitions_for_topic(topic):
            emit(error=f"topic {topic} has no partitions")
            return

        def poll():
            got = consumer.poll(timeout_ms=int(POLL_S * 1000))
            return [(m.partition, m.offset, m.value.decode()) for batch in got.values() for m in batch]

        def assignment():
            return sorted(tp.partition for tp in consumer.assignment())

        def commit(offsets: dict[int, int]) -> None:
            from kafka import OffsetAndMetadata, TopicPartition

            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

        def produce(start: int, count: int, partitions: int) -> None:
            from kafka import KafkaProducer

            producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                     retry_backoff_ms=200)
            futures = [(i, producer.send(topic, f"m{i}".encode(), partition=i % partitions))
                       for i in range(start, start + count)]
            producer.flush()  # delivery_timeout_ms bounds each message
            emit(produced={"acked": [i for i, f in futures if f.succeeded()],
                           "failed": [i for i, f in futures if not f.succeeded()]})
            producer.close()

    last = None
    consumed: dict[int, int] = {}  # partition -> the next offset to commit
    while True:
        got = poll()
        for p, o, v in got:
            emit(msg=[p, o, v])
            consumed[p] = o + 1
        now = assignment()
        if now != last:
            emit(assigned=now)
            last = now
        try:
            # When a poll returns at once with nothing, wait a little for a command rather than
            # poll again straight away: kafka-python 3.0's poll() can return immediately while a
            # rebalance is in flight, and a loop calling it back to back keeps taking the
            # coordinator's lock, which its network thread needs to complete the SyncGroup
            # (seen as a member that stops heartbeating, then spins forever).
            command = todo.get(timeout=0 if got else 0.01)
        except queue.Empty:
            continue
        if command == "commit":
            offsets = dict(consumed)
            try:
                commit(offsets)
            except Exception as e:  # noqa: BLE001 - reported; the test decides whether to retry
                emit(commit_failed=repr(e))
            else:
                emit(committed=offsets)
        elif produce_command(command):
            threading.Thread(target=produce, args=produce_command(command), daemon=True).start()
        elif command == "close":
            consumer.close()
            emit(closed=True)
            return


async def run_aiokafka(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def produce(start: int, count: int, partitions: int) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
        await producer.start()
        try:
            sent = [(i, await producer.send(topic, f"m{i}".encode(), partition=i % partitions))
                    for i in range(start, start + count)]
            results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
        finally:
            await producer.stop()
        emit(produced={"acked": [i for (i, _), r in zip(sent, results) if not isinstance(r, BaseException)],
                       "failed": [i for (i, _), r in zip(sent, results) if isinstance(r, BaseException)]})

    todo = commands()
    tasks = set()
    consumed: dict[int, int] = {}
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=30000,
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    last = None
    while True:
        got = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
        for batch in got.values():
            for m in batch:
                emit(msg=[m.partition, m.offset, m.value.decode()])
                consumed[m.partition] = m.offset + 1
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            emit(assigned=now)
            last = now
        try:
            command = todo.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            offsets = dict(consumed)
            try:
                await consumer.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
            except Exception as e:  # noqa: BLE001 - reported; the test decides whether to retry
                emit(commit_failed=repr(e))
            else:
                emit(committed=offsets)
        elif produce_command(command):
            task = asyncio.ensure_future(produce(*produce_command(command)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif command == "close":
            await consumer.stop()
            emit(closed=True)
            return


def main() -> None:
    client, bootstrap, topic, group, session = sys.argv[1:6]
    if client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group, int(session)))
    else:
        run_sync(client, bootstrap, topic, group, int(session))


if __name__ == "__main__":
    main()
