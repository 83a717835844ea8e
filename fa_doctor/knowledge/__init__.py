"""What a pasted error means: the knowledge base (errors.json) and the matcher behind `fa-doctor explain`.

    from fa_doctor.knowledge import explain
    for m in explain(text, facts=None, limit=5): print(m.category, m.confidence, m.title)

`check` classifies smoke-test errors with the same table through fa_doctor.knowledge.classify.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fa_doctor.knowledge.base import CATEGORIES, Entry, KnowledgeError, Match, load
from fa_doctor.knowledge.match import MAX_CHARS, extracted_for, match, normalise
from fa_doctor.knowledge.remedies import build
from fa_doctor.plan.intents import describe

if TYPE_CHECKING:
    from fa_doctor.facts import Facts

__all__ = ["CATEGORIES", "MAX_CHARS", "NO_MATCH", "Entry", "KnowledgeError", "Match", "explain", "load", "markdown"]

NO_MATCH = (
    "fa-doctor does not recognise this error. Run `fa-doctor check` on the machine (add `--python` for the "
    "server's interpreter) to test the install directly."
)


def explain(text: str, facts: Facts | None = None, limit: int = 5) -> list[Match]:
    """Ranked explanations of a pasted error (best first; empty when nothing matches).

    The paste is capped at MAX_CHARS characters (its head and its tail are kept); facts, when given, make
    the remedies exact for the target interpreter.
    """
    if limit <= 0 or not text:
        return []
    hits, found = match(load(), normalise(text), limit)
    out: list[Match] = []
    for hit in hits:
        entry = hit.entry
        extracted = extracted_for(entry, found, hit.groups)
        out.append(
            Match(
                id=entry.id,
                category=entry.category,
                title=entry.title,
                cause=entry.cause,
                remedies=build(entry, extracted, facts),
                confidence=hit.score,
                extracted=extracted,
                confirm_with=entry.confirm_with,
                links=entry.links,
            )
        )
    return out


def markdown() -> str:
    """docs/errors.md: every entry of the knowledge base (tests keep the file equal to this)."""
    lines = [
        "# Error reports `fa-doctor explain` recognises",
        "",
        "Generated from `fa_doctor/knowledge/errors.json` (regenerate with",
        "`python -c \"from fa_doctor.knowledge import markdown; print(markdown(), end='')\" > docs/errors.md`).",
        "Each entry: its id, what it looks like, the cause, what to do, and the `fa-doctor check` findings",
        "that would confirm it on the machine.",
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
                lines.extend(f"  - `{c}`" for c in r.lines())
                if r.intent is not None:
                    lines.append(f"  - the install fa-doctor plans for the target: {describe(r.intent)}")
            if e.confirm_with:
                lines += ["", "Confirm with: " + ", ".join(f"`{c}`" for c in e.confirm_with)]
            if e.links:
                lines += ["", "Reports: " + ", ".join(e.links)]
    return "\n".join(lines) + "\n"
