"""The fitted evidence model: which category the evidence of a paste points to, and how likely that is right.

model.json is data, written by benchmarks/explain_fit.py from the labelled corpus (tests/explain_cases/ and
tests/explain_reports/) and checked equal to a refit by tests/test_explain_loro.py. It holds:

- per feature (an `ev:` rule, an `entry:` pattern hit, a `tok:` word), how many reports of each category have
  it (features seen in fewer than two repositories are dropped: one thread's words are not evidence);
- the weights of the three kinds of evidence (hand-written pattern scores, rule and entry features, words);
- the calibration table that turns the model's probability into the observed rate of being right.

A category's score is a naive-Bayes log-odds sum, smoothed towards uniform and towards the rules' hand-written
hints (evidence.HINTS), plus the weighted best pattern score of that category. Scoring is dictionary look-ups
and a few logarithms per feature: well under a millisecond for a paste.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from fa_doctor.knowledge.evidence import HINT_DOCS, HINTS

SMOOTHING = 1.0  # pseudo-reports spread evenly over the categories, per feature
SHOWN_MIN = 0.05  # after the first three, a category is listed when its confidence is at least this
FLOOR, CEILING = 0.01, 0.99  # a confidence is never 0 or 1


@dataclass(frozen=True, slots=True)
class Model:
    categories: tuple[str, ...]
    docs: Mapping[str, int]  # training reports per category
    counts: Mapping[str, Mapping[str, int]]  # feature -> category -> reports that have it
    weights: tuple[float, float, float]  # patterns, evidence (ev:/entry:), words (tok:)
    calibration: tuple[tuple[float, float], ...] = ()  # (model probability, observed rate), ascending
    _cache: dict[str, tuple[float, ...] | None] = field(default_factory=dict, compare=False, repr=False)

    def weight(self, feature: str) -> tuple[float, ...] | None:
        """Log-odds per category of one feature (None when the model knows nothing about it)."""
        got = self._cache.get(feature)
        if got is None and feature not in self._cache:
            got = feature_weights(self.categories, self.counts.get(feature, {}), HINTS.get(feature))
            self._cache[feature] = got
        return got

    def rank(self, patterns: Mapping[str, float], evidence: Iterable[str], words: Iterable[str]) -> list[Ranked]:
        """Every category with its model probability and the features that weighed most for it, best first."""
        cats = self.categories
        total = sum(self.docs.values()) + len(cats)
        score = [math.log((self.docs.get(c, 0) + 1) / total) for c in cats]
        wp, we, wt = self.weights
        for i, c in enumerate(cats):
            score[i] += wp * patterns.get(c, 0.0)
        support: list[list[tuple[float, str]]] = [[] for _ in cats]
        for group, weight in ((evidence, we), (words, wt)):
            for f in group:
                w = self.weight(f)
                if w is None:
                    continue
                for i, x in enumerate(w):
                    score[i] += weight * x
                    if x > 0:
                        support[i].append((weight * x, f))
        top = max(score)
        exp = [math.exp(s - top) for s in score]
        norm = sum(exp)
        out = [
            Ranked(c, e / norm, tuple(f for _, f in sorted(s, reverse=True)[:4]))
            for c, e, s in zip(cats, exp, support, strict=True)
        ]
        return sorted(out, key=lambda r: -r.probability)

    def calibrated(self, probability: float) -> float:
        """The observed rate of being right at this model probability: isotonic regression fitted on held-out
        scores, interpolated linearly between its points."""
        cal = self.calibration
        if not cal:
            return min(CEILING, max(FLOOR, probability))
        i = bisect.bisect_left([x for x, _ in cal], probability)
        if i == 0:
            rate = cal[0][1]
        elif i == len(cal):
            rate = cal[-1][1]
        else:
            (x0, y0), (x1, y1) = cal[i - 1], cal[i]
            rate = y0 + (y1 - y0) * (probability - x0) / (x1 - x0) if x1 > x0 else y1
        return min(CEILING, max(FLOOR, rate))


@dataclass(frozen=True, slots=True)
class Ranked:
    category: str
    probability: float
    support: tuple[str, ...]  # the features that weighed most for this category


def shown(
    ranked: Sequence[tuple[str, float]], calibrated: Callable[[float], float], limit: int
) -> list[tuple[str, float]]:
    """The categories explain lists, best first, with their confidence: the first three (the right one is among
    them for 97% of real reports), then any other as likely as SHOWN_MIN, at most `limit` in all."""
    out = []
    for i, (category, probability) in enumerate(ranked):
        confidence = calibrated(probability)
        if i < 3 or confidence >= SHOWN_MIN:
            out.append((category, confidence))
        if len(out) >= limit:
            break
    return out


def feature_weights(cats: tuple[str, ...], counts: Mapping[str, int], hint: str | None) -> tuple[float, ...] | None:
    """log(P(category | feature) / uniform), P smoothed: counts, HINT_DOCS for the hinted category, SMOOTHING."""
    n = sum(counts.values()) + (HINT_DOCS if hint else 0)
    if n == 0:
        return None
    k = len(cats)
    denominator = math.log(n + SMOOTHING) - math.log(k)
    return tuple(
        math.log(counts.get(c, 0) + (HINT_DOCS if c == hint else 0) + SMOOTHING / k) - denominator for c in cats
    )


def to_json(model: Model) -> str:
    doc: dict[str, Any] = {
        "version": 1,
        "categories": list(model.categories),
        "weights": list(model.weights),
        "docs": dict(model.docs),
        "calibration": [list(step) for step in model.calibration],
        "counts": {f: dict(sorted(c.items())) for f, c in sorted(model.counts.items())},
    }
    return json.dumps(doc, indent=0, sort_keys=False) + "\n"


def from_json(text: str) -> Model:
    doc = json.loads(text)
    return Model(
        tuple(doc["categories"]),
        doc["docs"],
        doc["counts"],
        tuple(doc["weights"]),
        tuple((float(x), float(y)) for x, y in doc["calibration"]),
    )


@lru_cache(maxsize=1)
def stored() -> Model:
    """The model shipped in the package (fa_doctor/knowledge/model.json)."""
    return from_json(resources.files("fa_doctor.knowledge").joinpath("model.json").read_text(encoding="utf-8"))
