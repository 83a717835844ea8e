"""The fleet's own findings, which decide its exit code: 1 when any node fails (or does not answer, or fewer
distinct nodes reported than expected), 0 when every node passes or warns; `--strict` makes warnings, outliers,
refused reports and nodes reported twice fail too; 2 when no node report could be read at all.

Their ids (`fleet.*`) are listed in docs/fleet.md; the node findings themselves are in the payload.
"""

from __future__ import annotations

from collections.abc import Mapping

from fa_doctor.fleet.model import FleetPayload, indexes
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.result import Result

_SHOWN = 20  # node names in a finding's evidence; the payload has them all


def _names(names: list[str], total: int | None = None) -> list[str]:
    """The first few names, and how many more there are (`total`: all of them, where only some were kept)."""
    more = (len(names) if total is None else total) - min(len(names), _SHOWN)
    return names[:_SHOWN] + ([f"... {more} more"] if more > 0 else [])


def _top(payload: FleetPayload, severity: Severity) -> str:
    found = [f for f in payload.findings if f.severity is severity][:3]
    return "; ".join(f"{f.id} on {len(f.nodes)} node(s) ({f.scope})" for f in found)


def _with(payload: FleetPayload, status: Severity) -> list[str]:
    return payload.names(indexes(payload.nodes.with_status(status)), _SHOWN + 1)


_FIX = Remedy(
    "Fix each finding with its remedies: scope `install` means every node of its group has it (fix the image or "
    "environment and roll it out), `node` only some (fix or drain those nodes); then check and merge again."
)


def findings(payload: FleetPayload) -> tuple[Finding, ...]:
    counts: Mapping[str, int] = payload.counts
    total = len(payload.nodes)
    out: list[Finding] = []
    if counts["fail"]:
        title = f"{counts['fail']} of {total} node(s) fail"
        out.append(
            Finding(
                "fleet.failing",
                Severity.FAIL,
                title,
                _top(payload, Severity.FAIL),
                {"nodes": _names(_with(payload, Severity.FAIL), counts["fail"])},
                (_FIX,),
            )
        )
    if counts["warn"]:
        title = f"{counts['warn']} of {total} node(s) warn"
        evidence = {"nodes": _names(_with(payload, Severity.WARN), counts["warn"])}
        out.append(Finding("fleet.warning", Severity.WARN, title, _top(payload, Severity.WARN), evidence, (_FIX,)))
    if payload.outliers:
        names = [o.node for o in payload.outliers]
        remedy = Remedy(
            "Look at the node itself: its install matches its group, so the difference is its hardware, driver "
            "state or caches. Compare its report with one of its group's."
        )
        title = f"{len(names)} node(s) differ from the rest of their group"
        out.append(Finding("fleet.outlier", Severity.WARN, title, "", {"nodes": _names(names)}, (remedy,)))
    if counts["refused"]:
        remedy = Remedy(
            "Re-run `fa-doctor check --json` on those nodes with this fa-doctor version (a truncated report: the "
            "node stopped while writing it, or its disk is full) and merge again."
        )
        sources = _names([r.source for r in payload.refused], counts["refused"])
        title = f"{counts['refused']} report(s) could not be merged"
        out.append(Finding("fleet.refused", Severity.WARN, title, "", {"sources": sources}, (remedy,)))
    if payload.duplicate_reports:
        remedy = Remedy(
            "Nothing to do if a node was checked again (its newest report is merged). If these are different "
            "machines, they share a host name and no scheduler id: give each its own host name, or run the check "
            "under the scheduler (Slurm, Kubernetes, Ray) so its node id is in the report."
        )
        nodes = _names([d.node for d in payload.duplicates], payload.duplicate_nodes)
        title = f"{payload.duplicate_nodes} node(s) reported more than once: the newest report of each is merged"
        out.append(Finding("fleet.duplicate", Severity.WARN, title, "", {"nodes": nodes}, (remedy,)))
    if payload.unreachable:
        remedy = Remedy(
            "Check that the node is up and its GPUs are not all held by a running server (`ray status`), then "
            "run again, with a longer --node-timeout if the smoke test needs it."
        )
        names = [u.node for u in payload.unreachable]
        title = f"{len(names)} node(s) gave no report"
        out.append(Finding("fleet.unreachable", Severity.FAIL, title, "", {"nodes": _names(names)}, (remedy,)))
    if payload.expected is not None and total < payload.expected:
        remedy = Remedy(
            "Find the nodes whose report is missing (the job's output folder, the pods' logs) and merge again."
        )
        title = f"{total} node(s) reported where {payload.expected} were expected"
        if payload.duplicate_reports:
            title += f" ({payload.duplicate_reports} more report(s) were of nodes already counted)"
        out.append(Finding("fleet.missing", Severity.FAIL, title, "", {"expected": payload.expected}, (remedy,)))
    if not out:
        out.append(Finding("fleet.ok", Severity.OK, f"all {total} node(s) pass"))
    return tuple(out)


def fleet_result(
    command: str, payload: FleetPayload, timings: Mapping[str, float], strict: bool = False, error: str | None = None
) -> Result:
    """`error`: the command could not run at all (no Ray cluster, stdin a terminal): exit 2, still a fleet report."""
    if error is None and not payload.nodes:
        counts = payload.counts
        refused = f" ({counts['refused']} refused, {counts['unreachable']} unreachable)"
        error = "no node report could be read" + (refused if counts["refused"] or counts["unreachable"] else "")
    return Result(command, findings(payload), payload, timings, strict, error)
