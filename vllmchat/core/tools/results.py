"""Tool results as text for the model (capped), and tool schemas checked as JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

RESULT_CAP_BYTES = 1_000_000


def cap_text(text: str, cap_bytes: int = RESULT_CAP_BYTES) -> tuple[str, bool]:
    """``text`` cut to ``cap_bytes`` of UTF-8, with a note saying so; (text, cut)."""
    raw = text.encode("utf-8")
    if len(raw) <= cap_bytes:
        return text, False
    kept = raw[:cap_bytes].decode("utf-8", errors="ignore")
    note = (
        f"\n\n[The result was cut: {cap_bytes:,} of its {len(raw):,} bytes are shown; "
        "the rest was left out.]"
    )
    return kept + note, True


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind == "image" or kind == "audio":
        data = str(getattr(block, "data", ""))
        mime = getattr(block, "mime_type", "") or kind
        return f"[{kind} result: {mime}, about {len(data) * 3 // 4:,} bytes, not shown]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        uri = getattr(resource, "uri", "")
        return str(text) if text is not None else f"[binary resource {uri}, not shown]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'uri', '')}]"
    return f"[{kind or 'unknown'} result, not shown]"


def result_text(content: Sequence[Any], structured: Mapping[str, Any] | None) -> str:
    """One text from a call result's content blocks (or its structured content)."""
    parts = [_block_text(block) for block in content]
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema is not a usable JSON Schema for an object, or None."""
    if not isinstance(schema, Mapping):
        return "its input schema is not a JSON object"
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        at = f" at {where}" if where else ""
        return f"its input schema is not valid JSON Schema ({exc.message}{at})"
    if schema.get("type", "object") != "object":
        return f"its input schema is for {schema.get('type')!r}, not an object of arguments"
    return None


def arguments_problem(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not fit ``schema``, or None."""
    try:
        validator = jsonschema.validators.validator_for(schema)(dict(schema))
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the tool's schema is invalid ({exc.message})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.path)
    return f"{error.message}{' (at ' + where + ')' if where else ''}"
