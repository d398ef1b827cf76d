#!/usr/bin/env python3
"""kafkalog broker benchmarks: confluent-kafka (librdkafka) against `python -m kafkalog.broker`.

One run starts the broker as a subprocess on loopback (its own interpreter, so the client and the
broker do not share a GIL) and measures:

  [1] PRODUCE: confluent-kafka Producer, lz4, acks=1, linger.ms=5, into a fresh one-partition
      topic: N messages of 100 B and of 1 KiB values (keys of ~10 B; values half random, half
      text), timed from the first produce() to the end of flush(). Messages/s and MB/s of
      values, with the broker's and the client's CPU use over the same interval (from /proc),
      which says which side bounds the figure. Also the same with acks=all and the idempotent
      producer.
  [2] CONSUME: confluent-kafka Consumer, assign at offset 0, consume(10000) in a loop touching
      every value, over the topics of [1]: messages/s and MB/s.
  [3] RAW FETCH: a plain socket sends Fetch v11 requests (one partition, max_bytes = partition
      max = --fetch-size, 50 MiB) and reads every response whole into a reused buffer with
      recv_into, decoding the response header with kafkalog.protocol and walking only batch
      headers (to find the next offset), no record decoding; GB/s of record bytes (whole
      batches). Next to it, in the same run, raw os.sendfile of the very same segment file, in
      the same chunk size, from another process (a `python -c` sender, as the broker is one)
      to a socket drained by the same recv_into loop. Each pass moves the segment --rounds
      times; best and median of --repeats passes, interleaved. The broker's sendfile byte
      counter is not visible from outside, so the run checks that the bytes received equal
      --rounds x the segment's size.

  [4] GROUPS: four confluent-kafka consumers in one group (subscribe) on a 4-partition topic of
      100 B lz4 messages, next to the same four consumers with assign, in the same run: each
      consumer polls in its own thread (consume(10000) touching every value); messages/s from
      the first message to the last (the group's join time, start to first message, is shown
      apart). Then OffsetCommit latency, p50 and p99: synchronous commit() calls as the client
      sees them (after every consume(100)), and with enable.auto.commit (auto.commit.interval.ms
      = 20) the round-trip times librdkafka logs for its OffsetCommit requests (debug=protocol),
      the same figure for the synchronous ones beside it.

Run:   /tmp/kv/bin/python benchmarks/bench_broker.py [--quick] [--groups-only] [--json out.json]
Needs confluent-kafka. kafkalog is imported from the environment, or else from ../src.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, REPO_SRC, cpu_facts, git_describe, import_kafkalog, note, progress, table  # noqa: E402

KL, KL_IMPORT_ERROR = import_kafkalog("protocol", "broker")
_CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process (all its threads) from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK


def make_values(n: int, size: int, seed: int) -> list[bytes]:
    """Half random bytes, half text, so that lz4 has something to do (as bench_records)."""
    rnd = random.Random(seed)
    words = b"kafka log segment offset index batch record header producer consumer broker ".split()
    pool = []
    for i in range(1024):
        text = b" ".join(rnd.choice(words) for _ in range(size // 6))[: size // 2]
        pool.append((rnd.randbytes(size - len(text)) + text)[:size])
    return [pool[i % len(pool)] for i in range(n)]


class BrokerProcess:
    """`python -m kafkalog.broker` on a free loopback port."""

    def __init__(self, log_dir: Path, *config: str) -> None:
        args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(log_dir), "--listen", "127.0.0.1:0",
                "--log-level", "WARNING"]
        for item in config:
            args += ["--config", item]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), env.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"the broker did not start: {line!r}")
        self.address = line.split()[-1]
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc.stdout.close()


def produce(address: str, topic: str, values: list[bytes], **extra) -> dict:
    from confluent_kafka import Producer

    config = {"bootstrap.servers": address, "compression.type": "lz4", "linger.ms": 5, "acks": 1,
              "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
              "queue.buffering.max.kbytes": 1_048_576, "log_level": 3, **extra}
    producer = Producer(config)
    producer.produce(topic, key=b"warm-up", value=b"x")  # topic auto-created, metadata known
    producer.flush(30)
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    produce_ = producer.produce
    poll = producer.poll
    keys = [b"key-%06d" % (i % 100_000) for i in range(len(values))]
    return_value: dict = {}
    t_cpu, t0 = cpu_seconds(), time.perf_counter()
    b_cpu = cpu_seconds(BROKER.pid)
    for key, value in zip(keys, values):
        try:
            produce_(topic, value, key, on_delivery=report)
        except BufferError:
            poll(0.005)
            produce_(topic, value, key, on_delivery=report)
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    return_value.update(
        seconds=elapsed,
        messages=len(values),
        msgs_per_s=len(values) / elapsed,
        mb_per_s=sum(map(len, values)) / elapsed / 1e6,
        broker_cpu=(cpu_seconds(BROKER.pid) - b_cpu) / elapsed,
        client_cpu=(cpu_seconds() - t_cpu) / elapsed,
        errors=len(errors) + left,
    )
    if errors or left:
        note(f"produce to {topic}: {len(errors)} delivery errors, {left} not flushed ({errors[:1]})")
    return return_value


def produce_calls_alone(values: list[bytes]) -> float:
    """produce() calls per second into a producer with no broker to talk to (the client's own
    floor: the Python loop and librdkafka's enqueue, lz4 never runs)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "compression.type": "lz4", "linger.ms": 5,
                         "queue.buffering.max.messages": len(values) + 10, "queue.buffering.max.kbytes": 2_097_151,
                         "log_level": 0, "message.timeout.ms": 600_000})
    produce_ = producer.produce
    keys = [b"key-%06d" % (i % 100_000) for i in range(len(values))]
    t0 = time.perf_counter()
    for key, value in zip(keys, values):
        produce_("floor", value, key)
    elapsed = time.perf_counter() - t0
    producer.purge()
    producer.flush(0)
    return len(values) / elapsed


