"""What every fleet format says the same way: the headline, a group's install in one line, a list of names."""

from __future__ import annotations

from array import array

from fa_doctor.fleet.model import FleetPayload, Install
from fa_doctor.model.result import Result

NAMES_SHOWN = 10


def payload_of(result: Result) -> FleetPayload:
    return result.payload if isinstance(result.payload, FleetPayload) else FleetPayload()


def head(result: Result) -> str:
    payload = payload_of(result)
    engine = f" on {payload.engine}" if payload.engine else ""
    return f"fa-doctor {result.command}{engine}"


def summary_text(payload: FleetPayload) -> str:
    c = payload.counts
    total = len(payload.nodes)
    text = f"{total} node(s) in {len(payload.groups)} group(s): {c['ok']} ok, {c['warn']} warn, {c['fail']} fail"
    extra = [f"{c[k]} {k}" for k in ("refused", "unreachable") if c[k]]
    if payload.outliers:
        extra.append(f"{len(payload.outliers)} outlier(s)")
    if payload.duplicate_reports:
        extra.append(f"{payload.duplicate_nodes} node(s) reported more than once")
    if payload.expected is not None:
        extra.append(f"{payload.expected} expected")
    return text + ("; " + ", ".join(extra) if extra else "")


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


def names(items: tuple[str, ...] | list[str], limit: int | None = NAMES_SHOWN) -> str:
    shown = list(items if limit is None else items[:limit])
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def node_names(payload: FleetPayload, nodes: array[int], limit: int | None = NAMES_SHOWN) -> str:
    """Nodes given by index, by name: the first `limit`, and how many more."""
    shown = payload.names(nodes, limit)
    more = len(nodes) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def unlisted(payload: FleetPayload) -> tuple[int, int]:
    """Refused reports and duplicated nodes counted but not listed (a merge lists the first few of each)."""
    return payload.counts["refused"] - len(payload.refused), payload.duplicate_nodes - len(payload.duplicates)


def duplicate_text(payload: FleetPayload, index: int) -> tuple[str, str]:
    """A node reported more than once: its name, and which report was merged and which were not."""
    d = payload.duplicates[index]
    more = d.reports - 1 - len(d.dropped)
    dropped = ", ".join(d.dropped) + (f" and {more} more" if more > 0 else "")
    return d.node, f"{d.reports} reports: merged {d.kept} (the newest); not merged: {dropped}"
