#!/usr/bin/env python3
"""kafkalog record benchmarks: peers, hardware baselines and CRC-32C backends.

One run measures, and prints side by side:

  [1] Peers on ~16 KiB v2 record batches (100 B and 1 KiB values; codecs none,
      lz4, zstd):
        * build      records/s  kafka-python | aiokafka | kafkalog
        * decode     records/s and MB/s of batch bytes, iterating every record
                     and touching offset, timestamp, key, value and headers,
                     with CRC validation on for everybody; aiokafka is also
                     shown without its CRC check (its CRC-32C is software).
      All decoders read the very same bytes (built once with kafka-python);
      kafkalog's and aiokafka's decoded records are checked against
      kafka-python's before anything is timed.
  [2] Validated shallow batch iteration over a large file (default 1 GiB of
      ~16 KiB batches in a temp file, deleted afterwards), GB/s, next to the
      raw hardware measured in the same run: sequential readinto() of the same
      file into a reused buffer, and the same read plus CRC-32C over every
      byte with the fastest CRC backend found in [3].  The page cache is
      warmed first, so these are memory, not disk, numbers.
  [3] CRC-32C GB/s on a 16 KiB buffer for every backend available, plus a
      memcpy baseline (bytes(bytearray) copy of the same buffer).

Timing: time.perf_counter, a calibrated inner loop of >= --min-time seconds,
best of --repeats, garbage collector off while timing (as timeit does).

Run:   /tmp/kv/bin/python benchmarks/bench_records.py [--quick] [--file-size 1G]
                                                      [--json out.json]
kafkalog is imported from the environment, or else from ../src next to this
script; its parts are skipped with a note when it cannot be imported.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext as _nullcontext
import gc
import itertools
import json
import os
import platform
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import cpu_facts, parse_size, table  # noqa: E402

perf_counter = time.perf_counter

NOTES: list[str] = []  # things that went wrong / were skipped, printed at the end


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"  note: {msg}", file=sys.stderr, flush=True)


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Optional imports: peers, CRC backends, kafkalog
# --------------------------------------------------------------------------

try:
    from kafka.record import MemoryRecords as KPMemoryRecords
    from kafka.record import MemoryRecordsBuilder as KPBuilder
    import kafka as _kafka

    KP_VERSION = getattr(_kafka, "__version__", "?")
except Exception as e:  # pragma: no cover - environment dependent
    KPMemoryRecords = KPBuilder = None
    KP_VERSION = f"unavailable ({e!r})"

AIO_LABEL = "aiokafka"
try:
    import aiokafka as _aiokafka

    AIO_VERSION = getattr(_aiokafka, "__version__", "?")
    try:
        from aiokafka.record import _crecords as _aio_c

        AIOBuilder = _aio_c.DefaultRecordBatchBuilder
        AIOMemoryRecords = _aio_c.MemoryRecords
        AIO_CRC = _aio_c.crc32c_cython
        AIO_IMPL = "compiled aiokafka.record._crecords"
        AIO_LABEL = "aiokafka[C]"
    except ImportError:
        from aiokafka.record.default_records import (
            _DefaultRecordBatchBuilderPy as AIOBuilder,
        )
        from aiokafka.record.memory_records import _MemoryRecordsPy as AIOMemoryRecords
        from aiokafka.record.util import calc_crc32c_py as AIO_CRC

        AIO_IMPL = "pure-Python fallback (compiled _crecords not importable)"
        AIO_LABEL = "aiokafka[py]"
except Exception as e:  # pragma: no cover
    AIOBuilder = AIOMemoryRecords = AIO_CRC = None
    AIO_VERSION = f"unavailable ({e!r})"
    AIO_IMPL = "-"

try:
    import crcmod
    import crcmod.predefined

    CRCMOD_FN = crcmod.predefined.mkCrcFun("crc-32c")
    CRCMOD_EXT = bool(getattr(sys.modules.get("crcmod.crcmod"), "_usingExtension", False))
except Exception:
    CRCMOD_FN, CRCMOD_EXT = None, False

try:
    import crc32c as _crc32c_pkg

    CRC32C_FN = _crc32c_pkg.crc32c
    CRC32C_HW = getattr(_crc32c_pkg, "hardware_based", None)
except Exception:
    CRC32C_FN, CRC32C_HW = None, None

try:
    import google_crc32c

    GOOGLE_FN = google_crc32c.value
    GOOGLE_IMPL = getattr(google_crc32c, "implementation", "?")
except Exception:
    GOOGLE_FN, GOOGLE_IMPL = None, None


REPO_SRC = Path(__file__).resolve().parent.parent / "src"


def _import_kafkalog():
    """Import kafkalog from the environment, else from <repo>/src.

    Returns (module or None, import error or None).  kafkalog.crc is imported
    separately (see below) so the CRC table can include it even while the
    top-level API is still incomplete.
    """
    import importlib.util

    try:
        found = importlib.util.find_spec("kafkalog") is not None
    except (ImportError, ValueError):
        found = False
    if not found and REPO_SRC.is_dir() and str(REPO_SRC) not in sys.path:
        sys.path.insert(0, str(REPO_SRC))
    try:
        import kafkalog
        from kafkalog import (  # noqa: F401
            Compression,
            FileRecords,
            MemoryRecords,
            RecordBatchBuilder,
        )

        return kafkalog, None
    except Exception as e:  # missing or half-written library: report, go on
        return None, e


KL, KL_IMPORT_ERROR = _import_kafkalog()
KL_CRC_FN = None
KL_CRC_BACKEND = None
try:
    import kafkalog.crc as _kl_crc

    KL_CRC_FN = _kl_crc.crc32c
    KL_CRC_BACKEND = str(getattr(_kl_crc, "BACKEND", "?"))
except Exception as e:
    KL_CRC_BACKEND = f"unavailable ({e!r})"


# --------------------------------------------------------------------------
# Timing harness
# --------------------------------------------------------------------------


def bench(fn, min_time: float, repeats: int) -> float:
    """Best seconds per call of fn(): calibrated loop, best of `repeats`."""
    rep = itertools.repeat
    gc_was = gc.isenabled()
    gc.disable()
    try:
        n = 1
        while True:  # calibrate so one repeat takes ~min_time
            t0 = perf_counter()
            for _ in rep(None, n):
                fn()
            dt = perf_counter() - t0
            if dt >= min_time / 5 or n >= 1 << 30:
                break
            n *= 4 if dt < min_time / 50 else 2
        n = max(1, int(n * min_time / max(dt, 1e-9)))
        best = float("inf")
        for _ in range(repeats):
            t0 = perf_counter()
            for _ in rep(None, n):
                fn()
            best = min(best, (perf_counter() - t0) / n)
        return best
    finally:
        if gc_was:
            gc.enable()
        gc.collect()


def bench_once(fn, repeats: int) -> float:
    """Best seconds of a single (long) call of fn(), best of `repeats`."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(repeats):
            t0 = perf_counter()
            fn()
            best = min(best, perf_counter() - t0)
        return best
    finally:
        if gc_was:
            gc.enable()


