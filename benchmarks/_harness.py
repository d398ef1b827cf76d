"""Helpers shared by the benchmark scripts: sizes, plain-text tables, CPU facts."""

from __future__ import annotations

import platform
import sys
from pathlib import Path


def parse_size(s: str) -> int:
    """``"64M"``, ``"1G"``, ``"512KiB"`` or a plain number of bytes."""
    s = s.strip().upper().replace("IB", "").replace("B", "")
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf):
            s, mult = s[:-1], m
            break
    return int(float(s) * mult)


def table(headers, rows, aligns=None, *, left_columns: int = 1) -> str:
    """A plain-text table; the first ``left_columns`` columns align left, the rest right."""
    cols = list(zip(*([headers] + rows))) if rows else [[h] for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]
    aligns = aligns or (["<"] * left_columns + [">"] * (len(headers) - left_columns))

    def line(vals):
        return "  ".join(f"{str(v):{a}{w}}" for v, a, w in zip(vals, aligns, widths)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def cpu_facts(flag_names=("sse4_2", "pclmulqdq", "avx2", "avx512f", "vpclmulqdq")) -> tuple[str, str]:
    """(CPU model, the named CPU flags present) from /proc/cpuinfo."""
    cpu, flags = "?", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu == "?":
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    present = set(line.split(":", 1)[1].split())
                    flags = " ".join(x for x in flag_names if x in present)
    except OSError:
        cpu = platform.processor() or "?"
    return cpu, flags


def git_describe(where: Path) -> str:
    """The commit (and whether the tree is dirty) of the checkout holding ``where``."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return "?" if not head else head + (" (src modified)" if dirty else "")


NOTES: list[str] = []  # things that went wrong or were skipped, printed at the end of a run


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"  note: {msg}", file=sys.stderr, flush=True)


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


REPO_SRC = Path(__file__).resolve().parent.parent / "src"


def import_kafkalog(*modules: str):
    """``(kafkalog, None)`` from the environment, else from ../src; ``(None, error)`` when it
    (or one of ``modules``, e.g. ``"log"``) does not import, so a run can report it."""
    import importlib
    import importlib.util

    try:
        found = importlib.util.find_spec("kafkalog") is not None
    except (ImportError, ValueError):
        found = False
    if not found and REPO_SRC.is_dir() and str(REPO_SRC) not in sys.path:
        sys.path.insert(0, str(REPO_SRC))
    try:
        import kafkalog

        for name in ("crc", "recordbatch", *modules):
            importlib.import_module(f"kafkalog.{name}")
        return kafkalog, None
    except Exception as e:  # missing or half-written library: report
        return None, e
