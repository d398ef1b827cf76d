"""Running a ZooKeeper server for a local cluster (``kafkalog cluster up``) and for the tests:
Debian's ``zookeeper`` package's ``zkServer.sh start-foreground`` with a config of our own
(data in a directory we choose, loopback only, no admin HTTP server, ``ruok`` allowed)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..errors import KafkalogError

#: Where Debian's and the Apache tarball's launchers live, and ``$ZOOKEEPER_HOME``.
_CANDIDATES = ("/usr/share/zookeeper/bin/zkServer.sh", "/opt/zookeeper/bin/zkServer.sh")
_POLL_S = 0.1
_STOP_S = 10


def find_zookeeper() -> str | None:
    """The path of ``zkServer.sh``, or None when ZooKeeper is not installed."""
    home = os.environ.get("ZOOKEEPER_HOME")
    candidates = ((f"{home}/bin/zkServer.sh",) if home else ()) + _CANDIDATES
    for path in candidates:
        if os.access(path, os.X_OK) and shutil.which("java"):
            return path
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ruok(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a ZooKeeper server answers ``imok`` to ZooKeeper's ``ruok`` command."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper server on 127.0.0.1 with its data under ``directory``.

    Args:
        directory: its data directory (created), config file and log.
        port: the client port (0: a free one).
        tick_ms: ZooKeeper's tickTime (sessions may last 2 to 20 ticks... up to maxSessionTimeout).
    """

    def __init__(self, directory: str | os.PathLike, *, port: int = 0, tick_ms: int = 500) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self._process: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect``."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> None:
        """Start the server and wait (bounded) until it answers ``ruok``.

        Raises:
            KafkalogError: ZooKeeper is not installed, or did not answer in time.
        """
        script = find_zookeeper()
        if script is None:
            raise KafkalogError("ZooKeeper is not installed (apt-get install zookeeper, or set ZOOKEEPER_HOME)")
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_ms}\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n"
            f"maxSessionTimeout={max(60_000, 20 * self.tick_ms)}\n"
        )
        env = {**os.environ, "ZOO_LOG_DIR": str(self.directory), "ZOOCFGDIR": str(self.directory)}
        with open(self.directory / "zookeeper.out", "ab") as log:
            self._process = subprocess.Popen([script, "start-foreground", str(config)], stdout=log,
                                             stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not ruok("127.0.0.1", self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise KafkalogError(f"ZooKeeper did not start on {self.connect} within {timeout_s:g} s; "
                                    f"see {self.directory / 'zookeeper.out'}")
            time.sleep(_POLL_S)

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after a bounded wait)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(_STOP_S)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
