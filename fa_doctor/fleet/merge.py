"""Many node reports as one: nodes named uniquely, grouped by install fingerprint, findings counted once with
their remedies, and the outliers: nodes whose install matches their group but whose result does not.

A `Merger` takes one report at a time and keeps only a compact summary of each (10,000 reports fit in tens of
megabytes), then builds the `FleetPayload`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import astuple, dataclass

from fa_doctor.fleet.model import (
    FleetFinding,
    FleetPayload,
    Group,
    GroupFinding,
    Install,
    NodeResult,
    Outlier,
    Refused,
    Unreachable,
)
from fa_doctor.fleet.node import NodeReport, Seen, judge
from fa_doctor.fleet.read import Document
from fa_doctor.model.finding import Remedy, Severity

NODE_ERROR = "fleet.node_error"  # a node whose fa-doctor could not check it: its report has an error, no findings
OUTLIER_MIN_GROUP = 3  # with two nodes that differ, neither is the odd one
_REMEDIES_KEPT = 6
_RANK = {"ok": 0, "warn": 1, "fail": 2}
_STATUS = {"ok": Severity.OK, "warn": Severity.WARN, "fail": Severity.FAIL}
_ERROR_REMEDY = Remedy("Run `fa-doctor check` on the node by hand: its error says what stopped it (the node's line).")


@dataclass(slots=True)
class _Node:
    source: str
    host: str | None
    scheduler_id: str | None
    install: Install
    status: str
    findings: tuple[tuple[str, Severity], ...]
    error: str | None
    gpus: int
    name: str = ""


@dataclass(slots=True)
class _Agg:
    severity: Severity
    title: str
    remedies: dict[Remedy, None]


def fingerprint(install: Install) -> str:
    text = json.dumps(astuple(install), separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _short(scheduler_id: str) -> str:
    kind, _, value = scheduler_id.partition(":")
    return f"{kind}:{value[:12]}" if kind == "ray" else scheduler_id


class Merger:
    def __init__(self) -> None:
        self.refused: list[Refused] = []
        self._nodes: list[_Node] = []
        self._findings: dict[str, _Agg] = {}

    def add(self, item: Document | NodeReport | Refused) -> None:
        judged = judge(item.source, item.doc) if isinstance(item, Document) else item
        if isinstance(judged, Refused):
            self.refused.append(judged)
            return
        self._add(judged)

    def _add(self, report: NodeReport) -> None:
        seen = list(report.findings)
        if report.error:
            seen.insert(0, _error_seen())
        for f in seen:
            agg = self._findings.get(f.id)
            if agg is None:
                agg = self._findings[f.id] = _Agg(f.severity, f.title, {})
            elif f.severity.rank > agg.severity.rank:
                agg.severity, agg.title = f.severity, f.title
            for remedy in f.remedies:
                agg.remedies.setdefault(remedy, None)  # a remedy once, however many nodes print it
        pairs = tuple((f.id, f.severity) for f in seen)
        self._nodes.append(
            _Node(
                report.source,
                report.host,
                report.scheduler_id,
                report.install,
                report.status,
                pairs,
                report.error,
                report.gpus,
            )
        )

    def _name(self) -> None:
        """Host names, unique: where they collide, the scheduler's node id (else the source) tells them apart."""
        bases = Counter(n.host or n.source for n in self._nodes)
        for n in self._nodes:
            base = n.host or n.source
            tag = _short(n.scheduler_id) if n.scheduler_id else n.source
            n.name = base if bases[base] == 1 else f"{base} ({tag})"
        names = Counter(n.name for n in self._nodes)
        for n in self._nodes:
            if names[n.name] > 1:
                n.name = f"{n.name[:-1]}, {n.source})" if n.name.endswith(")") else f"{n.name} ({n.source})"

    def payload(
        self, unreachable: Iterable[Unreachable] = (), engine: str | None = None, expected: int | None = None
    ) -> FleetPayload:
        self._name()
        members: dict[Install, list[_Node]] = {}
        for n in self._nodes:
            members.setdefault(n.install, []).append(n)
        prints = {install: fingerprint(install) for install in members}
        groups = [_group(prints[i], i, nodes) for i, nodes in members.items()]
        groups.sort(key=lambda g: (-_RANK[g.status], -len(g.nodes), g.fingerprint))
        index = {g.fingerprint: number for number, g in enumerate(groups)}
        outliers = [o for i, nodes in members.items() for o in _outliers(prints[i], nodes)]
        return FleetPayload(
            nodes=tuple(
                NodeResult(n.name, index[prints[n.install]], _STATUS[n.status], n.findings, n.source, n.error, n.gpus)
                for n in self._nodes
            ),
            groups=tuple(groups),
            findings=self._fleet_findings(members, prints),
            outliers=tuple(outliers),
            refused=tuple(self.refused),
            unreachable=tuple(unreachable),
            engine=engine,
            expected=expected,
        )

    def _fleet_findings(
        self, members: dict[Install, list[_Node]], prints: dict[Install, str]
    ) -> tuple[FleetFinding, ...]:
        nodes: dict[str, list[str]] = {}
        where: dict[str, dict[str, tuple[int, int]]] = {}  # id -> group -> (nodes with it, group size)
        for install, group in members.items():
            per_group = Counter(fid for n in group for fid, _ in n.findings)
            for fid, count in per_group.items():
                where.setdefault(fid, {})[prints[install]] = (count, len(group))
        for n in self._nodes:
            for fid, _ in n.findings:
                nodes.setdefault(fid, []).append(n.name)
        out = []
        for fid, agg in self._findings.items():
            spread = where.get(fid, {})
            scope = "install" if all(have == size for have, size in spread.values()) else "node"
            remedies = tuple(agg.remedies)
            out.append(
                FleetFinding(
                    fid, agg.severity, agg.title, tuple(nodes.get(fid, ())), tuple(spread), scope,
                    remedies[:_REMEDIES_KEPT], max(1, len(remedies)),
                )
            )  # fmt: skip
        out.sort(key=lambda f: (-f.severity.rank, -len(f.nodes), f.id))
        return tuple(out)


