"""The terminal report: summary first, failing findings with their fixes, details with -v."""

from __future__ import annotations

from typing import Any, TextIO

from fa_doctor.finding import Finding, Severity
from fa_doctor.report import Report
from fa_doctor.scrub import scrub_text, scrub_tree

_MARK = {
    Severity.OK: ("✓", "green"),
    Severity.INFO: ("i", "cyan"),
    Severity.WARN: ("!", "yellow"),
    Severity.FAIL: ("✗", "red"),
}
_STATUS_STYLE = {"ok": "bold green", "warn": "bold yellow", "fail": "bold red"}


def _selection_line(selection: dict[str, Any] | None) -> str:
    if not selection:
        return "Selected: unknown (the selection check did not run)"
    pre, dec = selection["prefill"], selection["decode"]

    def one(p: dict[str, Any]) -> str:
        if p["fa_version"] is None:
            return f"{p['backend'] or 'nothing'} (not FA)"
        return f"FA{p['fa_version']} [{p['implementation']}]" + (" — cannot run" if p["problems"] else "")

    if one(pre) == one(dec):
        return f"Selected: {one(pre)} for prefill and decode ({pre['source']})"
    return f"Selected: prefill {one(pre)} ({pre['source']}), decode {one(dec)} ({dec['source']})"


def _gpu_line(report: Report) -> str:
    gpus = report.gpus or {}
    devices = gpus.get("devices") or []
    torch = report.torch or {}
    parts = [", ".join(f"GPU {d['index']} {d['name']} (cc {d['capability']})" for d in devices) or "no GPU"]
    if gpus.get("driver_version"):
        parts.append(f"driver {gpus['driver_version']}")
    parts.append(f"torch {torch['version']} (CUDA {torch.get('cuda') or 'none'})" if torch else "no torch")
    return "GPUs: " + " · ".join(parts)


class HumanRenderer:
    def __init__(self, stream: TextIO, *, verbose: bool = False, color: bool = True) -> None:
        from rich.console import Console

        # markup=False: library strings such as "[sm80, sm121]" or "flash-attn[cu13]" must print as they are.
        self.console = Console(
            file=stream, markup=False, highlight=False, emoji=False, no_color=not color, soft_wrap=True
        )
        self.verbose = verbose
        # What the stream cannot encode (lone surrogates from odd bytes in paths, "✓" on an ASCII terminal) is
        # escaped instead of ending the run with UnicodeEncodeError.
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def line(self, text: str, style: str | None = None, indent: int = 0) -> None:
        from rich.text import Text

        pad = " " * indent
        safe = scrub_text(text).encode(self.encoding, "backslashreplace").decode(self.encoding)
        self.console.print(
            Text(pad + safe.replace("\n", "\n" + pad), style=style or ""),
            no_wrap=True,
            overflow="ignore",
            crop=False,
        )

    def finding(self, f: Finding) -> None:
        mark, style = _MARK[f.severity]
        self.line(f"{mark} {f.title}  [{f.id}]", style)
        if f.detail and (f.severity is not Severity.OK or self.verbose):
            self.line(f.detail, indent=4)
        for remedy in f.remedies:
            self.line("fix: " + remedy.text, "bold", indent=4)
            for command in remedy.commands:
                self.line(command, "cyan", indent=8)
        if self.verbose and f.evidence:
            for key, value in scrub_tree(dict(f.evidence)).items():
                self.line(f"{key}: {value}", "dim", indent=4)

    def render(self, report: Report) -> None:
        if report.error:
            self.line(f"fa-doctor: {report.error}", "bold red")
            return
        target = report.target or {}
        counts = {s: sum(1 for f in report.findings if f.severity is s) for s in Severity}
        self.line(
            f"fa-doctor {report.command} · {target.get('executable', '?')} (Python {target.get('version', '?')})",
            "bold",
        )
        summary = f"{counts[Severity.FAIL]} failing, {counts[Severity.WARN]} warning(s), {counts[Severity.OK]} ok"
        self.line(
            f"Status: {report.status.upper()} — {summary} (exit {report.exit_code})", _STATUS_STYLE.get(report.status)
        )
        self.line(_selection_line(dict(report.selection) if report.selection else None))
        self.line(_gpu_line(report))
        self.line("")
        order = sorted(report.findings, key=lambda f: -f.severity.rank)
        shown = [f for f in order if self.verbose or f.severity in (Severity.FAIL, Severity.WARN)]
        for f in shown:
            self.finding(f)
        hidden = len(order) - len(shown)
        if self.verbose:
            self._details(report)
        elif hidden:
            self.line(f"({hidden} passing or informational finding(s) hidden; -v shows them with evidence)", "dim")

    def _details(self, report: Report) -> None:
        self.line("")
        self.line("Packages:", "bold")
        for p in report.packages:
            self.line(f"{p['distribution']} {p['version']}  [{p['family']}]  {p['location']}", indent=2)
        if report.timings:
            self.line("Timings: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in report.timings.items()), "dim")
