"""The broker's config requests: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

A topic's overrides live in the broker's metadata file with its partition count (Kafka keeps
them in its metadata log as ConfigRecords); a change is validated as CreateTopics validates
(:func:`check_topic_configs`), written durably, then applied to every open partition with
:meth:`kafkalog.Log.update_config`, so the next append, roll, flush and retention pass follow
it. The broker resource is described (its start-up settings) but read-only: this broker changes
no broker setting while running. Other resource types (broker loggers, client metrics, groups)
are refused with ``INVALID_REQUEST`` and logged once per client.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from ..errors import InvalidConfigError
from ..protocol import ErrorCode, Request
from ._config import (
    LIST_TOPIC_KEYS,
    TOPIC_CONFIG_TYPES,
    broker_config_entries,
    topic_config_entries,
    topic_defaults,
)
from ._state import _BrokerState

_log = logging.getLogger(__package__)

#: ``ConfigResource.Type`` ids.
_TOPIC = 2
_BROKER = 4
#: IncrementalAlterConfigs' operations (``AlterConfigOp.OpType``).
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_UNKNOWN_TOPIC = "This server does not host this topic-partition."


class _ConfigAdminHandlers(_BrokerState):
    """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

    async def _describe_configs(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        results = []
        for r in body["resources"]:
            kind, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
            out = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": kind,
                   "resource_name": name, "configs": []}
            results.append(out)
            if kind == _TOPIC:
                topic = self._topics.get(name)
                if topic is None:
                    out["error_code"], out["error_message"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
                else:
                    out["configs"] = topic_config_entries(self.config, topic.overrides, keys, body["include_synonyms"])
            elif kind == _BROKER:
                problem = self._broker_name_error(name)
                if problem is not None:
                    out["error_code"], out["error_message"] = ErrorCode.INVALID_REQUEST, problem
                else:
                    out["configs"] = broker_config_entries(self.config, keys, body["include_synonyms"])
            else:
                out["error_code"], out["error_message"] = self._unsupported_resource(request, kind)
        return {"throttle_time_ms": 0, "results": results}

    async def _alter_configs(self, request: Request) -> dict[str, Any]:
        """AlterConfigs: each resource's overrides become exactly the given set."""
        return await self._alter(request, incremental=False)

    async def _incremental_alter_configs(self, request: Request) -> dict[str, Any]:
        """IncrementalAlterConfigs: SET, DELETE, APPEND or SUBTRACT named settings."""
        return await self._alter(request, incremental=True)

    async def _alter(self, request: Request, incremental: bool) -> dict[str, Any]:
        body = request.body or {}
        counts = Counter((r["resource_type"], r["resource_name"]) for r in body["resources"])
        responses = []
        assert self._admin_lock is not None
        async with self._admin_lock:
            for r in body["resources"]:
                kind, name = r["resource_type"], r["resource_name"]
                code: ErrorCode
                message: str | None
                if counts[(kind, name)] > 1:
                    code, message = ErrorCode.INVALID_REQUEST, "Error due to duplicate resources"
                else:
                    code, message = await self._alter_one(request, r, incremental, body["validate_only"])
                responses.append({"error_code": code, "error_message": message, "resource_type": kind,
                                  "resource_name": name})
        return {"throttle_time_ms": 0, "responses": responses}

    async def _alter_one(self, request: Request, r: dict[str, Any], incremental: bool, validate_only: bool
                         ) -> tuple[ErrorCode, str | None]:
        kind, name, configs = r["resource_type"], r["resource_name"], r["configs"]
        if kind == _BROKER:
            problem = self._broker_name_error(name)
            if problem is not None:
                return ErrorCode.INVALID_REQUEST, problem
            if not configs:
                return ErrorCode.NONE, None
            self._unsupported(request.client_id, "changing broker settings at run time")
            return ErrorCode.INVALID_REQUEST, (
                "Cannot update these configs dynamically: "
                + ", ".join(sorted(c["name"] for c in configs))
                + " (kafkalog's broker takes its settings at start only)"
            )
        if kind != _TOPIC:
            return self._unsupported_resource(request, kind)
        topic = self._topics.get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
        if any(n > 1 for n in Counter(c["name"] for c in configs).values()):
            return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
        try:
            overrides = (_incremental(topic.overrides, configs, topic_defaults(self.config)) if incremental
                         else _replacement(configs))
            config = self.config.topic_config(overrides)
        except _InvalidRequest as e:
            return ErrorCode.INVALID_REQUEST, e.reason
        except InvalidConfigError as e:
            return ErrorCode.INVALID_CONFIG, e.reason
        if validate_only or overrides == topic.overrides:
            return ErrorCode.NONE, None
        previous = topic.overrides
        topic.overrides = overrides
        try:
            await self._in_executor(self._write_metadata, dict(self._topics), self._producer_id_block_end)
        except OSError as e:
            topic.overrides = previous
            _log.error("writing the configs of topic %s failed: %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        for partition in topic.partitions:
            partition.log.update_config(config)
        _log.info("topic %s: config overrides now %s", name, overrides)
        return ErrorCode.NONE, None

    def _broker_name_error(self, name: str) -> str | None:
        """Kafka answers for its own broker id (or the cluster default, an empty name) only."""
        if name in ("", str(self.config.node_id)):
            return None
        return f"Unexpected broker id, expected {self.config.node_id} or empty string, but received {name}"

    def _unsupported_resource(self, request: Request, kind: int) -> tuple[ErrorCode, str]:
        self._unsupported(request.client_id, f"configs of resource type {kind}")
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}: kafkalog's broker has topic and broker configs"


class _InvalidRequest(InvalidConfigError):
    """A request Kafka answers with INVALID_REQUEST rather than INVALID_CONFIG."""


def _replacement(configs: list[dict[str, Any]]) -> dict[str, str]:
    """AlterConfigs' new overrides: exactly the given settings."""
    out = {}
    for c in configs:
        if c["value"] is None:
            raise _InvalidRequest(f"Null value not supported for topic configs: {c['name']}")
        out[c["name"]] = c["value"]
    return out


def _incremental(current: dict[str, str], configs: list[dict[str, Any]], defaults: dict[str, str]) -> dict[str, str]:
    """IncrementalAlterConfigs' new overrides (Kafka's ``ConfigAdminManager`` rules: APPEND and
    SUBTRACT start from the value in effect, the override or else the broker's default)."""
    out = dict(current)
    for c in configs:
        key, op, value = c["name"], c["config_operation"], c["value"]
        if key not in TOPIC_CONFIG_TYPES:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        if op == _SET:
            if value is None:
                raise _InvalidRequest(f"Null value not supported for : {key}")
            out[key] = value
        elif op == _DELETE:
            out.pop(key, None)
        elif op in (_APPEND, _SUBTRACT):
            word = "append" if op == _APPEND else "subtract"
            if key not in LIST_TOPIC_KEYS:
                raise InvalidConfigError(f"Config value {word} is not allowed for config key: {key}")
            if value is None:
                raise _InvalidRequest(f"Null value not supported for : {key}")
            items = [v for v in out.get(key, defaults[key]).split(",") if v]
            given = [v.strip() for v in value.split(",") if v.strip()]
            if op == _APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            out[key] = ",".join(items)
        else:
            raise _InvalidRequest(f"Unknown alter config operation {op} for {key}")
    return out
