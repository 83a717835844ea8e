"""The fleet report, typed: what `merge` and `fleet ray` return as their payload (schema `fa-doctor.fleet/1`).

Every string in it came from a node's report and is hostile: the render boundary escapes it like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fa_doctor.model.finding import Remedy, Severity

FLEET_SCHEMA = "fa-doctor.fleet/1"


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
    """One node's verdict, as the fleet report lists it (one JUnit test case per node)."""

    name: str  # unique in the fleet report
    # Only the name and the source are node text: a fleet of 10,000 is walked by the render boundary in ~0.2 s.
    group: int  # its group's index in FleetPayload.groups
    status: Severity  # OK, WARN or FAIL (FAIL also when its own run exited non-zero, e.g. under its --strict)
    findings: tuple[tuple[str, Severity], ...] = ()  # its non-ok finding ids, worst first
    source: str = ""  # the file (and line) or the engine it came from
    error: str | None = None  # fa-doctor could not check the node
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class GroupFinding:
    id: str
    severity: Severity
    nodes: int  # how many of the group's nodes have it


@dataclass(frozen=True, slots=True)
class Group:
    fingerprint: str
    install: Install
    nodes: tuple[str, ...]
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
    nodes: tuple[str, ...]
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
class Unreachable:
    """A node the engine knows but that gave no report in time."""

    node: str
    why: str


@dataclass(frozen=True, slots=True)
class FleetPayload:
    nodes: tuple[NodeResult, ...] = ()
    groups: tuple[Group, ...] = ()
    findings: tuple[FleetFinding, ...] = ()
    outliers: tuple[Outlier, ...] = ()
    refused: tuple[Refused, ...] = ()
    unreachable: tuple[Unreachable, ...] = ()
    engine: str | None = None  # "ray" when `fleet ray` collected the reports
    expected: int | None = None  # merge --expect N

    @property
    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "warn": 0, "fail": 0}
        for node in self.nodes:
            out[node.status.value] += 1
        return out | {"refused": len(self.refused), "unreachable": len(self.unreachable)}
