"""``python -m kafkalog`` (the ``kafkalog`` command): the command-line tools, the broker, or a
summary of ``.log`` files.

    kafkalog COMMAND ...           # dump, verify, compact, ... (kafkalog --help lists them)
    kafkalog broker ...            # a Kafka-protocol broker over a log directory (kafkalog.broker)
    kafkalog FILE.log [...]        # summarise segments batch by batch (every argument an existing file)
    kafkalog                       # kafkalog demo: a sample partition written, compacted, verified, dumped
    kafkalog --out DIR             # ... keeping it in DIR (DIR/sample-0): kafkalog demo DIR
    kafkalog --version             # kafkalog <version>

A thin entry over the public API: the commands, the demo and the summary live in :mod:`kafkalog.tools`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from . import KafkalogError
from . import tools as cli
from .tools import summarise


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader went away (``| head``), and the interpreter's
    final flush must not complain about it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _summary_mode(argv: list[str]) -> bool:
    """``kafkalog FILE ...``: every argument names an existing file (not an option or a command)."""
    return bool(argv) and argv[0] not in cli.SUBCOMMANDS and all(
        not a.startswith("-") and os.path.isfile(a) for a in argv
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kafkalog`` entry point; returns the exit status.

    ``broker`` goes to :mod:`kafkalog.broker`; arguments that all name existing files are
    summarised; no argument (or only ``--out DIR``) runs ``kafkalog demo``; anything else goes
    to :func:`kafkalog.tools.main` (subcommands, ``--help``, ``--version``, and the error for an
    unknown command).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "broker":  # `kafkalog broker ...`: see kafkalog.broker
        from .broker import main as broker_main

        return broker_main(argv[1:])
    if not argv:
        return cli.main(["demo"])
    if len(argv) == 2 and argv[0] == "--out":  # the demo's old spelling: kafkalog demo DIR
        return cli.main(["demo", argv[1]])
    if not _summary_mode(argv):
        return cli.main(argv)
    try:
        ok = all([summarise(f) for f in argv])
        sys.stdout.flush()
        return 0 if ok else 1
    except KeyboardInterrupt:
        print("kafkalog: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except (KafkalogError, OSError) as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
