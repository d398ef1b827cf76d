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

import sys
from collections.abc import Sequence

from . import tools as cli


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kafkalog`` entry point; returns the exit status.

    No argument (or only ``--out DIR``) runs ``kafkalog demo``; anything else goes to
    :func:`kafkalog.tools.main` (the subcommands, ``broker`` included, the summary of segment
    files, ``--help``, ``--version``, and the error for an unknown command).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        return cli.main(["demo"])
    if len(argv) == 2 and argv[0] == "--out":  # the demo's old spelling: kafkalog demo DIR
        return cli.main(["demo", argv[1]])
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
