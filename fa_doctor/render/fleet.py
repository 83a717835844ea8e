"""What every format says the same way of a fleet report (`FleetPayload`): the headline, an install in one line,
node names, and the lists of what could not be merged."""

from __future__ import annotations

from array import array

from fa_doctor.fleet.model import FleetPayload, Install
from fa_doctor.model.result import Result

Rows = list[tuple[str, str]]  # (where, why)


def head(result: Result, payload: FleetPayload) -> str:
    return f"fa-doctor {result.command}" + (f" on {payload.engine}" if payload.engine else "")


def fleet_summary(payload: FleetPayload) -> str:
    c = payload.counts
    text = f"{len(payload.nodes)} node(s) in {len(payload.groups)} group(s): {c['ok']} ok, {c['warn']} warn"
    extra = [f"{c[k]} {k}" for k in ("refused", "unreachable") if c[k]]
    if payload.outliers:
        extra.append(f"{len(payload.outliers)} outlier(s)")
    if payload.duplicate_reports:
        extra.append(f"{payload.duplicate_nodes} node(s) reported more than once")
    if payload.expected is not None:
        extra.append(f"{payload.expected} expected")
    return f"{text}, {c['fail']} fail" + ("; " + ", ".join(extra) if extra else "")


def install_line(install: Install) -> str:
    parts = [
        # torch has its own part (with its CUDA); the report's package list names it too
        ", ".join(p for p in install.packages if not p.startswith("torch ")) or "no FA package",
        f"torch {install.torch}" if install.torch else "no torch",
        f"driver {install.driver}" if install.driver else "no driver",
        ", ".join(install.gpus) or "no GPU",
    ]
    if install.selection:
        parts.append(install.selection)
    if install.python:
        parts.append(f"Python {install.python}")
    if install.tool:
        parts.append(f"fa-doctor {install.tool}")
    return " · ".join(parts)


def node_names(payload: FleetPayload, nodes: array[int], limit: int | None = 10) -> str:
    """Nodes given by index, by name: the first `limit`, and how many more."""
    shown = payload.names(nodes, limit)
    more = len(nodes) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def others(payload: FleetPayload) -> dict[str, tuple[Rows, int]]:
    """Refused reports, unreachable nodes and nodes reported more than once: the rows listed, and how many more
    were counted but not listed (a merge lists the first few of each)."""
    duplicates = []
    for d in payload.duplicates:
        more = d.reports - 1 - len(d.dropped)
        dropped = ", ".join(d.dropped) + (f" and {more} more" if more > 0 else "")
        duplicates.append((d.node, f"{d.reports} reports: merged {d.kept} (the newest); not merged: {dropped}"))
    return {
        "refused": ([(r.source, r.why) for r in payload.refused], payload.counts["refused"] - len(payload.refused)),
        "unreachable": ([(u.node, u.why) for u in payload.unreachable], 0),
        "duplicates": (duplicates, payload.duplicate_nodes - len(payload.duplicates)),
    }
