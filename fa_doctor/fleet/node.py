"""One node's report, judged: a small typed summary of what the fleet needs, or why it is refused as a whole.
The report is hostile: nothing here trusts a type, and every string and list kept is cut to a bound."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

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
_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class Seen:
    """A non-ok finding of one node: its title and remedies are kept only until the fleet has them once."""

    id: str
    severity: Severity
    title: str
    remedies: tuple[Remedy, ...]


class NodeReport(NamedTuple):  # a tuple: made once per report (10,000s), 5x cheaper than a frozen dataclass
    source: str
    identity: str  # two reports with the same identity are the same node's (see `identity`)
    host: str | None  # None: a report written before reports said where they ran
    scheduler_id: str | None
    install: Install
    status: str
    findings: tuple[Seen, ...]
    error: str | None
    gpus: int
    when: float = 0.0  # when the report was written, as far as merge knows (read.Document.when)


def identity(host: HostFacts) -> str:
    """What names the node itself, not the run: the scheduler's id of the node (a Ray node id, the Kubernetes
    node, the Slurm node's name; not the job or the pod, which come and go), else the host name."""
    ids = (
        ("ray", host.ray_node_id),
        ("k8s", host.k8s_node),
        ("k8s-pod", host.k8s_pod and f"{host.k8s_namespace or ''}/{host.k8s_pod}"),
        ("slurm", host.slurm_node_name),
        ("slurm-job", host.slurm_node_id and f"{host.slurm_job_id or ''}/{host.slurm_node_id}"),
    )
    return next((f"{kind}:{value}" for kind, value in ids if value), f"host:{host.name}")


def _s(value: Any, limit: int = _SHORT) -> str | None:
    return value[:limit] if type(value) is str else None  # json makes exactly str: no subclass to allow for


def _d(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict else _EMPTY


def _l(value: Any) -> list[Any]:
    return value[:_MAX_ITEMS] if type(value) is list else []


def _raw_pairs(items: list[Any], first: str, second: str) -> frozenset[tuple[Any, Any]]:
    """The distinct (first, second) values of a list of objects, compared raw before any text is made (most of a
    node's GPUs and packages are alike); where one is not an object or not hashable, what is not a string is None."""
    try:  # the usual report: objects with string (or null) values
        return frozenset([(item.get(first), item.get(second)) for item in items])
    except (AttributeError, TypeError):  # not an object, or a value that cannot be hashed (a list)
        objects = [_d(item) for item in items]
        return frozenset((_s(o.get(first)), _s(o.get(second))) for o in objects)


def install_of(doc: Mapping[str, Any]) -> tuple[Install, int]:
    """The fingerprint's parts, and how many GPUs the node saw (hardware: not part of the fingerprint). Most nodes
    share an install: it is made once per distinct combination of the raw values it reads."""
    torch, gpus, target = _d(doc.get("torch")), _d(doc.get("gpus")), _d(doc.get("target"))
    selection = _d(doc.get("selection"))
    devices = _l(gpus.get("devices"))
    prefill, decode = _d(selection.get("prefill")), _d(selection.get("decode"))
    key: tuple[Any, ...] = (
        _raw_pairs(_l(doc.get("packages")), "distribution", "version"),
        _raw_pairs(devices, "name", "capability"),
        torch.get("version"), torch.get("cuda"), torch.get("hip"),
        gpus.get("driver_version"), gpus.get("cuda_driver_version"),
        target.get("version"), target.get("implementation"), target.get("machine"), target.get("libc"),
        prefill.get("implementation"), prefill.get("backend"), prefill.get("source"),
        decode.get("implementation"), decode.get("backend"), decode.get("source"),
        doc.get("tool_version"),
    )  # fmt: skip
    try:
        return _install(key), len(devices)
    except TypeError:  # a list or an object where a string belongs: only whether it is set is read
        return _install((*key[:2], *(v if type(v) is str else bool(v) for v in key[2:]))), len(devices)


@functools.lru_cache(maxsize=1024)
def _install(key: tuple[Any, ...]) -> Install:
    packages, devices, version, cuda, hip, driver, cuda_driver, *rest = key
    platform = f"CUDA {_s(cuda)}" if cuda else f"ROCm {_s(hip)}" if hip else "CPU"
    phases = zip(("prefill", "decode"), (rest[4:7], rest[7:10]), strict=True)
    runs = [f"{p} {what} ({_s(src)})" for p, (impl, backend, src) in phases if (what := _s(impl) or _s(backend))]
    return Install(
        packages=tuple(sorted({f"{_s(n)} {_s(v)}" for n, v in packages} - {"None None"})),
        torch=f"{_s(version)} ({platform})" if version else None,
        driver=f"{_s(driver)} (CUDA {_s(cuda_driver)})" if _s(driver) else None,
        gpus=tuple(sorted({f"{_s(n)} ({_s(c)})" for n, c in devices})),
        python=" ".join(p for p in map(_s, rest[:4]) if p) or None,
        selection=", ".join(runs) or None,
        tool=_s(rest[10]),
    )


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
        fid, severity = (item.get("id"), item.get("severity")) if type(item) is dict else (None, None)
        level = _SEVERITY.get(severity) if type(severity) is str else None
        if type(fid) is not str or len(fid) > 100 or not _ID.fullmatch(fid) or level is None:
            return f"finding {number} has no valid id and severity"
        if level is not Severity.OK:
            seen.append(Seen(fid, level, _s(item.get("title"), _TEXT) or fid, _remedies(item.get("remedies"))))
    return tuple(sorted(seen, key=lambda f: -f.severity.rank))


def _schema_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__.replace('dict', 'object')}, not a fa-doctor report"
    schema = doc.get("schema")
    if schema == SCHEMA:
        if (command := doc.get("command")) not in ("check", "exec"):
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


def judge(source: str, doc: Any, when: float = 0.0) -> NodeReport | Refused:
    if (problem := _schema_problem(doc)) is not None:
        return Refused(source, problem)
    status = doc.get("status")
    if status not in ("ok", "warn", "fail"):
        return Refused(source, "no status ok, warn or fail")
    if isinstance(findings := _findings(doc.get("findings")), str):
        return Refused(source, findings)
    error = _s(doc.get("error"), _TEXT)
    if error or (type(code := doc.get("exit_code")) is int and code != 0):
        status = "fail"  # its own run failed its gate: an error, a signal, or a warning under its --strict
    # The host name, and the scheduler's ids if any is set; no host: a report written before reports said where.
    name, ids, host = None, None, doc.get("host")
    if type(host) is dict:
        name = _s(host.get("name")) or "unknown"
        found = [_s(host.get(f)) for f in _HOST_FIELDS]
        ids = HostFacts(name, *found) if any(found) else None
    who = identity(ids) if ids else f"source:{source}" if name is None else f"host:{name}"
    install, gpus = install_of(doc)
    sched = ids.scheduler_id if ids else None
    return NodeReport(source, who, name, sched, install, status, findings, error, gpus, when)
