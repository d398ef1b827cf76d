"""DESIGN.md's layers and the public/private line, read from each module's imports with ``ast``
by dotted module name.

- The library core is flat in ``kafkalog/``; its imports only point down the layers.
- ``kafkalog.protocol`` (the wire schemas) imports only the base layer and its own package.
- The surfaces (``kafkalog.tools``, ``kafkalog.broker``, ``kafkalog.spark``, ``kafkalog.__main__``)
  import the ``kafkalog`` facade, core modules by name (what they share is internal, listed in
  docs/architecture.md), modules of their own package, and the facade of the subpackages they
  are allowed (``SURFACE_DEPS``): Spark never imports the command-line package.
- The facade exports a small API (``MAX_PUBLIC_NAMES``), and nothing but it and the modules.
- Implementation modules are private: a subpackage's modules are named with a leading
  underscore, and no module but a package facade declares ``__all__``.
"""

from __future__ import annotations

import ast
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import kafkalog

PACKAGE = Path(kafkalog.__file__).parent

# Layer of every core module, lowest first (DESIGN.md "Layers").
CORE_LAYERS = {
    "errors": 0,
    "varint": 1,
    "native": 1,
    "crc": 1,
    "compression": 1,
    "record": 2,
    "record_walk": 2,
    "recordbatch": 2,
    "legacy_record": 2,
    "memory_records": 2,
    "memory_records_builder": 2,
    "columnar": 2,
    "file_records": 3,
    "sendfile": 3,
    "remote": 3,
    "index": 4,
    "resync": 4,
    "transaction_index": 4,
    "transaction_tracker": 5,
    "log_config": 4,
    "filenames": 4,
    "durable": 4,
    "location": 4,
    "log": 5,
    "log_directory": 5,
    "local_log": 5,
    "log_append": 5,
    "append_request": 5,
    "log_retention": 5,
    "log_validator": 5,
    "log_loader": 5,
    "offline_retention": 5,
    "log_segments": 5,
    "segment": 5,
    "segment_recovery": 5,
    "partition_view": 5,
    "checkpoint": 5,
    "producer_state": 5,
    "leader_epoch_cache": 5,
    "follower": 5,
    "high_watermark": 5,
    "scheduler": 5,
    "cleaner": 6,
    "cleaner_offset_map": 6,
    "cleaner_manager": 6,
    "cleaner_stats": 6,
    "cleaner_filter": 6,
    # operator capabilities: verify, salvage, index rebuilding
    "progress": 7,
    "index_rebuild": 7,
    "salvage": 7,
    "verify": 7,
    # schema-aware decoding: the _schemas topic read through the partition view, the registry
    "schema_registry": 6,
}
#: Core subpackages: every module in one takes its package's layer.
CORE_PACKAGES = {"columnar", "producer_state", "verify", "schema_registry"}
SURFACES = ("tools", "broker", "spark")
#: The other subpackages (their facades) each surface may import.
SURFACE_DEPS = {"tools": {"protocol", "broker"}, "broker": {"protocol"}, "spark": set(), "__main__": {"tools"}}
#: How many names the facade may export (DESIGN: ~17, plus replication and schema decoding).
MAX_PUBLIC_NAMES = 60
WIRE = "protocol"
#: Public modules of the core a surface may import besides the facade.
PUBLIC_CORE = {"errors"}

# Third-party libraries live in one module (or one package) each (DESIGN.md).
THIRD_PARTY_HOMES = {
    "zstandard": {"compression"},
    "snappy": {"compression"},
    "lz4": {"compression"},
    "crcmod": {"crc"},
    "crc32c": {"crc"},
    "numpy": {"index", "columnar", "cleaner", "cleaner_offset_map", "spark"},
    "pyspark": {"spark"},
    "pyarrow": {"spark", "columnar"},
    "fsspec": {"remote"},
    "s3fs": set(),  # reached through fsspec only
    "fastavro": {"schema_registry"},
    "google": {"schema_registry"},  # google.protobuf
    "grpc_tools": {"schema_registry"},
    "jsonschema": {"schema_registry"},
    "referencing": {"schema_registry"},
    "kazoo": {"broker"},  # broker/_zk.py, the cluster's ZooKeeper client
}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name below ``kafkalog`` ("" is the facade)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_package(name: str, path: Path) -> bool:
    return path.name == "__init__.py"


def _is_module(path: Path) -> bool:
    """Whether ``path`` (without suffix) is a module: source, package, or built extension."""
    if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
        return True
    return any(path.with_name(path.name + suffix).exists() for suffix in EXTENSION_SUFFIXES)


def imports_of(name: str, source: str, *, package: bool = False) -> tuple[set[str], set[str]]:
    """(kafkalog modules by dotted name below ``kafkalog``, top-level third-party packages)
    that ``source`` (module ``name``) imports anywhere."""
    tree = ast.parse(source)
    me = name.split(".") if name else []
    here = me if package else me[:-1]  # the package a relative import starts from
    internal, external = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else list(here)
                target = base + (node.module.split(".") if node.module else [])
                if node.module:
                    internal.add(".".join(target))
                # `from . import x` / `from .pkg import x`: x may be a module of that package
                for alias in node.names:
                    candidate = ".".join(target + [alias.name])
                    if _is_module(PACKAGE / Path(*target, alias.name)):
                        internal.add(candidate)
                    elif not node.module:
                        internal.add(".".join(target))
            elif node.module and node.module.split(".")[0] == "kafkalog":
                parts = node.module.split(".")[1:]
                internal.add(".".join(parts))
                for alias in node.names:
                    sub = PACKAGE / Path(*parts, alias.name)
                    if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                        internal.add(".".join(parts + [alias.name]))
            elif node.module:
                external.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "kafkalog":
                    internal.add(".".join(parts[1:]))
                else:
                    external.add(parts[0])
    return internal, external


