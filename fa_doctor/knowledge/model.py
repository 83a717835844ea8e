"""The fitted evidence model (model.json, written by benchmarks/explain_fit.py): which category a paste's evidence
points to, and the calibrated probability that the first answer is right (docs/explain.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from fa_doctor.knowledge.evidence import HINT_DOCS, HINTS

SMOOTHING = 1.0  # pseudo-reports spread evenly over the categories, per feature
FLOOR, CEILING = 0.01, 0.99  # a confidence is never 0 or 1
GUESS = 0.5  # a first answer below this is shown as a guess
SHOWN_MIN = 0.05  # below this, an answer after the first is labelled unlikely (after the third, not listed)
MARGIN_CAP = 30.0  # log-odds gaps beyond this say nothing more
SUPPORTING = 1.0  # a rule or pattern feature supports a category when it raises its log-odds by this much
SUPPORT_CAP = 6  # supporting features beyond this say nothing more
UNSUPPORTED = 0.35  # hand-set: the most a first answer that only words chose can be (docs/explain.md)
# Evidence that says where or in what a report happened, not what failed: it supports no category.
CONTEXT = ("ev:exc-", "ev:frame-", "ev:torch-version", "ev:fa-version-", "ev:windows", "ev:unsupported",
           "ev:install-hint", "ev:cpu", "ev:container")  # fmt: skip


def supports(feature: str, weight: float) -> bool:
    """Whether a rule or pattern feature with this log-odds weight for a category is support for it."""
    return weight >= SUPPORTING and not feature.startswith(CONTEXT)


@dataclass(frozen=True, slots=True)
class Scores:
    """Per category (in Model.categories order)."""

    full: tuple[float, ...]
    evidence: tuple[float, ...]  # the score without the patterns
    patterns: tuple[float, ...]  # the best pattern score
    support: tuple[int, ...]  # rule and pattern features (not words) that support each category


@dataclass(frozen=True, slots=True)
class Model:
    categories: tuple[str, ...]
    docs: Mapping[str, int]  # training reports per category
    counts: Mapping[str, Mapping[str, int]]  # feature -> category -> reports that have it
    weights: tuple[float, float, float]  # patterns, evidence (ev:/entry:), words (tok:)
    confidence: tuple[float, ...] = ()  # logistic coefficients over confidence_features()
    _cache: dict[str, tuple[float, ...] | None] = field(default_factory=dict, compare=False, repr=False)

    def weight(self, feature: str) -> tuple[float, ...] | None:
        """Log-odds per category of one feature (None when the model knows nothing about it)."""
        if feature not in self._cache:
            self._cache[feature] = feature_weights(self.categories, self.counts.get(feature, {}), HINTS.get(feature))
        return self._cache[feature]

    def rank(self, patterns: Mapping[str, float], evidence: Iterable[str], words: Iterable[str]) -> list[Ranked]:
        """Every category with its probability, confidence and the features that weighed most for it, best first."""
        cats = self.categories
        total = sum(self.docs.values()) + len(cats)
        ev = [math.log((self.docs.get(c, 0) + 1) / total) for c in cats]  # the prior
        _, we, wt = self.weights
        support = [0] * len(cats)  # rule and pattern features that support each category
        weighed: list[list[tuple[float, str]]] = [[] for _ in cats]
        for group, weight in ((evidence, we), (words, wt)):
            for f in group:
                if (w := self.weight(f)) is None:
                    continue
                ev = [a + weight * x for a, x in zip(ev, w, strict=True)]
                if weight == we:
                    support = [n + supports(f, x) for n, x in zip(support, w, strict=True)]
                for i, x in enumerate(w):
                    if x > 0:
                        weighed[i].append((weight * x, f))
        s = combine(tuple(patterns.get(c, 0.0) for c in cats), ev, support, self.weights)
        out = [
            Ranked(c, p, q, tuple(f for _, f in sorted(sup, reverse=True)[:4]))
            for c, p, q, sup in zip(cats, softmax(s.full), distribute(s, self.confidence), weighed, strict=True)
        ]
        return sorted(out, key=lambda r: (-r.confidence, -r.probability))


@dataclass(frozen=True, slots=True)
class Ranked:
    category: str
    probability: float  # the naive-Bayes model's, overconfident
    confidence: float  # calibrated: the probability this category is right
    support: tuple[str, ...]  # the features that weighed most for this category


def combine(
    pat: Sequence[float], ev: Sequence[float], support: Sequence[int], weights: tuple[float, float, float]
) -> Scores:
    """ev already holds the prior and the weighted evidence and words; the full score adds the patterns."""
    full = tuple(e + weights[0] * p for e, p in zip(ev, pat, strict=True))
    return Scores(full, tuple(ev), tuple(pat), tuple(support))


def softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    exp = [math.exp(s - top) for s in scores]
    norm = sum(exp)
    return [e / norm for e in exp]


def _best_two(values: Sequence[float]) -> tuple[int, int]:
    order = sorted(range(len(values)), key=lambda i: -values[i])
    return order[0], order[1]


def confidence_features(s: Scores) -> tuple[float, ...]:
    """What the confidence model reads of the first category's standing (docs/explain.md), 1 the intercept."""
    top, second = _best_two(s.full)
    others = [p for i, p in enumerate(s.patterns) if i != top]
    ev_rest = max(e for i, e in enumerate(s.evidence) if i != top)
    ev_margin = max(-MARGIN_CAP, min(MARGIN_CAP, s.evidence[top] - ev_rest))
    return (
        1.0,
        min(MARGIN_CAP, s.full[top] - s.full[second]) / 10,
        s.patterns[top],
        max(others),
        1.0 if ev_margin > 0 else 0.0,
        ev_margin / 10,
        1.0 if max(s.patterns) == 0 else 0.0,
        min(SUPPORT_CAP, s.support[top]) / SUPPORT_CAP,
    )


