"""Every compaction test runs on both record cores: the compiled ``kafkalog._native`` (when it
is built) and the pure-Python reference (``native.use(pure=...)``). The cores must give the same
cleaned bytes and the same figures; ``test_cleaner_native.py`` compares them directly."""

from __future__ import annotations

import pytest

from kafkalog import native

#: Both cores, unless the compiled one is not built or KAFKALOG_PUREPYTHON=1 forces the pure one.
CORES = ["native", "pure"] if native.ext is not None else ["pure"]


@pytest.fixture(scope="module", params=CORES, autouse=True)
def core(request) -> str:
    """The record core the module's tests run on (module-scoped, so hypothesis tests may use it)."""
    with native.use(pure=request.param == "pure"):
        yield request.param
