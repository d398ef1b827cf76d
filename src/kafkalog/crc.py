"""Checksums: CRC-32 (magic 0 and 1 messages) and CRC-32C (v2 record batches).

CRC-32 is zlib's (the standard library's C code). CRC-32C has two backends behind one function:

- ``crc32c``: the ``crc32c`` package, which uses the SSE4.2 ``crc32`` instruction (or ARMv8 CRC)
  where the CPU has it and accepts any buffer (bytes, memoryview slices) without copying. This
  is the default: it measured about 40x faster than crcmod on 16 KiB buffers here
  (see docs/benchmarks.md).
- ``crcmod``: crcmod's table-driven C extension, the portable fallback.

Set ``KAFKALOG_CRC32C=crcmod`` (or ``crc32c``) in the environment to force one; the tests run
over both.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable

Buffer = bytes | bytearray | memoryview


def crc32(data: Buffer) -> int:
    """CRC-32 (IEEE, as zlib and Java's ``java.util.zip.CRC32``) of ``data`` as an unsigned int."""
    return zlib.crc32(data)


def _crcmod_backend() -> Callable[[Buffer], int]:
    import crcmod.predefined

    return crcmod.predefined.mkCrcFun("crc-32c")


def _crc32c_backend() -> Callable[[Buffer], int]:
    import crc32c as _crc32c_module

    return _crc32c_module.crc32c


_FACTORIES: dict[str, Callable[[], Callable[[Buffer], int]]] = {
    "crc32c": _crc32c_backend,
    "crcmod": _crcmod_backend,
}


def available_backends() -> dict[str, Callable[[Buffer], int]]:
    """Every CRC-32C backend that imports on this machine, by name (for tests and benchmarks)."""
    found = {}
    for name, factory in _FACTORIES.items():
        try:
            found[name] = factory()
        except ImportError:
            continue
    return found


def _choose() -> tuple[str, Callable[[Buffer], int]]:
    forced = os.environ.get("KAFKALOG_CRC32C", "").strip().lower()
    if forced:
        if forced not in _FACTORIES:
            raise ImportError(f"KAFKALOG_CRC32C={forced!r}: expected one of {sorted(_FACTORIES)}")
        return forced, _FACTORIES[forced]()
    for name in ("crc32c", "crcmod"):
        try:
            return name, _FACTORIES[name]()
        except ImportError:
            continue
    raise ImportError('no CRC-32C backend: pip install crc32c (or crcmod)')


#: The chosen backend's name, and ``crc32c(data) -> int``: CRC-32C (Castagnoli) as an unsigned int.
BACKEND, crc32c = _choose()
