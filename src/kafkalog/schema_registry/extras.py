"""The optional libraries schema decoding needs (extra ``kafkalog[schemas]``), imported lazily so
that the base install reads and dumps logs without them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import SchemaError

#: What each library is needed for, for the error message.
_NEEDED_FOR = {
    "fastavro": "Avro",
    "google.protobuf": "Protobuf",
    "grpc_tools": "Protobuf (compiling the registry's .proto text)",
    "jsonschema": "JSON Schema validation",
}


def require(module: str) -> ModuleType:
    """Import ``module``, or raise a :class:`SchemaError` saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise SchemaError(f"decoding {_NEEDED_FOR.get(module, module)} needs {module.split('.')[0]} "
                          f"({e}): pip install 'kafkalog[schemas]'") from None