def _error_seen() -> Seen:
    return Seen(NODE_ERROR, Severity.FAIL, "fa-doctor could not check the node", (_ERROR_REMEDY,))


def _group(print_: str, install: Install, nodes: list[_Node]) -> Group:
    counts = Counter(n.status for n in nodes)
    status = max(counts, key=lambda s: _RANK[s])
    found = Counter(pair for n in nodes for pair in n.findings)
    findings = sorted(
        (GroupFinding(fid, sev, count) for (fid, sev), count in found.items()),
        key=lambda f: (-f.severity.rank, -f.nodes, f.id),
    )
    return Group(
        print_, install, tuple(n.name for n in nodes), status, {s: counts.get(s, 0) for s in _RANK}, tuple(findings)
    )


def _signature(n: _Node) -> tuple[object, ...]:
    return (n.status, frozenset(n.findings), n.gpus)


def _outliers(print_: str, nodes: list[_Node]) -> list[Outlier]:
    """The nodes whose result differs from the one a strict majority of their group shares."""
    if len(nodes) < OUTLIER_MIN_GROUP:
        return []
    ((norm, count),) = Counter(map(_signature, nodes)).most_common(1)
    if count * 2 <= len(nodes):
        return []
    usual = next(n for n in nodes if _signature(n) == norm)
    return [Outlier(n.name, print_, _why(n, usual, count)) for n in nodes if _signature(n) != norm]


def _ids(pairs: Iterable[tuple[str, Severity]]) -> str:
    return ", ".join(f"{fid} ({sev.value})" for fid, sev in sorted(pairs, key=lambda p: (-p[1].rank, p[0])))


def _why(n: _Node, usual: _Node, others: int) -> tuple[str, ...]:
    why = []
    if n.status != usual.status:
        why.append(f"{n.status} where {others} other node(s) of its group are {usual.status}")
    if n.gpus != usual.gpus:
        why.append(f"{n.gpus} GPU(s) visible where the others see {usual.gpus}")
    extra, missing = set(n.findings) - set(usual.findings), set(usual.findings) - set(n.findings)
    if extra:
        why.append("only here: " + _ids(extra))
    if missing:
        why.append("the rest of its group has, this node not: " + _ids(missing))
    if n.error:
        why.append(f"fa-doctor could not check it: {n.error}")
    return tuple(why)
