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


class BrokerChild:
    """One ``kafkalog broker`` subprocess on a free loopback port (log directory ``directory``,
    its stderr appended to ``directory.log``); :meth:`start` again after a stop or a kill brings
    the same broker back on a new port."""

    def __init__(self, broker_id: int, directory: Path, settings: dict[str, str], *,
                 log_level: str = "INFO") -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.settings = settings
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.address = ""

    @property
    def log_path(self) -> Path:
        """Where the broker's stderr goes."""
        return self.directory.with_suffix(".log")

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the process and wait (bounded) for its ``listening on`` line.

        Raises:
            KafkalogError: it exited or said nothing in time (its log named).
        """
        args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(self.directory),
                "--listen", "127.0.0.1:0", "--log-level", self.log_level]
        for key, value in self.settings.items():
            args += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            # its own process group: Ctrl-C in the terminal reaches the supervisor only, which
            # then stops each broker in order
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], _START_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.kill()
            raise KafkalogError(f"broker {self.broker_id} did not start; see {self.log_path}")
        self.address = line.split()[-1]

    def terminate(self) -> None:
        """SIGTERM: a controlled shutdown (returns at once; see :meth:`wait_or_kill`)."""
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)

    def wait_or_kill(self, deadline: float) -> None:
        """Wait for the exit until ``deadline`` (``time.monotonic()``), then SIGKILL."""
        if self.proc is None:
            return
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.alive:
            self.proc.kill()
            self.proc.wait(_STOP_S)
        self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None and self.proc.poll() is not None:
            self.proc.stdout.close()


class LocalCluster:
    """A ZooKeeper server (unless ``zookeeper_connect`` names a running one; its data in
    ``root/zookeeper``) and brokers 1..N (``root/broker-<id>``), all on loopback: what
    ``kafkalog cluster up`` runs, and what the cluster benchmark starts.

    Args:
        root: where ZooKeeper's data and the brokers' log directories live (created).
        brokers: how many brokers.
        zookeeper_connect: a running ZooKeeper to use instead of starting one.
        config: settings for every broker, over the defaults (replication factors of
            ``min(3, brokers)``).
        zookeeper_port: the port for the ZooKeeper started here (0: a free one).
        log_level: the brokers' stderr logging level.
    """

    def __init__(self, root: Path, brokers: int = 3, *, zookeeper_connect: str | None = None,
                 config: dict[str, str] | None = None, zookeeper_port: int = 0, log_level: str = "INFO") -> None:
        self.root = Path(root)
        self.count = brokers
        self.connect = zookeeper_connect or ""
        self.config = dict(config or {})
        self.zookeeper_port = zookeeper_port
        self.log_level = log_level
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: list[BrokerChild] = []

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` of the brokers now running."""
        return ",".join(b.address for b in self.brokers if b.alive and b.address)

    def start(self) -> None:
        """Start ZooKeeper (if needed) and every broker, in order; on a failure stop what started.

        Raises:
            KafkalogError: ZooKeeper is not installed, or something did not start.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            if not self.connect:
                if find_zookeeper() is None:
                    raise KafkalogError("ZooKeeper is not installed (apt-get install zookeeper, or set "
                                        "ZOOKEEPER_HOME); or pass --zookeeper HOST:PORT")
                self.zookeeper = ZooKeeperServer(self.root / "zookeeper", port=self.zookeeper_port)
                self.zookeeper.start()
                (self.root / "zookeeper" / "port").write_text(f"{self.zookeeper.port}\n")
                self.connect = self.zookeeper.connect
            factor = str(min(3, self.count))
            common = {"zookeeper.connect": self.connect, "default.replication.factor": factor,
                      "offsets.topic.replication.factor": factor, **self.config}
            for broker_id in range(1, self.count + 1):
                child = BrokerChild(broker_id, self.root / f"broker-{broker_id}",
                                    {**common, "broker.id": str(broker_id)}, log_level=self.log_level)
                self.brokers.append(child)
                child.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM to every broker (a controlled shutdown each), SIGKILL after a bounded wait,
        then stop the ZooKeeper started here."""
        for b in self.brokers:
            b.terminate()
        deadline = time.monotonic() + _STOP_S
        for b in self.brokers:
            b.wait_or_kill(deadline)
        if self.zookeeper is not None:
            self.zookeeper.stop()


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
    config = {}
    for item in args.config:
        key, _, value = item.partition("=")
        config[key.strip()] = value
    cluster = LocalCluster(root, args.brokers, zookeeper_connect=args.zookeeper, config=config,
                           zookeeper_port=_saved_port(root))
    started = False
    try:
        cluster.start()
        started = True
        print(f"zookeeper.connect={cluster.connect}", flush=True)
        print(f"bootstrap.servers={cluster.bootstrap}", flush=True)
        print("press Ctrl-C to stop the cluster", file=sys.stderr, flush=True)
        while not stop.wait(_WATCH_S):  # until Ctrl-C/SIGTERM; reports a broker that exits
            for b in cluster.brokers:
                if b.proc is not None and b.proc.poll() is not None and b.address:
                    print(f"broker {b.broker_id} exited with status {b.proc.returncode}; see "
                          f"{b.log_path}", file=sys.stderr, flush=True)
                    b.address = ""
        return 0
    except (KafkalogError, OSError) as e:
        print(f"kafkalog cluster: {e}", file=sys.stderr)
        return 1
    finally:
        if started:
            cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if started:
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