def consume(address: str, topic: str, count: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 100, "log_level": 3,
                         "queued.max.messages.kbytes": 262_144})
    consumer.assign([TopicPartition(topic, 0, 1)])  # after the warm-up message
    got = nbytes = 0
    b_cpu = cpu_seconds(BROKER.pid)
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < count and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                nbytes += len(message.value())
                got += 1
    elapsed = time.perf_counter() - t0
    broker = (cpu_seconds(BROKER.pid) - b_cpu) / elapsed
    consumer.close()
    if got < count:
        note(f"consume of {topic}: {got} of {count} messages")
    return {"seconds": elapsed, "messages": got, "msgs_per_s": got / elapsed, "mb_per_s": nbytes / elapsed / 1e6,
            "broker_cpu": broker}


# -- raw fetch and raw sendfile --------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta at byte 23 of a v2 batch


def _recv_exactly(sock: socket.socket, view: memoryview, n: int) -> None:
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n], n - got)
        if not k:
            raise ConnectionError("closed")
        got += k


def raw_fetch_pass(address: str, topic: str, end_offset: int, fetch_size: int, buf: bytearray,
                   rounds: int) -> tuple[int, float]:
    """Fetch ``topic``-0 from offset 0 to ``end_offset``, ``rounds`` times over one connection;
    return (record bytes, seconds)."""
    from kafkalog import protocol as p

    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    view = memoryview(buf)
    offset = total = 0
    cid = 0
    t0 = time.perf_counter()
    try:
        for _ in range(rounds):
            offset = 0
            while offset < end_offset:
                cid += 1
                body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": fetch_size, "isolation_level": 0,
                        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                             "partition_max_bytes": fetch_size}]}], "forgotten_topics_data": [], "rack_id": ""}
                sock.sendall(p.encode_request(p.ApiKey.FETCH, 11, cid, body))
                _recv_exactly(sock, view, 4)
                size = struct.unpack_from(">i", view)[0]
                _recv_exactly(sock, view, size)
                _, response = p.decode_response(p.ApiKey.FETCH, 11, view[:size])
                records = response["responses"][0]["partitions"][0]["records"]
                n = len(records)
                pos = last = 0
                while pos + 27 <= n:  # batch headers only: the last whole batch gives the next offset
                    base, length = _BATCH_HEAD.unpack_from(records, pos)
                    if pos + 12 + length > n:
                        break
                    last = base + _LAST_DELTA.unpack_from(records, pos + 23)[0]
                    pos += 12 + length
                if not pos:
                    raise RuntimeError(f"empty fetch at offset {offset}")
                total += pos  # whole batches (a response may end inside one, fetched again next time)
                offset = last + 1
    finally:
        sock.close()
    return total, time.perf_counter() - t0


