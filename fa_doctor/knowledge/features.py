"""Everything explain reads from a paste, computed once: pattern hits, variable parts, evidence and words."""

from __future__ import annotations

from dataclasses import dataclass

from fa_doctor.knowledge.base import load
from fa_doctor.knowledge.evidence import evidence, relevant, tokens
from fa_doctor.knowledge.match import Hit, lower, match, presence

_ALL_HITS = 1_000  # every entry that matches (the model weighs them all)
# Evidence rules and words read the paste's first 8k and last 32k characters (where the command and the final
# error are); the patterns read all that match.py analyses. Keeps a megabyte paste within a few milliseconds.
_EV_HEAD, _EV_TAIL = 8_000, 32_000


@dataclass(frozen=True, slots=True)
class Features:
    hits: tuple[Hit, ...]  # entries whose patterns match, best first
    found: dict[str, str]  # extract()'s variable parts
    evidence: dict[str, str]  # "ev:NAME" and "entry:ID" -> the reason shown to the user
    words: tuple[str, ...]  # "tok:WORD"
    relevant: bool  # the paste is about FlashAttention's world at all

    @property
    def patterns(self) -> dict[str, float]:
        """category -> the best pattern score in it."""
        best: dict[str, float] = {}
        for h in self.hits:
            best[h.entry.category] = max(best.get(h.entry.category, 0.0), h.score)
        return best


def featurise(flat: str) -> Features:
    """flat: match.normalise()'s output."""
    hits, found = match(load(), flat, _ALL_HITS)
    if len(flat) > _EV_HEAD + _EV_TAIL:
        flat = flat[:_EV_HEAD] + " " + flat[-_EV_TAIL:]
    low = lower(flat)
    has = presence(low)
    ev = evidence(flat, low, found, has)
    for h in hits:
        ev.setdefault("entry:" + h.entry.id, f"the text matches {h.entry.id} ('{h.pattern.find or h.pattern.field}')")
    return Features(tuple(hits), found, ev, tuple("tok:" + w for w in tokens(low)), bool(hits) or relevant(ev, has))
