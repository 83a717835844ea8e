"""The fleet report, typed: the payload of `merge` and `fleet ray` (schema `fa-doctor.fleet/1`). Every string came
from a node's report and is hostile: the render boundary escapes it. Each node's text is held once, in `Nodes`;
groups and findings name nodes by index, in arrays the boundary passes through (100,000 nodes stay small). The
texts every format says alike (headline, summary, an install's line, node names) are methods here."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from fa_doctor.model.finding import Remedy, Severity

FLEET_SCHEMA = "fa-doctor.fleet/1"
STATUSES = (Severity.OK, Severity.WARN, Severity.FAIL)  # a node's status, as Nodes.statuses numbers it


def indexes(values: Iterator[int] | list[int] | tuple[int, ...] = ()) -> array[int]:
    """Node indexes (or counts) as an array: 4 bytes each, and no text for the render boundary to walk."""
    return array("I", values)


@dataclass(frozen=True, slots=True)
class Install:
    """What a fingerprint is made of: the same values on two nodes mean the same install on the same hardware
    model, so a different result between them is the node's, not the image's."""

    packages: tuple[str, ...] = ()  # "<name> <version>", sorted
    torch: str | None = None  # "2.11.0+cu130 (CUDA 13.0)"
    driver: str | None = None  # "580.159.04 (CUDA 13.0)"
    gpus: tuple[str, ...] = ()  # distinct models: "NVIDIA H200 (9.0)"
    python: str | None = None  # "3.12.3 cpython x86_64 glibc 2.39"
    selection: str | None = None  # what runs for prefill and decode, and why (the knobs' effect)
    tool: str | None = None  # the fa-doctor version that judged it: another version may judge differently

    def line(self) -> str:
        """The install in one line, as every format shows a group's."""
        parts = [
            # torch has its own part (with its CUDA); the report's package list names it too
            ", ".join(p for p in self.packages if not p.startswith("torch ")) or "no FA package",
            f"torch {self.torch}" if self.torch else "no torch",
            f"driver {self.driver}" if self.driver else "no driver",
            ", ".join(self.gpus) or "no GPU",
        ]
        extra = (self.selection, self.python and f"Python {self.python}", self.tool and f"fa-doctor {self.tool}")
        return " · ".join(parts + [p for p in extra if p])


@dataclass(frozen=True, slots=True)
class NodeResult:  # one node's verdict: a row of `Nodes`
    name: str  # unique in the fleet report
    group: int  # its group's index in FleetPayload.groups
    status: Severity  # OK, WARN or FAIL (FAIL also when its own run exited non-zero, e.g. under its --strict)
    findings: tuple[tuple[str, Severity], ...] = ()  # its non-ok finding ids, worst first
    source: str = ""  # the file (and line) or the engine it came from
    error: str | None = None  # fa-doctor could not check the node
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Nodes:
    """Every node as columns, in the fleet's order: text in tuples, numbers in arrays; `findings` indexes
    `finding_sets`, the distinct lists of non-ok findings (most nodes share a few). Iterating gives NodeResults."""

    names: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    errors: Mapping[int, str] = field(default_factory=dict)  # node index -> why fa-doctor could not check it
    groups: array[int] = field(default_factory=indexes)
    statuses: array[int] = field(default_factory=indexes)  # index into STATUSES
    gpus: array[int] = field(default_factory=indexes)
    findings: array[int] = field(default_factory=indexes)
    finding_sets: tuple[tuple[tuple[str, Severity], ...], ...] = ()

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[NodeResult]:
        for i, name in enumerate(self.names):
            status, found = STATUSES[self.statuses[i]], self.finding_sets[self.findings[i]]
            yield NodeResult(name, self.groups[i], status, found, self.sources[i], self.errors.get(i), self.gpus[i])


@dataclass(frozen=True, slots=True)
class GroupFinding:
    id: str
    severity: Severity
    nodes: int  # how many of the group's nodes have it


@dataclass(frozen=True, slots=True)
class Group:
    fingerprint: str
    install: Install
    nodes: array[int]  # indexes into FleetPayload.nodes
    status: str  # the worst of its nodes
    counts: Mapping[str, int] = field(default_factory=dict)  # ok/warn/fail -> nodes
    findings: tuple[GroupFinding, ...] = ()


