"""A Kafka-protocol broker over kafkalog's partition log (a demonstration and test bed): a single
node, or one replica of a cluster under a coordination layer (``_replica_manager.py``).

Unmodified Kafka clients produce to it, fetch from it and list offsets; every partition is a
:class:`~kafkalog.log.Log` in ``<log dir>/<topic>-<partition>``, so what it stores is what a
Kafka broker would store, and Fetch responses carry record bytes straight from the segment files
with ``sendfile``. Alone it is a single node (node id 0 by default, leader of everything); with
a coordination layer's ``brokers``/``alter_isr`` it leads or follows what it is told. No
transactions, no TLS or SASL; consumer groups have a single-node coordinator (``_coordinator.py``, its requests in ``_group_requests.py``). See ``docs/broker.md``.

Run it with ``kafkalog broker --log-dir DIR [--listen HOST:PORT] [--config key=value ...]``
(:func:`main`), or in-process::

    with Broker("/tmp/kl", port=0) as broker:        # serves from a background thread
        print(broker.bootstrap)                       # "127.0.0.1:40123"

or inside an asyncio program with ``await broker.start()`` / ``await broker.stop()``.

**Requests.** One task per connection reads a request, handles it and writes the reply before
reading the next, so replies go back in request order and one producer's appends stay in order
(Kafka mutes a connection the same way while a request is in flight). Appends (validation,
decompression, fsync under ``flush.messages``), ListOffsets and topic creation run on a thread
pool so they never stall the other connections; Fetch reads run on the event loop because a
read is an index lookup plus a few ``pread`` calls of batch headers, and the record bytes are
sent by the kernel (``loop.sendfile`` after the response headers; :attr:`Broker.sendfile_bytes`
counts them).

The state on disk (topics, the metadata file, the lock, producer id blocks) is described in
``_state.py``; the request handlers live in ``_admin.py``, ``_admin_topics.py``,
``_admin_configs.py`` and ``_data.py``; ``_unsupported.py`` logs what is not served.

**Shutdown.** :meth:`Broker.stop` (SIGTERM or SIGINT under :func:`main`) stops accepting,
answers the requests in flight (a long-polling Fetch returns at once), closes idle connections,
then closes every log cleanly so the next start skips recovery.

Thread safety: a Broker belongs to the event loop that started it; from other threads use only
the read-only properties, :meth:`log`, and the ``run_in_thread``/``shutdown`` pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import LogClosedError
from ..protocol import (
    ApiKey,
    ProtocolError,
    Request,
    ResponseFrame,
    UnsupportedApiError,
    decode_request,
    encode_response,
)
from ._admin import _AdminHandlers
from ._admin_configs import _ConfigAdminHandlers
from ._admin_topics import _TopicAdminHandlers
from ._cluster_requests import _ClusterHandlers
from ._data import _DataHandlers
from ._group_requests import _GroupHandlers
from ._limits import descriptor_limit, open_descriptors
from ._replica_manager import AlterIsrFn, BrokersFn
from ._state import _Close
from ._unsupported import PEER, client_id_of

_log = logging.getLogger(__package__)

#: The 4-byte size that starts every request.
_SIZE_PREFIX = 4
#: The stream reader's buffer limit, and the chunk of a slice copied when sendfile is unavailable.
_STREAM_LIMIT = 1 << 20
_COPY_CHUNK = 1 << 20
#: ApiVersions requests above the newest version are answered in the v0 layout (KIP-511).
_FALLBACK_API_VERSIONS_VERSION = 0
#: How long :meth:`Broker.stop` waits for the requests in flight, in seconds.
_STOP_TIMEOUT = 30
#: The listening socket's backlog (asyncio's default).
_BACKLOG = 100
#: accept() errors that mean "no descriptor or memory for a connection now": the accept loop
#: waits (doubling from the first delay up to the last, in seconds) and tries again.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_ACCEPT_BACKOFF_FIRST = 0.01
_ACCEPT_BACKOFF_MAX = 1.0


class _FdFile:
    """What ``loop.sendfile`` wants of a file: a descriptor (and a ``seek`` it may call)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class _Connection:
    __slots__ = ("peer", "writer", "task", "idle")

    def __init__(self, peer: str, writer: asyncio.StreamWriter, task: asyncio.Task | None) -> None:
        self.peer = peer
        self.writer = writer
        self.task = task
        self.idle = True