def si(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}{unit}"
    return f"{x:.3g}{unit}"


def fmt_gbs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

WORDS = (
    b"kafka log segment offset broker partition topic replica leader epoch "
    b"producer consumer fetch index timestamp record batch header value key "
    b"compaction retention cleaner checkpoint snapshot transaction commit abort"
).split()

BASE_TS = 1_700_000_000_000
TARGET_BATCH = 16 * 1024
CODECS = ("none", "lz4", "zstd")
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # v2 attribute bits


def make_value(rng: random.Random, size: int) -> bytes:
    """Half random bytes, half text from a small vocabulary (compresses ~2x)."""
    nrand = size // 2
    parts = [rng.randbytes(nrand)]
    n = nrand
    while n < size:
        w = rng.choice(WORDS) + b" "
        parts.append(w)
        n += len(w)
    return b"".join(parts)[:size]


def make_records(rng: random.Random, n: int, value_size: int, first_ts: int):
    """[(timestamp_ms, key, value)] with ~10-byte keys."""
    return [
        (first_ts + i * 3 + rng.randrange(3), b"user-%05d" % rng.randrange(100_000),
         make_value(rng, value_size))
        for i in range(n)
    ]


def records_per_batch(value_size: int) -> int:
    # ~ len varint + attrs + ts/offset deltas + key len/key + value len + hdr count
    per_record = value_size + 10 + 11
    return max(1, (TARGET_BATCH - 61) // per_record)


# --------------------------------------------------------------------------
# Builders (one batch per builder)
# --------------------------------------------------------------------------

BIG_BATCH_SIZE = 1 << 22  # never let a peer refuse an append


def kp_build(records, codec: str, base_offset: int = 0) -> bytes:
    b = KPBuilder(magic=2, compression_type=CODEC_ID[codec], batch_size=BIG_BATCH_SIZE,
                  offset=base_offset)
    append = b.append
    for ts, k, v in records:
        append(ts, k, v, [])
    b.close()
    return b.buffer()


def aio_build(records, codec: str, base_offset: int = 0):
    b = AIOBuilder(2, CODEC_ID[codec], 0, -1, -1, -1, BIG_BATCH_SIZE)
    append = b.append
    off = base_offset
    for ts, k, v in records:
        append(off, ts, k, v, [])
        off += 1
    return b.build()


def kl_build(records, codec: str, base_offset: int = 0):
    C = KL.Compression
    comp = {"none": C.NONE, "gzip": C.GZIP, "snappy": C.SNAPPY, "lz4": C.LZ4, "zstd": C.ZSTD}[codec]
    b = KL.RecordBatchBuilder(magic=2, compression=comp, base_offset=base_offset)
    append = b.append
    for ts, k, v in records:
        append(k, v, timestamp=ts, headers=())
    return b.build().buffer


# --------------------------------------------------------------------------
# Decoders: touch offset, timestamp, key, value, headers of every record
# --------------------------------------------------------------------------


def _len(x) -> int:
    return 0 if x is None else len(x)


def kp_decode(buf) -> int:
    acc = 0
    mr = KPMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        if not batch.validate_crc():
            raise ValueError("kafka-python: CRC mismatch")
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


def aio_decode(buf, validate: bool = True) -> int:
    acc = 0
    mr = AIOMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        if validate and not batch.validate_crc():
            raise ValueError("aiokafka: CRC mismatch")
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


def aio_decode_nocrc(buf) -> int:
    return aio_decode(buf, validate=False)


def kl_decode(buf) -> int:
    acc = 0
    for batch in KL.MemoryRecords(buf).batches():
        batch.ensure_valid()
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


def _b(x):
    return None if x is None else bytes(x)


def _hdrs(hs):
    out = []
    for k, v in hs or ():
        out.append((k.decode() if isinstance(k, (bytes, bytearray, memoryview)) else k, _b(v)))
    return out


def collect_kp(buf):
    out = []
    mr = KPMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, _b(r.key), _b(r.value), _hdrs(r.headers)) for r in batch]
    return out


