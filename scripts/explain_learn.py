"""Fitting the evidence model from labelled reports, and scoring it leave-one-repository-out (LORO).

A script, not part of the package (`explain` never fits): benchmarks/explain_fit.py writes model.json with fit(),
benchmarks/explain_loro.py and tests/test_explain_loro.py measure with loro(). Everything is counting, a small
grid and a small ridge logistic regression solved by a fixed number of Newton steps, so a fit is exact and
deterministic and a whole LORO run (one fold per repository, each with its own inner LORO to pick the weights
and fit the confidence model) takes seconds.

What is tuned from data, and where it is fitted in loro(): the feature counts (on the training repositories),
the feature filter (seen in at least MIN_REPOS training repositories), the three evidence weights and the
confidence model (both fitted on an inner LORO over the training repositories only). Hand-written, not
fitted: errors.json's patterns and their weights, evidence.RULES, structure.RULES, their HINTS, and the
thresholds of knowledge/model.py (GUESS, SHOWN_MIN, UNSUPPORTED).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fa_doctor.knowledge.match import Features, featurise, normalise
from fa_doctor.knowledge.model import (
    Model,
    Scores,
    combine,
    confidence_features,
    distribute,
    feature_weights,
    shown,
    softmax,
    supports,
)

MIN_REPOS = 2
Parts = tuple[list[float], list[float], list[float], list[float], list[int]]
GRID = tuple(
    (wp, we, wt) for wp in (5.0, 10.0, 20.0, 40.0) for we in (0.25, 0.5, 1.0) for wt in (0.02, 0.05, 0.1, 0.2)
)  # patterns, evidence, words
_REPO = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)")


@dataclass(frozen=True, slots=True)
class Doc:
    name: str
    repo: str  # owner/name, lower-case
    category: str
    patterns: Mapping[str, float]
    evidence: frozenset[str]
    words: frozenset[str]
    relevant: bool

    @classmethod
    def of(cls, name: str, source: str, category: str, text: str) -> Doc:
        f: Features = featurise(normalise(text))
        return cls(
            name, repository(source), category, f.patterns, frozenset(f.evidence), frozenset(f.words), f.relevant
        )


def repository(source: str) -> str:
    m = _REPO.search(source)
    if m is None:
        raise ValueError(f"not a GitHub URL: {source!r}")
    return f"{m.group(1)}/{m.group(2)}".lower()


@dataclass(frozen=True, slots=True)
class Prediction:
    doc: Doc
    shown: tuple[tuple[str, float], ...]  # (category, confidence) as explain shows them, best first
    ranking: tuple[str, ...]  # every category, best first (what top-3 is measured on)
    probability: float  # the naive-Bayes probability of the first (overconfident)


class Corpus:
    """Feature counts of labelled reports, by repository, so any set of repositories can be left out exactly."""

    def __init__(self, docs: Sequence[Doc], categories: Sequence[str]) -> None:
        self.docs = list(docs)
        self.categories = tuple(categories)
        self.by_repo: dict[str, list[Doc]] = defaultdict(list)
        for d in self.docs:
            self.by_repo[d.repo].append(d)
        self.repos = sorted(self.by_repo)
        self._weights: dict[tuple[str, frozenset[str]], tuple[float, ...] | None] = {}
        self._priors: dict[frozenset[str], list[float]] = {}
        self.count: dict[str, Counter[str]] = defaultdict(Counter)  # feature -> category -> reports
        self.repo_count: dict[str, dict[str, Counter[str]]] = defaultdict(dict)  # feature -> repo -> category
        for repo in self.repos:
            for d in self.by_repo[repo]:
                for f in d.evidence | d.words:
                    self.count[f][d.category] += 1
                    self.repo_count[f].setdefault(repo, Counter())[d.category] += 1

    def counts(self, feature: str, out: Iterable[str]) -> dict[str, int]:
        """The feature's counts without the repositories in out ({} when it is in fewer than MIN_REPOS left)."""
        per_repo = self.repo_count.get(feature)
        if not per_repo:
            return {}
        left = [r for r in per_repo if r not in out]
        if len(left) < MIN_REPOS:
            return {}
        if len(left) == len(per_repo):
            return dict(self.count[feature])
        got: Counter[str] = Counter()
        for r in left:
            got.update(per_repo[r])
        return dict(got)

    def model(
        self, out: frozenset[str], weights: tuple[float, float, float], confidence: tuple[float, ...] = ()
    ) -> Model:
        docs = Counter(d.category for d in self.docs if d.repo not in out)
        counts = {f: c for f in sorted(self.count) if (c := self.counts(f, out))}
        return Model(
            self.categories, {c: docs[c] for c in self.categories if docs[c]}, counts, weights, tuple(confidence)
        )

    def parts(self, doc: Doc, out: frozenset[str]) -> Parts:
        """prior, patterns, evidence and word scores per category of doc under the model without `out`, and
        how many of its evidence features support each category."""
        cats = self.categories
        prior = self._priors.get(out)
        if prior is None:
            docs = Counter(d.category for r in self.repos if r not in out for d in self.by_repo[r])
            total = sum(docs.values()) + len(cats)
            prior = self._priors[out] = [math.log((docs[c] + 1) / total) for c in cats]
        sums = []
        support = [0] * len(cats)
        for group in (doc.evidence, doc.words):
            s = [0.0] * len(cats)
            for f in group:
                w = self._weight(f, out)
                if w is not None:
                    s = [a + b for a, b in zip(s, w, strict=True)]
                    if group is doc.evidence:
                        support = [n + supports(f, x) for n, x in zip(support, w, strict=True)]
            sums.append(s)
        return prior, [doc.patterns.get(c, 0.0) for c in cats], sums[0], sums[1], support

    def _weight(self, feature: str, out: frozenset[str]) -> tuple[float, ...] | None:
        """feature_weights() of the feature without `out`, cached by the left-out repositories that have it."""
        per_repo = self.repo_count.get(feature, {})
        key = (feature, frozenset(r for r in out if r in per_repo))
        if key not in self._weights:
            self._weights[key] = feature_weights(self.categories, self.counts(feature, out), _hint(feature))
        return self._weights[key]