class _CloseWithLog(ConnectionError):
    """Close this connection after logging why (a response that cannot be sent whole)."""

    def __init__(self, conn: _Connection, reason: str) -> None:
        _log.error("closing connection from %s: %s", conn.peer, reason)
        super().__init__(reason)


class Broker(_AdminHandlers, _TopicAdminHandlers, _ConfigAdminHandlers, _DataHandlers, _GroupHandlers,
             _ClusterHandlers):
    """A Kafka-protocol broker serving the logs under ``log_dir``.

    Args:
        log_dir: the log directory (created if absent).
        host: the address to bind (loopback by default).
        port: the port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        config: Kafka-named settings (:class:`BrokerConfig`), e.g. ``{"flush.messages": "1"}``.
        brokers: a coordination layer's live brokers (id -> host, port); with ``alter_isr``,
            makes this broker one replica of a cluster (see ``_replica_manager.py``): its
            partitions have no role until :meth:`ReplicaManager.apply_partition_state` gives
            one. Without them the broker is a single node leading everything it hosts.
        alter_isr: a coordination layer's ISR proposal (Kafka's AlterPartition).

    Raises:
        InvalidConfigError: a bad setting.
    """
    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        config: Mapping[str, str] | None = None,
        brokers: BrokersFn | None = None,
        alter_isr: AlterIsrFn | None = None,
    ) -> None:
        super().__init__(log_dir, host=host, port=port, config=config, brokers=brokers, alter_isr=alter_isr)
        self._listeners: list[socket.socket] = []
        self._accept_tasks: set[asyncio.Task] = set()
        self._connection_tasks: set[asyncio.Task] = set()  # strong references (asyncio keeps weak ones)
        self._connections: set[_Connection] = set()
        self._stopped: asyncio.Event | None = None
        self._leaving = False
        self._retention_task: asyncio.Task | None = None
        self._thread: threading.Thread | None = None
        #: Record bytes sent with sendfile (zero copy) since start.
        self.sendfile_bytes = 0
        #: Record bytes that had to be copied because sendfile was not available.
        self.copied_bytes = 0
        #: Requests answered (or, for acks=0, handled) since start.
        self.requests = 0
        self._handlers: dict[int, Callable[[Request], Any]] = {
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.METADATA: self._metadata,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            # the admin APIs (_admin_topics.py, _admin_configs.py)
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.DELETE_RECORDS: self._delete_records,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self._describe_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
            # the group coordinator (_group_requests.py)
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.OFFSET_DELETE: self._offset_delete,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.DELETE_GROUPS: self._delete_groups,
            ApiKey.ELECT_LEADERS: self._elect_leaders,
        }
        if self.config.cluster.enabled:  # in a cluster these go through ZooKeeper (_cluster_requests.py)
            self._handlers.update({
                ApiKey.METADATA: self._cluster_metadata,
                ApiKey.CREATE_TOPICS: self._cluster_create_topics,
                ApiKey.DELETE_TOPICS: self._cluster_delete_topics,
                ApiKey.CREATE_PARTITIONS: self._cluster_create_partitions,
                ApiKey.FIND_COORDINATOR: self._cluster_find_coordinator,
            })

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the log directory (every partition, recovering after a crash) and start
        listening. Returns once connections are accepted.

        Raises:
            KafkalogError: the directory is in use by another broker, or a log cannot be opened.
            OSError: the address cannot be bound.
        """
        self._loop = asyncio.get_running_loop()
        self._admin_lock = asyncio.Lock()
        self._stopped = asyncio.Event()
        self._executor = ThreadPoolExecutor(self.config.num_io_threads, thread_name_prefix="kafkalog-broker")
        try:
            await self._loop.run_in_executor(self._executor, self._load)
            await self._start_groups()
            self._listeners = await self._bind()
            self._port = self._listeners[0].getsockname()[1]
            await self.replica_manager.start()
            await self._start_cluster()  # zookeeper.connect: register, watch, contest the controller
        except BaseException:
            for sock in self._listeners:
                sock.close()
            await self._stop_cluster()
            await self.replica_manager.stop()
            await self._stop_groups()
            await self._loop.run_in_executor(self._executor, self._close_logs)
            self._executor.shutdown(wait=True)
            raise
        for sock in self._listeners:
            self._spawn(self._accept_tasks, self._accept_loop(sock))
        self._retention_task = asyncio.create_task(self._retention_loop())
        self._remove_in_background(self._doomed_dirs)  # "-delete" directories a crash left
        self._doomed_dirs = []
        _log.info("kafkalog broker serving %s on %s (%d topics)", self.log_dir, self.bootstrap, len(self._topics))

    async def stop(self) -> None:
        """Stop accepting, answer the requests in flight, close every connection and every log."""
        if self._stopping or self._leaving or self._loop is None:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._leaving = True
        await self._leave_cluster_leadership()  # controlled shutdown, while still serving
        self._stopping = True
        assert self._executor is not None and self._stopped is not None
        for task in list(self._accept_tasks):
            task.cancel()
        for sock in self._listeners:
            sock.close()
        if self._retention_task is not None:
            self._retention_task.cancel()
        for topic in self._topics.values():
            for partition in topic.partitions:
                partition.notify()  # long polls answer now
        self._release_groups()  # so do joins and syncs waiting for a rebalance
        for conn in list(self._connections):
            if conn.idle and conn.task is not None:
                conn.task.cancel()
        busy = [c.task for c in self._connections if c.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=_STOP_TIMEOUT)
        await self._stop_groups()
        await self.replica_manager.stop()  # the fetchers stop writing before the logs close
        await self._loop.run_in_executor(self._executor, self._close_logs)
        await self._stop_cluster()  # the session closes: the registration vanishes
        self._executor.shutdown(wait=True)
        self._stopped.set()
        _log.info("kafkalog broker stopped; every log closed")

    async def wait_stopped(self) -> None:
        """Return once :meth:`stop` has finished."""
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()

    def run_in_thread(self) -> Broker:
        """Start the broker on its own event loop in a daemon thread; return once it listens.

        Raises:
            Whatever :meth:`start` raised.
        """
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            async def main() -> None:
                try:
                    await self.start()
                except BaseException as e:
                    failure.append(e)
                    return
                finally:
                    ready.set()
                await self.wait_stopped()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, name=f"kafkalog-broker-{self.log_dir.name}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        return self

    def shutdown(self, timeout: float | None = 60) -> None:
        """Stop a broker started with :meth:`run_in_thread` and wait for its thread."""
        if self._thread is None or self._loop is None:
            return
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(timeout)
            self._thread.join(timeout)

    def __enter__(self) -> Broker:
        return self.run_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- connections ------------------------------------------------------------------------------

    async def _bind(self) -> list[socket.socket]:
        """Listening sockets on every address of the host (as ``asyncio.start_server`` binds),
        all on the port the first one got when the port asked for is 0."""
        assert self._loop is not None
        infos = await self._loop.getaddrinfo(
            self._host or None, self._requested_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        listeners: list[socket.socket] = []
        port = self._requested_port
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                listeners.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                sock.listen(_BACKLOG)
                sock.setblocking(False)
                port = sock.getsockname()[1]
        except BaseException:
            for sock in listeners:
                sock.close()
            raise
        return listeners

    @staticmethod
    def _spawn(tasks: set[asyncio.Task], coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _accept_loop(self, sock: socket.socket) -> None:
        """Accept connections until :meth:`stop`. Out of descriptors (EMFILE, ENFILE) or
        memory, accept() fails on every try while the listening socket stays readable: the
        loop then waits, doubling the delay up to a second, warns once a minute at most (no
        traceback), and serves again as soon as descriptors free up."""
        assert self._loop is not None
        delay = 0.0
        while not self._stopping:
            try:
                conn, _ = await self._loop.sock_accept(sock)
            except OSError as e:
                if self._stopping:
                    return
                if e.errno in _OUT_OF_RESOURCES:
                    if not delay:
                        self._warn_accept(
                            "cannot accept connections: %s (%s of %s descriptors open); retrying until "
                            "descriptors free up", e.strerror, open_descriptors(), descriptor_limit(),
                        )
                    delay = min(_ACCEPT_BACKOFF_MAX, max(_ACCEPT_BACKOFF_FIRST, delay * 2))
                    await asyncio.sleep(delay)
                else:  # ECONNABORTED and the like: that one connection is gone
                    _log.debug("accept failed: %s", e)
                continue
            if delay:
                _log.info("accepting connections again")
                delay = 0.0
            self._spawn(self._connection_tasks, self._serve_socket(conn))

    async def _serve_socket(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=_STREAM_LIMIT)
        except OSError as e:
            conn.close()
            _log.debug("dropping a connection: %s", e)
            return
        await self._on_connection(reader, writer)

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = _Connection(f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer), writer,
                           asyncio.current_task())
        if self._stopping:
            writer.close()
            return
        self._connections.add(conn)
        PEER.set(conn.peer)  # this connection's task only (see _unsupported.py)
        max_size = self.config.socket_request_max_bytes
        try:
            while not self._stopping:
                conn.idle = True
                try:
                    head = await reader.readexactly(_SIZE_PREFIX)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        _log.warning("closing connection from %s: it ended inside a request size", conn.peer)
                    break
                size = int.from_bytes(head, "big", signed=True)
                if size < 0 or size > max_size:
                    # Kafka's InvalidReceiveException: the connection goes, nothing is allocated.
                    _log.warning("closing connection from %s: request size %d outside [0, %d] "
                                 "(socket.request.max.bytes)", conn.peer, size, max_size)
                    break
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    _log.warning("closing connection from %s: it ended %d bytes into a %d-byte request",
                                 conn.peer, len(e.partial), size)
                    break
                conn.idle = False
                try:
                    await self._handle(conn, frame)
                except ProtocolError as e:
                    _log.warning("closing connection from %s: %s", conn.peer, e)
                    break
                except _Close:
                    break
        except (ConnectionError, OSError) as e:
            _log.debug("connection from %s lost: %s", conn.peer, e)
        except asyncio.CancelledError:
            pass  # stop() closes idle connections
        except Exception:  # a bug must cost one connection, never the broker
            _log.exception("closing connection from %s after an unexpected error", conn.peer)
        finally:
            self._connections.discard(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, conn: _Connection, frame: bytes) -> None:
        try:
            request = decode_request(frame)
        except UnsupportedApiError as e:
            # Kafka closes the connection; the log says so once per client, not per request.
            name = ApiKey(e.api_key).name if e.api_key in ApiKey._value2member_map_ else f"API key {e.api_key}"
            self._unsupported(client_id_of(frame), f"{name} v{e.api_version}",
                              f"{e.reason}; the connection is closed, as Kafka closes it")
            raise _Close() from None
        self.requests += 1
        handler = self._handlers[request.api_key]
        body = await handler(request)
        if body is None:  # acks=0: no response
            return
        version = _FALLBACK_API_VERSIONS_VERSION if request.unsupported_api_versions else request.api_version
        response = encode_response(request.api_key, version, request.correlation_id, body)
        await self._send(conn, response)

    async def _send(self, conn: _Connection, response: ResponseFrame) -> None:
        writer = conn.writer
        for part in response.parts:
            if isinstance(part, bytes):
                writer.write(part)
            else:
                await self._sendfile(conn, part)
        await writer.drain()

    async def _sendfile(self, conn: _Connection, part: Any) -> None:
        """Send a file slice with sendfile; the descriptor is duplicated first so a segment the
        log closes meanwhile (retention, shutdown) cannot hand its number to another file."""
        assert self._loop is not None
        size = part.size_in_bytes
        try:
            fd = os.dup(part.fileno())
        except LogClosedError as e:
            raise _CloseWithLog(conn, f"the segment was closed before its bytes were sent ({e})") from None
        try:
            if os.fstat(fd).st_size < part.end:
                raise _CloseWithLog(conn, f"{part.path} shrank below {part.end} bytes before it was sent")
            try:
                sent = await self._loop.sendfile(conn.writer.transport, _FdFile(fd), part.start, size, fallback=False)
            except asyncio.SendfileNotAvailableError:
                sent = await self._copy_slice(conn, fd, part.start, size)
                self.copied_bytes += sent
            except RuntimeError as e:  # "Transport is closing": the client went away
                raise ConnectionError(str(e)) from None
            else:
                self.sendfile_bytes += sent
            if sent != size:
                raise _CloseWithLog(conn, f"{part.path} ended after {sent} of {size} bytes of a response")
        finally:
            os.close(fd)

    async def _copy_slice(self, conn: _Connection, fd: int, start: int, size: int) -> int:
        done = 0
        while done < size:
            data = os.pread(fd, min(_COPY_CHUNK, size - done), start + done)
            if not data:
                break
            conn.writer.write(data)
            await conn.writer.drain()
            done += len(data)
        return done
