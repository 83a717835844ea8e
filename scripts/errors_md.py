"""Regenerate docs/errors.md from the knowledge base (fa_doctor/knowledge/errors.json): python scripts/errors_md.py

tests/test_explain_kb.py keeps the file equal to markdown().
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fa_doctor.knowledge import CATEGORIES, load  # noqa: E402
from fa_doctor.model.intents import describe  # noqa: E402
from fa_doctor.render.shell import remedy_lines  # noqa: E402


def markdown() -> str:
    """docs/errors.md: every entry of the knowledge base (tests keep the file equal to this)."""
    lines = [
        "# Error reports `fa-doctor explain` recognises",
        "",
        "Generated from `fa_doctor/knowledge/errors.json` (regenerate with `python scripts/errors_md.py`).",
        "Each entry: its id, what it looks like, the cause, what to do, and the `fa-doctor check` findings",
        "that would confirm it on the machine.",
        "",
        "How explain ranks: [docs/explain.md](explain.md).",
    ]
    for category in CATEGORIES:
        entries = [e for e in load() if e.category == category]
        if not entries:
            continue
        lines += ["", f"## {category}"]
        for e in entries:
            lines += ["", f"### `{e.id}`: {e.title}", "", e.cause, ""]
            shows = [p.find for p in e.patterns if p.find] + [
                f"{p.field} in {', '.join(p.values)}" for p in e.patterns if p.field
            ]
            lines.append("Recognised by: " + "; ".join(f"`{s}`" for s in dict.fromkeys(shows)))
            lines.append("")
            for r in e.remedies:
                lines.append(f"- {r.text}")
                lines.extend(f"  - `{c}`" for c in remedy_lines(r))
                if r.intent is not None:
                    lines.append(f"  - the install fa-doctor plans for the target: {describe(r.intent)}")
            if e.confirm_with:
                lines += ["", "Confirm with: " + ", ".join(f"`{c}`" for c in e.confirm_with)]
            if e.links:
                lines += ["", "Reports: " + ", ".join(e.links)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    (ROOT / "docs" / "errors.md").write_text(markdown(), encoding="utf-8")
