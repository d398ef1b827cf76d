#!/usr/bin/env python3
"""kafkalog cluster benchmarks: three `kafkalog broker` processes and a ZooKeeper on loopback.

One run starts ZooKeeper (Debian's package) and brokers 1..3 as subprocesses, exactly as
`kafkalog cluster up` does (kafkalog.tools._cluster_up.LocalCluster), and measures:

  [1] PRODUCE: confluent-kafka Producer, lz4, linger.ms=5, the same N values (half random, half
      text) to an RF 3 topic with min.insync.replicas=2 and acks=all, and to an RF 1 topic with
      acks=1, both led by the same broker, interleaved over --repeats passes. Messages/s and MB/s
      from the first produce() to the end of flush(); per-message latency p50/p99 as the
      delivery report gives it (Message.latency(): librdkafka's time from produce() to the
      acknowledgement), and the CPU every broker and the client used (from /proc). Then the
      round trip of one message at a time (produce, flush) for each mode, p50/p99. With
      --profile (on by default when py-spy is installed) the leader and one follower are sampled
      with py-spy (all threads; the fetcher is a thread, so cProfile of the main thread would
      miss it) during one more acks=all pass: the busiest threads, and the functions that hold
      the most samples, inclusive and own.
  [2] FAILOVER: a producer (acks=all, idempotent) sends continuously to an RF 3 topic whose
      leader is not the controller; the leader gets SIGKILL; the time from the kill to the first
      delivery report of a message produced after the kill, against the target
      replica.lag.time.max.ms + zookeeper.session.timeout.ms + 1 s. A kazoo watch times the
      steps between: the broker's /brokers/ids znode gone (its ZooKeeper session expired) and the
      partition's state znode naming the new leader.
  [3] CATCH-UP: one follower of an RF 3 topic is stopped (controlled shutdown), --size bytes of
      1 KiB uncompressed values are produced with acks=all (min.insync.replicas=2 still holds),
      the follower is restarted and timed until the partition's ISR znode names it again (Kafka
      adds a follower back once its log end reaches the high watermark: with no more produce,
      the leader's log end). MB/s of log bytes it was behind, against two single-node fetches
      of the same log from the leader in the same run: a confluent-kafka consumer (every value
      touched), and a raw Fetch v11 loop (bench_broker's, batch headers only) asking
      replica.fetch.max.bytes at a time as the follower does, but writing nothing. The target
      is >= 50% of the consumer; the ratio to the raw loop is printed too. With --profile, a
      second, smaller catch-up (--profile-size) runs under py-spy.

Run:   python benchmarks/bench_cluster.py [--quick] [--size 1G] [--no-profile] [--json out.json]
Needs ZooKeeper (apt-get install zookeeper), kazoo and confluent-kafka; skips, saying so, without
them. kafkalog is imported from the environment, or else from ../src.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, REPO_SRC, cpu_facts, git_describe, import_kafkalog, note, parse_size, progress, table  # noqa: E402
from bench_broker import raw_fetch_pass  # noqa: E402  (the single-node raw Fetch loop of [3])

KL, KL_IMPORT_ERROR = import_kafkalog("protocol", "broker")
_CLK = os.sysconf("SC_CLK_TCK")
#: How long any one wait of the run may last (a topic's leader, a catch-up, a failover), in seconds.
_WAIT_S = 600


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process (all its threads) from /proc; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLK


def make_values(n: int, size: int, seed: int, *, compressible: bool = True) -> list[bytes]:
    """``n`` values of ``size`` bytes from a pool of 1024: half random, half text (as
    bench_broker), or all random when not ``compressible``."""
    import random

    rnd = random.Random(seed)
    words = b"kafka log segment offset index batch record header producer consumer broker ".split()
    pool = []
    for _ in range(1024):
        text = b" ".join(rnd.choice(words) for _ in range(size // 6))[: size // 2] if compressible else b""
        pool.append((rnd.randbytes(size - len(text)) + text)[:size])
    return [pool[i % len(pool)] for i in range(n)]


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of an ascending list, nearest rank."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))]


class Bench:
    """The cluster under test and the clients' shared settings."""

    def __init__(self, args, root: Path) -> None:
        from kafkalog.tools._cluster_up import LocalCluster

        self.args = args
        self.root = root
        config = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms),
                  "replica.lag.time.max.ms": str(args.replica_lag_ms),
                  "auto.create.topics.enable": "false"}
        for item in args.config:
            key, _, value = item.partition("=")
            config[key.strip()] = value
        self.cluster = LocalCluster(root, 3, config=config, log_level="WARNING")
        self.zk = None

    def start(self) -> None:
        from kazoo.client import KazooClient

        self.cluster.start()
        self.zk = KazooClient(hosts=self.cluster.connect)
        self.zk.start(timeout=60)

    def stop(self) -> None:
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        self.cluster.stop()

    def broker(self, broker_id: int):
        return self.cluster.brokers[broker_id - 1]

    def controller(self) -> int:
        data, _ = self.zk.get("/controller")
        return json.loads(data)["brokerid"]

    def partition_state(self, topic: str) -> dict:
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
        return json.loads(data)

    def create_topic(self, topic: str, replicas: list[int], **config: str) -> None:
        """A one-partition topic with this assignment; waits (bounded) until its leader is the
        first replica and its ISR is all of them."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=config)])[topic].result(60)
        self.wait_isr(topic, lambda s: s["leader"] == replicas[0] and sorted(s["isr"]) == sorted(replicas))

    def wait_isr(self, topic: str, predicate, seconds: float = _WAIT_S) -> float:
        """Wait on a ZooKeeper data watch until ``predicate(state)`` holds for the partition's
        state znode; the ``time.monotonic()`` at which the watch saw it."""
        seen = threading.Event()
        when = [0.0]

        def watch(data, stat, event=None) -> bool:
            if data is not None and predicate(json.loads(data)):
                when[0] = time.monotonic()
                seen.set()
                return False  # stop watching
            return True

        self.zk.exists(f"/brokers/topics/{topic}/partitions/0/state")
        self.zk.DataWatch(f"/brokers/topics/{topic}/partitions/0/state", watch)
        if not seen.wait(seconds):
            raise RuntimeError(f"{topic}: state {self.partition_state(topic)} not reached within {seconds:g} s")
        return when[0]

    def producer(self, **extra):
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.cluster.bootstrap, "compression.type": "lz4", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "log_level": 3, **extra})

    def cpu(self) -> dict:
        out = {f"broker {b.broker_id}": cpu_seconds(b.proc.pid) for b in self.cluster.brokers if b.alive}
        out["client"] = cpu_seconds()
        return out


# -- [1] produce ---------------------------------------------------------------------------------------


def produce_pass(bench: Bench, topic: str, values: list[bytes], **extra) -> dict:
    """Produce every value; throughput, delivery latency quantiles, CPU per process."""
    producer = bench.producer(**extra)
    producer.produce(topic, key=b"warm-up", value=b"x")  # metadata known, connection open
    producer.flush(60)
    latencies: list[float] = []
    errors: list = []
    add = latencies.append

    def report(err, msg) -> None:
        if err is None:
            add(msg.latency())
        else:
            errors.append(err)

    produce_, poll = producer.produce, producer.poll
    keys = [b"key-%06d" % (i % 100_000) for i in range(len(values))]
    cpu0, t0 = bench.cpu(), time.perf_counter()
    for key, value in zip(keys, values):
        try:
            produce_(topic, value, key, on_delivery=report)
        except BufferError:
            poll(0.005)
            produce_(topic, value, key, on_delivery=report)
    left = producer.flush(300)
    elapsed = time.perf_counter() - t0
    cpu1 = bench.cpu()
    if errors or left:
        note(f"produce to {topic}: {len(errors)} delivery errors, {left} not flushed ({errors[:1]})")
    latencies.sort()
    return {"seconds": elapsed, "messages": len(values), "msgs_per_s": len(values) / elapsed,
            "mb_per_s": sum(map(len, values)) / elapsed / 1e6, "p50_ms": percentile(latencies, 0.5) * 1e3,
            "p99_ms": percentile(latencies, 0.99) * 1e3,
            "cpu": {k: (cpu1[k] - cpu0.get(k, 0.0)) / elapsed for k in cpu1}}


def round_trips(bench: Bench, topic: str, count: int, **extra) -> dict:
    """One message in flight at a time (produce, flush): p50/p99 of the round trip."""
    producer = bench.producer(**{**extra, "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    producer.flush(60)
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        producer.produce(topic, b"%08d" % i)
        producer.flush(60)
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"p50_ms": percentile(times, 0.5) * 1e3, "p99_ms": percentile(times, 0.99) * 1e3}


def py_spy() -> str | None:
    """The py-spy executable beside this interpreter or on PATH, or None."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if os.access(here, os.X_OK) else shutil.which("py-spy")


