"""One node's report, judged: a small typed summary of what the fleet needs, or the reason it is refused.

The report is hostile: any field may be missing, of another type, huge or a lie. Nothing here trusts a type;
every string kept is cut to a bound, every list too. A report of another schema, of another command, or with a
malformed finding is refused as a whole (never half merged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fa_doctor import __version__
from fa_doctor.fleet.model import FLEET_SCHEMA, Install, Refused
from fa_doctor.model.finding import Remedy, Severity
from fa_doctor.model.machine import HostFacts
from fa_doctor.model.result import SCHEMA

_FAMILY = SCHEMA.rsplit("/", 1)[0] + "/"
_ID = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)+")
_SEVERITY = {s.value: s for s in Severity}
_HOST_FIELDS = tuple(f for f in HostFacts.__dataclass_fields__ if f != "name")
_MAX_FINDINGS = 1000
_MAX_ITEMS = 64  # packages, GPUs, remedies, commands
_SHORT, _TEXT = 200, 2000


@dataclass(frozen=True, slots=True)
class Seen:
    """A non-ok finding of one node: its title and remedies are kept only until the fleet has them once."""

    id: str
    severity: Severity
    title: str
    remedies: tuple[Remedy, ...]


@dataclass(frozen=True, slots=True)
class NodeReport:
    source: str
    host: str | None  # None: a report written before reports said where they ran
    scheduler_id: str | None
    install: Install
    status: str
    findings: tuple[Seen, ...]
    error: str | None
    gpus: int


def _s(value: Any, limit: int = _SHORT) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value[:_MAX_ITEMS] if isinstance(value, list) else []


def _join(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return " ".join(kept) if kept else None


def install_of(doc: Mapping[str, Any]) -> tuple[Install, int]:
    """The fingerprint's parts, and how many GPUs the node saw (hardware: not part of the fingerprint)."""
    packages = sorted({f"{_s(p.get('distribution'))} {_s(p.get('version'))}" for p in map(_d, _l(doc.get("packages")))})
    torch = _d(doc.get("torch"))
    platform = (
        f"CUDA {_s(torch['cuda'])}" if torch.get("cuda") else f"ROCm {_s(torch['hip'])}" if torch.get("hip") else "CPU"
    )
    gpus = _d(doc.get("gpus"))
    devices = [_d(d) for d in _l(gpus.get("devices"))]
    models = sorted({f"{_s(d.get('name'))} ({_s(d.get('capability'))})" for d in devices})
    driver = _s(gpus.get("driver_version"))
    target = _d(doc.get("target"))
    selection = _d(doc.get("selection"))
    phases = []
    for phase in ("prefill", "decode"):
        choice = _d(selection.get(phase))
        runs = _s(choice.get("implementation")) or _s(choice.get("backend"))
        if runs:
            phases.append(f"{phase} {runs} ({_s(choice.get('source'))})")
    install = Install(
        packages=tuple(p for p in packages if p != "None None"),
        torch=f"{_s(torch.get('version'))} ({platform})" if torch.get("version") else None,
        driver=f"{driver} (CUDA {_s(gpus.get('cuda_driver_version'))})" if driver else None,
        gpus=tuple(models),
        python=_join(*(_s(target.get(k)) for k in ("version", "implementation", "machine", "libc"))),
        selection=", ".join(phases) or None,
        tool=_s(doc.get("tool_version")),
    )
    return install, len(devices)


def _remedies(value: Any) -> tuple[Remedy, ...]:
    out = []
    for item in map(_d, _l(value)):
        text = _s(item.get("text"), _TEXT) or ""
        commands = tuple(c for c in (_s(c, _TEXT) for c in _l(item.get("commands"))) if c)
        if text or commands:
            out.append(Remedy(text, commands))
    return tuple(out)


def _findings(value: Any) -> tuple[Seen, ...] | str:
    if not isinstance(value, list):
        return "no findings list"
    if len(value) > _MAX_FINDINGS:
        return f"more than {_MAX_FINDINGS} findings"
    seen = []
    for number, item in enumerate(value, 1):
        fid = item.get("id") if isinstance(item, dict) else None
        severity = _SEVERITY.get(item.get("severity")) if isinstance(item, dict) else None  # type: ignore[arg-type]
        if not isinstance(fid, str) or len(fid) > 100 or not _ID.fullmatch(fid) or severity is None:
            return f"finding {number} has no valid id and severity"
        if severity is not Severity.OK:
            seen.append(Seen(fid, severity, _s(item.get("title"), _TEXT) or fid, _remedies(item.get("remedies"))))
    seen.sort(key=lambda f: -f.severity.rank)
    return tuple(seen)


def _schema_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__.replace('dict', 'object')}, not a fa-doctor report"
    schema = doc.get("schema")
    if schema == SCHEMA:
        command = doc.get("command")
        if command not in ("check", "exec"):
            return f"a report of `{_s(command, 40)}`, not of check or exec: it says nothing about a node"
        return None
    if schema == FLEET_SCHEMA:
        return f"a fleet report ({FLEET_SCHEMA}): merge the node reports it was made from"
    if isinstance(schema, str) and schema.startswith(_FAMILY):
        return (
            f"schema {_s(schema, 60)}: this fa-doctor ({__version__}) reads {SCHEMA}; "
            "merge it with the fa-doctor version that wrote it"
        )
    return f"not a fa-doctor report (its schema is not {SCHEMA})"


def judge(source: str, doc: Any) -> NodeReport | Refused:
    problem = _schema_problem(doc)
    if problem is not None:
        return Refused(source, problem)
    status = doc.get("status")
    if status not in ("ok", "warn", "fail"):
        return Refused(source, "no status ok, warn or fail")
    findings = _findings(doc.get("findings"))
    if isinstance(findings, str):
        return Refused(source, findings)
    error = _s(doc.get("error"), _TEXT)
    code = doc.get("exit_code")
    if error or (isinstance(code, int) and not isinstance(code, bool) and code != 0):
        status = "fail"  # its own run failed its gate: an error, a signal, or a warning under its --strict
    raw = doc.get("host")
    host = (
        HostFacts(name=_s(raw.get("name")) or "unknown", **{f: _s(raw.get(f)) for f in _HOST_FIELDS})
        if isinstance(raw, dict)
        else None
    )
    install, gpus = install_of(doc)
    return NodeReport(
        source,
        host.name if host else None,
        host.scheduler_id if host else None,
        install,
        status,
        findings,
        error,
        gpus,
    )