def _layer(name: str) -> int | None:
    top = name.split(".")[0]
    if top in CORE_LAYERS and ("." not in name or top in CORE_PACKAGES):
        return CORE_LAYERS[top]
    return None


def _kind(name: str) -> str:
    top = name.split(".")[0] if name else ""
    if name == "":
        return "facade"
    if name == "__main__" or top in SURFACES:
        return "surface"
    if top == WIRE:
        return "wire"
    return "core"


def violations(name: str, source: str, *, package: bool = False) -> list[str]:
    """What is wrong with module ``name``'s imports (empty when it keeps the rules)."""
    internal, _ = imports_of(name, source, package=package)
    kind = _kind(name)
    own = name.split(".")[0] if kind in ("surface", "wire") and name != "__main__" else None
    bad = []
    for dep in sorted(internal):
        dep_top = dep.split(".")[0] if dep else ""
        if dep == name:
            continue
        if kind == "core":
            if dep == "" or _kind(dep) != "core":
                bad.append(f"{name} (core) imports {dep or 'the facade'}")
            elif _layer(dep) is None:
                bad.append(f"{name} imports {dep}, which has no layer")
            elif _layer(dep) > _layer(name):
                bad.append(f"{name} (layer {_layer(name)}) imports {dep} (layer {_layer(dep)})")
        elif kind == "facade":
            if _kind(dep) != "core":
                bad.append(f"the facade imports {dep}: it re-exports the core only")
        elif kind == "wire":
            if not (dep == "errors" or dep_top == own):
                bad.append(f"{name} (wire schemas) imports {dep}")
        else:  # surface
            if dep_top == own and own is not None:
                continue
            if dep == "" or _kind(dep) == "core":
                continue
            allowed = SURFACE_DEPS[own or "__main__"]
            if dep_top in allowed and "." not in dep:
                continue  # another subpackage's public API
            if dep_top in allowed:
                bad.append(f"{name} (surface) imports the private module kafkalog.{dep}")
            else:
                bad.append(f"{name} (surface) imports kafkalog.{dep}, which it may not use")
    return bad


def test_every_core_module_has_a_layer():
    unplaced = [n for n in _modules() if _kind(n) == "core" and _layer(n) is None]
    assert not unplaced, f"unplaced modules: {sorted(unplaced)}"


def test_subpackage_modules_are_private_by_name():
    public = [
        n for n, p in _modules().items()
        if "." in n and n.split(".")[0] not in CORE_PACKAGES and not p.name.startswith("_")
    ]
    assert not public, f"name implementation modules with a leading underscore: {public}"


def test_only_facades_declare_all():
    """``__all__`` marks a supported API: only the package facades have one."""
    declaring = []
    for name, path in _modules().items():
        if path.name == "__init__.py" or name in PUBLIC_CORE:
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                declaring.append(name)
    assert not declaring, f"internal modules declaring __all__: {sorted(declaring)}"


def test_imports_keep_the_rules():
    bad = []
    for name, path in _modules().items():
        bad += violations(name, path.read_text(), package=path.name == "__init__.py")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "name, source",
    [
        ("tools._dump", "from ..spark._scan import _plan\n"),
        ("broker._data", "from ..spark import read_records\n"),
        ("broker._server", "from ..protocol._wire import _Reader\n"),
        ("spark._source", "import kafkalog.tools._verify\n"),
        ("spark._source", "from ..tools import verify_segment\n"),
        ("protocol._wire", "from ..log import Log\n"),
        ("filenames", "from .log import Log\n"),
        ("errors", "from .varint import decode_varint\n"),
        ("log", "from .tools import verify_path\n"),
        ("", "from .tools import main\n"),
    ],
)
def test_the_checker_flags_a_private_import(name, source):
    assert violations(name, source, package=name == ""), f"{name}: {source!r} passed"


@pytest.mark.parametrize(
    "name, source",
    [
        ("tools._dump", "from .. import FileRecords\nfrom ..errors import KafkalogError\nfrom ._jvm import _jackson\n"),
        ("broker._server", "from ..protocol import ApiKey\nfrom .. import Log\n"),
        ("spark._source", "from kafkalog.log import Log\nfrom . import _scan\n"),
        ("tools._dump", "from ..checkpoint import OffsetCheckpointFile\nfrom ..broker import main\n"),
        ("log", "from .segment import LogSegment\nfrom .errors import KafkalogError\n"),
    ],
)
def test_the_checker_passes_public_imports(name, source):
    assert not violations(name, source, package=False)


def test_third_party_libraries_stay_home():
    bad = []
    for name, path in _modules().items():
        _, external = imports_of(name, path.read_text(), package=path.name == "__init__.py")
        home = name.split(".")[0]
        for lib, homes in THIRD_PARTY_HOMES.items():
            if lib in external and home not in homes:
                bad.append(f"{name} imports {lib}")
    assert not bad, bad


def test_index_knows_nothing_of_records():
    """index.py imports no records-layer module."""
    internal, _ = imports_of("index", (PACKAGE / "index.py").read_text())
    assert not {d for d in internal if _layer(d) == 2}


def test_the_facade_is_small_and_exports_only_its_api():
    assert len(kafkalog.__all__) <= MAX_PUBLIC_NAMES, len(kafkalog.__all__)
    modules = {n.split(".")[0] for n in _modules() if n}
    extra = {
        n for n in dir(kafkalog)
        if not n.startswith("_") and n not in kafkalog.__all__ and n not in modules
    }
    assert not extra, f"the facade exposes names it does not export: {sorted(extra)}"
