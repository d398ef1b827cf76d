"""``python -m kafkalog``: the demo, the command-line tools, or a summary of ``.log`` files.

    python -m kafkalog                     # kafkalog demo: a sample partition written, compacted, verified, dumped
    python -m kafkalog --out DIR           # ... keeping it in DIR (DIR/sample-0): kafkalog demo DIR
    python -m kafkalog FILE.log [...]      # summarise segments Kafka (or kafkalog) wrote, batch by batch
    python -m kafkalog COMMAND ...         # dump, verify, compact, ... (kafkalog.tools; --help lists them)

A thin surface over the public API: the demo and the commands live in :mod:`kafkalog.tools`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import FileRecords, KafkalogError, tools as cli


def summarise(path: str, out=None) -> bool:
    """Print one line per batch of the segment at ``path`` and a total; False if it is not clean."""
    out = out or sys.stdout
    ok = True
    records = batches = 0
    print(f"{path}", file=out)
    print(f"{'position':>9} {'offsets':>13} {'magic':>5} {'codec':>6} {'count':>5} {'size':>6} {'timestamp type':>15}  flags", file=out)
    with FileRecords.open(path) as fr:
        try:
            for batch in fr.batches(validate=True, strict=True):
                n = len(batch.records())
                records += n
                batches += 1
                flags = ",".join(
                    name for name, on in (("transactional", batch.is_transactional), ("control", batch.is_control)) if on
                )
                print(
                    f"{batch.position:>9} {f'{batch.base_offset}..{batch.last_offset}':>13} {batch.magic:>5} "
                    f"{batch.compression.kafka_name:>6} {n:>5} {batch.size_in_bytes:>6} "
                    f"{batch.timestamp_type.kafka_name:>15}  {flags}",
                    file=out,
                )
        except KafkalogError as e:
            print(f"error: {e}", file=out)
            ok = False
        print(f"{batches} batches, {records} records, {fr.size_in_bytes} bytes, all CRCs {'valid' if ok else 'NOT valid'}", file=out)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kafkalog`` entry point: a subcommand goes to :func:`kafkalog.tools.main`; ``.log``
    paths are summarised; no argument (or only ``--out DIR``) runs ``kafkalog demo``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "broker":  # `kafkalog broker ...`: see kafkalog.broker
        from .broker import main as broker_main

        return broker_main(argv[1:])
    if argv and argv[0] in cli.SUBCOMMANDS:  # `kafkalog dump ...`: see kafkalog.tools
        return cli.main(argv)
    parser = argparse.ArgumentParser(
        prog="kafkalog",
        description=__doc__.split("\n\n")[0],
        epilog=f"commands: {', '.join((*cli.SUBCOMMANDS, 'broker'))} (kafkalog COMMAND --help)",
    )
    parser.add_argument("files", nargs="*", help=".log segment files to summarise (default: run kafkalog demo)")
    parser.add_argument("--out", metavar="DIR", help="the demo's log directory, kept (default: a temporary one)")
    args = parser.parse_args(argv)
    if not args.files:
        return cli.main(["demo"] + ([args.out] if args.out else []))
    try:
        return 0 if all([summarise(f) for f in args.files]) else 1
    except (KafkalogError, OSError) as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
