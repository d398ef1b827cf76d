"""``python -m kafkalog``: the demo, the command-line tools, or a summary of ``.log`` files.

    python -m kafkalog                     # kafkalog demo: a sample partition written, compacted, verified, dumped
    python -m kafkalog --out DIR           # ... keeping it in DIR (DIR/sample-0): kafkalog demo DIR
    python -m kafkalog FILE.log [...]      # summarise segments Kafka (or kafkalog) wrote, batch by batch
    python -m kafkalog COMMAND ...         # dump, verify, compact, ... (kafkalog.tools; --help lists them)

A thin entry over the public API: the demo, the commands and the summary live in :mod:`kafkalog.tools`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import KafkalogError
from . import tools as cli
from .tools import summarise


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
