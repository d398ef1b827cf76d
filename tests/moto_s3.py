"""A real S3 API server for the tests: moto's standalone server on 127.0.0.1 (a free port),
with a request log taken at the WSGI layer -- method, key, ``Range`` header and response bytes
of every request, from every process (the test's, Spark's python workers, the CLI's) -- so
tests assert on the bytes actually fetched, not on what the client says it fetched.

    def test_x(s3):                      # the session's server, log cleared
        s3.put_dir(local, "s3://bucket/logs")
        ... read with storage_options=s3.options ...
        assert s3.bytes_got("/bucket/logs/orders-0/00000000000000000000.log") < ...
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    bytes: int = 0  # body bytes sent back
    sent: int = 0  # body bytes of the request (a PUT's upload)
    copy_source: str | None = None  # a server-side copy's source (CopyObject)


class _Counting:
    """WSGI middleware: records each request and the body bytes sent back."""

    def __init__(self, app, log: list[Request], lock: threading.Lock) -> None:
        self.app, self.log, self.lock = app, log, lock

    def __call__(self, environ, start_response):
        request = Request(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("HTTP_RANGE"),
                          sent=int(environ.get("CONTENT_LENGTH") or 0),
                          copy_source=environ.get("HTTP_X_AMZ_COPY_SOURCE"))
        with self.lock:
            self.log.append(request)
        for chunk in self.app(environ, start_response):
            request.bytes += len(chunk)
            yield chunk


class S3Server:
    """The running server: ``endpoint``, ``options`` (fsspec storage options for it), the
    request ``log``."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        self.log: list[Request] = []
        self._lock = threading.Lock()
        with socket.socket() as probe:  # a free port on the loopback
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        app = _Counting(DomainDispatcherApplication(create_backend_app), self.log, self._lock)
        self._server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
        self.endpoint = f"http://127.0.0.1:{port}"
        self.options = {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing",
                        "client_kwargs": {"region_name": "us-east-1"}}
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=30)
        self._server.server_close()

    @property
    def fs(self):
        import s3fs

        return s3fs.S3FileSystem(**self.options)

    def make_bucket(self, name: str) -> None:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        if name not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
            client.create_bucket(Bucket=name)

    def put_dir(self, local: str | os.PathLike, url: str) -> None:
        """Upload the tree ``local`` to ``url`` (``s3://bucket/prefix``)."""
        fs = self.fs
        self.make_bucket(url[len("s3://"):].split("/")[0])
        root = Path(local)
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            fs.put_file(str(file), url[len("s3://"):] + "/" + file.relative_to(root).as_posix())
        fs.invalidate_cache()

    def clear(self) -> None:
        with self._lock:
            self.log.clear()

    def gets(self, suffix: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.log if r.method == "GET" and r.path.endswith(suffix) and "." in r.path.rsplit("/", 1)[-1]]

    def bytes_got(self, suffix: str = "") -> int:
        """Body bytes of the GETs of files whose key ends with ``suffix``."""
        return sum(r.bytes for r in self.gets(suffix))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3(s3_server: S3Server) -> S3Server:
    s3_server.clear()
    return s3_server
