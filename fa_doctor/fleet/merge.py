"""Many node reports as one: one entry per node (its identity, not its file), named uniquely, grouped by install
fingerprint, findings counted once with their remedies, and the outliers: nodes whose install matches their group
but whose result does not. Bounded: see MAX_* (a report beyond is refused, and says why) and docs/fleet.md: Scale."""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from typing import Any

from fa_doctor.fleet.model import (
    STATUSES,
    Duplicate,
    FleetFinding,
    FleetPayload,
    Group,
    GroupFinding,
    Install,
    Nodes,
    Outlier,
    Refused,
    Unreachable,
    indexes,
)
from fa_doctor.fleet.node import NodeReport, Seen, judge
from fa_doctor.fleet.read import Document
from fa_doctor.model.finding import Remedy, Severity

NODE_ERROR = "fleet.node_error"  # a node whose fa-doctor could not check it: its report has an error, no findings
OUTLIER_MIN_GROUP = 3  # with two nodes that differ, neither is the odd one
MAX_NODES = 250_000  # distinct nodes in one merge (~1.5 KB each, report included): a bound, not a fleet size
MAX_GROUPS = 1_000  # distinct installs
MAX_FINDING_IDS = 1_000  # distinct non-ok finding ids (fa-doctor has fewer than 100)
LISTED = 20  # refused reports and duplicated nodes listed; all are counted
_DROPPED_LISTED = 3  # per duplicated node, the sources of the reports not merged
_REMEDIES_KEPT = 6
_VARIANTS_COUNTED = 1_000  # distinct remedies counted per finding id (remedy_variants stops there)
_RANK = {"ok": 0, "warn": 1, "fail": 2}
_ERROR_FIX = Remedy("Run `fa-doctor check` on the node by hand: its error says what stopped it (the node's line).")
_ERROR_SEEN = Seen(NODE_ERROR, Severity.FAIL, "fa-doctor could not check the node", (_ERROR_FIX,))

Pairs = tuple[tuple[str, Severity], ...]


@dataclass(slots=True)
class _Agg:
    title: str
    severity: Severity  # of the title
    remedies: dict[Remedy, None]  # the first _REMEDIES_KEPT, in the order seen
    variants: set[int]  # hashes of the distinct remedies seen, up to _VARIANTS_COUNTED


