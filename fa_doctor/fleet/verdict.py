"""The fleet's own findings (`fleet.*`), which decide its exit code (docs/fleet.md: "Exit codes" and "The fleet's
own finding ids")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fa_doctor.fleet.model import STATUSES, FleetPayload
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.result import Result

_SHOWN = 20  # node names in a finding's evidence; the payload has them all
_REMEDY = {
    "fleet.failing": "Fix each finding with its remedies: scope `install` means every node of its group has it (fix "
    "the image or environment and roll it out), `node` only some (fix or drain those nodes); then check and merge "
    "again.",
    "fleet.outlier": "Look at the node itself: its install matches its group, so the difference is its hardware, "
    "driver state or caches. Compare its report with one of its group's.",
    "fleet.refused": "Re-run `fa-doctor check --json` on those nodes with this fa-doctor version (a truncated report: "
    "the node stopped while writing it, or its disk is full) and merge again.",
    "fleet.duplicate": "Nothing to do if a node was checked again (its newest report is merged). If these are "
    "different machines, they share a host name and no scheduler id: give each its own host name, or run the check "
    "under the scheduler (Slurm, Kubernetes, Ray) so its node id is in the report.",
    "fleet.unreachable": "Check that the node is up and its GPUs are not all held by a running server (`ray status`), "
    "then run again, with a longer --node-timeout if the smoke test needs it.",
    "fleet.missing": "Find the nodes whose report is missing (the job's output folder, the pods' logs) and merge "
    "again.",
}
_REMEDY["fleet.warning"] = _REMEDY["fleet.failing"]


def _names(names: list[str], total: int | None = None) -> list[str]:
    """The first few names, and how many more there are (`total`: all of them, where only some were kept)."""
    more = (len(names) if total is None else total) - min(len(names), _SHOWN)
    return names[:_SHOWN] + ([f"... {more} more"] if more > 0 else [])


def findings(payload: FleetPayload) -> tuple[Finding, ...]:
    counts, total = payload.counts, len(payload.nodes)
    out: list[Finding] = []

    def add(fid: str, severity: Severity, title: str, evidence: Mapping[str, Any], detail: str = "") -> None:
        out.append(Finding(fid, severity, title, detail, evidence, (Remedy(_REMEDY[fid]),)))

    for fid, status in (("fleet.failing", Severity.FAIL), ("fleet.warning", Severity.WARN)):
        if counts[status.value]:
            top = [f for f in payload.findings if f.severity is status][:3]
            detail = "; ".join(f"{f.id} on {len(f.nodes)} node(s) ({f.scope})" for f in top)
            held = [i for i, s in enumerate(payload.nodes.statuses) if STATUSES[s] is status]
            nodes = _names(payload.names(held, _SHOWN + 1), counts[status.value])
            add(fid, status, f"{counts[status.value]} of {total} node(s) {status.value}", {"nodes": nodes}, detail)
    if payload.outliers:
        title = f"{len(payload.outliers)} node(s) differ from the rest of their group"
        add("fleet.outlier", Severity.WARN, title, {"nodes": _names([o.node for o in payload.outliers])})
    if counts["refused"]:
        sources = _names([r.source for r in payload.refused], counts["refused"])
        add("fleet.refused", Severity.WARN, f"{counts['refused']} report(s) could not be merged", {"sources": sources})
    if payload.duplicate_reports:
        nodes = _names([d.node for d in payload.duplicates], payload.duplicate_nodes)
        title = f"{payload.duplicate_nodes} node(s) reported more than once: the newest report of each is merged"
        add("fleet.duplicate", Severity.WARN, title, {"nodes": nodes})
    if payload.unreachable:
        nodes = _names([u.node for u in payload.unreachable])
        add("fleet.unreachable", Severity.FAIL, f"{len(payload.unreachable)} node(s) gave no report", {"nodes": nodes})
    if payload.expected is not None and total < payload.expected:
        title = f"{total} node(s) reported where {payload.expected} were expected"
        if payload.duplicate_reports:
            title += f" ({payload.duplicate_reports} more report(s) were of nodes already counted)"
        add("fleet.missing", Severity.FAIL, title, {"expected": payload.expected})
    return tuple(out) or (Finding("fleet.ok", Severity.OK, f"all {total} node(s) pass"),)


def fleet_result(
    command: str, payload: FleetPayload, timings: Mapping[str, float], strict: bool = False, error: str | None = None
) -> Result:
    """`error`: the command could not run at all (no Ray cluster, stdin a terminal): exit 2, still a fleet report."""
    if error is None and not payload.nodes:
        counts = payload.counts
        refused = f" ({counts['refused']} refused, {counts['unreachable']} unreachable)"
        error = "no node report could be read" + (refused if counts["refused"] or counts["unreachable"] else "")
    return Result(command, findings(payload), payload, timings, strict, error)