def sample(pids: dict[str, int], out_dir: Path) -> dict[str, subprocess.Popen]:
    """Start one ``py-spy record`` per process (raw collapsed stacks, per thread, 200 Hz, threads
    py-spy judges idle left out, without pausing the process); stop them with
    :func:`summarise_samples`."""
    spy = py_spy()
    procs = {}
    for name, pid in pids.items():
        procs[name] = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--threads", "--nonblocking",
             "--output", str(out_dir / f"{name.replace(' ', '-')}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return procs


#: Frames every stack of a broker thread starts with (the interpreter, asyncio's loop, a thread's
#: start), left out of the inclusive list.
_PLUMBING = ("(base_events.py)", "(runners.py)", "(events.py)", "(threading.py)", "runpy>)", "(__main__.py)",
             "(_main.py)", "(thread.py)")


#: Leaf frames that are a thread blocked in a system call or a lock (py-spy counts them as
#: active): the event loop's epoll wait, the fetcher's blocking send and receive of a Fetch round
#: trip, an I/O thread waiting on its queue, a condition wait.
_WAITS = ("EpollSelector.select ", "_Client._exactly ", "_Client.call ", "_worker (thread.py)", "Condition.wait ")


def summarise_samples(procs: dict[str, subprocess.Popen], out_dir: Path, seconds: float, top: int) -> dict:
    """SIGINT each sampler (py-spy then writes its file) and read the stacks: per process, the
    share of the samples each thread has, and the functions in the most samples,
    the share blocked in a system call (leaf in ``_WAITS``), and among the rest (the work) the
    functions in the most samples, inclusive (the interpreter's and asyncio's own frames left
    out) and own (leaf)."""
    summary = {}
    for name, proc in procs.items():
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        path = out_dir / f"{name.replace(' ', '-')}.txt"
        if not path.exists():
            note(f"py-spy wrote nothing for {name}: {err.strip()[-300:]}")
            continue
        threads: collections.Counter = collections.Counter()
        inclusive: collections.Counter = collections.Counter()
        own: collections.Counter = collections.Counter()
        waiting: collections.Counter = collections.Counter()
        total = working = 0
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            frames = stack.split(";")
            thread = frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"
            thread = thread.rsplit("-", 1)[0] if thread.startswith("Thread-") else thread
            funcs = [f.split(" (", 1)[0] + " (" + f.rsplit("/", 1)[-1].split(":")[0].strip("(") + ")"
                     for f in frames[1:]]
            total += n
            threads[thread] += n
            if funcs and funcs[-1].startswith(_WAITS):
                waiting[funcs[-1]] += n
                continue
            working += n
            for f in set(funcs):
                if not f.endswith(_PLUMBING):
                    inclusive[f] += n
            if funcs:
                own[funcs[-1]] += n
        summary[name] = {
            "samples": total, "seconds": seconds,
            "threads": [(t, n / max(1, total)) for t, n in threads.most_common(6)],
            "waiting": [(f, n / max(1, total)) for f, n in waiting.most_common()],
            "inclusive": [(f, n / max(1, working)) for f, n in inclusive.most_common(top)],
            "own": [(f, n / max(1, working)) for f, n in own.most_common(top)],
        }
    return summary


def produce_section(bench: Bench, results: dict) -> None:
    args = bench.args
    leader = next(i for i in (1, 2, 3) if i != bench.controller())
    followers = [i for i in (1, 2, 3) if i != leader]
    bench.create_topic("rf3", [leader, *followers], **{"min.insync.replicas": "2"})
    bench.create_topic("rf1", [leader])
    values = make_values(args.messages, args.message_size, seed=args.message_size)
    modes = {"acks=all, RF 3": ("rf3", {"acks": "all"}), "acks=1, RF 1": ("rf1", {"acks": 1})}
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for i in range(args.repeats):
        order = list(modes) if i % 2 == 0 else list(reversed(modes))
        for mode in order:
            topic, extra = modes[mode]
            progress(f"[1] produce pass {i + 1}/{args.repeats}: {mode}, {len(values):,} x {args.message_size} B")
            runs[mode].append(produce_pass(bench, topic, values, **extra))
    rows = []
    med = {}
    for mode, passes in runs.items():
        best = max(passes, key=lambda r: r["msgs_per_s"])
        m = statistics.median(r["msgs_per_s"] for r in passes)
        med[mode] = m
        cpu = best["cpu"]
        rows.append([mode, f"{best['msgs_per_s'] / 1e3:,.0f} k", f"{m / 1e3:,.0f} k", f"{best['mb_per_s']:,.1f}",
                     f"{statistics.median(r['p50_ms'] for r in passes):.1f}",
                     f"{statistics.median(r['p99_ms'] for r in passes):.1f}",
                     " / ".join(f"{cpu.get(f'broker {b}', 0):.0%}" for b in (leader, *followers)),
                     f"{cpu['client']:.0%}"])
    results["produce"] = runs
    trips = {}
    for mode, (topic, extra) in modes.items():
        progress(f"[1] one message at a time: {mode}, {args.round_trips} round trips")
        trips[mode] = round_trips(bench, topic, args.round_trips, **extra)
    results["round trips"] = trips
    ratio = med["acks=all, RF 3"] / med["acks=1, RF 1"]
    results["produce ratio"] = ratio
    print(f"\n[1] PRODUCE ({len(values):,} values of {args.message_size} B, lz4, linger.ms=5; leader broker {leader}, "
          f"followers {followers[0]} and {followers[1]}; best and median of {args.repeats} interleaved passes; "
          "latency = produce() to delivery report, median of the passes)\n")
    print(table(["mode", "msg/s best", "msg/s median", "MB/s best", "p50 ms", "p99 ms",
                 "CPU leader / followers", "client CPU"], rows))
    print("\none message in flight (produce + flush), ms:")
    print(table(["mode", "p50", "p99"], [[m, f"{t['p50_ms']:.2f}", f"{t['p99_ms']:.2f}"] for m, t in trips.items()]))
    print(f"\nTarget: acks=all RF 3 >= 0.5x acks=1 RF 1: {'met' if ratio >= 0.5 else 'MISSED'} ({ratio:.2f}x median)")
    if args.profile:
        if py_spy() is None:
            note("no profile: py-spy is not installed (pip install py-spy)")
            return
        out_dir = bench.root / "profile"
        out_dir.mkdir(exist_ok=True)
        progress("[1] profiling one more acks=all pass (py-spy on the leader and a follower)")
        pids_ids = {"leader": leader, "follower": followers[0]}
        pids = {name: bench.broker(i).proc.pid for name, i in pids_ids.items()}
        samplers = sample(pids, out_dir)
        time.sleep(1.0)  # py-spy attaching: a benchmark's settling pause, not a synchronisation
        t0 = time.perf_counter()
        run = produce_pass(bench, "rf3", values, acks="all")
        seconds = time.perf_counter() - t0
        profile = summarise_samples(samplers, out_dir, seconds + 1.0, args.profile_top)
        results["profile"] = profile
        cpu = {"leader": run["cpu"].get(f"broker {leader}", 0), "follower": run["cpu"].get(f"broker {followers[0]}", 0)}
        print(f"\nPROFILE of one more acks=all pass under py-spy ({run['msgs_per_s'] / 1e3:,.0f} k msg/s; "
              f"the samplers take CPU too)")
        for name in profile:
            print(f"\n{name} (broker {pids_ids[name]}): CPU {cpu[name]:.0%} of a core (/proc, the produce only)")
        print_profile(profile)


# -- [2] failover --------------------------------------------------------------------------------------


def failover_section(bench: Bench, results: dict) -> None:
    args = bench.args
    controller = bench.controller()
    leader = next(i for i in (1, 2, 3) if i != controller)
    others = [i for i in (1, 2, 3) if i != leader]
    bench.create_topic("failover", [leader, *others], **{"min.insync.replicas": "2"})
    producer = bench.producer(**{"acks": "all", "enable.idempotence": True, "message.timeout.ms": 300_000})
    produced: list[float] = []  # produce time by sequence number (the value)
    acked: list[tuple[float, int]] = []  # (delivery report time, sequence)
    errors: list = []

    def report(err, msg) -> None:
        if err is None:
            acked.append((time.monotonic(), int(msg.value())))
        else:
            errors.append(err)

    events: dict[str, float] = {}
    gone = threading.Event()

    def ids_watch(children) -> bool:
        if str(leader) not in children and "killed" in events:
            events.setdefault("session expired", time.monotonic())
            gone.set()
            return False
        return True

    bench.zk.ChildrenWatch("/brokers/ids", ids_watch)
    stop = threading.Event()

    def send() -> None:
        seq = 0
        while not stop.is_set() and seq < 10_000_000:  # bounded: at most 10 M messages
            produced.append(time.monotonic())
            producer.produce("failover", b"%d" % seq, on_delivery=report)
            seq += 1
            producer.poll(0.001)  # ~1,000 messages/s at most, callbacks served
        producer.flush(120)

    sender = threading.Thread(target=send, name="failover-producer")
    sender.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 500 and time.monotonic() < deadline:  # bounded: a steady stream first
            time.sleep(0.05)
        progress(f"[2] SIGKILL the leader, broker {leader} (controller is {controller})")
        events["killed"] = time.monotonic()
        bench.broker(leader).proc.send_signal(signal.SIGKILL)
        first_after = len(produced)
        events["new leader"] = bench.wait_isr("failover", lambda s: s["leader"] not in (leader, -1))
        deadline = time.monotonic() + _WAIT_S
        while time.monotonic() < deadline:
            after = [t for t, seq in list(acked) if seq >= first_after]
            if after:
                events["first ack"] = min(after)
                break
            time.sleep(0.05)
    finally:
        stop.set()
        sender.join(180)
        bench.broker(leader).kill()
    gone.wait(5)
    t_kill = events["killed"]
    failover = events.get("first ack", float("nan")) - t_kill
    target = (args.replica_lag_ms + args.session_timeout_ms) / 1000 + 1
    new_leader = bench.partition_state("failover")["leader"]
    results["failover"] = {k: v - t_kill for k, v in events.items()} | {"target_s": target, "errors": len(errors)}
    print(f"\n[2] FAILOVER (acks=all, idempotent, ~1,000 messages/s; SIGKILL of leader {leader}, "
          f"not the controller {controller}; new leader {new_leader})\n")
    rows = [[f"broker's ZooKeeper session expired (/brokers/ids/{leader} gone)",
             f"{events.get('session expired', float('nan')) - t_kill:.2f}"],
            ["controller wrote the new leader (partition state znode)", f"{events['new leader'] - t_kill:.2f}"],
            ["first delivery report of a message produced after the kill", f"{failover:.2f}"]]
    print(table(["step (seconds after the kill)", "s"], rows))
    print(f"  delivery errors: {len(errors)}")
    print(f"\nTarget: <= replica.lag.time.max.ms {args.replica_lag_ms} + zookeeper.session.timeout.ms "
          f"{args.session_timeout_ms} + 1 s = {target:g} s: {'met' if failover <= target else 'MISSED'} "
          f"({failover:.2f} s)")
    progress(f"[2] restarting broker {leader}")
    bench.broker(leader).start()
    bench.wait_isr("failover", lambda s: leader in s["isr"])


# -- [3] catch-up ----------------------------------------------------------------------------------------


def log_bytes(directory: Path) -> int:
    """The size of a partition directory's segment files."""
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def consume_all(address: str, topic: str, count: int) -> tuple[int, float]:
    """A confluent-kafka consumer reading ``count`` messages of ``topic``-0 from ``address``
    (assign at 0, every value touched); (value bytes, seconds)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": "bench-cluster", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "log_level": 3, "queued.max.messages.kbytes": 262_144})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + _WAIT_S
    while got < count and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                nbytes += len(message.value())
                got += 1
    elapsed = time.perf_counter() - t0
    consumer.close()
    if got < count:
        note(f"consume of {topic}: {got} of {count} messages")
    return nbytes, elapsed


def fall_behind_and_catch_up(bench: Bench, topic: str, leader: int, lagging: int, size: int,
                             profile_dir: Path | None = None) -> dict:
    """Stop follower ``lagging`` (a controlled shutdown), produce ``size`` bytes of 1 KiB
    uncompressed values with acks=all, restart it and wait for the ISR to name it again; the
    bytes it was behind and the times (``time.monotonic()``) of its restart, its ``listening``
    line, its log's first growth and its return to the ISR. With ``profile_dir``, py-spy samples
    the follower from its ``listening`` line to its return."""
    follower = bench.broker(lagging)
    progress(f"[3] stopping follower {lagging} (controlled shutdown)")
    follower.terminate()
    follower.wait_or_kill(time.monotonic() + 120)
    bench.wait_isr(topic, lambda s: lagging not in s["isr"])
    value_size = 1024
    count = max(1, size // value_size)
    values = make_values(min(count, 4096), value_size, seed=7, compressible=False)
    progress(f"[3] producing {count:,} x {value_size} B (acks=all, uncompressed) while it is away")
    producer = bench.producer(**{"acks": "all", "compression.type": "none"})
    for i in range(count):
        value = values[i % len(values)]
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.005)
            producer.produce(topic, value)
    left = producer.flush(600)
    if left:
        note(f"catch-up produce: {left} messages not flushed")
    leader_dir = bench.broker(leader).directory / f"{topic}-0"
    follower_dir = follower.directory / f"{topic}-0"
    before = log_bytes(follower_dir)
    behind = log_bytes(leader_dir) - before
    progress(f"[3] restarting follower {lagging}, {behind / 2**20:,.0f} MiB behind"
             + (" (py-spy sampling it)" if profile_dir else ""))
    first_byte = [0.0]
    watching = threading.Event()

    def watch_log() -> None:  # when the follower's log first grows: its fetching has begun
        deadline = time.monotonic() + _WAIT_S
        while not watching.is_set() and time.monotonic() < deadline:
            if log_bytes(follower_dir) != before:
                first_byte[0] = time.monotonic()
                return
            time.sleep(0.002)

    watcher = threading.Thread(target=watch_log, name="catch-up-watch")
    t0 = time.monotonic()
    watcher.start()
    follower.start()
    t_listening = time.monotonic()
    samplers = sample({"catching-up follower": follower.proc.pid}, profile_dir) if profile_dir else None
    try:
        t_isr = bench.wait_isr(topic, lambda s: lagging in s["isr"])
    finally:
        watching.set()
        watcher.join(10)
    out = {"count": count, "behind": behind, "t0": t0, "listening": t_listening,
           "first_bytes": first_byte[0] or t_listening, "isr": t_isr}
    if samplers:
        out["profile"] = summarise_samples(samplers, profile_dir, t_isr - t_listening, bench.args.profile_top)
    missing = log_bytes(leader_dir) - log_bytes(follower_dir)
    if missing:
        note(f"the follower was back in the ISR {missing} log bytes short of the leader")
    return out


def catch_up_section(bench: Bench, results: dict) -> None:
    args = bench.args
    controller = bench.controller()
    leader = next(i for i in (1, 2, 3) if i != controller)
    others = [i for i in (1, 2, 3) if i != leader]
    lagging = next(i for i in others if i != controller) if controller in others else others[0]
    bench.create_topic("catchup", [leader, *others], **{"min.insync.replicas": "2"})
    run = fall_behind_and_catch_up(bench, "catchup", leader, lagging, args.size)
    behind, t0, t_listening, t_fetch, t_isr = (run[k] for k in ("behind", "t0", "listening", "first_bytes", "isr"))
    catch_up = t_isr - t_fetch  # the fetching; the process start is shown apart
    count = run["count"]
    progress(f"[3] single-node fetch: a consumer, then a raw Fetch loop, read the same {count:,} messages "
             f"from leader {leader}")
    address = bench.broker(leader).address
    log_size = log_bytes(bench.broker(leader).directory / "catchup-0")
    _, consumer_s = consume_all(address, "catchup", count)
    fetch_size = int(dict(item.partition("=")[::2] for item in args.config).get("replica.fetch.max.bytes", 1 << 20))
    raw_bytes, raw_s = raw_fetch_pass(address, "catchup", count, fetch_size, bytearray(fetch_size + (1 << 20)), 1)
    follower_mb_s = behind / catch_up / 1e6
    consumer_mb_s = log_size / consumer_s / 1e6
    raw_mb_s = raw_bytes / raw_s / 1e6
    ratio = follower_mb_s / consumer_mb_s
    results["catch-up"] = {"behind_bytes": behind, "seconds": catch_up, "listening_s": t_listening - t0,
                           "first_bytes_s": t_fetch - t0, "restart_to_isr_s": t_isr - t0,
                           "follower_mb_s": follower_mb_s, "consumer_mb_s": consumer_mb_s, "raw_fetch_mb_s": raw_mb_s,
                           "ratio": ratio, "ratio_raw": follower_mb_s / raw_mb_s}
    print(f"\n[3] CATCH-UP (follower {lagging} of leader {leader}, {behind / 2**20:,.0f} MiB of log behind; "
          f"1 KiB uncompressed values; MB/s of log bytes)\n")
    print(table(["what", "seconds", "MB/s"], [
        ["follower: its log's first growth to back in the ISR", f"{catch_up:.1f}", f"{follower_mb_s:,.0f}"],
        [(f"  the same from its restart (process start to listening {t_listening - t0:.1f} s, to first bytes "
          f"{t_fetch - t0:.1f} s)"), f"{t_isr - t0:.1f}", f"{behind / (t_isr - t0) / 1e6:,.0f}"],
        ["confluent-kafka consumer reads the log from the leader", f"{consumer_s:.1f}", f"{consumer_mb_s:,.0f}"],
        [f"raw Fetch v11 loop, {fetch_size >> 10} KiB a fetch (replica.fetch.max.bytes), batch headers only",
         f"{raw_s:.1f}", f"{raw_mb_s:,.0f}"],
    ]))
    print(f"\nTarget: catch-up >= 50% of the single-node consumer fetch: {'met' if ratio >= 0.5 else 'MISSED'} "
          f"({ratio:.0%}); against the raw Fetch loop, which writes nothing: {follower_mb_s / raw_mb_s:.0%}")
    if args.profile and py_spy() is not None:
        out_dir = bench.root / "profile"
        out_dir.mkdir(exist_ok=True)
        size = min(args.size, args.profile_size)
        run = fall_behind_and_catch_up(bench, "catchup", leader, lagging, size, out_dir)
        seconds = run["isr"] - run["listening"]
        results["catch-up profile"] = run["profile"]
        print(f"\nPROFILE of a second catch-up, {run['behind'] / 2**20:,.0f} MiB, under py-spy "
              f"({run['behind'] / seconds / 1e6:,.0f} MB/s from listening to the ISR)")
        print_profile(run["profile"])


def print_profile(profile: dict) -> None:
    """Each sampled process: its busiest threads and the functions in the most samples."""
    for name, s in profile.items():
        print(f"\n{name}: {s['samples']:,} samples of threads py-spy saw active")
        print("  samples by thread: " + ", ".join(f"{t} {share:.0%}" for t, share in s["threads"]))
        print("  blocked in a system call: " + (", ".join(f"{f} {share:.0%}" for f, share in s["waiting"]) or "none")
              + "; the rest, the work, below (shares of the work)")
        print(table(["function (inclusive)", "share", "function (own)", "share"],
                    [[a[0], f"{a[1]:.0%}", b[0], f"{b[1]:.0%}"] for a, b in zip(s["inclusive"], s["own"])],
                    aligns=["<", ">", "<", ">"]))


# -- main ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a 6 s session timeout (a smoke check)")
    parser.add_argument("--messages", type=int, default=500_000, help="values per produce pass in [1]")
    parser.add_argument("--message-size", type=int, default=100, help="bytes per value in [1]")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved produce passes per mode in [1]")
    parser.add_argument("--round-trips", type=int, default=1000, help="one-at-a-time produces per mode in [1]")
    parser.add_argument("--size", type=parse_size, help="bytes the follower is behind in [3] (1G; --quick: 32M)")
    parser.add_argument("--session-timeout-ms", type=int, default=18_000,
                        help="zookeeper.session.timeout.ms of every broker (Kafka's default 18000)")
    parser.add_argument("--replica-lag-ms", type=int, default=30_000,
                        help="replica.lag.time.max.ms of every broker (Kafka's default 30000)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="another setting for every broker (repeatable)")
    parser.add_argument("--no-profile", dest="profile", action="store_false", help="skip the py-spy pass of [1]")
    parser.add_argument("--profile-top", type=int, default=12, help="functions shown per profile")
    parser.add_argument("--profile-size", type=parse_size, default=256 << 20,
                        help="bytes behind in the profiled second catch-up of [3] (256M)")
    parser.add_argument("--skip", default="", help="sections to leave out: produce,failover,catchup")
    parser.add_argument("--dir", help="where the cluster lives (default: a temporary directory, removed)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.repeats, args.round_trips = 50_000, 1, 100
        args.size = args.size or 32 << 20
        args.profile_size = min(args.profile_size, args.size)
        args.session_timeout_ms = 6_000
        args.replica_lag_ms = 10_000
    args.size = args.size or 1 << 30
    if KL is None:
        print(f"kafkalog does not import: {KL_IMPORT_ERROR}", file=sys.stderr)
        return 1
    from kafkalog.tools._zookeeper import find_zookeeper

    missing = [name for name, ok in (("ZooKeeper (apt-get install zookeeper)", find_zookeeper() is not None),
                                     ("kazoo (pip install kazoo)", _imports("kazoo")),
                                     ("confluent-kafka (pip install confluent-kafka)", _imports("confluent_kafka")))
               if not ok]
    if missing:
        print(f"bench_cluster: skipped, needs {', '.join(missing)}", file=sys.stderr)
        return 0
    import confluent_kafka

    # the brokers are `python -m kafkalog.broker`: they import the kafkalog measured here
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), os.environ.get("PYTHONPATH", "")]))
    cpu, flags = cpu_facts()
    load = os.getloadavg()[0]
    print(f"kafkalog cluster benchmark: kafkalog {git_describe(REPO_SRC)}, confluent-kafka "
          f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}), CPython "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs ({cpu}; {flags}), load average {load:.1f} at start; "
          f"3 brokers, zookeeper.session.timeout.ms={args.session_timeout_ms}, "
          f"replica.lag.time.max.ms={args.replica_lag_ms}")
    results: dict = {"load_start": load}
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafkalog-bench-cluster-"))
    skip = set(filter(None, args.skip.split(",")))
    bench = None
    try:
        bench = Bench(args, root)
        progress(f"starting ZooKeeper and 3 brokers under {root}")
        bench.start()
        if "produce" not in skip:
            produce_section(bench, results)
        if "failover" not in skip:
            failover_section(bench, results)
        if "catchup" not in skip:
            catch_up_section(bench, results)
    finally:
        if bench is not None:
            bench.stop()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    results["load_end"] = os.getloadavg()[0]
    print(f"\nload average {results['load_end']:.1f} at the end")
    if NOTES:
        print("\nNotes:\n" + "\n".join(f"  - {n}" for n in NOTES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


def _imports(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main())