def distribute(s: Scores, coefficients: Sequence[float]) -> list[float]:
    """Every category's confidence: the first's from the logistic model (the softmax when unfitted; at most
    UNSUPPORTED when only words chose it), the rest shared by the others in proportion to their scores."""
    top, _ = _best_two(s.full)
    if coefficients:
        z = sum(c * x for c, x in zip(coefficients, confidence_features(s), strict=True))
        first = 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))
    else:
        first = max(softmax(s.full))
    if s.patterns[top] == 0 and s.support[top] == 0:
        first = min(first, UNSUPPORTED)
    first = min(CEILING, max(FLOOR, first))
    rest = iter(softmax([x for i, x in enumerate(s.full) if i != top]))
    return [first if i == top else (1 - first) * next(rest) for i in range(len(s.full))]


def standing(confidence: float, first: bool) -> str:
    """How explain words an answer: the first 'likely' or a 'guess', another 'possible' or 'unlikely'."""
    if first:
        return "likely" if confidence >= GUESS else "guess"
    return "possible" if confidence >= SHOWN_MIN else "unlikely"


def shown(ranked: Sequence[tuple[str, float]], limit: int) -> list[tuple[str, float]]:
    """The categories explain lists: the first three, then any other at least SHOWN_MIN likely, `limit` at most."""
    return [(c, x) for i, (c, x) in enumerate(ranked) if i < 3 or x >= SHOWN_MIN][:limit]


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


def from_json(text: str) -> Model:
    doc = json.loads(text)
    weights, confidence = tuple(doc["weights"]), tuple(float(c) for c in doc["confidence"])
    return Model(tuple(doc["categories"]), doc["docs"], doc["counts"], weights, confidence)


@lru_cache(maxsize=1)
def stored() -> Model:
    """The model shipped in the package (fa_doctor/knowledge/model.json)."""
    return from_json(resources.files("fa_doctor.knowledge").joinpath("model.json").read_text(encoding="utf-8"))