def collect_aio(buf):
    out = []
    mr = AIOMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, _b(r.key), _b(r.value), _hdrs(r.headers)) for r in batch]
    return out


def collect_kl(buf):
    out = []
    for batch in KL.MemoryRecords(buf).batches():
        batch.ensure_valid()
        out += [(r.offset, r.timestamp, _b(r.key), _b(r.value), _hdrs(r.headers)) for r in batch]
    return out


def expected_records(records, base_offset: int):
    return [(base_offset + i, ts, k, v, []) for i, (ts, k, v) in enumerate(records)]


def first_diff(a, b) -> str:
    if len(a) != len(b):
        return f"{len(a)} records vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"record {i}: {str(x)[:120]} != {str(y)[:120]}"
    return "?"


# --------------------------------------------------------------------------
# [1] peers
# --------------------------------------------------------------------------


def section_peers(args, out):
    rows = []
    have_kp = KPBuilder is not None
    have_aio = AIOBuilder is not None
    if not have_kp:
        note(f"kafka-python unavailable: {KP_VERSION}; section [1] skipped")
        return rows
    for value_size in (100, 1024):
        n = records_per_batch(value_size)
        rng = random.Random(0xC0FFEE + value_size)
        batches = [make_records(rng, n, value_size, BASE_TS + 10_000 * j)
                   for j in range(args.batches)]
        for codec in CODECS:
            progress(f"[1] value={value_size} B codec={codec}: {n} rec/batch x {args.batches} batches")
            row = {"value_size": value_size, "codec": codec, "records_per_batch": n,
                   "batches": args.batches, "build": {}, "decode": {}}
            # ---- input bytes, built once with kafka-python, consecutive offsets
            buf = b"".join(bytes(kp_build(recs, codec, j * n)) for j, recs in enumerate(batches))
            row["buffer_bytes"] = len(buf)
            row["batch_bytes_avg"] = len(buf) / args.batches
            nrec = n * args.batches
            want = [r for j, recs in enumerate(batches) for r in expected_records(recs, j * n)]
            got = collect_kp(buf)
            if got != want:
                note(f"kafka-python round trip differs ({value_size} B, {codec}): {first_diff(got, want)}")

            # ---- build
            def run_build(fn):
                def go():
                    for recs in batches:
                        fn(recs, codec)
                return nrec / bench(go, args.min_time, args.repeats)

            if not args.skip_build:
                row["build"]["kafka-python"] = run_build(kp_build)
            if have_aio and not args.skip_build:
                row["build"][AIO_LABEL] = run_build(aio_build)
            if KL is not None and not args.skip_build:
                try:
                    kl_out = b"".join(bytes(kl_build(recs, codec, j * n)) for j, recs in enumerate(batches))
                    chk = collect_kp(kl_out)
                    if chk != want:
                        note(f"kafkalog build output decodes differently with kafka-python "
                             f"({value_size} B, {codec}): {first_diff(chk, want)}")
                    row["build"]["kafkalog"] = run_build(kl_build)
                    row["kafkalog_built_bytes"] = len(kl_out)
                except Exception as e:
                    note(f"kafkalog build failed ({value_size} B, {codec}): {e!r}")

            # ---- decode + touch, CRC on. The decoders are timed in turns (one calibrated repeat
            # each per round, best of --repeats rounds kept) so that load from elsewhere on the
            # machine falls on all of them alike and the ratios stay meaningful.
            decoders = []

            def add_decoder(name, fn, collect, pure=False):
                if collect is not None:
                    with KL.native.use(pure=True) if pure else _nullcontext():
                        got = collect(buf)
                    if got != want:
                        note(f"{name} decodes differently ({value_size} B, {codec}): "
                             f"{first_diff(got, want)}; not timed")
                        return
                decoders.append((name, fn, pure))

            add_decoder("kafka-python", kp_decode, None)
            if have_aio:
                add_decoder(AIO_LABEL, aio_decode, collect_aio)
                add_decoder(AIO_LABEL + " noCRC", aio_decode_nocrc, None)
            if KL is not None:
                # "kafkalog": the active core (compiled when built); "kafkalog[py]": the
                # pure-Python reference, in the same run.
                add_decoder("kafkalog", kl_decode, collect_kl)
                if KL.native.available():
                    add_decoder("kafkalog[py]", kl_decode, collect_kl, pure=True)
            best = {name: float("inf") for name, _, _ in decoders}
            for _ in range(args.repeats):
                for name, fn, pure in decoders:
                    try:
                        with KL.native.use(pure=True) if pure else _nullcontext():
                            best[name] = min(best[name], bench(lambda: fn(buf), args.min_time, 1))
                    except Exception as e:
                        note(f"{name} decode failed ({value_size} B, {codec}): {e!r}")
            for name, t in best.items():
                if t < float("inf"):
                    row["decode"][name] = {"records_per_s": nrec / t, "MB_per_s": len(buf) / t / 1e6}
            rows.append(row)
    out["peers"] = rows
    return rows