def _hint(feature: str) -> str | None:
    from fa_doctor.knowledge.evidence import HINTS

    return HINTS.get(feature)


def probabilities(parts: Parts, weights: tuple[float, float, float]) -> list[float]:
    return softmax(scores(parts, weights).full)


def scores(parts: Parts, weights: tuple[float, float, float]) -> Scores:
    prior, pat, ev, words, support = parts
    _, we, wt = weights
    return combine(pat, [a + we * c + wt * d for a, c, d in zip(prior, ev, words, strict=True)], support, weights)


def choose(corpus: Corpus, out: frozenset[str]) -> tuple[tuple[float, float, float], tuple[float, ...]]:
    """The weights and the confidence model for a model without `out`, from an inner LORO over the other
    repositories: the weights that rank the right category first most often, then a logistic regression of
    'the first answer is right' on its confidence features, both on reports whose repository was left out."""
    inner = [(d, corpus.parts(d, out | {d.repo})) for r in corpus.repos if r not in out for d in corpus.by_repo[r]]
    inner = [(d, p) for d, p in inner if d.relevant]
    cats = corpus.categories
    # Per report: the right category's parts, and every category's (ranks need no softmax).
    rows = [(tuple(zip(*p[:4], strict=True)), cats.index(d.category)) for d, p in inner]
    best: tuple[tuple[int, int], tuple[float, float, float]] | None = None
    for wp, we, wt in GRID:
        top1 = top3 = 0
        for parts, right in rows:
            a, b, c, e = parts[right]
            want = a + wp * b + we * c + wt * e
            above = sum(1 for a, b, c, e in parts if a + wp * b + we * c + wt * e > want)
            top1 += above == 0
            top3 += above < 3
        if best is None or (top1, top3) > best[0]:
            best = ((top1, top3), (wp, we, wt))
    assert best is not None
    weights = best[1]
    xs, ys = [], []
    for d, p in inner:
        s = scores(p, weights)
        xs.append(confidence_features(s))
        ys.append(1.0 if cats[max(range(len(cats)), key=lambda i: s.full[i])] == d.category else 0.0)
    return weights, logistic(xs, ys)


RIDGE = 1.0  # L2 penalty on the confidence model's slopes (not the intercept)
NEWTON_STEPS = 25


