"""``kafkalog cluster up DIR --brokers N``: a local cluster for trying things out.

Starts a ZooKeeper server (Debian's ``zookeeper`` package; its data in ``DIR/zookeeper``) unless
``--zookeeper HOST:PORT`` names a running one, then N ``kafkalog broker`` processes (ids 1..N,
log directories ``DIR/broker-<id>``, logs in ``DIR/broker-<id>.log``) on free loopback ports,
prints the bootstrap string, and on Ctrl-C or SIGTERM stops the brokers (SIGTERM: a controlled
shutdown each, then SIGKILL after a bounded wait) and ZooKeeper. Running it again on the same
DIR brings the same cluster back (topics and data are kept; the ports are new).
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import KafkalogError
from ._zookeeper import ZooKeeperServer, find_zookeeper

#: How long a broker may take to print its "listening on" line, and to stop, in seconds.
_START_S = 60
_STOP_S = 60
#: How often the supervisor looks at its brokers while it waits for Ctrl-C, in seconds.
_WATCH_S = 1.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkalog cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="start ZooKeeper and N brokers; stop them all on Ctrl-C")
    up.add_argument("dir", metavar="DIR", help="where ZooKeeper's data and every broker's log directory live")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    up.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                    help="use this ZooKeeper instead of starting one")
    up.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every broker (repeatable)")
    return parser


class _BrokerChild:
    def __init__(self, broker_id: int, directory: Path, settings: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        self.address = ""

    def start(self) -> None:
        args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(self.directory),
                "--listen", "127.0.0.1:0"]
        for key, value in self.settings.items():
            args += ["--config", f"{key}={value}"]
        with open(self.directory.with_suffix(".log"), "ab") as log:
            # its own process group: Ctrl-C in the terminal reaches the supervisor only, which
            # then stops each broker in order
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], _START_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.kill()
            raise KafkalogError(f"broker {self.broker_id} did not start; see {self.directory.with_suffix('.log')}")
        self.address = line.split()[-1]

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_or_kill(self, deadline: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(_STOP_S)


def main(argv: Sequence[str] | None = None) -> int:
    """``kafkalog cluster up DIR [--brokers N] [--zookeeper HOST:PORT] [--config k=v ...]``;
    0 after a clean stop, 1 when something could not start."""
    args = _parser().parse_args(None if argv is None else list(argv))
    if args.brokers < 1:
        print("kafkalog cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    zookeeper: ZooKeeperServer | None = None
    brokers: list[_BrokerChild] = []
    try:
        connect = args.zookeeper
        if connect is None:
            if find_zookeeper() is None:
                print("kafkalog cluster: ZooKeeper is not installed (apt-get install zookeeper, or set "
                      "ZOOKEEPER_HOME); or pass --zookeeper HOST:PORT", file=sys.stderr)
                return 1
            zookeeper = ZooKeeperServer(root / "zookeeper", port=_saved_port(root))
            zookeeper.start()
            (root / "zookeeper" / "port").write_text(f"{zookeeper.port}\n")
            connect = zookeeper.connect
        factor = str(min(3, args.brokers))
        common = {"zookeeper.connect": connect, "default.replication.factor": factor,
                  "offsets.topic.replication.factor": factor}
        for item in args.config:
            key, _, value = item.partition("=")
            common[key.strip()] = value
        for broker_id in range(1, args.brokers + 1):
            child = _BrokerChild(broker_id, root / f"broker-{broker_id}",
                                 {**common, "broker.id": str(broker_id)})
            brokers.append(child)
            child.start()
        print(f"zookeeper.connect={connect}", flush=True)
        print(f"bootstrap.servers={','.join(b.address for b in brokers)}", flush=True)
        print("press Ctrl-C to stop the cluster", file=sys.stderr, flush=True)
        while not stop.wait(_WATCH_S):  # until Ctrl-C/SIGTERM; reports a broker that exits
            for b in brokers:
                if b.proc is not None and b.proc.poll() is not None and b.address:
                    print(f"broker {b.broker_id} exited with status {b.proc.returncode}; see "
                          f"{b.directory.with_suffix('.log')}", file=sys.stderr, flush=True)
                    b.address = ""
        return 0
    except (KafkalogError, OSError) as e:
        print(f"kafkalog cluster: {e}", file=sys.stderr)
        return 1
    finally:
        for b in brokers:
            b.terminate()
        deadline = time.monotonic() + _STOP_S
        for b in brokers:
            b.wait_or_kill(deadline)
        if zookeeper is not None:
            zookeeper.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if brokers:
            print("cluster stopped", file=sys.stderr, flush=True)


def _saved_port(root: Path) -> int:
    """The port ZooKeeper had last time (so a restarted cluster keeps its zookeeper.connect), or 0."""
    try:
        port = int((root / "zookeeper" / "port").read_text())
    except (OSError, ValueError):
        return 0
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return 0
    return port if 0 < port < 65536 else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
