"""Fitting the evidence model from labelled reports, and scoring it leave-one-repository-out (LORO).

A script, not part of the package (`explain` never fits): benchmarks/explain_fit.py writes model.json with fit(), benchmarks/explain_loro.py
and tests/test_explain_loro.py measure with loro(). Everything is counting, a small grid and isotonic
regression, so a fit is exact and deterministic and a whole LORO run (about 150 folds, each with its own
inner LORO to pick the weights and the calibration) takes seconds.

What is tuned from data, and where it is fitted in loro(): the feature counts (on the training repositories),
the feature filter (seen in at least MIN_REPOS training repositories), the three evidence weights and the
calibration table (both chosen on an inner LORO over the training repositories only). Hand-written, not
fitted: errors.json's patterns and their weights, evidence.RULES and evidence.HINTS.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fa_doctor.knowledge.features import Features, featurise
from fa_doctor.knowledge.match import normalise
from fa_doctor.knowledge.model import Model, feature_weights, shown

MIN_REPOS = 2
Calibration = tuple[tuple[float, float], ...]
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
    probability: float  # the model's (uncalibrated) probability of the first


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

    def model(self, out: frozenset[str], weights: tuple[float, float, float], calibration: Calibration = ()) -> Model:
        docs = Counter(d.category for d in self.docs if d.repo not in out)
        counts = {f: c for f in sorted(self.count) if (c := self.counts(f, out))}
        return Model(
            self.categories, {c: docs[c] for c in self.categories if docs[c]}, counts, weights, tuple(calibration)
        )

    def parts(self, doc: Doc, out: frozenset[str]) -> tuple[list[float], list[float], list[float], list[float]]:
        """prior, patterns, evidence and word scores per category of doc under the model without `out`."""
        cats = self.categories
        prior = self._priors.get(out)
        if prior is None:
            docs = Counter(d.category for r in self.repos if r not in out for d in self.by_repo[r])
            total = sum(docs.values()) + len(cats)
            prior = self._priors[out] = [math.log((docs[c] + 1) / total) for c in cats]
        sums = []
        for group in (doc.evidence, doc.words):
            s = [0.0] * len(cats)
            for f in group:
                w = self._weight(f, out)
                if w is not None:
                    s = [a + b for a, b in zip(s, w, strict=True)]
            sums.append(s)
        return prior, [doc.patterns.get(c, 0.0) for c in cats], sums[0], sums[1]

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


Parts = tuple[list[float], list[float], list[float], list[float]]


def probabilities(parts: Parts, weights: tuple[float, float, float]) -> list[float]:
    prior, pat, ev, words = parts
    wp, we, wt = weights
    s = [a + wp * b + we * c + wt * d for a, b, c, d in zip(prior, pat, ev, words, strict=True)]
    top = max(s)
    e = [math.exp(x - top) for x in s]
    n = sum(e)
    return [x / n for x in e]


def choose(corpus: Corpus, out: frozenset[str]) -> tuple[tuple[float, float, float], Calibration]:
    """The weights and calibration for a model without `out`, from an inner LORO over the other repositories."""
    inner = [(d, corpus.parts(d, out | {d.repo})) for r in corpus.repos if r not in out for d in corpus.by_repo[r]]
    inner = [(d, p) for d, p in inner if d.relevant]
    cats = corpus.categories
    # Per report: the right category's parts, and every category's (ranks need no softmax).
    rows = [(tuple(zip(*p, strict=True)), cats.index(d.category)) for d, p in inner]
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
    pairs = []
    for d, p in inner:
        probs = probabilities(p, weights)
        for i in sorted(range(len(cats)), key=lambda i: -probs[i])[:3]:
            pairs.append((probs[i], cats[i] == d.category))
    return weights, isotonic(pairs)


def isotonic(pairs: Iterable[tuple[float, bool]]) -> Calibration:
    """Pool-adjacent-violators: ascending (mean probability of a block, its rate of being right); the rates
    strictly increase, and Model.calibrated() interpolates between the points."""
    blocks: list[list[float]] = []  # [sum right, count, sum x]
    for x, right in sorted(pairs):
        blocks.append([float(right), 1.0, x])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            r, n, sx = blocks.pop()
            blocks[-1][0] += r
            blocks[-1][1] += n
            blocks[-1][2] += sx
    return tuple((round(b[2] / b[1], 6), round(b[0] / b[1], 4)) for b in blocks)


def fit(corpus: Corpus) -> Model:
    weights, calibration = choose(corpus, frozenset())
    return corpus.model(frozenset(), weights, calibration)


def predict(
    corpus: Corpus, doc: Doc, out: frozenset[str], weights: tuple[float, float, float], cal: Model
) -> Prediction:
    if not doc.relevant:
        return Prediction(doc, (), 0.0)
    probs = probabilities(corpus.parts(doc, out), weights)
    ranked = sorted(zip(corpus.categories, probs, strict=True), key=lambda cp: -cp[1])
    return Prediction(doc, tuple(shown(ranked, cal.calibrated, 5)), ranked[0][1])


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
    weights, calibration = choose(corpus, out)
    cal = Model(corpus.categories, {}, {}, weights, calibration)
    return [predict(corpus, d, out, weights, cal) for d in corpus.by_repo[repo]]


def in_sample(corpus: Corpus, model: Model) -> list[Prediction]:
    return [predict(corpus, d, frozenset(), model.weights, model) for d in corpus.docs]


def ece(preds: Sequence[Prediction], bins: int = 10) -> float:
    """Expected calibration error of the first answer's confidence (equal-width bins)."""
    groups: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for p in preds:
        if p.shown:
            conf = p.shown[0][1]
            groups[min(bins - 1, int(conf * bins))].append((conf, p.shown[0][0] == p.doc.category))
    n = sum(len(g) for g in groups.values())
    return sum(abs(sum(c for c, _ in g) / len(g) - sum(r for _, r in g) / len(g)) * len(g) / n for g in groups.values())