@dataclass(frozen=True, slots=True)
class FleetFinding:
    """One non-ok finding id across the fleet, its remedies once. `scope`: `install` when every node of each group
    it occurs in has it (the image's), `node` when only some nodes of a group do (the nodes')."""

    id: str
    severity: Severity
    title: str
    nodes: array[int]  # indexes into FleetPayload.nodes
    groups: tuple[str, ...]
    scope: str
    remedies: tuple[Remedy, ...] = ()
    variants: int = 1  # distinct remedies seen (the first few are kept)


@dataclass(frozen=True, slots=True)
class Outlier:
    node: str
    group: str
    why: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refused:
    source: str  # a report read but not merged (other schema, truncated, not a node report)
    why: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    node: str  # a node that sent more than one report (one identity): its name in the fleet report
    kept: str  # the source of the report merged (the newest)
    dropped: tuple[str, ...]  # the sources of the others, the first few
    reports: int  # how many reports of it were read


@dataclass(frozen=True, slots=True)
class Unreachable:
    node: str  # a node the engine knows but that gave no report in time
    why: str


@dataclass(frozen=True, slots=True)
class FleetPayload:
    nodes: Nodes = field(default_factory=Nodes)
    groups: tuple[Group, ...] = ()
    findings: tuple[FleetFinding, ...] = ()
    outliers: tuple[Outlier, ...] = ()
    refused: tuple[Refused, ...] = ()  # the first few; `refused_count` counts them all
    unreachable: tuple[Unreachable, ...] = ()
    engine: str | None = None  # "ray" when `fleet ray` collected the reports
    expected: int | None = None  # merge --expect N
    duplicates: tuple[Duplicate, ...] = ()  # the first few nodes that sent more than one report
    refused_count: int = 0  # all refused reports, listed or not
    duplicate_nodes: int = 0  # nodes that sent more than one report, listed or not
    duplicate_reports: int = 0  # reports not merged because a newer one of the same node was

    @property
    def counts(self) -> dict[str, int]:
        out = {s.value: self.nodes.statuses.count(i) for i, s in enumerate(STATUSES)}
        refused = max(self.refused_count, len(self.refused))
        return out | {"refused": refused, "unreachable": len(self.unreachable), "duplicates": self.duplicate_reports}

    def head(self, command: str) -> str:
        return f"fa-doctor {command}" + (f" on {self.engine}" if self.engine else "")

    def summary(self) -> str:
        c = self.counts
        text = f"{len(self.nodes)} node(s) in {len(self.groups)} group(s): {c['ok']} ok, {c['warn']} warn"
        extra = [f"{c[k]} {k}" for k in ("refused", "unreachable") if c[k]]
        extra += [f"{len(self.outliers)} outlier(s)"] if self.outliers else []
        extra += [f"{self.duplicate_nodes} node(s) reported more than once"] if self.duplicate_reports else []
        extra += [f"{self.expected} expected"] if self.expected is not None else []
        return f"{text}, {c['fail']} fail" + ("; " + ", ".join(extra) if extra else "")

    def node_names(self, nodes: Sequence[int], limit: int | None = 10) -> str:
        shown = self.names(nodes, limit)
        more = len(nodes) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")

    def others(self) -> dict[str, tuple[list[tuple[str, str]], int]]:
        """Refused reports, unreachable nodes and nodes reported more than once: the (where, why) rows listed, and
        how many more were counted but not listed (a merge lists the first few of each)."""
        duplicates = []
        for d in self.duplicates:
            more = d.reports - 1 - len(d.dropped)
            dropped = ", ".join(d.dropped) + (f" and {more} more" if more > 0 else "")
            duplicates.append((d.node, f"{d.reports} reports: merged {d.kept} (the newest); not merged: {dropped}"))
        return {
            "refused": ([(r.source, r.why) for r in self.refused], self.counts["refused"] - len(self.refused)),
            "unreachable": ([(u.node, u.why) for u in self.unreachable], 0),
            "duplicates": (duplicates, self.duplicate_nodes - len(self.duplicates)),
        }

    def names(self, nodes: Sequence[int], limit: int | None = None) -> list[str]:
        names = self.nodes.names
        return [names[i] for i in (nodes if limit is None else nodes[:limit])]