def logistic(xs: Sequence[Sequence[float]], ys: Sequence[float]) -> tuple[float, ...]:
    """Ridge logistic regression by Newton's method (a fixed number of steps: exact and deterministic)."""
    k = len(xs[0])
    w = [0.0] * k
    for _ in range(NEWTON_STEPS):
        grad = [0.0] * k
        hess = [[0.0] * k for _ in range(k)]
        for x, y in zip(xs, ys, strict=True):
            z = max(-30.0, min(30.0, sum(a * b for a, b in zip(w, x, strict=True))))
            p = 1 / (1 + math.exp(-z))
            for i in range(k):
                grad[i] += (p - y) * x[i]
                for j in range(k):
                    hess[i][j] += p * (1 - p) * x[i] * x[j]
        for i in range(1, k):
            grad[i] += RIDGE * w[i]
            hess[i][i] += RIDGE
        hess[0][0] += 1e-6
        step = _solve(hess, grad)
        w = [a - b for a, b in zip(w, step, strict=True)]
    return tuple(w)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a small symmetric positive definite system)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def fit(corpus: Corpus) -> Model:
    weights, confidence = choose(corpus, frozenset())
    return corpus.model(frozenset(), weights, confidence)


def to_json(model: Model) -> str:
    """model.json's text (fa_doctor.knowledge.model.from_json reads it)."""
    doc: dict[str, Any] = {
        "version": 2,
        "categories": list(model.categories),
        "weights": list(model.weights),
        "docs": dict(model.docs),
        "confidence": [round(c, 6) for c in model.confidence],
        "counts": {f: dict(sorted(c.items())) for f, c in sorted(model.counts.items())},
    }
    return json.dumps(doc, indent=0, sort_keys=False) + "\n"


def predict(
    corpus: Corpus, doc: Doc, out: frozenset[str], weights: tuple[float, float, float], conf: tuple[float, ...]
) -> Prediction:
    if not doc.relevant:
        return Prediction(doc, (), (), 0.0)
    s = scores(corpus.parts(doc, out), weights)
    dist = distribute(s, conf)
    ranked = sorted(zip(corpus.categories, dist, softmax(s.full), strict=True), key=lambda cp: (-cp[1], -cp[2]))
    order = tuple((c, q) for c, q, _ in ranked)
    return Prediction(doc, tuple(shown(order, 5)), tuple(c for c, _ in order), ranked[0][2])


def loro(corpus: Corpus, workers: int = 1) -> list[Prediction]:
    """Every report scored by a model fitted (counts, weights, calibration) without its repository; the folds
    are independent, so `workers` processes share them (same result, in repository order)."""
    global _SHARED
    if workers <= 1 or not hasattr(os, "fork"):
        return [p for repo in corpus.repos for p in _fold(corpus, repo)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _SHARED = corpus  # inherited by the forked workers, not pickled
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            folds = list(pool.map(_shared_fold, corpus.repos, chunksize=4))
    finally:
        _SHARED = None
    return [p for fold in folds for p in fold]


_SHARED: Corpus | None = None


def _shared_fold(repo: str) -> list[Prediction]:
    assert _SHARED is not None
    return _fold(_SHARED, repo)


def _fold(corpus: Corpus, repo: str) -> list[Prediction]:
    out = frozenset({repo})
    weights, confidence = choose(corpus, out)
    return [predict(corpus, d, out, weights, confidence) for d in corpus.by_repo[repo]]


def in_sample(corpus: Corpus, model: Model) -> list[Prediction]:
    return [predict(corpus, d, frozenset(), model.weights, model.confidence) for d in corpus.docs]


def ece(preds: Sequence[Prediction], bins: int = 10) -> float:
    """Expected calibration error of the first answer's confidence (equal-width bins)."""
    groups: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for p in preds:
        if p.shown:
            conf = p.shown[0][1]
            groups[min(bins - 1, int(conf * bins))].append((conf, p.shown[0][0] == p.doc.category))
    n = sum(len(g) for g in groups.values())
    return sum(abs(sum(c for c, _ in g) / len(g) - sum(r for _, r in g) / len(g)) * len(g) / n for g in groups.values())


BINS = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


def calibration_table(
    preds: Sequence[Prediction], bins: Sequence[float] = BINS
) -> list[tuple[float, float, int, float]]:
    """(low, high, first answers with a confidence in [low, high), their observed rate of being right)."""
    rows = []
    for low, high in itertools.pairwise(bins):
        last = high == bins[-1]
        got = [p.shown[0][0] == p.doc.category for p in preds if p.shown and low <= p.shown[0][1] < high + last]
        rows.append((low, high, len(got), sum(got) / len(got) if got else 0.0))
    return rows


def confident_errors(preds: Sequence[Prediction], at: float = 0.9) -> list[Prediction]:
    """The reports whose first answer is wrong although its confidence is at least `at`."""
    return [p for p in preds if p.shown and p.shown[0][1] >= at and p.shown[0][0] != p.doc.category]
