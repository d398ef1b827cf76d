"""DESIGN.md's import layers, read from each module's imports with ``ast``: imports only point down."""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalog

PACKAGE = Path(kafkalog.__file__).parent

# Layer of every module, lowest first (DESIGN.md "Layers"); builder sits with the records.
LAYERS = {
    "errors": 0,
    "varint": 1,
    "crc": 1,
    "compression": 1,
    "record": 2,
    "recordbatch": 2,
    "legacy": 2,
    "records": 2,
    "builder": 2,
    "columnar": 2,
    "file_records": 3,
    "sendfile": 3,
    "index": 4,
    "config": 4,
    "filenames": 4,
    "log": 5,
    "validator": 5,
    "loader": 5,
    "retention": 5,
    "segments": 5,
    "segment": 5,
    "checkpoint": 5,
    "producer_state": 5,
    "leader_epoch": 5,
    "cleaner": 6,
    "verify": 6,
    "salvage": 6,
    "convert": 6,
    "scan": 6,
    "cli": 7,
    "spark": 7,
    "broker": 7,
    "protocol": 7,
    "__init__": 7,
    "__main__": 7,
}
# Third-party libraries live in one module each (DESIGN.md).
THIRD_PARTY_HOMES = {
    "zstandard": {"compression"},
    "snappy": {"compression"},
    "lz4": {"compression"},
    "crcmod": {"crc"},
    "crc32c": {"crc"},
    "numpy": {"index", "columnar", "cleaner", "scan"},
    "pyspark": {"spark"},
    "pyarrow": {"spark", "columnar"},
}


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(kafkalog modules, top-level third-party packages) imported anywhere in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    internal, external = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from .x import y
                if node.module:
                    internal.add(node.module.split(".")[0])
                else:
                    internal.update(alias.name for alias in node.names)
            elif node.module and node.module.split(".")[0] == "kafkalog":
                parts = node.module.split(".")
                internal.add(parts[1] if len(parts) > 1 else "__init__")
            elif node.module:
                external.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "kafkalog":
                    parts = alias.name.split(".")
                    internal.add(parts[1] if len(parts) > 1 else "__init__")
                else:
                    external.add(top)
    return internal, external


def test_every_module_has_a_layer():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules <= set(LAYERS), f"unplaced modules: {sorted(modules - set(LAYERS))}"


def test_imports_point_down():
    """A module imports only modules of a lower layer (or its own, for the records layer)."""
    bad = []
    for path in PACKAGE.glob("*.py"):
        me = path.stem
        internal, _ = _imports(path)
        for dep in internal:
            if dep == "__init__" and me not in ("__main__", "cli", "spark"):
                bad.append(f"{me} imports the package facade")
            elif dep in LAYERS and LAYERS[dep] > LAYERS[me]:
                bad.append(f"{me} (layer {LAYERS[me]}) imports {dep} (layer {LAYERS[dep]})")
    assert not bad, bad


def test_third_party_libraries_stay_home():
    bad = []
    for path in PACKAGE.glob("*.py"):
        _, external = _imports(path)
        for lib, homes in THIRD_PARTY_HOMES.items():
            if lib in external and path.stem not in homes:
                bad.append(f"{path.stem} imports {lib}")
    assert not bad, bad


def test_index_knows_nothing_of_records():
    """index.py (when present) imports no records-layer module."""
    path = PACKAGE / "index.py"
    if path.exists():
        internal, _ = _imports(path)
        assert not internal & {m for m, layer in LAYERS.items() if layer == 2}