def fingerprint(install: Install) -> str:
    text = json.dumps(astuple(install), separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _short(scheduler_id: str) -> str:
    kind, _, value = scheduler_id.partition(":")
    return f"{kind}:{value[:12]}" if kind == "ray" else scheduler_id


def _worst_first(pair: tuple[str, Severity]) -> tuple[int, str]:
    return -pair[1].rank, pair[0]


class Merger:
    def __init__(self) -> None:
        self.refused: list[Refused] = []  # the first LISTED
        self.refused_count = self.duplicate_reports = 0
        self._slot: dict[str, int] = {}  # identity -> node index
        # One entry per node in each column: the node's text in lists, its numbers in arrays.
        self._hosts: list[str | None] = []
        self._scheduler: list[str | None] = []
        self._sources: list[str] = []
        self._errors: dict[int, str] = {}
        self._when, self._status = array("d"), array("B")
        self._install, self._set, self._gpus = indexes(), indexes(), indexes()
        self._columns: tuple[Any, ...] = (self._hosts, self._scheduler, self._sources, self._when)
        self._columns += (self._install, self._status, self._set, self._gpus)
        self._installs: dict[Install, int] = {}
        self._sets: dict[Pairs, int] = {}
        self._findings: dict[str, _Agg] = {}
        self._dups: dict[int, list[str]] = {}  # a node reported more than once -> the first sources not merged
        self._dup_reports: Counter[int] = Counter()  # and how many of its reports were not merged

    def add(self, item: Document | NodeReport | Refused) -> None:
        judged = judge(item.source, item.doc, item.when) if isinstance(item, Document) else item
        if isinstance(judged, NodeReport):
            if (problem := self._add(judged)) is None:
                return
            judged = Refused(judged.source, problem)
        self.refused_count += 1
        if len(self.refused) < LISTED:
            self.refused.append(judged)

    def _add(self, report: NodeReport) -> str | None:
        """None, or why the report cannot be held."""
        slot = self._slot.get(report.identity)
        if slot is None and len(self._sources) >= MAX_NODES:
            return f"beyond {MAX_NODES} distinct nodes, the most one merge holds: merge the fleet in parts"
        if slot is not None and report.when < self._when[slot]:  # an older report of a node held: not merged
            self._duplicate(slot, report.source)
            return None
        install = self._installs.get(report.install)
        if install is None and len(self._installs) >= MAX_GROUPS:
            return f"a new install beyond {MAX_GROUPS} distinct ones, the most one merge holds"
        seen = (_ERROR_SEEN, *report.findings) if report.error else report.findings
        if len(self._findings) + len({f.id for f in seen} - self._findings.keys()) > MAX_FINDING_IDS:
            return f"finding ids beyond {MAX_FINDING_IDS} distinct ones, the most one merge holds"
        if install is None:
            install = self._installs[report.install] = len(self._installs)
        for f in seen:
            self._aggregate(f)
        pairs = tuple(sorted({(f.id, f.severity) for f in seen}, key=_worst_first))
        found = self._sets.setdefault(pairs, len(self._sets))
        status = _RANK[report.status]
        values = (report.host, report.scheduler_id, report.source, report.when, install, status, found, report.gpus)
        if slot is None:
            slot = self._slot[report.identity] = len(self._sources)
            for column, value in zip(self._columns, values, strict=True):
                column.append(value)
        else:  # a newer report of a node held replaces it (the old one's titles and remedies stay known)
            self._duplicate(slot, self._sources[slot])
            for column, value in zip(self._columns, values, strict=True):
                column[slot] = value
            self._errors.pop(slot, None)
        if report.error:
            self._errors[slot] = report.error
        return None

    def _duplicate(self, slot: int, dropped: str) -> None:
        sources = self._dups.setdefault(slot, [])
        self._dup_reports[slot] += 1
        self.duplicate_reports += 1
        if len(sources) < _DROPPED_LISTED:
            sources.append(dropped)

    def _aggregate(self, f: Seen) -> None:
        agg = self._findings.get(f.id)
        if agg is None:
            agg = self._findings[f.id] = _Agg(f.title, f.severity, {}, set())
        elif f.severity.rank > agg.severity.rank:
            agg.severity, agg.title = f.severity, f.title
        for remedy in f.remedies:  # a remedy once, however many nodes print it
            if len(agg.variants) < _VARIANTS_COUNTED:
                agg.variants.add(hash(remedy))
            if len(agg.remedies) < _REMEDIES_KEPT:
                agg.remedies.setdefault(remedy, None)

    def _names(self) -> list[str]:
        """Host names, unique: where they collide, the scheduler's node id (else the source) tells them apart."""
        bases = [h or s for h, s in zip(self._hosts, self._sources, strict=True)]
        count = Counter(bases)
        names = [
            base if count[base] == 1 else f"{base} ({_short(sched) if sched else source})"
            for base, sched, source in zip(bases, self._scheduler, self._sources, strict=True)
        ]
        again = Counter(names)
        return [
            name if again[name] == 1 else f"{name[:-1]}, {source})" if name.endswith(")") else f"{name} ({source})"
            for name, source in zip(names, self._sources, strict=True)
        ]

    def payload(
        self, unreachable: Iterable[Unreachable] = (), engine: str | None = None, expected: int | None = None
    ) -> FleetPayload:
        names = self._names()
        installs = list(self._installs)
        sets = list(self._sets)
        members: list[list[int]] = [[] for _ in installs]
        for node, install in enumerate(self._install):
            members[install].append(node)
        held = [i for i, nodes in enumerate(members) if nodes]  # an install only a replaced report had: none
        prints = {i: fingerprint(installs[i]) for i in held}
        made = sorted(
            ((self._group(prints[i], installs[i], members[i], sets), i) for i in held),
            key=lambda gi: (-_RANK[gi[0].status], -len(gi[0].nodes), gi[0].fingerprint),
        )
        groups = [group for group, _ in made]
        number = {install: n for n, (_, install) in enumerate(made)}  # install index -> group index
        group_of = indexes(number[i] for i in self._install)
        numbers = (group_of, self._status[:], self._gpus[:], self._set[:])
        nodes = Nodes(tuple(names), tuple(self._sources), dict(self._errors), *numbers, tuple(sets))
        outliers = [o for i in held for o in self._outliers(prints[i], members[i], names, sets)]
        duplicates = [
            Duplicate(names[slot], self._sources[slot], tuple(dropped), self._dup_reports[slot] + 1)
            for slot, dropped in sorted(self._dups.items())[:LISTED]
        ]
        return FleetPayload(
            nodes=nodes,
            groups=tuple(groups),
            findings=self._fleet_findings(members, prints, sets),
            outliers=tuple(outliers),
            refused=tuple(self.refused),
            unreachable=tuple(unreachable),
            engine=engine,
            expected=expected,
            duplicates=tuple(duplicates),
            refused_count=self.refused_count,
            duplicate_nodes=len(self._dups),
            duplicate_reports=self.duplicate_reports,
        )

    def _group(self, print_: str, install: Install, nodes: list[int], sets: list[Pairs]) -> Group:
        counts = Counter(STATUSES[self._status[i]].value for i in nodes)
        status = max(counts, key=lambda s: _RANK[s])
        found: Counter[tuple[str, Severity]] = Counter()
        for found_set, count in Counter(self._set[i] for i in nodes).items():
            for pair in sets[found_set]:
                found[pair] += count
        findings = sorted(
            (GroupFinding(fid, sev, count) for (fid, sev), count in found.items()),
            key=lambda f: (-f.severity.rank, -f.nodes, f.id),
        )
        return Group(print_, install, indexes(nodes), status, {s: counts.get(s, 0) for s in _RANK}, tuple(findings))

    def _fleet_findings(
        self, members: list[list[int]], prints: dict[int, str], sets: list[Pairs]
    ) -> tuple[FleetFinding, ...]:
        ids = [tuple(dict.fromkeys(fid for fid, _ in pairs)) for pairs in sets]  # a node's ids, each once
        nodes: defaultdict[str, array[int]] = defaultdict(indexes)
        worst: dict[str, Severity] = {}
        for found_set in set(self._set):  # the finding sets of nodes held (not of reports replaced)
            for fid, severity in sets[found_set]:
                worst[fid] = max(worst.get(fid, severity), severity, key=lambda s: s.rank)
        for node, found_set in enumerate(self._set):
            for fid in ids[found_set]:
                nodes[fid].append(node)
        out = []
        for fid, held in nodes.items():
            agg = self._findings[fid]
            spread = sorted(Counter(self._install[n] for n in held).items())  # (install, its nodes with it)
            scope = "install" if all(have == len(members[i]) for i, have in spread) else "node"
            groups = tuple(prints[i] for i, _ in spread)
            variants = max(1, len(agg.variants))
            out.append(FleetFinding(fid, worst[fid], agg.title, held, groups, scope, tuple(agg.remedies), variants))
        return tuple(sorted(out, key=lambda f: (-f.severity.rank, -len(f.nodes), f.id)))

    def _signature(self, node: int) -> tuple[int, int, int]:
        return (self._status[node], self._set[node], self._gpus[node])

    def _outliers(self, print_: str, nodes: list[int], names: list[str], sets: list[Pairs]) -> list[Outlier]:
        """The nodes whose result differs from the one a strict majority of their group shares."""
        if len(nodes) < OUTLIER_MIN_GROUP:
            return []
        ((norm, count),) = Counter(map(self._signature, nodes)).most_common(1)
        if count * 2 <= len(nodes):
            return []
        return [Outlier(names[n], print_, self._why(n, norm, count, sets)) for n in nodes if self._signature(n) != norm]

    def _why(self, node: int, usual: tuple[int, int, int], others: int, sets: list[Pairs]) -> tuple[str, ...]:
        why = []
        status, found, gpus = self._signature(node)
        if status != usual[0]:
            was, now = STATUSES[usual[0]].value, STATUSES[status].value
            why.append(f"{now} where {others} other node(s) of its group are {was}")
        if gpus != usual[2]:
            why.append(f"{gpus} GPU(s) visible where the others see {usual[2]}")
        mine, theirs = set(sets[found]), set(sets[usual[1]])
        if mine - theirs:
            why.append("only here: " + _ids(mine - theirs))
        if theirs - mine:
            why.append("the rest of its group has, this node not: " + _ids(theirs - mine))
        if node in self._errors:
            why.append(f"fa-doctor could not check it: {self._errors[node]}")
        return tuple(why)


def _ids(pairs: Iterable[tuple[str, Severity]]) -> str:
    return ", ".join(f"{fid} ({sev.value})" for fid, sev in sorted(pairs, key=_worst_first))
