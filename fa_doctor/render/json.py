"""The versioned JSON envelope: one document on stdout, always; the only place a result becomes dicts. The fleet
report is written by `pretty`, as `json.dumps(indent=2, ensure_ascii=True)` would, faster (docs/fleet.md: Scale)."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from fa_doctor import __version__
from fa_doctor.model.finding import Finding
from fa_doctor.model.result import SCHEMA, DeviceSmoke, PackageRow, Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.shell import finding_dict

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload

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
    if isinstance(value, array):  # node indexes: numbers only
        return value.tolist()
    if isinstance(value, PackageRow):
        return {**jsonable(value.dist, depth + 1), "family": value.family}
    if isinstance(value, DeviceSmoke):
        return {"device": jsonable(value.device, depth + 1), **jsonable(value.result, depth + 1)}
    if isinstance(value, Finding):
        return jsonable(finding_dict(value), depth + 1)  # its remedies with their shell lines and fix command
    if callable(to_dict := getattr(value, "to_dict", None)) and not isinstance(value, type):
        return jsonable(to_dict(), depth + 1)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), depth + 1) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, depth + 1) for v in items]
    return str(value)


def _top(result: Result, schema: str, between: dict[str, Any]) -> dict[str, Any]:
    head = {"schema": schema, "tool": "fa-doctor", "tool_version": __version__, "command": result.command}
    verdict = {"status": result.status, "exit_code": result.exit_code, "strict": result.strict, "error": result.error}
    return head | between | verdict


def _timings(result: Result) -> dict[str, float]:
    return {k: round(v * 1000, 1) for k, v in result.timings.items() if math.isfinite(v)}


def envelope(result: Result) -> dict[str, Any]:
    doc = _top(result, SCHEMA, {}) | {"summary": {s.value: n for s, n in result.counts.items()}}
    payload = jsonable(result.payload) if result.payload is not None else {}
    if result.command in ("check", "exec") and result.payload is None:
        payload = {k: None for k in ("host", "target", "selection", "gpus", "torch", "smoke")} | {"packages": []}
    doc.update(payload if isinstance(payload, dict) else {"payload": payload})
    doc["findings"] = jsonable(result.findings)
    doc["timings_ms"] = _timings(result)
    return doc


def fleet_document(result: Result, p: FleetPayload) -> dict[str, Any]:
    nodes, prints = p.nodes, [g.fingerprint for g in p.groups]
    ids = [[fid for fid, _ in pairs] for pairs in nodes.finding_sets]
    columns = zip(nodes.names, nodes.groups, nodes.statuses, nodes.findings, nodes.gpus, nodes.sources, strict=True)
    from fa_doctor.fleet.model import FLEET_SCHEMA, STATUSES

    return _top(result, FLEET_SCHEMA, {"engine": p.engine}) | {
        "nodes": len(p.nodes),
        "expected": p.expected,
        "summary": p.counts,
        "groups": [jsonable(g) | {"nodes": p.names(g.nodes)} for g in p.groups],
        "findings": [
            {"id": f.id, "severity": f.severity.value, "title": f.title, "nodes": p.names(f.nodes)}
            | {"groups": list(f.groups), "scope": f.scope}
            | {"remedies": [{"text": r.text, "commands": list(r.commands)} for r in f.remedies]}
            | {"remedy_variants": f.variants}
            for f in p.findings
        ],
        **{key: jsonable(getattr(p, key)) for key in ("outliers", "refused", "unreachable", "duplicates")},
        "node_results": [
            {"node": name, "group": prints[group], "status": STATUSES[status].value, "findings": ids[found]}
            | {"gpus": gpus, "error": nodes.errors.get(i), "source": source}
            for i, (name, group, status, found, gpus, source) in enumerate(columns)
        ],
        "verdict": jsonable(result.findings),
        "timings_ms": _timings(result),
    }


def pretty(value: Any, level: int = 0) -> str:
    """`value` as `json.dumps(value, indent=2, ensure_ascii=True, allow_nan=False)` writes it; every key is a string
    (fleet_document's keys are, and jsonable's)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None or kind is bool or kind is int or kind is float:
        return json.dumps(value, allow_nan=False)
    inner = "\n" + "  " * (level + 1)
    if kind is dict:
        if not value:
            return "{}"
        items = [encode_basestring_ascii(k) + ": " + pretty(v, level + 1) for k, v in value.items()]
    elif kind is list or kind is tuple:
        if not value:
            return "[]"
        items = [pretty(v, level + 1) for v in value]
    else:
        return json.dumps(value, indent=2, ensure_ascii=True, allow_nan=False)  # not made by fleet_document()
    close = "\n" + "  " * level + ("}" if kind is dict else "]")
    return ("{" if kind is dict else "[") + inner + ("," + inner).join(items) + close


class JsonRenderer(Renderer):
    name = "json"
    one_line = False  # json.dumps writes a line break as \n: the values stay exact

    def format(self, result: Result) -> str:
        # ensure_ascii: odd bytes in paths or variables (lone surrogates) must not break the one document.
        return json.dumps(envelope(result), indent=2, ensure_ascii=True, allow_nan=False) + "\n"

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        return pretty(fleet_document(result, payload)) + "\n"
