"""The fleet report as GitHub Actions workflow commands: an annotation per failing or warning finding (with its
nodes and fixes), per outlier, per unreachable node and per refused report; the groups in a collapsed log
group, guarded so no node's text can act as a command; the verdict last. Escaping: `render/github.py`'s."""

from __future__ import annotations

from fa_doctor.model.finding import Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.fleet.common import (
    duplicate_text,
    head,
    install_line,
    node_names,
    payload_of,
    summary_text,
    unlisted,
)
from fa_doctor.render.github import ANNOTATIONS_PER_KIND, guarded, workflow_command

_KIND = {Severity.FAIL: "error", Severity.WARN: "warning"}


class FleetGithubRenderer(Renderer):
    name = "github"

    def format(self, result: Result) -> str:
        payload = payload_of(result)
        out: list[str] = []
        if result.error:
            out.append(workflow_command("error", result.error, title=f"{head(result)} could not merge"))
        log = [
            f"{g.fingerprint}: {len(g.nodes)} node(s), {g.status} — {install_line(g.install)}" for g in payload.groups
        ]
        if log:
            out += [workflow_command("group", f"{head(result)}: {len(payload.groups)} group(s)"), *guarded(log)]
            out.append("::endgroup::")
        shown: dict[str, int] = {}

        def annotate(kind: str, message: str, title: str) -> None:
            shown[kind] = shown.get(kind, 0) + 1
            out.append(workflow_command(kind, message, title=title))

        strict = result.strict
        for f in payload.findings:
            kind = "error" if strict and f.severity is Severity.WARN else _KIND.get(f.severity)
            if kind:
                body = f"on {len(f.nodes)} node(s) ({f.scope}): {node_names(payload, f.nodes)}"
                fixes = [line for r in f.remedies for line in (f"Fix: {r.text}", *(f"    {c}" for c in r.commands))]
                annotate(kind, "\n".join([body, *fixes]), f"{f.title} [{f.id}]")
        for o in payload.outliers:
            annotate("error" if strict else "warning", "; ".join(o.why), f"outlier {o.node} (group {o.group})")
        for u in payload.unreachable:
            annotate("error", u.why, f"no report from {u.node}")
        loose = "error" if strict else "warning"
        for r in payload.refused:
            annotate(loose, r.why, f"report not merged: {r.source}")
        refused_more, duplicates_more = unlisted(payload)
        if refused_more:
            annotate(loose, "counted, not listed: merge lists the first few", f"{refused_more} more reports not merged")
        for i in range(len(payload.duplicates)):
            node, why = duplicate_text(payload, i)
            annotate(loose, why, f"node reported more than once: {node}")
        if duplicates_more:
            annotate(loose, "counted, not listed", f"{duplicates_more} more nodes reported more than once")
        summary = f"{head(result)}: {result.status.upper()} — {summary_text(payload)} (exit {result.exit_code})"
        over = sorted(kind for kind, n in shown.items() if n > ANNOTATIONS_PER_KIND)
        if over:
            summary += f"; GitHub shows {ANNOTATIONS_PER_KIND} {'/'.join(over)} annotations per step: all are above"
        return "\n".join([*out, summary]) + "\n"
