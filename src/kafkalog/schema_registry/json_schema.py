"""JSON Schema validation (jsonschema) of values written by Schema Registry's JSON serializer.

The schema of the id is the validator's schema; its ``references`` (each ``name`` the URL a
``$ref`` uses) are registered as resources, so ``{"$ref": "other.json"}`` resolves to the
referenced subject's version. The draft is the schema's ``$schema`` (default: the latest).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import SchemaDecodeError, SchemaError
from .extras import require
from .schema import Schema
from .store import SchemaStore


def validator(store: SchemaStore, schema: Schema) -> Callable[[Any], None]:
    """A check raising :class:`SchemaDecodeError` for a value ``schema`` rejects."""
    jsonschema = require("jsonschema")
    referencing = require("referencing")
    try:
        contents = json.loads(schema.schema)
        resources = [(ref.name, referencing.Resource.from_contents(
            json.loads(target.schema), default_specification=referencing.jsonschema.DRAFT202012))
            for ref, target in store.references(schema)]
        registry = referencing.Registry().with_resources(resources)
        cls = jsonschema.validators.validator_for(contents)
        cls.check_schema(contents)
        checker = cls(contents, registry=registry)
    except SchemaError:
        raise
    except Exception as e:
        raise SchemaError(f"the JSON Schema does not load: {e}", schema_id=schema.id, subject=schema.subject) from None

    def check(value: Any) -> None:
        error = jsonschema.exceptions.best_match(checker.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the value"
            raise SchemaDecodeError(f"{where} does not match the JSON Schema: {error.message}",
                                    schema_id=schema.id, subject=schema.subject)

    return check
