"""The terminal report: summary first, failing findings with their fixes; with -v every finding's evidence as
key/value lists and tables, then the packages, the smoke cases and the timings. `--quiet`: QuietRenderer."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import CheckPayload, ExplainPayload, FixPayload, Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.shell import fix_command, remedy_lines

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload

_MARK = {
    Severity.OK: ("✓", "green"),
    Severity.INFO: ("i", "cyan"),
    Severity.WARN: ("!", "yellow"),
    Severity.FAIL: ("✗", "red"),
}
_STATUS_STYLE = {"ok": "bold green", "warn": "bold yellow", "fail": "bold red"}
# markup off: library strings such as "[sm80, sm121]" or "flash-attn[cu13]" print as they are.
_PLAIN: dict[str, Any] = {"markup": False, "highlight": False, "emoji": False, "soft_wrap": True}
# A backquoted span (a command inside prose) or a run of non-blanks: the units a line break may fall between.
_UNIT = re.compile(r"[^\s`]*`[^`\n]*`\S*|\S+")


def wrap(text: str, width: int, indent: int = 0) -> list[str]:
    """Lines of at most `width` columns where the units allow it: a word is never split (paths, URLs, versions stay
    whole) and a `backquoted command` is one unit, moved to the next line whole (a longer unit gets its own line)."""
    pad = " " * indent
    room = max(1, width - indent)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        current = ""
        for unit in _UNIT.findall(paragraph):
            if current and len(current) + 1 + len(unit) > room:
                lines.append(pad + current)
                current = unit
            else:
                current = f"{current} {unit}" if current else unit
        lines.append(pad + current)
    return lines


def scalar(value: Any) -> str:
    """A value as a person reads it: never a Python repr of a list or a dict."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={scalar(v)}" for k, v in value.items()) or "—"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(scalar(v) for v in value) or "—"
    return str(value)


def selection_line(payload: CheckPayload) -> str:
    sel = payload.selection
    if sel is None:
        return "Selected: unknown (the selection check did not run)"

    def one(p: Any) -> str:  # a PhaseChoice
        if p.version is None:
            return f"{p.backend or 'nothing'} (not FA)"
        return f"FA{p.version} [{p.implementation}]" + (" — cannot run" if p.problems else "")

    pre, dec = sel.prefill, sel.decode
    if (a := one(pre)) == (b := one(dec)):
        return f"Selected: {a} for prefill and decode ({pre.source})"
    return f"Selected: prefill {a} ({pre.source}), decode {b} ({dec.source})"


def gpu_line(payload: CheckPayload) -> str:
    gpus, torch = payload.gpus, payload.torch
    devices = gpus.devices if gpus else ()
    named = (f"GPU {d.index} {d.name} (cc {'.'.join(map(str, d.capability or ())) or 'unknown'})" for d in devices)
    parts = [", ".join(named) or "no GPU"]
    if gpus and gpus.driver_version:
        parts.append(f"driver {gpus.driver_version}")
    parts.append(f"torch {torch.version} (CUDA {torch.cuda or 'none'})" if torch else "no torch")
    return "GPUs: " + " · ".join(parts)


def verdict_line(payload: CheckPayload) -> str | None:
    """When the smoke test was not run because a passing verdict still holds: when and where it was proven."""
    smoke = payload.smoke
    if smoke is None or not smoke.cached or smoke.proven is None:
        return None
    p = smoke.proven
    return (
        f"Smoke: passing verdict reused, proven {p.at} on {p.host} ({', '.join(p.gpus)}) with fa-doctor "
        f"{p.tool_version}; nothing it depends on changed (fingerprint {(smoke.fingerprint or '')[:12]}). "
        "--fresh runs the kernels again."
    )


def summary_text(result: Result) -> str:
    """Counts that add up to every finding, shown or hidden."""
    c = result.counts
    return f"{c[Severity.FAIL]} failing, {c[Severity.WARN]} warning(s), {c[Severity.OK]} ok, {c[Severity.INFO]} info"


