"""``kafkalog broker``: run a :class:`~kafkalog.broker.Broker` from the command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from ..errors import KafkalogError
from . import _server
from ._limits import raise_descriptor_limit
from ._server import Broker

_MAX_PORT = 65535
_DEFAULT_LISTEN = ("127.0.0.1", 9092)


def _parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > _MAX_PORT:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _parse_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, not {text!r}")
    return key.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    """``kafkalog broker --log-dir DIR [--listen HOST:PORT] [--config key=value ...]``.

    Raises the soft open-file limit to the hard one first (as the JVM does for Kafka). Prints
    ``listening on HOST:PORT`` (one line, flushed) once clients can connect, logs to stderr,
    and on SIGTERM or SIGINT shuts down cleanly and returns 0; 1 on a startup error.
    """
    parser = argparse.ArgumentParser(prog="kafkalog broker", description=_server.__doc__.split("\n\n")[0])
    parser.add_argument("--log-dir", required=True, help="the log directory (one <topic>-<partition> per partition)")
    parser.add_argument("--listen", type=_parse_listen, default=_DEFAULT_LISTEN,
                        help="HOST:PORT to listen on (default 127.0.0.1:9092; port 0 picks a free one)")
    parser.add_argument("--config", type=_parse_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka broker or topic setting, e.g. flush.messages=1 (repeatable)")
    parser.add_argument("--log-level", default="INFO", help="logging level for stderr (default INFO)")
    args = parser.parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raised = raise_descriptor_limit()
    if raised is not None:
        logging.getLogger(__package__).info("raised the open-file limit (RLIMIT_NOFILE) from %d to %d", *raised)
    host, port = args.listen
    try:
        broker = Broker(args.log_dir, host=host, port=port, config=dict(args.config))
    except KafkalogError as e:
        print(f"kafkalog broker: {e}", file=sys.stderr)
        return 1

    async def serve() -> int:
        try:
            await broker.start()
        except (KafkalogError, OSError) as e:
            print(f"kafkalog broker: {e}", file=sys.stderr)
            return 1
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
        print(f"listening on {_address(host, broker.port)}", flush=True)
        await broker.wait_stopped()
        return 0

    return asyncio.run(serve())


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
