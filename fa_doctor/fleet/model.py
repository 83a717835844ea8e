"""The fleet report, typed: what `merge` and `fleet ray` return as their payload (schema `fa-doctor.fleet/1`).

Every string in it came from a node's report and is hostile: the render boundary escapes it like any other.
A fleet may have 100,000 nodes: each node's text (name, source, error) is held once, in `Nodes`; groups and
findings name their nodes by index into it, in arrays of numbers, which the boundary passes through as they are.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
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


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node's verdict, as the fleet report lists it (one JUnit test case per node): a row of `Nodes`."""

    name: str  # unique in the fleet report
    group: int  # its group's index in FleetPayload.groups
    status: Severity  # OK, WARN or FAIL (FAIL also when its own run exited non-zero, e.g. under its --strict)
    findings: tuple[tuple[str, Severity], ...] = ()  # its non-ok finding ids, worst first
    source: str = ""  # the file (and line) or the engine it came from
    error: str | None = None  # fa-doctor could not check the node
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Nodes:
    """Every node of the fleet as columns, in the fleet's order; iterating gives `NodeResult` rows.

    Only `names`, `sources` and `errors` are node text; the rest are numbers: the group's index, the status
    (index into STATUSES), the GPU count, and the finding set (index into `finding_sets`, the distinct lists of
    non-ok findings: most nodes of a fleet share a few)."""

    names: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    errors: Mapping[int, str] = field(default_factory=dict)  # node index -> why fa-doctor could not check it
    groups: array[int] = field(default_factory=indexes)
    statuses: array[int] = field(default_factory=indexes)
    gpus: array[int] = field(default_factory=indexes)
    findings: array[int] = field(default_factory=indexes)
    finding_sets: tuple[tuple[tuple[str, Severity], ...], ...] = ()

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> NodeResult:
        return NodeResult(
            self.names[i],
            self.groups[i],
            STATUSES[self.statuses[i]],
            self.finding_sets[self.findings[i]],
            self.sources[i],
            self.errors.get(i),
            self.gpus[i],
        )

    def __iter__(self) -> Iterator[NodeResult]:
        return (self[i] for i in range(len(self.names)))

    def count(self, status: Severity) -> int:
        return self.statuses.count(STATUSES.index(status))

    def with_status(self, status: Severity) -> list[int]:
        code = STATUSES.index(status)
        return [i for i, s in enumerate(self.statuses) if s == code]


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
    """One non-ok finding id across the fleet, its remedies once.

    `scope` answers "the image or the node?": `install` when every node of each group it occurs in has it,
    `node` when only some nodes of a group do."""

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
    """A report that was read but not merged (other schema, truncated, not a node report), and why."""

    source: str
    why: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A node that sent more than one report (the same identity: its host name or scheduler node id): the
    newest is merged, the others are not."""

    node: str  # its name in the fleet report
    kept: str  # the source of the report merged
    dropped: tuple[str, ...]  # the sources of the others, the first few
    reports: int  # how many reports of it were read


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A node the engine knows but that gave no report in time."""

    node: str
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
        out = {s.value: self.nodes.count(s) for s in STATUSES}
        refused = max(self.refused_count, len(self.refused))
        return out | {"refused": refused, "unreachable": len(self.unreachable), "duplicates": self.duplicate_reports}

    def names(self, nodes: array[int], limit: int | None = None) -> list[str]:
        """The names of nodes given by index (the first `limit`)."""
        names = self.nodes.names
        return [names[i] for i in (nodes if limit is None else nodes[:limit])]