# --------------------------------------------------------------------------
# [3] CRC-32C backends
# --------------------------------------------------------------------------


def crc_backends():
    """[(label, fn, accepts_memoryview)] for every available backend."""
    bk = []
    if CRCMOD_FN is not None:
        bk.append(("crcmod" + ("[C ext]" if CRCMOD_EXT else "[pure Python]"), CRCMOD_FN))
    if CRC32C_FN is not None:
        bk.append((f"crc32c pkg[{'hw' if CRC32C_HW else 'sw'}]", CRC32C_FN))
    if GOOGLE_FN is not None:
        bk.append((f"google-crc32c[{GOOGLE_IMPL}]", GOOGLE_FN))
    if AIO_CRC is not None:
        bk.append((f"aiokafka crc32c_cython", AIO_CRC))
    if KL_CRC_FN is not None:
        bk.append((f"kafkalog.crc[{KL_CRC_BACKEND}]", KL_CRC_FN))
    out = []
    for label, fn in bk:
        try:
            ok = fn(b"123456789") == 0xE3069283
        except Exception as e:
            note(f"{label} failed on check value: {e!r}")
            continue
        if not ok:
            note(f"{label} gives a wrong CRC-32C check value; skipped")
            continue
        try:
            fn(memoryview(bytearray(b"123456789")))
            mv = True
        except Exception:
            mv = False
        out.append((label, fn, mv))
    return out