_SENDER = """
import os, socket, sys
path, port, chunk, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
size = os.path.getsize(path)
out = socket.create_connection(("127.0.0.1", port))
out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
fd = os.open(path, os.O_RDONLY)
for _ in range(rounds):
    pos = 0
    while pos < size:
        end = min(size, pos + chunk)
        while pos < end:
            pos += os.sendfile(out.fileno(), fd, pos, end - pos)
out.close()
"""


def raw_sendfile_pass(path: str, fetch_size: int, buf: bytearray, rounds: int) -> tuple[int, float]:
    """os.sendfile of the whole file, ``fetch_size`` at a time, from another process (as the
    broker is one; not a fork, whose copy-on-write pages would tax the receiving buffer) to a
    loopback socket drained with the same recv_into loop; return (bytes, seconds)."""
    size = os.path.getsize(path) * rounds
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    sender = subprocess.Popen([sys.executable, "-c", _SENDER, path, str(port), str(fetch_size), str(rounds)])
    conn, _ = listener.accept()
    listener.close()
    view = memoryview(buf)
    got = 0
    try:
        _recv_exactly(conn, view, 1)  # timing starts at the first byte, as the sender gets going
        got = 1
        t0 = time.perf_counter()
        while got < size:
            n = min(size - got, fetch_size)
            _recv_exactly(conn, view, n)
            got += n
        elapsed = time.perf_counter() - t0
    finally:
        conn.close()
        sender.wait(60)
    return got, elapsed


# -- main ------------------------------------------------------------------------------------------


# -- consumer groups ---------------------------------------------------------------------------------

GROUP_PARTITIONS = 4


