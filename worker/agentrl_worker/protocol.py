"""The worker protocol's messages, checked against protocol.schema.json.

That file is generated from the CLI's zod schemas (src/train/worker/protocol.ts, `npm run protocol:schema`), so the
CLI and the worker validate against one definition. The worker checks every request before acting on it and every
reply before sending it. Errors name the field: `init: config.lr must be float, got str`.

No torch here: `python -m agentrl_worker.validate` imports this alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

SCHEMA: dict[str, Any] = json.loads(Path(__file__).with_name("protocol.schema.json").read_text(encoding="utf-8"))
COMMANDS: tuple[str, ...] = tuple(SCHEMA["requests"])
# zod writes the safe-integer range into every integer; a message about a range leaves these bounds out.
_SAFE_INTEGER = 2**53 - 1


class ConfigError(ValueError):
    """A bad field in a command; the reply (error type InputError) names the field."""


class ProtocolError(ValueError):
    """A line that is not a command at all (not an object, or no string cmd)."""


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON Schema counts 2.0 as an integer; the worker would then pass a float to range(). JSON.stringify never
    # writes an integer that way, so refusing it changes nothing the CLI sends.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    # Python's json reads NaN and Infinity, which JSON (and zod's z.number()) refuse.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number}),
)
_validators: dict[int, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    # Every schema is a part of SCHEMA, which lives as long as the process: its id() is a stable key.
    key = id(schema)
    if key not in _validators:
        _validators[key] = _Validator(schema)
    return _validators[key]


def problems(schema: dict[str, Any], instance: Any, prefix: tuple[Any, ...] = ()) -> list[str]:
    """What is wrong with `instance`, one sentence per failure, each naming the field by its dotted path (after
    `prefix`, the path of `instance` itself)."""
    found = [_describe(error, prefix) for error in _validator(schema).iter_errors(instance)]
    return list(dict.fromkeys(found))  # one sentence per field: a tuple's maxItems and items say the same thing


def check_request(message: Any) -> None:
    """Raises ProtocolError for a line that is not a command, ConfigError for a command the schema refuses."""
    if not isinstance(message, dict) or not isinstance(message.get("cmd"), str):
        raise ProtocolError("a command is an object with a string cmd")
    cmd = message["cmd"]
    if cmd not in SCHEMA["requests"]:
        raise ConfigError(f"unknown command {cmd!r}")
    _raise(cmd, problems(SCHEMA["requests"][cmd], message))


def check_init_config(config: Any) -> None:
    """The `init` config alone, for callers that build a WorkerConfig without a request around it."""
    _raise("init", problems(SCHEMA["requests"]["init"]["properties"]["config"], config, ("config",)))


def reply_problems(cmd: str, reply: Any) -> list[str]:
    """What is wrong with a successful reply to `cmd`."""
    return problems(SCHEMA["replies"][cmd], reply)


def outgoing_problems(message: dict[str, Any], cmd: str | None) -> list[str]:
    """What is wrong with a message the worker is about to send: an event, an error reply, or a reply to `cmd`."""
    if "event" in message:
        schema = SCHEMA["events"].get(message["event"])
        return problems(schema, message) if schema else [f"unknown event {message['event']!r}"]
    if message.get("ok") is False:
        return problems(SCHEMA["error_reply"], message)
    return reply_problems(cmd, message) if cmd else ["a reply without its command"]


def _raise(cmd: str, found: list[str]) -> None:
    if found:
        raise ConfigError(f"{cmd}: {'; '.join(found)}")


# --- messages -----------------------------------------------------------------------------------------------------

_TYPE_NAMES = {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "null", "array": "list", "object": "object"}


def _field(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _types(schema: dict[str, Any]) -> list[str]:
    if "anyOf" in schema:
        return [name for branch in schema["anyOf"] for name in _types(branch)]
    kind = schema.get("type")
    if kind is None and "const" in schema:
        return [json.dumps(schema["const"])]
    return [_TYPE_NAMES.get(k, k) for k in (kind if isinstance(kind, list) else [kind])]


def _range(schema: dict[str, Any]) -> str:
    def bound(key: str) -> Any:
        value = schema.get(key)
        return None if value is None or abs(value) == _SAFE_INTEGER else value

    low_in, low_out, high_in, high_out = bound("minimum"), bound("exclusiveMinimum"), bound("maximum"), bound("exclusiveMaximum")
    low = low_in if low_in is not None else low_out
    high = high_in if high_in is not None else high_out
    if low is not None and high is not None:
        return f"in {'[' if low_in is not None else '('}{low}, {high}{']' if high_in is not None else ')'}"
    if low is not None:
        return f">= {low}" if low_in is not None else f"> {low}"
    return f"<= {high}" if high_in is not None else f"< {high}"


def _describe(error: ValidationError, prefix: tuple[Any, ...]) -> str:
    path = [*prefix, *error.absolute_path]
    where = _field(path)
    schema, value, keyword = error.schema, error.instance, error.validator
    if keyword in ("type", "anyOf") and isinstance(value, float) and not math.isfinite(value):
        return f"{where} must be a finite number, got {value}"
    if keyword == "anyOf":
        # A nullable field: report against the branch of the value's own type, else list the types allowed.
        fitting = [b for b in schema["anyOf"] if not any(e.validator == "type" for e in _validator(b).iter_errors(value))]
        if len(fitting) == 1:
            return _describe(next(_validator(fitting[0]).iter_errors(value)), tuple(path))
        return f"{where} must be {' or '.join(_types(schema))}, got {_json_type(value)}"
    if keyword == "type":
        return f"{where} must be {' or '.join(_types(schema))}, got {_json_type(value)}"
    if keyword == "enum":
        return f"{where} must be one of {', '.join(str(v) for v in error.validator_value)}, got {value!r}"
    if keyword == "const":
        return f"{where} must be {json.dumps(error.validator_value)}, got {json.dumps(value)}"
    if keyword == "required":
        missing = [_field([*path, name]) for name in error.validator_value if name not in value]
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required"
    if keyword == "additionalProperties":
        unknown = sorted(set(value) - set(schema.get("properties", {})))
        return f"{where + ': ' if where else ''}unknown field(s) {', '.join(unknown)}"
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"{where} must be {_range(schema)}, got {value!r}"
    if keyword == "minLength" and error.validator_value == 1:
        return f"{where} must not be empty"
    if keyword in ("minItems", "maxItems", "items") and "prefixItems" in schema:
        return f"{where} must be a list of {len(schema['prefixItems'])}, got {len(value)} item(s)"
    return f"{where}: {error.message}"
