"""A real Azure Blob Storage API for the tests: Azurite (Microsoft's emulator, from npm) on
127.0.0.1 on a free port, in memory, with adlfs as the client -- a store without a conditional
create in kafkalog's terms, so the writer's optimistic offset claims run against it.

    def test_x(azure):                  # the session's emulator
        azure.make_container("box")
        ... write or read "abfs://box/logs" with storage_options=azure.options ...

Azurite is installed with npm into the node cache directory of the kafkajs tests (once);
without node/npm, or without adlfs, the tests that use it are skipped.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import npm_modules, scaled

AZURITE_VERSION = "3.35.0"
# Azurite's documented development account (a fixed, public key).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_binary() -> Path | None:
    """``azurite-blob`` installed with npm into the node cache directory (once), or None."""
    modules = npm_modules("azurite", AZURITE_VERSION)
    return None if modules is None else modules / ".bin" / "azurite-blob"


class Azurite:
    """The running emulator: ``options`` (adlfs storage options for it) and ``fs``."""

    def __init__(self, binary: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.workspace = tempfile.mkdtemp(prefix="kafkalog-azurite-")
        self.proc = subprocess.Popen(
            [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
             "--skipApiVersionCheck", "--loose", "--silent"],
            cwd=self.workspace, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # in memory; cwd for anything else
        deadline = time.monotonic() + scaled(30)
        while True:  # bounded: until the port answers, the process exits, or the deadline
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("Azurite did not start") from None
                time.sleep(0.05)
        self.options = {"connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};")}

    @property
    def fs(self):
        import adlfs

        return adlfs.AzureBlobFileSystem(**self.options)

    def make_container(self, name: str) -> None:
        fs = self.fs
        if not fs.exists(name):
            fs.mkdir(name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(scaled(10))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(scaled(10))
        shutil.rmtree(self.workspace, ignore_errors=True)


@pytest.fixture(scope="session")
def azure() -> Iterator[Azurite]:
    pytest.importorskip("adlfs")
    binary = azurite_binary()
    if binary is None:
        pytest.skip("needs node and npm (Azurite is installed from npm)")
    server = Azurite(binary)
    try:
        yield server
    finally:
        server.stop()
