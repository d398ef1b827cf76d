"""Which record core runs: the compiled ``kafkalog._native`` or the pure-Python reference.

The per-record loops (the v2 record walk, decoding into columns and records, the append
pipeline, the cleaner's key digests and keep/drop pass) exist twice: in the pure-Python modules,
which are the reference, and in the C extension ``kafkalog._native`` built from ``src/native/``.
The extension is optional at build time (no compiler: the package is pure-Python) and at import;
``KAFKALOG_PUREPYTHON=1`` in the environment forces the pure core.

The compiled functions never word an error: on malformed input they raise ``_native.Invalid``
and the caller re-runs the pure code, which raises kafkalog's typed, positioned error. Callers
read :data:`ext` at call time (``native.ext``), so :func:`use` can switch cores in tests.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from types import ModuleType

#: Set to anything but ``""``/``"0"`` to run the pure-Python core even when the extension is built.
FORCE_PURE_ENV = "KAFKALOG_PUREPYTHON"

_forced = os.environ.get(FORCE_PURE_ENV, "").strip() not in ("", "0")

_compiled: ModuleType | None
try:
    _compiled = importlib.import_module("._native", __package__)
except ModuleNotFoundError:  # installed without a compiler, or KAFKALOG_NO_EXTENSION=1
    _compiled = None
    _why_not = "kafkalog._native is not built"
except ImportError as e:  # built for another interpreter, or a broken build
    _compiled = None
    _why_not = f"kafkalog._native does not import: {e}"
else:
    _why_not = ""

#: The compiled module when it is in use, else ``None`` (callers then take the pure path).
ext: ModuleType | None = None if _forced else _compiled


class _NoInvalid(Exception):
    """Stands in for ``_native.Invalid`` when there is no extension: never raised."""


#: The exception the compiled functions raise for malformed input (catch it, then re-run pure).
Invalid: type[Exception] = _compiled.Invalid if _compiled is not None else _NoInvalid


def available() -> bool:
    """Whether the compiled core was built and imports (whatever :func:`use` selected)."""
    return _compiled is not None


def core_name() -> str:
    """One line naming the active core, for ``kafkalog --version`` and bug reports."""
    if ext is not None:
        return "native (kafkalog._native" + (", sanitized)" if ext.SANITIZED else ")")
    if _compiled is not None:
        return f"python (forced by {FORCE_PURE_ENV}=1)" if _forced else "python (selected by native.use)"
    return f"python ({_why_not})"


@contextlib.contextmanager
def use(*, pure: bool) -> Iterator[None]:
    """Run the body on the pure core (``pure=True``) or the compiled one (tests, benchmarks)."""
    global ext
    if not pure and _compiled is None:
        raise RuntimeError(f"the compiled core is not available: {_why_not}")
    saved = ext
    ext = None if pure else _compiled
    try:
        yield
    finally:
        ext = saved
