"""What a pasted error means: the knowledge base (errors.json) and the model behind `fa-doctor explain`, how it
ranks in docs/explain.md. `check` classifies smoke-test errors with the same table (knowledge.classify)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from fa_doctor.knowledge.base import CATEGORIES, Entry, KnowledgeError, Match, load
from fa_doctor.knowledge.evidence import ENTRY_HINTS, WORD
from fa_doctor.knowledge.match import MAX_CHARS, extracted_for, featurise, normalise
from fa_doctor.knowledge.model import shown, standing, stored
from fa_doctor.knowledge.remedies import build
from fa_doctor.knowledge.verify import Verdict, reweigh, verdicts
from fa_doctor.model.intents import describe
from fa_doctor.render.shell import remedy_lines

if TYPE_CHECKING:
    from fa_doctor.model.facts import Facts
    from fa_doctor.model.finding import Finding

__all__ = ["CATEGORIES", "MAX_CHARS", "NO_MATCH", "Entry", "KnowledgeError", "Match", "explain", "load", "markdown"]

NO_MATCH = (
    "fa-doctor does not recognise this error. Run `fa-doctor check` on the machine (add `--python` for the "
    "server's interpreter) to test the install directly."
)


def explain(
    text: str, facts: Facts | None = None, limit: int = 5, findings: Sequence[Finding] | None = None
) -> list[Match]:
    """Ranked explanations of a pasted error, best first (none for text with nothing of FlashAttention's world).
    With facts, remedies are exact for the target; with check's findings too, verdicts reweigh (verify.py)."""
    if limit <= 0 or not text:
        return []
    f = featurise(normalise(text))
    if not f.relevant:
        return []
    model = stored()
    ranked = model.rank(f.patterns, f.evidence, f.words)
    support = {r.category: r.support for r in ranked}
    confidences = {r.category: r.confidence for r in ranked}
    said: dict[str, Verdict] = {}
    if facts is not None and findings is not None:
        said = verdicts(facts, findings)
        confidences = reweigh(confidences, said)
    order = sorted(confidences.items(), key=lambda cp: -cp[1])
    out: list[Match] = []
    for rank, (category, confidence) in enumerate(shown(order, limit)):
        hit = next((h for h in f.hits if h.entry.category == category), None)
        entry = hit.entry if hit else _entry_for(category, f.evidence, f.words)
        extracted = extracted_for(entry, f.found, hit.groups if hit else {})
        reasons = tuple(f.evidence.get(x) or f"the word '{x[4:]}'" for x in support[category])
        verdict = said.get(category)
        out.append(
            Match(
                id=entry.id,
                category=entry.category,
                title=entry.title,
                cause=entry.cause,
                remedies=build(entry, extracted, facts),
                confidence=round(confidence, 3),
                extracted=extracted,
                confirm_with=entry.confirm_with,
                links=entry.links,
                reasons=tuple(dict.fromkeys(reasons)),
                standing=standing(confidence, rank == 0),
                verdict=verdict.state if verdict else "",
                verdict_reason=verdict.reason if verdict else "",
            )
        )
    return out


def _entry_for(category: str, evidence: Mapping[str, str], words: Sequence[str]) -> Entry:
    """The category's entry the evidence names (evidence.ENTRY_HINTS), else the one whose pattern words the text
    shares most (file order breaks ties)."""
    entries = [e for e in load() if e.category == category]
    named = {ENTRY_HINTS[x] for x in evidence if x in ENTRY_HINTS}
    if hinted := next((e for e in entries if e.id in named), None):
        return hinted
    have = {w[4:] for w in words}
    return max(entries, key=lambda e: (len(_words(e) & have), -entries.index(e)))


@cache
def _words(entry: Entry) -> frozenset[str]:
    return frozenset(w for p in entry.patterns for lit in (p.find, *p.also) for w in WORD.findall(lit))


def markdown() -> str:
    """docs/errors.md: every entry of the knowledge base (tests keep the file equal to this)."""
    lines = [
        "# Error reports `fa-doctor explain` recognises",
        "",
        "Generated from `fa_doctor/knowledge/errors.json` (regenerate with",
        "`python -c \"from fa_doctor.knowledge import markdown; print(markdown(), end='')\" > docs/errors.md`).",
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
