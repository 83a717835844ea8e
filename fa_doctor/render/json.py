"""The versioned JSON envelope: one document on stdout, always. The only place a result becomes dicts."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from fa_doctor import __version__
from fa_doctor.model.actions import KINDS
from fa_doctor.model.actions import to_dict as action_dict
from fa_doctor.model.finding import Finding
from fa_doctor.model.result import SCHEMA, DeviceSmoke, PackageRow, Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.shell import finding_dict

_MAX_DEPTH = 40


def jsonable(value: Any, depth: int = 0) -> Any:
    """Plain JSON values only: no NaN or Infinity (strict parsers reject them), no reprs."""
    if depth > _MAX_DEPTH:
        return None
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    if isinstance(value, PackageRow):
        return {**jsonable(value.dist, depth + 1), "family": value.family}
    if isinstance(value, DeviceSmoke):
        return {"device": jsonable(value.device, depth + 1), **jsonable(value.result, depth + 1)}
    if type(value) in KINDS:
        return jsonable(action_dict(value), depth + 1)
    if isinstance(value, Finding):
        return jsonable(finding_dict(value), depth + 1)  # its remedies with their shell lines and fix command
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return jsonable(to_dict(), depth + 1)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), depth + 1) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, depth + 1) for v in items]
    return str(value)


def envelope(result: Result) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": "fa-doctor",
        "tool_version": __version__,
        "command": result.command,
        "status": result.status,
        "exit_code": result.exit_code,
        "strict": result.strict,
        "error": result.error,
        "summary": {s.value: n for s, n in result.counts.items()},
    }
    payload = jsonable(result.payload) if result.payload is not None else {}
    if result.command in ("check", "exec") and result.payload is None:
        payload = {k: None for k in ("host", "target", "selection", "gpus", "torch", "smoke")} | {"packages": []}
    doc.update(payload if isinstance(payload, dict) else {"payload": payload})
    doc["findings"] = jsonable(result.findings)
    doc["timings_ms"] = {k: round(v * 1000, 1) for k, v in result.timings.items() if math.isfinite(v)}
    return doc


class JsonRenderer(Renderer):
    name = "json"
    one_line = False  # json.dumps writes a line break as \n: the values stay exact

    def format(self, result: Result) -> str:
        # ensure_ascii: odd bytes in paths or variables (lone surrogates) must not break the one document.
        return json.dumps(envelope(result), indent=2, ensure_ascii=True, allow_nan=False) + "\n"
