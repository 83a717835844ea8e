"""The fleet report as one JSON document, schema `fa-doctor.fleet/1` (docs/fleet.md describes every key).

Written as `json.dumps(indent=2, ensure_ascii=True)` would write it, by `pretty` below: the standard library
formats an indented document in pure Python, a generator per level (0.15 s for 10,000 nodes, over a second and
a list of millions of pieces for 100,000); here each string is escaped by the same C function and each
container joined once.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import Any

from fa_doctor import __version__
from fa_doctor.fleet.model import FLEET_SCHEMA, STATUSES, FleetPayload
from fa_doctor.model.finding import Remedy
from fa_doctor.model.result import Result
from fa_doctor.render.json import JsonRenderer, jsonable


def _remedy(remedy: Remedy) -> dict[str, Any]:
    return {"text": remedy.text, "commands": list(remedy.commands)}


def _node_results(p: FleetPayload) -> list[dict[str, Any]]:
    nodes = p.nodes
    prints = [g.fingerprint for g in p.groups]
    ids = [[fid for fid, _ in pairs] for pairs in nodes.finding_sets]
    return [
        {
            "node": name,
            "group": prints[group],
            "status": STATUSES[status].value,
            "findings": ids[found],
            "gpus": gpus,
            "error": nodes.errors.get(i),
            "source": source,
        }
        for i, (name, group, status, found, gpus, source) in enumerate(
            zip(nodes.names, nodes.groups, nodes.statuses, nodes.findings, nodes.gpus, nodes.sources, strict=True)
        )
    ]


def document(result: Result) -> dict[str, Any]:
    p = result.payload if isinstance(result.payload, FleetPayload) else FleetPayload()
    return {
        "schema": FLEET_SCHEMA,
        "tool": "fa-doctor",
        "tool_version": __version__,
        "command": result.command,
        "engine": p.engine,
        "status": result.status,
        "exit_code": result.exit_code,
        "strict": result.strict,
        "error": result.error,
        "nodes": len(p.nodes),
        "expected": p.expected,
        "summary": p.counts,
        "groups": [
            {
                "fingerprint": g.fingerprint,
                "install": jsonable(g.install),
                "nodes": p.names(g.nodes),
                "status": g.status,
                "counts": dict(g.counts),
                "findings": [{"id": f.id, "severity": f.severity.value, "nodes": f.nodes} for f in g.findings],
            }
            for g in p.groups
        ],
        "findings": [
            {
                "id": f.id,
                "severity": f.severity.value,
                "title": f.title,
                "nodes": p.names(f.nodes),
                "groups": list(f.groups),
                "scope": f.scope,
                "remedies": [_remedy(r) for r in f.remedies],
                "remedy_variants": f.variants,
            }
            for f in p.findings
        ],
        "outliers": [{"node": o.node, "group": o.group, "why": list(o.why)} for o in p.outliers],
        "refused": [{"source": r.source, "why": r.why} for r in p.refused],
        "unreachable": [{"node": u.node, "why": u.why} for u in p.unreachable],
        "duplicates": [
            {"node": d.node, "kept": d.kept, "dropped": list(d.dropped), "reports": d.reports} for d in p.duplicates
        ],
        "node_results": _node_results(p),
        "verdict": jsonable(result.findings),
        "timings_ms": {k: round(v * 1000, 1) for k, v in result.timings.items() if math.isfinite(v)},
    }


def _key(key: Any) -> str:
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    return encode_basestring_ascii(json.dumps(key) if key is None or isinstance(key, (bool, float)) else str(key))


def pretty(value: Any, level: int = 0) -> str:
    """`value` as `json.dumps(value, indent=2, ensure_ascii=True, allow_nan=False)` writes it."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None or kind is bool or kind is int or kind is float:
        return json.dumps(value, allow_nan=False)
    inner = "\n" + "  " * (level + 1)
    if kind is dict:
        if not value:
            return "{}"
        items = [_key(k) + ": " + pretty(v, level + 1) for k, v in value.items()]
    elif kind is list or kind is tuple:
        if not value:
            return "[]"
        items = [pretty(v, level + 1) for v in value]
    else:
        return json.dumps(value, indent=2, ensure_ascii=True, allow_nan=False)  # not made by document()
    close = "\n" + "  " * level + ("}" if kind is dict else "]")
    return ("{" if kind is dict else "[") + inner + ("," + inner).join(items) + close


class FleetJsonRenderer(JsonRenderer):
    name = "json"

    def format(self, result: Result) -> str:
        return pretty(document(result)) + "\n"
