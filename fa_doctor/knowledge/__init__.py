"""What a pasted error means: the knowledge base (errors.json) and the matcher behind `fa-doctor explain`.

    from fa_doctor.knowledge import explain
    for m in explain(text, facts=None, limit=5): print(m.category, m.confidence, m.title)

Each category is weighed by a model fitted on labelled real reports (model.py; scripts/explain_learn.py):
pattern hits of errors.json, evidence rules (evidence.py), the report's structure (structure.py) and the paste's
words; confidence is a probability measured on reports of repositories the model did not see, and each answer
says how it stands (likely, a guess, possible, unlikely).

`check` classifies smoke-test errors with the same table through fa_doctor.knowledge.classify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from fa_doctor.knowledge.base import CATEGORIES, Entry, KnowledgeError, Match, load
from fa_doctor.knowledge.evidence import ENTRY_HINTS
from fa_doctor.knowledge.features import featurise
from fa_doctor.knowledge.match import MAX_CHARS, extracted_for, normalise
from fa_doctor.knowledge.model import shown, standing, stored
from fa_doctor.knowledge.remedies import build
from fa_doctor.knowledge.verify import Verdict, reweigh, verdicts
from fa_doctor.model.intents import describe
from fa_doctor.render.shell import remedy_lines

if TYPE_CHECKING:
    from fa_doctor.model.facts import Facts
    from fa_doctor.model.finding import Finding

_WORD = re.compile(r"[a-z][a-z0-9_]{2,39}")

__all__ = ["CATEGORIES", "MAX_CHARS", "NO_MATCH", "Entry", "KnowledgeError", "Match", "explain", "load", "markdown"]

NO_MATCH = (
    "fa-doctor does not recognise this error. Run `fa-doctor check` on the machine (add `--python` for the "
    "server's interpreter) to test the install directly."
)


def explain(
    text: str, facts: Facts | None = None, limit: int = 5, findings: Sequence[Finding] | None = None
) -> list[Match]:
    """Ranked explanations of a pasted error (best first; empty when the text has nothing of FlashAttention's
    world in it).

    The paste is capped at MAX_CHARS characters (its head and its tail are kept). Every category is weighed by
    the fitted model (model.py) from the patterns that match, the evidence rules and the words; a category's
    entry is its best-matching pattern's, else the one whose words the text shares most. Confidence is the
    calibrated probability of being right. With facts, remedies are exact for the target; with check's
    findings too, the machine confirms or rules out hypotheses and the ranking follows (verify.py).
    """
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
    for e in entries:
        if e.id in named:
            return e
    have = {w[4:] for w in words}
    return max(entries, key=lambda e: (len(_words(e) & have), -entries.index(e)))


@cache
def _words(entry: Entry) -> frozenset[str]:
    return frozenset(w for p in entry.patterns for lit in (p.find, *p.also) for w in _WORD.findall(lit))


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
        "## How explain ranks",
        "",
        "Every category is weighed, not only those a pattern below matches: a model fitted on every labelled real",
        "report of `tests/explain_cases/`, `tests/explain_reports/`, `tests/explain_dev/` and `tests/explain_heldout/`",
        "(`fa_doctor/knowledge/model.json`, written by `benchmarks/explain_fit.py`) adds up the best pattern score of",
        "each category, evidence rules (`fa_doctor/knowledge/evidence.py`: head dims, capabilities, compiler and",
        "linker messages, frames' packages, version requirements, ...), the structure of the report",
        "(`fa_doctor/knowledge/structure.py`: whose symbol is missing and which library asked for it, whether the",
        "module Python could not import is FlashAttention's own or a dependency deeper in the chain, the GPU's",
        "generation, a container or a GPU the process cannot see, a dispatcher's reason list) and the paste's words.",
        "A category no pattern matched is worded by the entry its evidence names. Text with nothing of",
        "FlashAttention's world in it gets no answer.",
        "",
        "Confidence is the probability of being right: a logistic model, fitted on reports of repositories the",
        "counts did not see, reads how the evidence agrees (the margin, the pattern behind the first category and",
        "any pattern against it, whether the evidence without patterns agrees, how many rules support it). A first",
        "answer below 50% is labelled a guess (one that nothing but words chose is at most 35%); the rest of the",
        "probability is shared by the other categories, and those below 5% are labelled unlikely. With `--python`,",
        "check's checks run on the target and each hypothesis the machine confirms or rules out says so; the",
        "ranking follows.",
        "",
        "Measured leave-one-repository-out (`python benchmarks/explain_loro.py`): the counts, the weights and the",
        "confidence model are fitted without the held-out repository. Hand-written and the same in every fold: the",
        "patterns below, the evidence and structure rules and their category hints, the thresholds; some were",
        "written after reading reports of `tests/explain_reports/` and `tests/explain_dev/` (see `git log` of",
        "`fa_doctor/knowledge/`); `tests/explain_heldout/` was collected and labelled after they were frozen",
        "(its MANIFEST.json). The figures and the calibration table are in docs/testing.md.",
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
