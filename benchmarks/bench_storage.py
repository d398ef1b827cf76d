#!/usr/bin/env python3
"""kafkalog storage benchmarks: segment append, index lookups, read + transfer, recovery.

One run measures, and prints each kafkalog figure next to a raw-hardware or peer
baseline measured in the same run:

  [1] APPEND ~16 KiB v2 batches (built once with kafkalog's RecordBatchBuilder,
      then copied with rewritten base offsets and timestamps) to a LogSegment with
      index.interval.bytes=4096, so every batch after the first gets an offset and
      a time index entry; default 512 MiB per run.  MB/s next to buffered
      file.write() of the very same buffers, and os.pwrite() of them.  Timed: the
      append (write) loop only; opening, closing and fsync are outside the timer
      for every line (nothing is fsynced; files are truncated, then deleted).
      LogSegment.append gets offsets and timestamps from the prepared batch list
      (no header parsing in the loop); append_batches, which parses every header,
      is a second line, fed ~1 MiB MemoryRecords; a third line appends with no
      index entries at all (index.interval.bytes = 2^31-1) to show their cost.
  [2] OFFSET INDEX lookups on a FULL 10 MiB .index (1,310,720 entries, written
      with numpy, opened read-only): single lookup() with random targets on the
      default path (native key cache + bisect) and the plain path (Kafka's warm-
      first binary search on the map, KAFKALOG_INDEX_SEARCH=plain), and with
      targets confined to the warm tail (last 8 KiB of entries); lookup_many()
      over 1e6 random targets; the one-off cost of building the key cache on the
      first lookup.  Baselines: bisect.bisect_right over a Python list of the same
      ints, and numpy.searchsorted over a native int32 array.
  [3] READ + TRANSFER: LogSegment.read(offset, 1 MiB) + FileRecords.transfer_to()
      over a loopback TCP socket, walking a whole segment (default 512 MiB) by
      offset, next to raw os.sendfile() of the same file to the same kind of
      socket (the whole range in one call loop, and the same 1 MiB ranges).  A
      forked process (or, with --receiver thread, a thread) drains the receiving
      end into a reused buffer with recv_into().  The walk's start offsets (the
      offset after the last whole batch of each slice) are found in an untimed
      first pass; a last line times the walk including that shallow scan of each
      slice.  The ratio is taken against the faster of the two raw lines.  Page
      cache warm.
  [4] RECOVER: LogSegment.recover() of a 1 GiB segment of ~16 KiB batches (validates
      every batch, rebuilds offset/time/txn indexes), GB/s, next to sequential
      readinto() of the same file and readinto() + CRC-32C (kafkalog.crc.crc32c)
      of every byte.  Checks recover() returned 0 and the rebuilt index entry
      counts.  Page cache warm.

Timing: time.perf_counter, garbage collector off while timing, best of
--repeats (big-file sections), --transfer-repeats (loopback) or --lookup-repeats
(index lookups); baselines and kafkalog runs are interleaved within each repeat,
in an order rotated from one repeat to the next.  The worst run is shown too
where runs are noisy (writes into the page cache, loopback TCP).

Run:   /tmp/kv/bin/python benchmarks/bench_storage.py [--quick] [--json out.json]
kafkalog is imported from the environment, or else from ../src next to this script.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import importlib
import json
import os
import platform
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, REPO_SRC, cpu_facts, git_describe, import_kafkalog, note, parse_size, progress, table  # noqa: E402

perf_counter = time.perf_counter

KL, KL_IMPORT_ERROR = import_kafkalog("segment", "index")
try:
    import numpy as np
except Exception:  # pragma: no cover - numpy is a kafkalog dependency
    np = None


# --------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------


@contextmanager
def gc_off():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def timed(fn) -> float:
    """Seconds of one call of fn(), GC off."""
    with gc_off():
        t0 = perf_counter()
        fn()
        return perf_counter() - t0


def rotated(seq: list, r: int) -> list:
    """``seq`` rotated by ``r``: each repeat starts with a different case, so no case is always
    the one that runs first (or right after a given other)."""
    k = r % len(seq)
    return seq[k:] + seq[:k]


def mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def pct(x: float | None, base: float | None) -> str:
    return "-" if x is None or not base else f"{x / base * 100:.0f}%"


def verdict(value: float | None, target: float, higher_is_better: bool = True) -> str:
    if value is None:
        return "not measured"
    ok = value >= target if higher_is_better else value <= target
    return "MET" if ok else "MISSED"


# --------------------------------------------------------------------------
# Data: a contiguous run of ~16 KiB v2 batches with consecutive offsets
# --------------------------------------------------------------------------

WORDS = (
    b"kafka log segment offset broker partition topic replica leader epoch "
    b"producer consumer fetch index timestamp record batch header value key "
    b"compaction retention cleaner checkpoint snapshot transaction commit abort"
).split()

BASE_TS = 1_700_000_000_000
TARGET_BATCH = 16 * 1024
VALUE_SIZE = 100
N_PROTOS = 8
TS_STEP = 1000  # ms between consecutive batches: every batch raises the max timestamp


def make_value(rng: random.Random, size: int) -> bytes:
    """Half random bytes, half text from a small vocabulary."""
    nrand = size // 2
    parts = [rng.randbytes(nrand)]
    n = nrand
    while n < size:
        w = rng.choice(WORDS) + b" "
        parts.append(w)
        n += len(w)
    return b"".join(parts)[:size]


def records_per_batch(value_size: int) -> int:
    per_record = value_size + 10 + 11  # value + ~10 B key + varints/attrs
    return max(1, (TARGET_BATCH - 61) // per_record)


class LogData:
    """``nbatches`` v2 batches laid out back to back in one bytearray (the bytes of a
    segment starting at offset 0), with each batch's (position, size, last offset,
    max timestamp)."""

    def __init__(self, buf: bytearray, meta: list[tuple[int, int, int, int]], records_per_batch: int):
        self.buf = buf
        self.mv = memoryview(buf)
        self.meta = meta
        self.records_per_batch = records_per_batch

    def prefix(self, nbytes: int) -> list[tuple[int, int, int, int]]:
        """The first batches whose total size reaches ``nbytes`` (all of them at most)."""
        out = []
        total = 0
        for m in self.meta:
            if total >= nbytes:
                break
            out.append(m)
            total += m[1]
        return out


def build_log_data(nbytes: int) -> LogData:
    rb = KL.recordbatch
    crc32c = KL.crc.crc32c
    n = records_per_batch(VALUE_SIZE)
    rng = random.Random(0x5E6)
    protos = []
    for _ in range(N_PROTOS):
        b = KL.RecordBatchBuilder(magic=2, compression=KL.Compression.NONE, base_offset=0)
        for i in range(n):
            b.append(b"user-%05d" % rng.randrange(100_000), make_value(rng, VALUE_SIZE),
                     timestamp=BASE_TS + i * 3 + rng.randrange(3), headers=())
        raw = bytes(b.build().buffer)
        fields = rb.HEADER.unpack_from(raw, 0)
        # (bytes, base ts, max ts, last offset delta)
        protos.append((raw, fields[7], fields[8], fields[6]))
    avg = sum(len(p[0]) for p in protos) / len(protos)
    nb = max(2, int(-(-nbytes // avg)) + N_PROTOS)
    sizes = [len(protos[k % N_PROTOS][0]) for k in range(nb)]
    total = sum(sizes)
    buf = bytearray(total)
    mv = memoryview(buf)
    meta = []
    pack_q = struct.Struct(">q").pack_into
    pack_I = struct.Struct(">I").pack_into
    set_base_offset = rb.set_base_offset
    BTS, MTS, CRC, ATTR = rb.BASE_TIMESTAMP_OFFSET, rb.MAX_TIMESTAMP_OFFSET, rb.CRC_OFFSET, rb.ATTRIBUTES_OFFSET
    pos = 0
    for k in range(nb):
        raw, base_ts, max_ts, delta = protos[k % N_PROTOS]
        size = len(raw)
        mv[pos:pos + size] = raw
        base = k * n
        set_base_offset(buf, pos, base)
        shift = k * TS_STEP
        pack_q(buf, pos + BTS, base_ts + shift)
        pack_q(buf, pos + MTS, max_ts + shift)
        pack_I(buf, pos + CRC, crc32c(mv[pos + ATTR:pos + size]))
        meta.append((pos, size, base + delta, max_ts + shift))
        pos += size
    data = LogData(buf, meta, n)
    # spot check: the first and last batches parse, validate and carry what meta says
    for pos, size, last, mts in meta[:4] + meta[-4:]:
        (batch,) = list(KL.MemoryRecords(bytes(mv[pos:pos + size])).batches(validate=True))
        assert (batch.last_offset, batch.max_timestamp, batch.size_in_bytes) == (last, mts, size), batch
    return data


_LOG_DATA: LogData | None = None


def log_data(args, nbytes: int) -> LogData:
    """The shared batch buffer, built once at the largest size any section needs."""
    global _LOG_DATA
    if _LOG_DATA is None or len(_LOG_DATA.buf) < nbytes:
        want = max(nbytes, args.data_bytes)
        progress(f"building {mib(want)} of ~16 KiB v2 batches (kafkalog RecordBatchBuilder, "
                 f"{records_per_batch(VALUE_SIZE)} records of {VALUE_SIZE} B per batch)")
        t0 = perf_counter()
        _LOG_DATA = build_log_data(want)
        progress(f"  built {len(_LOG_DATA.meta)} batches in {perf_counter() - t0:.2f} s")
    return _LOG_DATA


def write_plain(path: str, mv: memoryview) -> None:
    with open(path, "wb", buffering=0) as f:
        done = 0
        while done < len(mv):
            done += f.write(mv[done:done + (64 << 20)])


def discard_segment(seg) -> None:
    """Close a segment without writing its log to disk: truncate first (drops dirty pages),
    then close (whose fsync then has nothing to write)."""
    try:
        if not seg.log.closed:
            seg.log.truncate_to(0)
    except Exception:
        pass
    seg.close()


def seg_files_gone(directory: str) -> None:
    for name in os.listdir(directory):
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def segment_config(index_interval: int = 4096):
    # segment_bytes must hold the whole run; the index is the broker default 10 MiB.
    return KL.LogConfig(segment_bytes=2**31 - 1, segment_jitter_ms=0, segment_index_bytes=10 * 1024 * 1024,
                        index_interval_bytes=index_interval, preallocate=False)


# --------------------------------------------------------------------------
# [1] append
# --------------------------------------------------------------------------


def section_append(args, out):
    res = {}
    data = log_data(args, args.segment_size)
    meta = data.prefix(args.segment_size)
    mv = data.mv
    nbytes = sum(m[1] for m in meta)
    nb = len(meta)
    n = data.records_per_batch
    MemoryRecords = KL.MemoryRecords
    items = [(MemoryRecords(mv[p:p + s]), last, mts) for p, s, last, mts in meta]
    # ~1 MiB chunks on batch boundaries for append_batches
    chunks = []
    start = 0
    for p, s, _, _ in meta:
        if p + s - start >= (1 << 20):
            chunks.append(MemoryRecords(mv[start:p + s]))
            start = p + s
    if start < meta[-1][0] + meta[-1][1]:
        chunks.append(MemoryRecords(mv[start:meta[-1][0] + meta[-1][1]]))
    res.update({"bytes": nbytes, "batches": nb, "batch_bytes": nbytes / nb, "records_per_batch": n,
                "append_batches_chunk_bytes": nbytes / len(chunks)})
    d = tempfile.mkdtemp(prefix="kafkalog-bench-append-", dir=args.tmpdir)
    plain_path = os.path.join(d, "plain.bin")
    cfg = segment_config()
    cfg_noindex = segment_config(2**31 - 1)
    expected_next = meta[-1][2] + 1
    times = {k: [] for k in ("file_write", "pwrite", "seg_append", "seg_append_noindex", "seg_append_batches")}

    def run_file_write():
        f = open(plain_path, "wb")  # default buffering (8 KiB BufferedWriter)
        try:
            w = f.write

            def go():
                for mr, _, _ in items:
                    w(mr.buffer)
                f.flush()  # Python's buffer to the OS (no fsync)

            t = timed(go)
            assert f.tell() == nbytes
        finally:
            f.close()
            os.unlink(plain_path)
        return t

    def run_pwrite():
        fd = os.open(plain_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite = os.pwrite

            def go():
                pos = 0
                for mr, _, _ in items:
                    pos += pwrite(fd, mr.buffer, pos)

            t = timed(go)
            assert os.fstat(fd).st_size == nbytes
        finally:
            os.close(fd)
            os.unlink(plain_path)
        return t

    def run_segment(kind: str, check: bool):
        seg = KL.LogSegment.open(d, 0, cfg_noindex if kind == "noindex" else cfg)
        try:
            if kind == "batches":
                ab = seg.append_batches

                def go():
                    for mr in chunks:
                        ab(mr)
            else:
                append = seg.append

                def go():
                    for mr, last, mts in items:
                        append(mr, largest_offset=last, largest_timestamp=mts, offset_of_max_timestamp=last)

            t = timed(go)
            if check:
                want_idx = 0 if kind == "noindex" else nb - 1
                got = (seg.size, seg.offset_index.entries, seg.time_index.entries, seg.next_offset)
                want = (nbytes, want_idx, want_idx, expected_next)
                if got != want:
                    note(f"[1] {kind}: (size, offset entries, time entries, next offset) = {got}, expected {want}")
                    res.setdefault("check_failures", []).append(kind)
        finally:
            discard_segment(seg)
            seg_files_gone(d)
        return t

    try:
        progress(f"[1] append: {mib(nbytes)} per run, {nb} batches of ~{nbytes / nb:.0f} B, "
                 f"best of {args.repeats}")
        # untimed warm-up: the first writes into freshly used memory run several times slower
        run_file_write()
        for kind in ("append", "batches", "noindex"):
            run_segment(kind, check=True)
        cases = [("file_write", run_file_write), ("pwrite", run_pwrite),
                 ("seg_append", lambda: run_segment("append", check=False)),
                 ("seg_append_batches", lambda: run_segment("batches", check=False)),
                 ("seg_append_noindex", lambda: run_segment("noindex", check=False))]
        for r in range(args.repeats):
            progress(f"[1]   repeat {r + 1}/{args.repeats}")
            for name, fn in rotated(cases, r):
                times[name].append(fn())
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for k, ts in times.items():
        if ts:
            best = min(ts)
            res[k] = {"best_s": best, "MB_per_s": nbytes / best / 1e6, "batches_per_s": nb / best,
                      "us_per_batch": best / nb * 1e6, "worst_MB_per_s": nbytes / max(ts) / 1e6, "all_s": ts}
    out["append"] = res
    return res


# --------------------------------------------------------------------------
# [2] offset index lookups
# --------------------------------------------------------------------------

INDEX_BYTES = 10 * 1024 * 1024
WARM_ENTRIES = 8192 // 8


@contextmanager
def index_search(mode: str | None):
    key = "KAFKALOG_INDEX_SEARCH"
    old = os.environ.get(key)
    if mode is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def section_index(args, out):
    res = {}
    OffsetIndex = KL.OffsetIndex
    n = INDEX_BYTES // 8
    rng = np.random.default_rng(12345)
    rel = np.cumsum(rng.integers(1, 200, size=n, dtype=np.int64))  # strictly increasing
    assert rel[-1] < 2**31 - 1
    positions = np.arange(n, dtype=np.int64) * 1600  # stays below 2^31
    base = 1_000_000_000
    d = tempfile.mkdtemp(prefix="kafkalog-bench-index-", dir=args.tmpdir)
    path = os.path.join(d, "%020d.index" % base)
    res.update({"entries": n, "file_bytes": INDEX_BYTES, "base_offset": base})
    try:
        arr = np.empty(n, dtype=OffsetIndex.DTYPE)
        arr["relative_offset"] = rel
        arr["position"] = positions
        arr.tofile(path)
        del arr

        def open_index():
            idx = OffsetIndex(path, base, INDEX_BYTES, writable=False)
            assert idx.entries == n and idx.is_full, (idx.entries, idx.max_entries)
            return idx

        def truth(targets_abs):
            t = np.asarray(targets_abs, dtype=np.int64) - base
            slot = np.searchsorted(rel, t, side="right") - 1
            off = np.where(slot >= 0, base + rel[np.maximum(slot, 0)], base)
            pos = np.where(slot >= 0, positions[np.maximum(slot, 0)], 0)
            return off, pos

        hi = int(rel[-1]) + 200
        tail_lo = int(rel[n - 1 - WARM_ENTRIES])
        pyr = random.Random(99)
        rand_targets = [base + pyr.randrange(0, hi) for _ in range(args.lookups)]
        tail_targets = [base + pyr.randrange(tail_lo, hi) for _ in range(args.lookups)]
        plain_n = max(1000, args.lookups // 4)

        # --- correctness, both paths, before timing. The search mode is read when an index
        # opens, so each path gets its own index object.
        idx = open_index()
        with index_search("plain"):
            idx_plain = open_index()
        sample = rand_targets[:2000] + tail_targets[:500] + [base - 5, base, base + int(rel[0]),
                                                             base + int(rel[-1]), base + hi]
        want_off, want_pos = truth(sample)
        for mode, which in ((None, idx), ("plain", idx_plain)):
            with index_search(mode):
                got = [tuple(which.lookup(t)) for t in sample]
            bad = [(t, g, (int(o), int(p))) for t, g, o, p in zip(sample, got, want_off, want_pos)
                   if g != (int(o), int(p))]
            if bad:
                note(f"[2] lookup ({mode or 'default'}) wrong for {len(bad)} of {len(sample)} targets, "
                     f"e.g. target {bad[0][0]}: got {bad[0][1]}, expected {bad[0][2]}")
                res.setdefault("check_failures", []).append(mode or "default")

        many_targets = np.asarray(rng.integers(base - 10, base + hi, size=args.many, dtype=np.int64))
        offs, poss = idx.lookup_many(many_targets)
        w_off, w_pos = truth(many_targets)
        if not (np.array_equal(offs, w_off) and np.array_equal(poss, w_pos)):
            note("[2] lookup_many disagrees with numpy truth")
            res.setdefault("check_failures", []).append("lookup_many")

        # --- native cache build on first lookup (fresh index each time; map opened untimed)
        progress(f"[2] index: native cache build on first lookup, best of {args.lookup_repeats}")
        builds = []
        for _ in range(args.lookup_repeats):
            fresh = open_index()
            lk = fresh.lookup
            t = timed(lambda: lk(rand_targets[0]))
            builds.append(t)
            fresh.close()
        res["cache_build"] = {"best_s": min(builds), "all_s": builds}

        # --- single lookups
        keys_list = rel.tolist()

        def loop_lookup(targets, which=idx):
            lookup = which.lookup

            def go():
                for t in targets:
                    lookup(t)
            return go

        def loop_bisect(targets):
            br = bisect.bisect_right
            lst = keys_list
            rel_targets = [t - base for t in targets]

            def go():
                for t in rel_targets:
                    br(lst, t)
            return go

        cases = [
            ("bisect_random", None, loop_bisect(rand_targets), len(rand_targets)),
            ("default_random", None, loop_lookup(rand_targets), len(rand_targets)),
            ("plain_random", "plain", loop_lookup(rand_targets[:plain_n], idx_plain), plain_n),
            ("bisect_tail", None, loop_bisect(tail_targets), len(tail_targets)),
            ("default_tail", None, loop_lookup(tail_targets), len(tail_targets)),
            ("plain_tail", "plain", loop_lookup(tail_targets[:plain_n], idx_plain), plain_n),
        ]
        progress(f"[2] index: single lookups ({args.lookups} targets; plain path {plain_n}), "
                 f"best of {args.lookup_repeats}")
        times = {name: [] for name, *_ in cases}
        for _ in range(args.lookup_repeats):
            for name, mode, fn, cnt in cases:
                with index_search(mode):
                    times[name].append(timed(fn) / cnt)
        for name, *_ in cases:
            res[name] = {"us_per_lookup": min(times[name]) * 1e6}

        # --- vectorised
        progress(f"[2] index: lookup_many over {args.many} targets vs numpy.searchsorted")
        keys_native = rel.astype(np.int32)
        rel_many = (many_targets - base).clip(-2**31, 2**31 - 1).astype(np.int32)
        tm, ts_ = [], []
        for _ in range(args.lookup_repeats):
            ts_.append(timed(lambda: np.searchsorted(keys_native, rel_many, side="right")))
            tm.append(timed(lambda: idx.lookup_many(many_targets)))
        res["searchsorted_many"] = {"ns_per_lookup": min(ts_) / args.many * 1e9}
        res["lookup_many"] = {"ns_per_lookup": min(tm) / args.many * 1e9}
        idx.close()
        idx_plain.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    out["index"] = res
    return res


# --------------------------------------------------------------------------
# [3] read + transfer_to over loopback TCP
# --------------------------------------------------------------------------


class Loopback:
    """A connected TCP pair on 127.0.0.1 and a receiver that drains the far end into a reused
    1 MiB buffer with ``recv_into()``.

    ``receiver="process"`` (the default where ``os.fork`` exists) drains in a forked child, told
    how many bytes to expect over a pipe and acknowledging over another, so the receiver never
    competes with the sender for the GIL; ``receiver="thread"`` drains in a thread of this
    process (started per measurement).
    """

    _ACK = struct.Struct("=q")

    def __init__(self, receiver: str = "process"):
        if receiver == "process" and not hasattr(os, "fork"):
            receiver = "thread"
        self.receiver = receiver
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self.send = socket.create_connection(srv.getsockname())
        self.recv, _ = srv.accept()
        srv.close()
        self.sndbuf = self.send.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        self.rcvbuf = self.recv.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.pid = None
        if receiver == "process":
            ctl_r, ctl_w = os.pipe()
            ack_r, ack_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: drain on request, never return into the parent's code
                code = 0
                try:
                    os.close(ctl_w)
                    os.close(ack_r)
                    self.send.close()
                    self._child(ctl_r, ack_w)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            os.close(ctl_r)
            os.close(ack_w)
            self.recv.close()
            self.pid, self.ctl, self.ack = pid, ctl_w, ack_r
        else:
            self.buf = memoryview(bytearray(1 << 20))

    def _child(self, ctl: int, ack: int) -> None:
        buf = memoryview(bytearray(1 << 20))
        recv_into = self.recv.recv_into
        unpack, pack = self._ACK.unpack, self._ACK.pack
        while True:
            msg = os.read(ctl, 8)
            if len(msg) < 8:
                return
            (expect,) = unpack(msg)
            if expect < 0:
                return
            got = 0
            while got < expect:
                k = recv_into(buf)
                if not k:
                    break
                got += k
            os.write(ack, pack(got))

    def _thread(self, expect: int):
        result = []

        def run():
            got = 0
            recv_into = self.recv.recv_into
            buf = self.buf
            try:
                while got < expect:
                    k = recv_into(buf)
                    if not k:
                        break
                    got += k
            finally:
                result.append(got)

        th = threading.Thread(target=run, daemon=True)
        th.start()
        return th, result

    def measure(self, send_fn, expect: int) -> tuple[float, int]:
        """Seconds from the first send until the receiver has all ``expect`` bytes."""
        import select

        if self.pid is not None:
            os.write(self.ctl, self._ACK.pack(expect))
            with gc_off():
                t0 = perf_counter()
                sent = send_fn()
                ready, _, _ = select.select([self.ack], [], [], 120)
                t = perf_counter() - t0
            if not ready:
                self.close()
                raise RuntimeError(f"receiver stuck: sender reported {sent} bytes, receiver expected {expect}")
            msg = os.read(self.ack, 8)
            received = self._ACK.unpack(msg)[0] if len(msg) == 8 else -1
        else:
            th, result = self._thread(expect)
            with gc_off():
                t0 = perf_counter()
                sent = send_fn()
                th.join(120)
                t = perf_counter() - t0
            if th.is_alive():
                self.close()
                raise RuntimeError(f"receiver stuck: sender reported {sent} bytes, receiver expected {expect}")
            received = result[0]
        if sent != expect or received != expect:
            raise RuntimeError(f"sent {sent}, received {received}, expected {expect}")
        return t, sent

    def close(self):
        for s in (self.send, self.recv):
            try:
                s.close()
            except OSError:
                pass
        if self.pid is not None:
            for fd in (self.ctl, self.ack):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.waitpid(self.pid, 0)  # the child sees EOF on its pipe (and socket) and exits
            except ChildProcessError:
                pass
            self.pid = None


def section_transfer(args, out):
    res = {}
    data = log_data(args, args.segment_size)
    meta = data.prefix(args.segment_size)
    mv = data.mv
    nbytes = sum(m[1] for m in meta)
    max_size = args.max_read
    d = tempfile.mkdtemp(prefix="kafkalog-bench-transfer-", dir=args.tmpdir)
    seg = None
    lb = None
    try:
        progress(f"[3] transfer: building a {mib(nbytes)} segment with LogSegment.append")
        seg = KL.LogSegment.open(d, 0, segment_config())
        MemoryRecords = KL.MemoryRecords
        for p, s, last, mts in meta:
            seg.append(MemoryRecords(mv[p:p + s]), largest_offset=last, largest_timestamp=mts,
                       offset_of_max_timestamp=last)
        assert seg.size == nbytes
        fd = seg.log.fileno()

        # untimed pass: the walk's (start offset, position, bytes) schedule
        sched = []
        off = 0
        while True:
            sl = seg.read(off, max_size)
            if sl is None:
                break
            last = None
            for b in sl.batches():
                last = b
            sched.append((off, sl.start, sl.size_in_bytes))
            if last is None:
                note(f"[3] slice at offset {off} holds no whole batch")
                break
            off = last.next_offset
        walk_bytes = sum(c for _, _, c in sched)
        if off != meta[-1][2] + 1:
            note(f"[3] the walk ended at offset {off}, expected {meta[-1][2] + 1}")
        res.update({"segment_bytes": nbytes, "reads": len(sched), "max_size": max_size,
                    "walk_bytes": walk_bytes, "walk_bytes_over_file": walk_bytes / nbytes})

        lb = Loopback(args.receiver)
        res.update({"so_sndbuf": lb.sndbuf, "so_rcvbuf": lb.rcvbuf, "receiver": lb.receiver})
        read = seg.read
        sendfile = os.sendfile

        def kl_walk():
            sent = 0
            sock = lb.send
            for o, _, _ in sched:
                sl = read(o, max_size)
                sent += sl.transfer_to(sock, 0, sl.size_in_bytes)
            return sent

        def kl_walk_scan():
            sent = 0
            sock = lb.send
            o = 0
            while True:
                sl = read(o, max_size)
                if sl is None:
                    break
                sent += sl.transfer_to(sock, 0, sl.size_in_bytes)
                last = None
                for b in sl.batches():
                    last = b
                o = last.next_offset
            return sent

        def raw_ranges():
            out_fd = lb.send.fileno()
            sent = 0
            for _, pos, cnt in sched:
                done = 0
                while done < cnt:
                    k = sendfile(out_fd, fd, pos + done, cnt - done)
                    if not k:
                        break
                    done += k
                sent += done
            return sent

        def raw_whole():
            out_fd = lb.send.fileno()
            done = 0
            while done < nbytes:
                k = sendfile(out_fd, fd, done, nbytes - done)
                if not k:
                    break
                done += k
            return done

        # page cache is warm (just written); one warm-up transfer of everything
        lb.measure(raw_whole, nbytes)
        cases = [("raw_whole", raw_whole, nbytes), ("raw_ranges", raw_ranges, walk_bytes),
                 ("kafkalog", kl_walk, walk_bytes), ("kafkalog_scan", kl_walk_scan, walk_bytes)]
        times = {k: [] for k, _, _ in cases}
        progress(f"[3] transfer: {len(sched)} reads of <= {max_size} B, best of {args.transfer_repeats}")
        for r in range(args.transfer_repeats):
            for name, fn, expect in rotated(cases, r):
                t, _ = lb.measure(fn, expect)
                times[name].append(t)
        for name, _, expect in cases:
            best = min(times[name])
            res[name] = {"best_s": best, "bytes": expect, "GB_per_s": expect / best / 1e9, "all_s": times[name],
                         "worst_GB_per_s": expect / max(times[name]) / 1e9,
                         "median_GB_per_s": expect / sorted(times[name])[len(times[name]) // 2] / 1e9,
                         "us_per_read": best / len(sched) * 1e6}
    finally:
        if lb is not None:
            lb.close()
        if seg is not None:
            discard_segment(seg)
        shutil.rmtree(d, ignore_errors=True)
    out["transfer"] = res
    return res


# --------------------------------------------------------------------------
# [4] recover
# --------------------------------------------------------------------------


def section_recover(args, out):
    res = {}
    data = log_data(args, args.recover_size)
    meta = data.prefix(args.recover_size)
    nbytes = sum(m[1] for m in meta)
    nb = len(meta)
    free = shutil.disk_usage(args.tmpdir).free
    if free < nbytes * 1.2 + (256 << 20):
        note(f"only {free >> 20} MiB free in {args.tmpdir}: section [4] skipped")
        return res
    d = tempfile.mkdtemp(prefix="kafkalog-bench-recover-", dir=args.tmpdir)
    path = os.path.join(d, "%020d.log" % 0)
    seg = None
    crc_fn = KL.crc.crc32c
    res.update({"file_bytes": nbytes, "batches": nb, "crc_backend": KL.crc.BACKEND})
    try:
        progress(f"[4] recover: writing a {mib(nbytes)} segment file ({nb} batches)")
        write_plain(path, data.mv[:nbytes])
        bufsize = 1 << 20
        rbuf = memoryview(bytearray(bufsize))

        def read_all():
            with open(path, "rb", buffering=0) as f:
                readinto = f.readinto
                total = 0
                while True:
                    k = readinto(rbuf)
                    if not k:
                        break
                    total += k
            assert total == nbytes

        def read_crc():
            with open(path, "rb", buffering=0) as f:
                readinto = f.readinto
                c = 0
                while True:
                    k = readinto(rbuf)
                    if not k:
                        break
                    c ^= crc_fn(rbuf[:k] if k != bufsize else rbuf)
            return c

        read_all()  # warm
        seg = KL.LogSegment.open(d, 0, segment_config())
        results = []

        native = importlib.import_module("kafkalog.native")

        def recover():
            results.append(seg.recover())

        def recover_pure():
            with native.use(pure=True):
                results.append(seg.recover())

        times = {"read": [], "read_crc": [], "recover": []}
        cases = [("read", read_all), ("read_crc", read_crc), ("recover", recover)]
        res["core"] = native.core_name()
        if native.ext is not None:  # both cores in the same run
            times["recover_pure"] = []
            cases.append(("recover_pure", recover_pure))
        progress(f"[4] recover: best of {args.repeats}")
        for r in range(args.repeats):
            for name, fn in rotated(cases, r):
                times[name].append(timed(fn))
            got = (results[-1], seg.offset_index.entries, seg.time_index.entries, seg.size)
            want = (0, nb - 1, nb - 1, nbytes)
            if got != want:
                note(f"[4] recover #{r + 1}: (truncated, offset entries, time entries, size) = {got}, "
                     f"expected {want}")
                res.setdefault("check_failures", []).append(r)
        res["recover_returned"] = results
        res["offset_index_entries"] = seg.offset_index.entries
        res["time_index_entries"] = seg.time_index.entries
        for k, ts in times.items():
            best = min(ts)
            res[k] = {"best_s": best, "GB_per_s": nbytes / best / 1e9, "all_s": ts,
                      "us_per_batch": best / nb * 1e6}
    finally:
        if seg is not None:
            discard_segment(seg)
        shutil.rmtree(d, ignore_errors=True)
    out["recover"] = res
    return res


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


def machine_facts(args):
    cpu, flags = cpu_facts(("sse4_2", "avx2", "avx512f"))
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    fs = "?"
    try:
        tmp = os.path.realpath(args.tmpdir)
        best = ""
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, typ = line.split()[:3]
                if (tmp == mnt or tmp.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fs = mnt, f"{typ} on {dev} (mounted at {mnt})"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "memory": mem,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "numpy": getattr(np, "__version__", "-"),
        "kafkalog": (getattr(KL, "__file__", "?") if KL is not None
                     else f"not importable ({KL_IMPORT_ERROR!r})"),
        "kafkalog.crc.BACKEND": getattr(getattr(KL, "crc", None), "BACKEND", "-"),
        "kafkalog_commit": git_describe(Path(getattr(KL, "__file__", ".")).resolve().parent),
        "tmpdir": f"{args.tmpdir}: {fs}",
        "tcp_wmem": _read("/proc/sys/net/ipv4/tcp_wmem"),
        "tcp_rmem": _read("/proc/sys/net/ipv4/tcp_rmem"),
        "dirty_ratio": f"background {_read('/proc/sys/vm/dirty_background_ratio')}%, "
                       f"{_read('/proc/sys/vm/dirty_ratio')}%",
    }


def report(args, out):
    m = out["machine"]
    p = print
    p("=" * 100)
    p("kafkalog storage benchmarks" + ("  (--quick)" if args.quick else ""))
    p("=" * 100)
    p(f"CPU        : {m['cpu']}  ({m['cores']} logical cores; flags: {m['cpu_flags'] or '?'}); RAM {m['memory']}")
    p(f"Python     : {m['python']}  [{m['platform']}]; numpy {m['numpy']}")
    p(f"kafkalog   : {m['kafkalog']}  (commit {m['kafkalog_commit']}; crc32c backend: {m['kafkalog.crc.BACKEND']})")
    p(f"temp files : {m['tmpdir']}; vm.dirty {m['dirty_ratio']}")
    p(f"loopback   : tcp_wmem {m['tcp_wmem']}; tcp_rmem {m['tcp_rmem']}")
    p(f"timing     : time.perf_counter, GC off while timing; best of {args.repeats} (files), "
      f"{args.transfer_repeats} (sockets), {args.lookup_repeats} (index lookups); baseline and kafkalog runs "
      f"interleaved, order rotated per repeat")

    a = out.get("append")
    if a:
        base = a["file_write"]["MB_per_s"]
        p()
        p(f"[1] APPEND {mib(a['bytes'])} per run: {a['batches']} v2 batches of ~{a['batch_bytes']:.0f} B "
          f"({a['records_per_batch']} records of {VALUE_SIZE} B), index.interval.bytes=4096 -> an offset and a "
          f"time index entry per batch")
        p("    timed: the write/append loop only; no fsync in any line; page cache absorbs the writes")
        rows = [
            ["baseline: buffered file.write() of the same buffers (+ flush)", "file_write"],
            ["raw: os.pwrite() of the same buffers at a tracked position", "pwrite"],
            ["kafkalog LogSegment.append(records, largest_offset=.., ...)  <- target >= 80%", "seg_append"],
            ["kafkalog LogSegment.append_batches(~1 MiB MemoryRecords; parses headers)", "seg_append_batches"],
            ["kafkalog LogSegment.append, no index entries (interval 2^31-1)", "seg_append_noindex"],
        ]
        body = []
        for label, k in rows:
            r = a.get(k)
            if r is None:
                body.append([label, "-", "-", "-", "-", "-"])
                continue
            body.append([label, f"{r['MB_per_s']:.0f}", f"{r['worst_MB_per_s']:.0f}",
                         f"{r['batches_per_s'] / 1e3:.1f}k", f"{r['us_per_batch']:.2f}", pct(r["MB_per_s"], base)])
        p(table(["what", "MB/s", "(worst)", "batches/s", "us/batch", "vs file.write"], body))
        v = a.get("seg_append", {}).get("MB_per_s")
        p(f"    LogSegment.append / file.write = {pct(v, base)}  (target >= 80%: "
          f"{verdict(v and v / base, 0.8)})")

    ix = out.get("index")
    if ix:
        p()
        p(f"[2] OFFSET INDEX LOOKUPS on a full {mib(ix['file_bytes'])} .index ({ix['entries']:,} entries, "
          f"opened read-only); random targets over the whole index, or confined to the warm tail "
          f"(last {WARM_ENTRIES} entries = 8 KiB)")
        b_r = ix["bisect_random"]["us_per_lookup"]
        b_t = ix["bisect_tail"]["us_per_lookup"]
        body = [
            ["baseline: bisect.bisect_right(list of ints), random", f"{b_r:.3f} us", "1.00x"],
            ["kafkalog lookup(), default path (key cache + bisect), random  <- target < 2 us",
             f"{ix['default_random']['us_per_lookup']:.3f} us",
             f"{ix['default_random']['us_per_lookup'] / b_r:.2f}x"],
            ["kafkalog lookup(), plain path (KAFKALOG_INDEX_SEARCH=plain), random",
             f"{ix['plain_random']['us_per_lookup']:.3f} us", f"{ix['plain_random']['us_per_lookup'] / b_r:.2f}x"],
            ["baseline: bisect.bisect_right(list of ints), warm tail", f"{b_t:.3f} us", "1.00x"],
            ["kafkalog lookup(), default path, warm tail", f"{ix['default_tail']['us_per_lookup']:.3f} us",
             f"{ix['default_tail']['us_per_lookup'] / b_t:.2f}x"],
            ["kafkalog lookup(), plain path, warm tail", f"{ix['plain_tail']['us_per_lookup']:.3f} us",
             f"{ix['plain_tail']['us_per_lookup'] / b_t:.2f}x"],
            [f"baseline: numpy.searchsorted(int32 keys, {args.many:,} targets)",
             f"{ix['searchsorted_many']['ns_per_lookup']:.1f} ns", "1.00x"],
            [f"kafkalog lookup_many({args.many:,} random targets) -> (offsets, positions)",
             f"{ix['lookup_many']['ns_per_lookup']:.1f} ns",
             f"{ix['lookup_many']['ns_per_lookup'] / ix['searchsorted_many']['ns_per_lookup']:.2f}x"],
            ["kafkalog native key cache build (first lookup on a fresh index)",
             f"{ix['cache_build']['best_s'] * 1e3:.2f} ms", ""],
        ]
        p(table(["what", "per lookup", "vs baseline"], body))
        v = ix["default_random"]["us_per_lookup"]
        p(f"    default-path single lookup {v:.3f} us (target < 2 us: {verdict(v, 2.0, higher_is_better=False)})")

    t = out.get("transfer")
    if t:
        p()
        p(f"[3] READ + TRANSFER over loopback TCP (127.0.0.1; a receiving {t['receiver']} recv_into() a reused "
          f"1 MiB buffer; SO_SNDBUF {t['so_sndbuf']}, SO_RCVBUF {t['so_rcvbuf']} at connect) of a "
          f"{mib(t['segment_bytes'])} segment; page cache warm")
        p(f"    {t['reads']} reads of max_size={t['max_size']}; a slice ends mid-batch, so its partial tail batch is "
          f"sent again by the next read: {t['walk_bytes'] / 2**20:.0f} MiB sent "
          f"({t['walk_bytes_over_file']:.3f}x the file)")
        bw = t["raw_whole"]["GB_per_s"]
        br = t["raw_ranges"]["GB_per_s"]
        braw = max(bw, br)
        body = [
            ["raw: os.sendfile() of the whole file range", "raw_whole"],
            ["raw: os.sendfile() of the same ranges the walk sends", "raw_ranges"],
            ["kafkalog seg.read(offset, 1 MiB) + transfer_to(), offsets precomputed  <- target >= 90%",
             "kafkalog"],
            ["kafkalog same walk, next offset from a shallow scan of each slice", "kafkalog_scan"],
        ]
        rows = []
        for label, k in body:
            r = t[k]
            rows.append([label, f"{r['GB_per_s']:.2f}", f"{r['median_GB_per_s']:.2f}", f"{r['worst_GB_per_s']:.2f}",
                         f"{r['us_per_read']:.0f}", pct(r["GB_per_s"], bw), pct(r["GB_per_s"], br)])
        p(table(["what", "GB/s", "median", "worst", "us/read", "vs whole", "vs ranges"], rows))
        v = t["kafkalog"]["GB_per_s"]
        vm = t["kafkalog"]["median_GB_per_s"]
        bm = max(t["raw_whole"]["median_GB_per_s"], t["raw_ranges"]["median_GB_per_s"])
        spread = max(1 - t[k]["worst_GB_per_s"] / t[k]["GB_per_s"] for _, k in body)
        p(f"    read+transfer_to / faster raw sendfile line: best {pct(v, braw)}, median {pct(vm, bm)} "
          f"(target >= 90%: {verdict(v / braw, 0.9)}); best of {args.transfer_repeats}; the worst run of a line "
          f"is up to {spread * 100:.0f}% below its best")

    r = out.get("recover")
    if r and "recover" in r:
        p()
        p(f"[4] RECOVER a {mib(r['file_bytes'])} segment ({r['batches']} v2 batches of "
          f"~{r['file_bytes'] / r['batches']:.0f} B, index.interval.bytes=4096); page cache warm")
        base = r["read"]["GB_per_s"]
        body = [
            ["hardware: sequential readinto(), 1 MiB reused buffer", "read"],
            [f"hardware: readinto() + CRC-32C of every byte (kafkalog.crc[{r['crc_backend']}])", "read_crc"],
            [f"kafkalog LogSegment.recover(), {r.get('core', '?').split(' (')[0]} core  <- target >= 5 GB/s",
             "recover"],
        ]
        if "recover_pure" in r:
            body.append(["kafkalog LogSegment.recover(), pure-Python core", "recover_pure"])
        rows = [[label, f"{r[k]['GB_per_s']:.2f}", f"{r[k]['us_per_batch']:.2f}", pct(r[k]["GB_per_s"], base),
                 pct(r[k]["GB_per_s"], r["read_crc"]["GB_per_s"])] for label, k in body]
        p(table(["what", "GB/s", "us/batch", "vs read", "vs read+CRC"], rows))
        v = r["recover"]["GB_per_s"]
        p(f"    recover() returned {sorted(set(r['recover_returned']))} (truncated bytes); rebuilt offset index "
          f"{r['offset_index_entries']} entries, time index {r['time_index_entries']} (expected "
          f"{r['batches'] - 1} each); {v:.2f} GB/s (issue 15's target >= 5 GB/s: {verdict(v, 5.0)})")

    if NOTES:
        p()
        p("Notes:")
        for n_ in NOTES:
            p(f"  - {n_}")
    p()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="short run: 64 MiB segments, 128 MiB recovery, fewer repeats and lookups")
    ap.add_argument("--segment-size", type=parse_size, default=None,
                    help="bytes appended per run in [1] and walked in [3] (default 512M, 64M with --quick)")
    ap.add_argument("--recover-size", type=parse_size, default=None,
                    help="segment size recovered in [4] (default 1G, 128M with --quick)")
    ap.add_argument("--max-read", type=parse_size, default=1 << 20, help="max_size of each read in [3] (1M)")
    ap.add_argument("--lookups", type=int, default=None, help="single-lookup targets in [2] (200000; 50000 quick)")
    ap.add_argument("--many", type=int, default=1_000_000, help="targets for lookup_many in [2]")
    ap.add_argument("--repeats", type=int, default=None, help="repeats of the big-file runs (5; 3 quick)")
    ap.add_argument("--lookup-repeats", type=int, default=None, help="repeats of the lookup runs (5; 3 quick)")
    ap.add_argument("--transfer-repeats", type=int, default=None,
                    help="repeats of the loopback runs, which are noisy (9; 5 quick)")
    ap.add_argument("--receiver", choices=("process", "thread"), default="process",
                    help="who drains the loopback socket in [3]: a forked process (default) or a thread")
    ap.add_argument("--json", metavar="OUT.json", help="also write all figures as JSON")
    ap.add_argument("--tmpdir", default=tempfile.gettempdir(), help="where the temp files go (default /tmp)")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: append,index,transfer,recover")
    args = ap.parse_args(argv)
    if args.segment_size is None:
        args.segment_size = (64 << 20) if args.quick else (512 << 20)
    if args.recover_size is None:
        args.recover_size = (128 << 20) if args.quick else (1 << 30)
    if args.lookups is None:
        args.lookups = 50_000 if args.quick else 200_000
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.transfer_repeats is None:
        args.transfer_repeats = 5 if args.quick else 9
    if args.lookup_repeats is None:
        args.lookup_repeats = 3 if args.quick else 5
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - {"append", "index", "transfer", "recover"}
    if unknown:
        ap.error(f"unknown sections in --skip: {sorted(unknown)}")
    sizes = [args.segment_size] * bool({"append", "transfer"} - skip) + [args.recover_size] * ("recover" not in skip)
    args.data_bytes = max(sizes, default=0)

    out = {"machine": machine_facts(args), "config": {k: v for k, v in vars(args).items()}}
    if KL is None or np is None:
        note(f"kafkalog not importable ({KL_IMPORT_ERROR!r}; tried the environment and {REPO_SRC}): nothing to run")
        report(args, out)
        return 1
    t_start = perf_counter()
    for name, fn in (("append", section_append), ("index", section_index), ("transfer", section_transfer),
                     ("recover", section_recover)):
        if name in skip:
            continue
        try:
            fn(args, out)
        except Exception as e:
            note(f"section {name} failed: {e!r}")
            traceback.print_exc()
    out["elapsed_s"] = perf_counter() - t_start
    out["notes"] = NOTES
    report(args, out)
    print(f"total time {out['elapsed_s']:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