def produce_partitioned(address: str, topic: str, values: list[bytes]) -> None:
    """``values`` spread round-robin over the partitions of a fresh 4-partition topic."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(topic, GROUP_PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": address, "compression.type": "lz4", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "log_level": 3})
    for i, value in enumerate(values):
        try:
            producer.produce(topic, value, partition=i % GROUP_PARTITIONS)
        except BufferError:
            producer.poll(0.005)
            producer.produce(topic, value, partition=i % GROUP_PARTITIONS)
    left = producer.flush(120)
    if left:
        note(f"produce to {topic}: {left} messages not flushed")


def four_consumers(address: str, topic: str, total: int, mode: str, group: str) -> dict:
    """Four consumers, one thread each, reading ``total`` messages of ``topic``: with ``mode``
    "assign" each takes one partition from offset 0, with "group" they subscribe to one group
    (auto commit on, librdkafka's default). Messages/s from the first message to the last."""
    from confluent_kafka import Consumer, TopicPartition

    config = {"bootstrap.servers": address, "group.id": group, "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 100,
              "log_level": 3, "queued.max.messages.kbytes": 262_144, "auto.offset.reset": "earliest",
              "enable.auto.commit": mode == "group"}
    consumers = [Consumer(config) for _ in range(GROUP_PARTITIONS)]
    counts = [0] * GROUP_PARTITIONS
    firsts: list[float] = []
    lasts = [0.0] * GROUP_PARTITIONS
    done = threading.Event()
    lock = threading.Lock()

    def run(i: int, consumer) -> None:
        deadline = time.perf_counter() + 300
        while not done.is_set() and time.perf_counter() < deadline:
            got = 0
            for message in consumer.consume(10_000, 0.2):
                if message.error() is None:
                    len(message.value())
                    got += 1
            if got:
                now = time.perf_counter()
                with lock:
                    if not firsts:
                        firsts.append(now)
                    counts[i] += got
                    lasts[i] = now
                    if sum(counts) >= total:
                        done.set()

    start = time.perf_counter()
    b_cpu = cpu_seconds(BROKER.pid)
    for i, consumer in enumerate(consumers):
        if mode == "assign":
            consumer.assign([TopicPartition(topic, i, 0)])
        else:
            consumer.subscribe([topic])
    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = max(lasts)
    broker = (cpu_seconds(BROKER.pid) - b_cpu) / (end - start)
    for consumer in consumers:
        consumer.close()
    got = sum(counts)
    if got < total:
        note(f"{mode}: {got} of {total} messages")
    window = end - firsts[0] if firsts else float("nan")
    return {"messages": got, "msgs_per_s": got / window, "join_seconds": (firsts[0] - start) if firsts else None,
            "broker_cpu": broker, "per_consumer": counts}


_RTT = re.compile(r"Received OffsetCommitResponse .*rtt ([0-9.]+)ms")


class _Rtts(logging.Handler):
    """Collects librdkafka's OffsetCommit round-trip times from its protocol debug log."""

    def __init__(self) -> None:
        super().__init__()
        self.rtts: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = _RTT.search(record.getMessage())
        if m:
            self.rtts.append(float(m.group(1)) / 1000)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    if not ordered:
        return float("nan"), float("nan")
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def commit_latency(address: str, topic: str, mode: str, commits: int) -> dict:
    """OffsetCommit latency of one group member: synchronous commit() after every consume(100),
    or librdkafka's own commits with enable.auto.commit every 20 ms while it consumes."""
    from confluent_kafka import Consumer

    rtts = _Rtts()
    logger = logging.getLogger(f"kafkalog.bench.rdkafka.{mode}")
    logger.addHandler(rtts)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"bench-commit-{mode}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": mode == "auto",
                         "auto.commit.interval.ms": 20, "debug": "protocol", "logger": logger,
                         "fetch.queue.backoff.ms": 1})
    consumer.subscribe([topic])
    calls: list[float] = []
    deadline = time.perf_counter() + 300
    while len(calls if mode == "sync" else rtts.rtts) < commits and time.perf_counter() < deadline:
        messages = consumer.consume(100, 0.5)
        if not messages:
            continue
        if mode == "sync":
            t0 = time.perf_counter()
            consumer.commit(asynchronous=False)
            calls.append(time.perf_counter() - t0)
        else:
            time.sleep(0.002)  # consume slowly, so that every auto commit has new offsets
    consumer.close()
    p50, p99 = _percentiles(calls)
    r50, r99 = _percentiles(rtts.rtts)
    return {"commits": len(calls) or len(rtts.rtts), "call_p50": p50, "call_p99": p99, "rtt_p50": r50, "rtt_p99": r99}


def group_benchmark(args, results: dict) -> None:
    topic = "bench-group-100"
    values = make_values(args.group_messages, 100, seed=4)
    progress(f"[4] groups: {args.group_messages:,} 100 B lz4 messages over {GROUP_PARTITIONS} partitions of {topic}")
    produce_partitioned(BROKER.address, topic, values)
    runs: dict[str, list[dict]] = {"assign": [], "group": []}
    for i in range(args.group_repeats):
        order = ["assign", "group"] if i % 2 == 0 else ["group", "assign"]
        for mode in order:
            progress(f"[4] {mode}, pass {i + 1}")
            runs[mode].append(four_consumers(BROKER.address, topic, args.group_messages, mode, f"bench-group-{i}"))
    best = {m: max(r["msgs_per_s"] for r in rs) for m, rs in runs.items()}
    med = {m: statistics.median(r["msgs_per_s"] for r in rs) for m, rs in runs.items()}
    join = statistics.median(r["join_seconds"] for r in runs["group"] if r["join_seconds"] is not None)
    results["group consume"] = runs
    print(f"\n[4] GROUPS: 4 confluent-kafka consumers, 4 partitions, {args.group_messages:,} x 100 B lz4 "
          f"(best and median of {args.group_repeats}, interleaved)\n")
    print(table(["mode", "messages/s best", "messages/s median", "vs assign (best, median)", "broker CPU"], [
        ["assign (no group)", f"{best['assign'] / 1e3:,.0f} k", f"{med['assign'] / 1e3:,.0f} k", "100%",
         f"{statistics.median(r['broker_cpu'] for r in runs['assign']):.0%}"],
        ["one group (subscribe, auto commit)", f"{best['group'] / 1e3:,.0f} k", f"{med['group'] / 1e3:,.0f} k",
         f"{best['group'] / best['assign']:.0%}, {med['group'] / med['assign']:.0%}",
         f"{statistics.median(r['broker_cpu'] for r in runs['group']):.0%}"],
    ]))
    print(f"  group join, start to first message (median): {join:.2f} s "
          "(group.initial.rebalance.delay.ms is Kafka's 3 s)")
    rows = []
    for mode in ("sync", "auto"):
        progress(f"[4] commit latency, {mode}")
        r = commit_latency(BROKER.address, topic, mode, args.commits)
        results[f"commit latency {mode}"] = r
        call = f"{r['call_p50'] * 1e3:.2f} / {r['call_p99'] * 1e3:.2f}" if mode == "sync" else "-"
        rows.append(["commit(asynchronous=False)" if mode == "sync" else "enable.auto.commit (every 20 ms)",
                     f"{r['commits']:,}", call, f"{r['rtt_p50'] * 1e3:.2f} / {r['rtt_p99'] * 1e3:.2f}"])
    print("\n[4] OFFSET COMMIT LATENCY (ms, p50 / p99)\n")
    print(table(["commits", "count", "commit() call", "OffsetCommit round trip (librdkafka rtt)"], rows))
    ratio = med["group"] / med["assign"]
    print(f"\nTarget: group consume >= 0.9x assign: {'met' if ratio >= 0.9 else 'MISSED'} ({ratio:.2f}x median)")

