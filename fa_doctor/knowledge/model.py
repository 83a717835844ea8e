"""The fitted evidence model: which category the evidence of a paste points to, and how likely that is right.

model.json is data, written by benchmarks/explain_fit.py (scripts/explain_learn.py) from the labelled corpus
(tests/explain_cases/, tests/explain_reports/, tests/explain_dev/, tests/explain_heldout/) and checked equal to a
refit by tests/test_explain_loro.py. It holds:

- per feature (an `ev:` rule, an `entry:` pattern hit, a `tok:` word), how many reports of each category have
  it (features seen in fewer than two repositories are dropped: one thread's words are not evidence);
- the weights of the three kinds of evidence (hand-written pattern scores, rule and entry features, words);
- the confidence model: a logistic regression, fitted on reports of repositories the counts did not see, that
  turns how the evidence agrees (the margin, the pattern behind the first category and any pattern against
  it, whether the evidence without patterns picks the same category) into the probability the first answer
  is right.

A category's score is a naive-Bayes log-odds sum, smoothed towards uniform and towards the rules' hand-written
hints (evidence.HINTS), plus the weighted best pattern score of that category. The naive-Bayes probability
itself is overconfident (correlated evidence counted as independent); the confidence model is what explain
shows. The rest of the probability (1 - confidence) is shared among the other categories in proportion to
their scores, so the answers' confidences add up to one. Scoring is dictionary look-ups and a few logarithms
per feature: well under a millisecond for a paste.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from fa_doctor.knowledge.evidence import HINT_DOCS, HINTS

SMOOTHING = 1.0  # pseudo-reports spread evenly over the categories, per feature
FLOOR, CEILING = 0.01, 0.99  # a confidence is never 0 or 1
CONFIDENT = 0.9  # a first answer at least this likely is stated as the cause
GUESS = 0.5  # a first answer below this is shown as a guess
SHOWN_MIN = 0.05  # below this, an answer after the first is labelled unlikely (after the third, not listed)
MARGIN_CAP = 30.0  # log-odds gaps beyond this say nothing more
SUPPORTING = 1.0  # a rule or pattern feature supports a category when it raises its log-odds by this much
SUPPORT_CAP = 6  # supporting features beyond this say nothing more
# Hand-set, not fitted: a first answer that no pattern and no rule supports (the words alone chose it) is a guess.
# The corpus has almost no such report to measure it on (real reports carry an error message).
UNSUPPORTED = 0.35
# Evidence that says where or in what a report happened, not what failed: it supports no category.
CONTEXT = ("ev:exc-", "ev:frame-", "ev:torch-version", "ev:fa-version-", "ev:windows", "ev:unsupported",
           "ev:install-hint", "ev:cpu", "ev:container")  # fmt: skip


def supports(feature: str, weight: float) -> bool:
    """Whether a rule or pattern feature with this log-odds weight for a category is support for it."""
    return weight >= SUPPORTING and not feature.startswith(CONTEXT)


@dataclass(frozen=True, slots=True)
class Scores:
    """Per category (in Model.categories order): the full score, the score without the patterns, and the best
    pattern score."""

    full: tuple[float, ...]
    evidence: tuple[float, ...]
    patterns: tuple[float, ...]
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
        got = self._cache.get(feature)
        if got is None and feature not in self._cache:
            got = feature_weights(self.categories, self.counts.get(feature, {}), HINTS.get(feature))
            self._cache[feature] = got
        return got

    def scores(self, patterns: Mapping[str, float], evidence: Iterable[str], words: Iterable[str]) -> Scores:
        cats = self.categories
        total = sum(self.docs.values()) + len(cats)
        prior = [math.log((self.docs.get(c, 0) + 1) / total) for c in cats]
        _, we, wt = self.weights
        ev = list(prior)
        support = [0] * len(cats)
        for group, weight in ((evidence, we), (words, wt)):
            for f in group:
                w = self.weight(f)
                if w is not None:
                    ev = [a + weight * x for a, x in zip(ev, w, strict=True)]
                    if weight == we:
                        support = [n + supports(f, x) for n, x in zip(support, w, strict=True)]
        pat = tuple(patterns.get(c, 0.0) for c in cats)
        return combine(pat, ev, support, self.weights)

    def rank(self, patterns: Mapping[str, float], evidence: Iterable[str], words: Iterable[str]) -> list[Ranked]:
        """Every category with its model probability, its confidence and the features that weighed most for it,
        best first."""
        evidence, words = list(evidence), list(words)
        s = self.scores(patterns, evidence, words)
        probs = softmax(s.full)
        conf = distribute(s, self.confidence)
        support: list[list[tuple[float, str]]] = [[] for _ in self.categories]
        for group, weight in ((evidence, self.weights[1]), (words, self.weights[2])):
            for f in group:
                w = self.weight(f)
                for i, x in enumerate(w or ()):
                    if x > 0:
                        support[i].append((weight * x, f))
        out = [
            Ranked(c, p, q, tuple(f for _, f in sorted(sup, reverse=True)[:4]))
            for c, p, q, sup in zip(self.categories, probs, conf, support, strict=True)
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
    wp = weights[0]
    full = tuple(e + wp * p for e, p in zip(ev, pat, strict=True))
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
    """What the confidence model reads of the first category's standing (1 is the intercept): the log-odds
    margin over the second, its best pattern score, the best pattern score of any other category, whether the
    evidence without patterns ranks it first too and by what margin, whether no pattern matched at all, and
    how many rule or pattern features (not words) support it."""
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


def first_confidence(s: Scores, coefficients: Sequence[float]) -> float:
    """The probability that the first category is right (the logistic model; the softmax when unfitted), at most
    UNSUPPORTED when nothing but words chose it."""
    top, _ = _best_two(s.full)
    if coefficients:
        z = sum(c * x for c, x in zip(coefficients, confidence_features(s), strict=True))
        p = 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))
    else:
        p = max(softmax(s.full))
    if s.patterns[top] == 0 and s.support[top] == 0:
        p = min(p, UNSUPPORTED)
    return min(CEILING, max(FLOOR, p))


def distribute(s: Scores, coefficients: Sequence[float]) -> list[float]:
    """Every category's confidence: the first's from the confidence model, the rest of the probability shared
    by the others in proportion to their scores (so the confidences add up to one)."""
    top, _ = _best_two(s.full)
    first = first_confidence(s, coefficients)
    rest = softmax([x for i, x in enumerate(s.full) if i != top])
    it = iter(rest)
    return [first if i == top else (1 - first) * next(it) for i in range(len(s.full))]


def standing(confidence: float, first: bool) -> str:
    """How explain words an answer: the first is 'likely' (the cause, as far as the text shows) or a 'guess'
    (the evidence does not settle it); another is 'possible' (worth a look) or 'unlikely' (listed for
    completeness, below SHOWN_MIN: not an equal of the first)."""
    if first:
        return "likely" if confidence >= GUESS else "guess"
    return "possible" if confidence >= SHOWN_MIN else "unlikely"


def shown(ranked: Sequence[tuple[str, float]], limit: int) -> list[tuple[str, float]]:
    """The categories explain lists, best first, with their confidence: the first three (each labelled by
    standing()), then any other at least SHOWN_MIN likely, at most `limit` in all."""
    out = []
    for i, (category, confidence) in enumerate(ranked):
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
        "version": 2,
        "categories": list(model.categories),
        "weights": list(model.weights),
        "docs": dict(model.docs),
        "confidence": [round(c, 6) for c in model.confidence],
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
        tuple(float(c) for c in doc["confidence"]),
    )


@lru_cache(maxsize=1)
def stored() -> Model:
    """The model shipped in the package (fa_doctor/knowledge/model.json)."""
    return from_json(resources.files("fa_doctor.knowledge").joinpath("model.json").read_text(encoding="utf-8"))
