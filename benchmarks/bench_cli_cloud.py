#!/usr/bin/env python3
"""The read-only CLI on object storage: ``kafkalog dump``, ``verify`` and ``stat`` on the same
partition from local disk and from an S3 server on the loopback, in one run.

One run measures, for each command, on --size (default 256 MiB) of segments (--segment-size,
default 64 MiB; ~16 KiB v2 batches, indexes by Kafka's rule, written through Log):

  local disk       -- the command on the local directory (page cache warm)
  S3, in place     -- the command on ``s3://bench/logs/...``: listings, indexes whole, the .log
                      files by ranged GETs with a bounded read-ahead (what the CLI does)
  S3, download     -- every file the command reads fetched whole into a temporary directory
                      first (fsspec's ``get``), then the local command: what the CLI did before
                      it read in place, as a peer
  raw S3 GETs      -- the .log objects fetched in 16 MiB ranged GETs, nothing decoded: what
                      bounds the S3 figures

and the bytes fetched from .log objects (counted by the server, per request) against their
size. The server is moto's standalone S3 server (one Python process on 127.0.0.1, a free port,
stopped at the end), shared with bench_cloud.py. Command output goes to a sink that drops it.

Timing: time.perf_counter around the whole command, best of --repeats. Temporary files are
deleted.

Run:   python benchmarks/bench_cli_cloud.py [--size 256M] [--repeats 2] [--json out.json]

Needs fsspec, s3fs, moto[server].
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, cpu_facts, git_describe, import_kafkalog, parse_size, progress, table  # noqa: E402
from bench_cloud import _BLOCK, Server, best, build  # noqa: E402

KL, KL_IMPORT_ERROR = import_kafkalog("log", "tools")


class _Sink:
    """A text stream that keeps nothing (a deep dump of 256 MiB prints ~1 GB of lines)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def cli(*argv: str) -> int:
    status = KL.tools.main(list(argv), stdout=_Sink(), stderr=_Sink())
    if status != 0:
        raise RuntimeError(f"kafkalog {' '.join(argv)} exited with {status}")
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256M")
    ap.add_argument("--segment-size", default="64M")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    if KL is None:
        print(f"kafkalog not importable: {KL_IMPORT_ERROR}", file=sys.stderr)
        return 1
    import s3fs

    size, segment_size = parse_size(a.size), parse_size(a.segment_size)
    cpu, _ = cpu_facts()
    print(f"kafkalog {git_describe(Path(__file__).resolve().parent)}, "
          f"core {KL.core_name()}, {os.cpu_count()} cores ({cpu}), load {os.getloadavg()[0]:.1f}")
    work = tempfile.mkdtemp(prefix="kafkalog-bench-cli-cloud-")
    server = None
    out: dict = {}
    saved_env = os.environ.get("AWS_ENDPOINT_URL")
    try:
        part = os.path.join(work, "logs", "bench-0")
        progress(f"building {size >> 20} MiB of segments ...")
        build(part, size, segment_size)
        names = sorted(os.listdir(part))
        logs = [f for f in names if f.endswith(".log")]
        total = sum(os.path.getsize(os.path.join(part, f)) for f in logs)
        one = logs[0]
        one_size = os.path.getsize(os.path.join(part, one))
        progress("starting the S3 server and uploading ...")
        server = Server()
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint  # how the CLI finds the server
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
        fs = s3fs.S3FileSystem(**server.options)
        fs.mkdir("bench")
        for f in names:
            fs.put_file(os.path.join(part, f), f"bench/logs/bench-0/{f}")
        url = "s3://bench/logs/bench-0"

        def downloaded(argv: list[str], keys: list[str]) -> int:
            """The old way: the files fetched whole into a temporary directory, then the local command."""
            tmp = tempfile.mkdtemp(prefix="kafkalog-bench-view-", dir=work)
            try:
                local = os.path.join(tmp, "bench-0")
                os.makedirs(local)
                for k in keys:
                    fs.get_file(f"bench/logs/bench-0/{k}", os.path.join(local, k))
                target = os.path.join(local, one) if argv[0] == "dump" else local
                return cli(*argv[:-1], target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

        segment_files = [f for f in names if f.split(".")[0] == one.split(".")[0]]
        cases = [
            ("dump --deep-iteration (one segment)", ["dump", "--deep-iteration", "--files", "@"], one_size, segment_files),
            ("verify (the partition)", ["verify", "@"], total, names),
            ("verify --deep", ["verify", "--deep", "@"], total, names),
            ("stat (the partition)", ["stat", "@"], total, names),
        ]
        fs.invalidate_cache()

        def raw_s3(keys: list[str]) -> int:
            n = 0
            for f in keys:
                key = f"bench/logs/bench-0/{f}"
                length = fs.info(key)["size"]
                for start in range(0, length, _BLOCK):
                    n += len(fs.cat_file(key, start=start, end=min(length, start + _BLOCK)))
            return n

        rows = []
        for label, argv, nbytes, keys in cases:
            progress(f"{label} ...")
            target_local = os.path.join(part, one) if argv[0] == "dump" else part
            target_s3 = f"{url}/{one}" if argv[0] == "dump" else url
            local_argv = [target_local if x == "@" else x for x in argv]
            s3_argv = [target_s3 if x == "@" else x for x in argv]
            cli(*local_argv)  # warm the page cache
            t_local, _ = best(a.repeats, lambda local_argv=local_argv: cli(*local_argv))
            server.clear()
            t_s3, _ = best(a.repeats, lambda s3_argv=s3_argv: cli(*s3_argv))
            fetched = server.counters().get("log", [0, 0])
            t_old, _ = best(a.repeats, lambda argv=argv, keys=keys: downloaded(argv, keys))
            t_raw, _ = best(a.repeats, lambda keys=keys: raw_s3([k for k in keys if k.endswith(".log")]))
            mib = nbytes / (1 << 20)
            rows.append([label, f"{mib:,.0f}", f"{t_local:.2f}", f"{t_s3:.2f}", f"{t_old:.2f}", f"{t_raw:.2f}",
                         f"{t_local / t_s3:.2f}x", f"{t_old / t_s3:.2f}x",
                         f"{fetched[1] / a.repeats / nbytes:.3f}x ({fetched[0] // a.repeats} GETs)"])
            out[label] = {"mib": mib, "t_local": t_local, "t_s3": t_s3, "t_download": t_old, "t_raw_s3": t_raw,
                          "log_bytes_fetched_ratio": fetched[1] / a.repeats / nbytes, "log_gets": fetched[0] // a.repeats}
        print(f"\n{len(logs)} segments, {total / (1 << 20):,.0f} MiB of .log; best of {a.repeats}; seconds")
        print(table(["command", "MiB", "local", "S3 in place", "S3 download", "raw S3 GETs", "local/S3",
                     "download/in place", ".log bytes fetched / size"], rows))
        out["load"] = os.getloadavg()[0]
    finally:
        if saved_env is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = saved_env
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for n in NOTES:
        print(f"note: {n}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