def verdict(result: Result, summary: str) -> str:
    return f"{result.status.upper()} — {summary} (exit {result.exit_code})"


class HumanRenderer(Renderer):
    name = "human"

    def format(self, result: Result) -> str:
        return self._printed(self._report, result)

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        return self._printed(self._fleet, result, payload)

    def _printed(self, report: Callable[..., None], *args: Any) -> str:
        from rich.console import Console

        buffer = io.StringIO()
        colors: dict[str, Any] = {"force_terminal": self.color, "no_color": not self.color}
        colors["color_system"] = "standard" if self.color else None
        self.console = Console(file=buffer, width=self.width, **colors, **_PLAIN)
        report(*args)
        # Table cells are padded to their column's width: no line ends in blanks a copy would carry along.
        return "\n".join(line.rstrip(" ") for line in buffer.getvalue().split("\n"))

    def line(self, text: str, style: str | None = None, indent: int = 0) -> None:
        from rich.text import Text

        pad = " " * indent
        self.console.print(
            Text(pad + text.replace("\n", "\n" + pad), style=style or ""), no_wrap=True, overflow="ignore", crop=False
        )

    def heading(self, title: str, style: str = "bold") -> None:
        self.line("")
        self.line(title, style)

    def prose(self, text: str, style: str | None = None, indent: int = 0) -> None:
        """Sentences, wrapped to the terminal (never inside a word or a `command`); one line in a log."""
        if not self.wrap:
            self.line(text, style, indent)
            return
        for part in wrap(text, self.width, indent):
            self.line(part, style)

    def _report(self, result: Result) -> None:
        if result.error:
            self.line(f"fa-doctor: {result.error}", "bold red")
            return
        payload = result.check
        target = payload.target
        where = f"{target.executable} (Python {'.'.join(map(str, target.version))})" if target else ""
        self.line(f"fa-doctor {result.command}" + (f" · {where}" if where else ""), "bold")
        if isinstance(result.payload, ExplainPayload):
            found = len(result.payload.matches)
            self.line(f"{found} explanation(s), best first" if found else "No known failure matches", "bold")
        else:
            self.prose(f"Status: {verdict(result, summary_text(result))}", _STATUS_STYLE.get(result.status))
        if target is not None:
            self.prose(selection_line(payload))
            self.prose(gpu_line(payload))
            if reused := verdict_line(payload):
                self.prose(reused)
        self.line("")
        order = sorted(result.findings, key=lambda f: -f.severity.rank)
        # explain's matches are informational, and they are the whole answer.
        everything = self.verbose or result.command == "explain"
        shown = [f for f in order if everything or f.severity in (Severity.FAIL, Severity.WARN)]
        for f in shown:
            self.finding(f)
        if hidden := len(order) - len(shown):
            self.prose(f"({hidden} passing or informational finding(s) hidden; -v shows them with evidence)", "dim")
        if isinstance(result.payload, FixPayload):
            self._fix(result.payload)
        if self.verbose:
            self._details(result)

    def finding(self, f: Finding) -> None:
        mark, style = _MARK[f.severity]
        self.prose(f"{mark} {f.title}  [{f.id}]", style)
        if f.detail and (f.severity is not Severity.OK or self.verbose):
            self.prose(f.detail, indent=4)
        for remedy in f.remedies:
            self.prose("fix: " + remedy.text, "bold", indent=4)
            for command in remedy_lines(remedy):
                self.line(command, "cyan", indent=8)
            if apply := fix_command(remedy, f.id):
                self.line(f"(fa-doctor can do it: {apply})", "dim", indent=8)
            elif remedy.refused:  # the planner's reason: `fix --apply` would refuse it here (issue #26)
                self.prose(f"(fa-doctor will not do it here: {remedy.refused}; run it by hand)", "dim", indent=8)
        if self.verbose and f.evidence:
            self.evidence(f.evidence, indent=4, already=f.detail)

    def evidence(self, values: Mapping[str, Any], indent: int, already: str = "") -> None:
        for key, value in values.items():
            if already and f"{key}: {scalar(value)}" in already:
                continue  # the detail says it already, in the same words
            if isinstance(value, Mapping) and value:
                self.line(f"{key}:", "dim", indent)
                self.evidence(value, indent + 2)
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
                self.line(f"{key}:", "dim", indent)
                self.table([dict(v) for v in value], indent + 2)
            elif isinstance(value, (list, tuple)) and len(value) > 1 and any(len(scalar(v)) > 40 for v in value):
                self.line(f"{key}:", "dim", indent)
                for item in value:
                    self.line(f"- {scalar(item)}", "dim", indent + 2)
            else:
                self.line(f"{key}: {scalar(value)}", "dim", indent)

    def table(self, rows: Sequence[Mapping[str, Any]], indent: int, title: str | None = None) -> None:
        from rich.padding import Padding
        from rich.table import Table

        columns = list(dict.fromkeys(k for row in rows for k in row))
        table = Table(title=title, show_edge=False, pad_edge=False, box=None, header_style="bold")
        for column in columns:
            table.add_column(column, overflow="fold")  # a long UUID or path wraps, never ends in "…"
        for row in rows:
            table.add_row(*(scalar(row.get(c)) for c in columns))
        self.console.print(Padding(table, (0, 0, 0, indent), expand=False), crop=False)

    def _fix(self, payload: FixPayload) -> None:
        if payload.mode == "plan":
            self.line("")
            if not payload.plan:
                self.line("Nothing fa-doctor can repair by itself; the fixes above say what to do.", "bold")
                return
            self.line(f"Plan: {len(payload.plan)} step(s); `fa-doctor fix --apply` runs them", "bold")
            for number, step in enumerate(payload.plan, 1):
                self.line(f"{number}. {step.description}  [{step.finding}]", indent=2)
                self.line(step.command, "cyan", indent=5)
        elif payload.mode == "apply":
            fixed = ", ".join(payload.fixed) or "nothing"
            self.heading(f"Now fixed: {fixed}", "bold green" if payload.fixed else "bold")
            if payload.remaining:
                self.line("Still failing or warning: " + ", ".join(payload.remaining), "bold yellow")

    def _details(self, result: Result) -> None:
        payload = result.check
        if payload.packages:
            self.heading("Packages:")
            rows = [(p.dist.name, p.dist.version, p.family, p.dist.location) for p in payload.packages]
            keys = ("distribution", "version", "family", "location")
            self.table([dict(zip(keys, row, strict=True)) for row in rows], 2)
        cases = [
            {"GPU": s.device.index, "implementation": s.result.key, "case": c.name, "max abs err": c.max_abs_err}
            | {"tolerance": c.tolerance, "passed": c.passed, "seconds": c.seconds}
            for s in (payload.smoke.results if payload.smoke else ())
            for c in s.result.cases
        ]
        if cases:
            self.heading("Smoke cases:")
            self.table(cases, 2)
        if result.timings:
            took = (f"{k} {v:.1f} s" if v >= 1 else f"{k} {v * 1000:.0f} ms" for k, v in result.timings.items())
            self.heading("Timings: " + ", ".join(took), "dim")

    def fleet_finding(self, payload: FleetPayload, f: Any, limit: int | None) -> None:
        """A fleet finding once: its nodes and its fixes."""
        mark, style = _MARK[f.severity]
        self.line(f"{mark} {f.title}  [{f.id}]", style)
        where = "every node of its group" if f.scope == "install" else "some nodes of its group"
        self.line(f"on {len(f.nodes)} node(s), {where}: {payload.node_names(f.nodes, limit)}", indent=4)
        for remedy in f.remedies:
            self.line("fix: " + remedy.text, "bold", indent=4)
            for command in remedy.commands:
                self.line(command, "cyan", indent=8)
        if f.variants > len(f.remedies):
            self.line(f"({f.variants - len(f.remedies)} more remedy variant(s): --format json has them)", "dim", 4)

    def _fleet(self, result: Result, payload: FleetPayload) -> None:
        """The verdict, a row per install group, each finding once with its nodes and fixes, the outliers and what
        could not be merged; `-v` lists every node."""
        self.line(payload.head(result.command), "bold")
        if result.error:
            self.line(f"fa-doctor: {result.error}", "bold red")
        else:
            self.line(f"Status: {verdict(result, payload.summary())}", _STATUS_STYLE.get(result.status))
        if payload.groups:
            self.heading("Groups (nodes with the same install fingerprint):")
            rows = []
            for g in payload.groups:
                loud = [f"{f.id} ×{f.nodes}" for f in g.findings if f.severity in (Severity.FAIL, Severity.WARN)]
                found = ", ".join(loud[:3]) + (f" (+{len(loud) - 3})" if len(loud) > 3 else "") or "—"
                counts = {s: g.counts.get(s, 0) for s in ("ok", "warn", "fail")}
                row = {"group": g.fingerprint, "nodes": len(g.nodes), "status": g.status}
                rows.append(row | counts | {"failing or warning findings": found})
            self.table(rows, 2)
            for g in payload.groups:
                self.line(f"{g.fingerprint}: {g.install.line()}", "dim", indent=2)
                if self.verbose:
                    self.line("nodes: " + payload.node_names(g.nodes, None), "dim", indent=4)
        limit = None if self.verbose else 10
        if payload.findings:
            self.heading("Findings (each once, with the nodes that have it):")
        for f in payload.findings:
            self.fleet_finding(payload, f, limit)
        if payload.outliers:
            self.heading("Outliers (install as their group's, result not):", "bold yellow")
            for o in payload.outliers[:limit]:
                self.line(f"{o.node} (group {o.group}): " + "; ".join(o.why), indent=2)
            if limit is not None and len(payload.outliers) > limit:
                self.line(f"... {len(payload.outliers) - limit} more (-v lists them)", "dim", indent=2)
        lists = payload.others()
        for key, title in (
            ("refused", "Refused reports (not merged):"),
            ("unreachable", "Unreachable nodes (no report):"),
            ("duplicates", "Nodes reported more than once (the newest report of each is merged):"),
        ):
            items, more = lists[key]
            if items:
                self.heading(title, "bold yellow")
                for where, why in items[:limit]:
                    self.line(f"{where}: {why}", indent=2)
                hidden = 0 if limit is None else max(0, len(items) - limit)
                notes = [f"-v lists {hidden} of them"] if hidden else []
                notes += [f"merge lists the first {len(items)} and counts the rest"] if more else []
                if hidden or more:
                    self.line(f"... {hidden + more} more ({'; '.join(notes)})", "dim", indent=2)
        if self.verbose and payload.nodes:
            self.heading("Nodes:")
            rows = [
                {"node": n.name, "group": payload.groups[n.group].fingerprint, "status": n.status.value, "GPUs": n.gpus}
                | {"findings": ", ".join(fid for fid, _ in n.findings) or n.error, "source": n.source}
                for n in payload.nodes
            ]
            self.table(rows, 2)


class QuietRenderer(HumanRenderer):
    """`--quiet`: the verdict line and what fails (each failing finding with its fixes), nothing else. Under --strict a
    warning fails, so it is shown too; an error of fa-doctor itself is its one line."""

    def _report(self, result: Result) -> None:
        self._quiet(result, summary_text(result), result.findings, self.finding)

    def _fleet(self, result: Result, payload: FleetPayload) -> None:
        """`merge -q`, `fleet ray -q`: the verdict line and each failing finding with its nodes and fixes."""
        self._quiet(result, payload.summary(), payload.findings, partial(self.fleet_finding, payload, limit=10))

    def _quiet(self, result: Result, summary: str, findings: Sequence[Any], show: Callable[[Any], None]) -> None:
        if result.error:
            self.line(f"fa-doctor {result.command}: {result.error}", "bold red")
            return
        self.prose(f"fa-doctor {result.command}: {verdict(result, summary)}", _STATUS_STYLE.get(result.status))
        failing = {Severity.FAIL, Severity.WARN} if result.strict else {Severity.FAIL}
        for f in findings:
            if f.severity in failing:
                show(f)
