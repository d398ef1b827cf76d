"""Zero-copy transfer from a file to a socket with ``os.sendfile``, with a plain fallback.

``os.sendfile`` may write less than asked (a signal, a full socket buffer), so the transfer
loops; on a non-blocking socket that would block it returns what was sent so far, as Kafka's
``FileRecords.writeTo`` does, and the caller retries with the rest. Where sendfile cannot be
used (no ``fileno()``, a platform or descriptor that does not support it) the bytes are read
and sent in chunks.
"""

from __future__ import annotations

import errno
import io
import os

_CHUNK = 1 << 20
# Errors meaning "sendfile does not apply to these descriptors", not "the transfer failed".
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK, errno.EBADF, errno.ESPIPE}


def _fileno(dest) -> int | None:
    try:
        return dest.fileno()
    except (AttributeError, io.UnsupportedOperation, OSError):
        return None


def transfer(dest, fd: int, offset: int, count: int) -> int:
    """Send ``count`` bytes of file descriptor ``fd`` from ``offset`` to ``dest``.

    Args:
        dest: a socket, a file object, or anything with ``sendall`` or ``write``.
        fd: the source file descriptor.
        offset: absolute position in the source file.
        count: bytes to send.

    Returns:
        Bytes sent: ``count``, or less if the file ended early or a non-blocking ``dest``
        would block.
    """
    sent = 0
    out = _fileno(dest)
    if out is not None and hasattr(os, "sendfile"):
        try:
            while sent < count:
                n = os.sendfile(out, fd, offset + sent, count - sent)
                if n == 0:
                    return sent
                sent += n
            return sent
        except BlockingIOError:
            return sent
        except OSError as e:
            if e.errno not in _UNSUPPORTED or sent:
                raise
    return sent + _copy(dest, fd, offset + sent, count - sent)


def _copy(dest, fd: int, offset: int, count: int) -> int:
    write = getattr(dest, "sendall", None) or dest.write
    done = 0
    while done < count:
        data = os.pread(fd, min(_CHUNK, count - done), offset + done)
        if not data:
            break
        write(data)
        done += len(data)
    return done