def section_crc(args, out):
    size = 16 * 1024
    data = random.Random(42).randbytes(size)
    rows = []
    ba = bytearray(data)
    progress("[3] memcpy baseline and CRC-32C backends on 16 KiB")
    t = bench(lambda: bytes(ba), args.min_time, args.repeats)
    rows.append({"name": "memcpy: bytes(bytearray) copy", "GB_per_s": size / t / 1e9,
                 "memoryview": None, "raw": True})
    for label, fn, mv in crc_backends():
        t = bench(lambda: fn(data), args.min_time, args.repeats)
        rows.append({"name": label, "GB_per_s": size / t / 1e9, "memoryview": mv, "fn": fn})
    out["crc"] = [{k: v for k, v in r.items() if k != "fn"} for r in rows]
    return rows


# --------------------------------------------------------------------------
# [2] big file
# --------------------------------------------------------------------------


def section_file(args, out, crc_rows):
    res = {}
    size = args.file_size
    if size <= 0:
        note("--file-size 0: section [2] skipped")
        return res
    if KPBuilder is None:
        note("kafka-python unavailable: cannot build the file; section [2] skipped")
        return res
    free = shutil.disk_usage(args.tmpdir).free
    if free < size * 1.2 + (256 << 20):
        note(f"only {free >> 20} MiB free in {args.tmpdir}: section [2] skipped")
        return res

    # Fastest CRC backend that takes a memoryview slice of a reused buffer.
    cands = [r for r in crc_rows if r.get("fn") is not None and r["memoryview"]]
    if not cands:
        note("no CRC-32C backend accepting memoryview: read+CRC baseline skipped")
        crc_fn, crc_name = None, None
    else:
        best = max(cands, key=lambda r: r["GB_per_s"])
        crc_fn, crc_name = best["fn"], best["name"]

    # A few distinct ~16 KiB uncompressed batches (100 B values).
    value_size = 100
    n = records_per_batch(value_size)
    rng = random.Random(7)
    proto = [bytes(kp_build(make_records(rng, n, value_size, BASE_TS + 10_000 * j), "none"))
             for j in range(8)]
    blen = len(proto[0])
    # per-chunk template of 256 batches; only base offsets (bytes 0..8, outside
    # the CRC-32C which starts at attributes, byte 21) are rewritten.
    per_chunk = 256
    template = bytearray(b"".join(proto[i % len(proto)] for i in range(per_chunk)))
    positions = []
    pos = 0
    for i in range(per_chunk):
        positions.append(pos)
        pos += len(proto[i % len(proto)])
    chunk_len = pos
    nchunks = max(1, size // chunk_len)
    nbatches = nchunks * per_chunk
    fsize = nchunks * chunk_len
    res.update({"file_bytes": fsize, "batches": nbatches, "batch_bytes": blen,
                "records_per_batch": n, "page_cache": "warm (file read once before timing)"})

    fd_, path = tempfile.mkstemp(prefix="kafkalog-bench-", suffix=".log", dir=args.tmpdir)
    os.close(fd_)
    try:
        progress(f"[2] writing {fsize / 2**20:.0f} MiB ({nbatches} batches of ~{blen} B) to {path}")
        t0 = perf_counter()
        pack_into = struct.pack_into
        off = 0
        with open(path, "wb", buffering=0) as f:
            for _ in range(nchunks):
                for p in positions:
                    pack_into(">q", template, p, off)
                    off += n
                f.write(template)
        res["write_s"] = perf_counter() - t0
        last_base = off - n

        bufsize = 1 << 20
        buf = bytearray(bufsize)
        mv = memoryview(buf)

        def read_all():
            with open(path, "rb", buffering=0) as f:
                readinto = f.readinto
                total = 0
                while True:
                    k = readinto(mv)
                    if not k:
                        break
                    total += k
            return total

        def read_crc():
            with open(path, "rb", buffering=0) as f:
                readinto = f.readinto
                c = 0
                while True:
                    k = readinto(mv)
                    if not k:
                        break
                    c ^= crc_fn(mv[:k] if k != bufsize else mv)
            return c

        progress("[2] warming the page cache (one full read)")
        t0 = perf_counter()
        assert read_all() == fsize
        res["warm_read_s"] = perf_counter() - t0

        progress("[2] raw read (readinto 1 MiB reused buffer)")
        t = bench_once(read_all, args.file_repeats)
        res["read_GB_per_s"] = fsize / t / 1e9
        if crc_fn is not None:
            progress(f"[2] raw read + CRC-32C ({crc_name})")
            t = bench_once(read_crc, args.file_repeats)
            res["read_crc_GB_per_s"] = fsize / t / 1e9
            res["crc_backend"] = crc_name

        if KL is not None:
            def kl_scan():
                cnt = 0
                last = -1
                with KL.FileRecords.open(path) as fr:
                    for batch in fr.batches(validate=True):
                        last = batch.base_offset
                        cnt += 1
                return cnt, last

            try:
                progress("[2] kafkalog FileRecords.batches(validate=True)")
                cnt, last = kl_scan()
                if (cnt, last) != (nbatches, last_base):
                    note(f"kafkalog FileRecords saw {cnt} batches / last base offset {last}, "
                         f"expected {nbatches} / {last_base}; not timed")
                else:
                    t = bench_once(kl_scan, args.file_repeats)
                    res["kafkalog_GB_per_s"] = fsize / t / 1e9
                    res["kafkalog_batches_per_s"] = nbatches / t
            except Exception as e:
                note(f"kafkalog FileRecords failed: {e!r}")
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    out["file"] = res
    return res


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def machine_facts():
    cpu, flags = cpu_facts()
    mods = {}
    for m in ("numpy", "lz4", "zstandard", "snappy", "cramjam"):
        try:
            mod = __import__(m)
            mods[m] = getattr(mod, "__version__", "?")
        except Exception:
            mods[m] = "-"
    return {
        "cpu": cpu,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "kafka-python": f"{KP_VERSION} (pure Python; CRC via crc32c pkg if installed; lz4.frame level 0, zstandard level 3)",
        "aiokafka": f"{AIO_VERSION} ({AIO_IMPL}; CRC-32C software table; codecs via cramjam, lz4 level 9, zstd level 3)",
        "crcmod": "C extension" if CRCMOD_EXT else ("pure Python" if CRCMOD_FN else "-"),
        "crc32c pkg": ("-" if CRC32C_FN is None else ("hardware" if CRC32C_HW else "software")),
        "google-crc32c": GOOGLE_IMPL or "-",
        "kafkalog": (getattr(KL, "__file__", "?") if KL is not None
                     else f"not importable ({KL_IMPORT_ERROR!r})"),
        "kafkalog.crc.BACKEND": KL_CRC_BACKEND or "-",
        "modules": mods,
    }


def report(args, out, peers, crc_rows, file_res):
    m = out["machine"]
    p = print
    p("=" * 100)
    p("kafkalog benchmarks" + ("  (--quick)" if args.quick else ""))
    p("=" * 100)
    p(f"CPU        : {m['cpu']}  ({m['cores']} logical cores; flags: {m['cpu_flags'] or '?'})")
    p(f"Python     : {m['python']}  [{m['platform']}]")
    for k in ("kafka-python", "aiokafka", "kafkalog", "kafkalog.crc.BACKEND"):
        p(f"{k:<11}: {m[k]}" if len(k) <= 11 else f"{k}: {m[k]}")
    p(f"CRC pkgs   : crcmod {m['crcmod']}; crc32c pkg {m['crc32c pkg']}; google-crc32c {m['google-crc32c']}")
    p(f"modules    : " + ", ".join(f"{k} {v}" for k, v in m["modules"].items()))
    p(f"timing     : best of {args.repeats} x >= {args.min_time:g} s calibrated loops, "
      f"time.perf_counter, GC off while timing")

    if peers:
        peer_names = [l for l in ("kafka-python", AIO_LABEL, "kafkalog")]
        p()
        p(f"[1a] BUILD v2 batches (one builder per ~16 KiB batch, keys ~10 B, values "
          f"half random/half text, no headers) -- records/s")
        hdr = ["value", "codec", "rec/batch", "batch B"] + peer_names + ["kafkalog/best peer"]
        rows = []
        for r in peers:
            b = r["build"]
            best_peer = max([b[k] for k in b if k != "kafkalog"], default=None)
            ratio = (f"{b['kafkalog'] / best_peer:.2f}x" if "kafkalog" in b and best_peer else "-")
            rows.append([f"{r['value_size']} B", r["codec"], r["records_per_batch"],
                         f"{r['batch_bytes_avg']:.0f}"] + [si(b.get(k)) for k in peer_names] + [ratio])
        p(table(hdr, rows, ["<", "<"] + [">"] * (len(hdr) - 2)))

        p()
        p(f"[1b] DECODE + touch offset/timestamp/key/value/headers of every record, CRC validated "
          f"({args.batches} batches per buffer, same bytes for all) -- records/s (MB/s of batch bytes)")
        dec_names = ["kafka-python", AIO_LABEL, AIO_LABEL + " noCRC", "kafkalog", "kafkalog[py]"]
        p(f"    kafkalog: the {KL.native.core_name() if KL else '-'} core; kafkalog[py]: the pure-Python core")
        hdr = ["value", "codec"] + dec_names + ["kafkalog/kafka-python", "kafkalog/" + AIO_LABEL,
                                                "[py]/kafka-python", "[py]/" + AIO_LABEL]
        rows = []
        for r in peers:
            d = r["decode"]

            def cell(k):
                if k not in d:
                    return "-"
                return f"{si(d[k]['records_per_s'])} ({d[k]['MB_per_s']:.0f})"

            def ratio(ours, peer):
                if ours not in d or peer not in d:
                    return "-"
                return f"{d[ours]['records_per_s'] / d[peer]['records_per_s']:.2f}x"

            ratios = [ratio(ours, peer) for ours in ("kafkalog", "kafkalog[py]") for peer in ("kafka-python", AIO_LABEL)]
            rows.append([f"{r['value_size']} B", r["codec"]] + [cell(k) for k in dec_names] + ratios)
        p(table(hdr, rows, ["<", "<"] + [">"] * (len(hdr) - 2)))

    if file_res:
        f = file_res
        p()
        p(f"[2] VALIDATED SHALLOW BATCH ITERATION over a {f['file_bytes'] / 2**30:.2f} GiB file "
          f"({f['batches']} v2 batches of ~{f['batch_bytes']} B) -- page cache WARM "
          f"(file read once first), best of {args.file_repeats}")
        rows = [
            ["hardware: sequential readinto(), 1 MiB reused buffer", fmt_gbs(f.get("read_GB_per_s")), "1.00x"],
        ]
        base = f.get("read_GB_per_s")
        if "read_crc_GB_per_s" in f:
            rows.append([f"hardware: readinto() + CRC-32C all bytes [{f['crc_backend']}]",
                         fmt_gbs(f["read_crc_GB_per_s"]), f"{f['read_crc_GB_per_s'] / base:.2f}x"])
        if "kafkalog_GB_per_s" in f:
            rows.append([f"kafkalog FileRecords.batches(validate=True) "
                         f"({si(f['kafkalog_batches_per_s'])} batches/s)",
                         fmt_gbs(f["kafkalog_GB_per_s"]), f"{f['kafkalog_GB_per_s'] / base:.2f}x"])
        else:
            rows.append(["kafkalog FileRecords.batches(validate=True)", "-", "-"])
        p(table(["what", "GB/s", "vs read"], rows, ["<", ">", ">"]))
        if "kafkalog_GB_per_s" in f and "read_crc_GB_per_s" in f:
            p(f"    kafkalog reaches {f['kafkalog_GB_per_s'] / f['read_crc_GB_per_s'] * 100:.0f}% "
              f"of read+CRC")
        p(f"    (file write took {f['write_s']:.2f} s, warming read {f['warm_read_s']:.2f} s; "
          f"temp file deleted)")

    if crc_rows:
        p()
        p("[3] CRC-32C on a 16 KiB buffer (bytes) -- GB/s")
        base = crc_rows[0]["GB_per_s"]
        rows = []
        for r in crc_rows:
            rows.append([r["name"] + ("  <- raw hardware" if r.get("raw") else ""),
                         f"{r['GB_per_s']:.2f}", f"{r['GB_per_s'] / base:.2f}x",
                         "" if r["memoryview"] is None else ("yes" if r["memoryview"] else "no")])
        p(table(["backend", "GB/s", "vs memcpy", "memoryview ok"], rows, ["<", ">", ">", ">"]))

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
                    help="~30 s run: shorter loops, fewer repeats, 128 MiB file")
    ap.add_argument("--file-size", type=parse_size, default=None,
                    help="size of the big-file case, e.g. 1G, 256M; 0 skips it (default 1G, 128M with --quick)")
    ap.add_argument("--json", metavar="OUT.json", help="also write all figures as JSON")
    ap.add_argument("--tmpdir", default="/tmp", help="where the temp file goes (default /tmp)")
    ap.add_argument("--min-time", type=float, default=None, help="seconds per timed repeat")
    ap.add_argument("--repeats", type=int, default=None, help="repeats (best is kept)")
    ap.add_argument("--batches", type=int, default=8,
                    help="distinct ~16 KiB batches per buffer in [1] (default 8)")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: peers,file,crc, and build (the build half of [1])")
    args = ap.parse_args(argv)
    if args.min_time is None:
        args.min_time = 0.08 if args.quick else 0.2
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.file_size is None:
        args.file_size = (128 << 20) if args.quick else (1 << 30)
    args.file_repeats = 2 if args.quick else 3
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    args.skip_build = "build" in skip

    if KL is None:
        note(f"kafkalog not importable ({KL_IMPORT_ERROR!r}; tried the environment and "
             f"{REPO_SRC}): kafkalog build/decode/FileRecords parts skipped")
    out = {"machine": machine_facts(),
           "config": {k: v for k, v in vars(args).items()}}
    t_start = perf_counter()
    crc_rows = [] if "crc" in skip else section_crc(args, out)
    peers = [] if "peers" in skip else section_peers(args, out)
    file_res = {} if "file" in skip else section_file(args, out, crc_rows)
    out["elapsed_s"] = perf_counter() - t_start
    out["notes"] = NOTES
    report(args, out, peers, crc_rows, file_res)
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
