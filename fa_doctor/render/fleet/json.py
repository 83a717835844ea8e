"""The fleet report as one JSON document, schema `fa-doctor.fleet/1` (docs/fleet.md describes every key)."""

from __future__ import annotations

import json
import math
from typing import Any

from fa_doctor import __version__
from fa_doctor.fleet.model import FLEET_SCHEMA, FleetPayload
from fa_doctor.model.finding import Remedy
from fa_doctor.model.result import Result
from fa_doctor.render.json import JsonRenderer, jsonable


def _remedy(remedy: Remedy) -> dict[str, Any]:
    return {"text": remedy.text, "commands": list(remedy.commands)}


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
                "nodes": list(g.nodes),
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
                "nodes": list(f.nodes),
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
        "node_results": [
            {
                "node": n.name,
                "group": p.groups[n.group].fingerprint,
                "status": n.status.value,
                "findings": [fid for fid, _ in n.findings],
                "gpus": n.gpus,
                "error": n.error,
                "source": n.source,
            }
            for n in p.nodes
        ],
        "verdict": jsonable(result.findings),
        "timings_ms": {k: round(v * 1000, 1) for k, v in result.timings.items() if math.isfinite(v)},
    }


class FleetJsonRenderer(JsonRenderer):
    name = "json"

    def format(self, result: Result) -> str:
        return json.dumps(document(result), indent=2, ensure_ascii=True, allow_nan=False) + "\n"