def network_benchmarks(args, results: dict, tmp: Path) -> None:
    """[1] produce, [2] consume, [3] raw fetch against raw sendfile."""
    rows = []
    for label, n, size, extra in (
        ("100 B, acks=1", args.small, 100, {}),
        ("1 KiB, acks=1", args.large, 1024, {}),
        ("100 B, acks=all idempotent", args.small, 100, {"acks": "all", "enable.idempotence": True}),
    ):
        topic = f"bench-{size}-{'idem' if extra else 'acks1'}"
        values = make_values(n, size, seed=size)
        progress(f"[1] produce {label}: {n:,} messages to {topic}")
        r = produce(BROKER.address, topic, values, **extra)
        results[f"produce {label}"] = r
        rows.append([label, f"{n:,}", f"{r['msgs_per_s'] / 1e3:,.0f} k", f"{r['mb_per_s']:,.1f}",
                     f"{r['broker_cpu']:.0%}", f"{r['client_cpu']:.0%}"])
        if not extra:
            floor = produce_calls_alone(values)
            results[f"produce() calls alone {label}"] = floor
            rows.append([f"  client floor: produce() calls alone, {size} B", f"{n:,}", f"{floor / 1e3:,.0f} k",
                         "", "", ""])
    print("\n[1] PRODUCE (confluent-kafka, lz4, linger.ms=5)\n")
    print(table(["case", "messages", "messages/s", "MB/s (values)", "broker CPU", "client CPU"], rows))
    rows = []
    for label, n, size in (("100 B", args.small, 100), ("1 KiB", args.large, 1024)):
        topic = f"bench-{size}-acks1"
        progress(f"[2] consume {label}")
        r = consume(BROKER.address, topic, n)
        results[f"consume {label}"] = r
        rows.append([label, f"{r['messages']:,}", f"{r['msgs_per_s'] / 1e3:,.0f} k", f"{r['mb_per_s']:,.1f}",
                     f"{r['broker_cpu']:.0%}"])
    print("\n[2] CONSUME (confluent-kafka, assign, consume(10000))\n")
    print(table(["case", "messages", "messages/s", "MB/s (values)", "broker CPU"], rows))

    topic = "bench-1024-acks1"
    segment = sorted((tmp / f"{topic}-0").glob("*.log"))
    path = str(segment[0])
    size = os.path.getsize(path)
    end_offset = args.large + 1
    if len(segment) != 1:
        note(f"{topic} has {len(segment)} segments; the sendfile baseline sends the first only")
    buf = bytearray(args.fetch_size + (1 << 20))
    fetch_runs, sendfile_runs = [], []
    progress(f"[3] raw fetch vs raw sendfile: {args.rounds} x {size / 1e6:,.0f} MB, {args.repeats} repeats")
    for i in range(args.repeats):
        order = [("fetch", fetch_runs), ("sendfile", sendfile_runs)]
        for kind, runs in order if i % 2 == 0 else reversed(order):
            if kind == "fetch":
                got, seconds = raw_fetch_pass(BROKER.address, topic, end_offset, args.fetch_size, buf, args.rounds)
            else:
                got, seconds = raw_sendfile_pass(path, args.fetch_size, buf, args.rounds)
            if got != size * args.rounds:
                note(f"{kind} pass moved {got} bytes, {args.rounds} x the segment is {size * args.rounds}")
            runs.append(got / seconds / 1e9)
    best_f, best_s = max(fetch_runs), max(sendfile_runs)
    med_f, med_s = statistics.median(fetch_runs), statistics.median(sendfile_runs)
    results["raw fetch GB/s"] = fetch_runs
    results["raw sendfile GB/s"] = sendfile_runs
    print(f"\n[3] RAW FETCH vs RAW SENDFILE ({args.rounds} x a {size / 1e6:,.0f} MB segment per pass, "
          f"{args.fetch_size >> 20} MiB per fetch/chunk, best and median of {args.repeats})\n")
    print(table(["what", "GB/s best", "GB/s median", "vs sendfile (best, median)"], [
        ["raw os.sendfile of the segment file", f"{best_s:.2f}", f"{med_s:.2f}", "100%"],
        ["Fetch v11 loop against the broker", f"{best_f:.2f}", f"{med_f:.2f}",
         f"{best_f / best_s:.0%}, {med_f / med_s:.0%}"],
    ]))
    target = results["produce 100 B, acks=1"]["msgs_per_s"]
    print("\nTargets: raw fetch >= 80% of raw sendfile: "
          f"{'met' if med_f >= 0.8 * med_s else 'MISSED'} ({med_f / med_s:.0%} median); "
          f"produce >= 300k 100 B messages/s: {'met' if target >= 300_000 else 'MISSED'} ({target / 1e3:,.0f} k)")


