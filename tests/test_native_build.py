"""The compiled core is optional (issue 15): without a compiler the package builds and runs pure;
``KAFKALOG_PUREPYTHON=1`` forces the pure core; ``kafkalog --version`` names the active core."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkalog
from kafkalog import native

ROOT = Path(__file__).resolve().parent.parent
_ROUND_TRIP = (
    "import kafkalog\n"
    "from kafkalog import RecordBatchBuilder\n"
    "b = RecordBatchBuilder(base_offset=5)\n"
    "[b.append(b'k%d' % i, b'v' * i, timestamp=1000 + i) for i in range(300)]\n"
    "rs = [r for batch in b.build().batches() for r in batch]\n"
    "assert [r.offset for r in rs] == list(range(5, 305)), rs[:3]\n"
    "print(kafkalog.core_name())\n"
)


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    full = {**os.environ, **(env or {})}
    done = subprocess.run(args, env=full, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.timeout_guard(120)
def test_without_a_compiler_the_build_succeeds_and_the_core_is_pure(tmp_path: Path) -> None:
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    done = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tmp_path,
        env={**os.environ, "CC": "/bin/false"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing the pure-Python core" in done.stderr
    assert not list((tmp_path / "src" / "kafkalog").glob("_native*"))
    out = _run([sys.executable, "-c", _ROUND_TRIP], env={"PYTHONPATH": str(tmp_path / "src")})
    assert out.strip() == "python (kafkalog._native is not built)"


def test_kafkalog_purepython_forces_the_pure_core() -> None:
    out = _run([sys.executable, "-c", _ROUND_TRIP], env={"KAFKALOG_PUREPYTHON": "1"})
    assert out.strip().startswith("python (")
    version = _run([sys.executable, "-m", "kafkalog", "--version"], env={"KAFKALOG_PUREPYTHON": "1"})
    assert version.splitlines()[1] == "record core: python (forced by KAFKALOG_PUREPYTHON=1)"


@pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")
def test_the_version_names_the_compiled_core_when_it_is_built() -> None:
    env = {k: v for k, v in os.environ.items() if k != native.FORCE_PURE_ENV}
    done = subprocess.run([sys.executable, "-m", "kafkalog", "--version"], env=env, capture_output=True, text=True, check=True)
    assert "record core: native (kafkalog._native" in done.stdout
    with native.use(pure=True):
        assert kafkalog.core_name().startswith("python")
    with native.use(pure=False):
        assert kafkalog.core_name().startswith("native")
