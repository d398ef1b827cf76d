"""A consumer-group member for tests/broker/test_groups_clients.py, run as its own process so that a
test can SIGKILL it (a member that stops heartbeating). One client library per run:

    python group_member.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS

CLIENT is kafka-python, confluent or aiokafka. It subscribes to TOPIC in GROUP (offsets from the
earliest, no auto-commit) and writes JSON lines to stdout: {"assigned": [partitions]} whenever
its assignment changes, {"msg": [partition, offset, value]} per message, {"committed": true}
and {"closed": true}. It reads commands from stdin: "commit" (a synchronous commit of what it
consumed) and "close" (leave the group and exit).
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading

HEARTBEAT_MS = 200
POLL_S = 0.1


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


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

        def commit():
            consumer.commit(asynchronous=False)
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

        def commit():
            consumer.commit()

    last = None
    while True:
        got = poll()
        for p, o, v in got:
            emit(msg=[p, o, v])
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
            commit()
            emit(committed=True)
        elif command == "close":
            consumer.close()
            emit(closed=True)
            return


async def run_aiokafka(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from aiokafka import AIOKafkaConsumer

    todo = commands()
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
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            emit(assigned=now)
            last = now
        try:
            command = todo.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            await consumer.commit()
            emit(committed=True)
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