def main(argv: list[str] | None = None) -> int:
    global BROKER
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and repeats (~20 s)")
    parser.add_argument("--small", type=int, default=1_000_000, help="100 B messages to produce")
    parser.add_argument("--large", type=int, default=200_000, help="1 KiB messages to produce")
    parser.add_argument("--fetch-size", type=int, default=50 << 20,
                        help="max_bytes of each raw fetch (50 MiB: the Java consumer's fetch.max.bytes)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=4, help="times each raw pass reads the whole segment")
    parser.add_argument("--group-messages", type=int, default=2_000_000, help="100 B messages for [4]")
    parser.add_argument("--group-repeats", type=int, default=3)
    parser.add_argument("--commits", type=int, default=1000, help="commits timed in each [4] latency case")
    parser.add_argument("--groups-only", action="store_true", help="run [4] only")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.large, args.repeats, args.rounds = 300_000, 60_000, 3, 2
        args.group_messages, args.group_repeats, args.commits = 500_000, 2, 300
    if KL is None:
        print(f"kafkalog does not import: {KL_IMPORT_ERROR}", file=sys.stderr)
        return 1
    try:
        import confluent_kafka
    except ImportError:
        print("needs confluent-kafka (pip install confluent-kafka)", file=sys.stderr)
        return 1
    cpu, flags = cpu_facts()
    version = confluent_kafka.version()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"kafkalog broker benchmark: kafkalog {git_describe(REPO_SRC)}, confluent-kafka "
          f"{version if isinstance(version, str) else version[0]} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs ({cpu}; {flags}), load average {load:.1f} at start")
    results: dict = {}
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-bench-broker-"))
    try:
        BROKER = BrokerProcess(tmp)
        progress(f"broker on {BROKER.address}, log dir {tmp}")
        if not args.groups_only:
            network_benchmarks(args, results, tmp)
        group_benchmark(args, results)
    finally:
        if "BROKER" in globals():
            BROKER.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if NOTES:
        print("\nNotes:\n" + "\n".join(f"  - {n}" for n in NOTES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
