"""explain generalises: leave-one-repository-out (LORO) over every labelled report, its confidence, the stored model.

Every report of tests/explain_cases/, explain_reports/, explain_dev/ and explain_heldout/ is scored by a model whose
counts, feature filter, weights and confidence model were fitted without the report's repository
(benchmarks/explain_loro.py prints the table per category and folder; `pytest -s` prints it here).
Deterministic: counting, a fixed grid, a fixed number of Newton steps. A whole LORO takes minutes on two cores,
so the run is stored (tests/explain_loro.json, `benchmarks/explain_loro.py --write`): a sample of folds is
recomputed here and must equal the stored predictions, and the figures are checked on the whole stored run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

import explain_fit  # noqa: E402
import explain_loro  # noqa: E402
from explain_learn import (  # noqa: E402
    Corpus,
    _fold,
    calibration_table,
    confident_errors,
    ece,
    fit,
    in_sample,
    logistic,
    loro,
    probabilities,
    repository,
    scores,
    to_json,
)

from fa_doctor.knowledge import explain  # noqa: E402
from fa_doctor.knowledge.model import distribute, from_json, stored  # noqa: E402


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return explain_fit.corpus()


SAMPLE = 32  # every SAMPLE-th repository's fold is recomputed


@pytest.fixture(scope="module")
def held(corpus: Corpus) -> list:  # type: ignore[type-arg]
    """The stored LORO run, as predictions of the current corpus (every report present, none extra)."""
    text = explain_loro.STORED.read_text(encoding="utf-8")
    names = {d.name for d in corpus.docs}
    assert set(explain_loro.json.loads(text)["predictions"]) == names, "run: python benchmarks/explain_loro.py --write"
    return explain_loro.load(corpus, text)


def test_the_stored_run_is_what_loro_computes(corpus: Corpus, held: list) -> None:  # type: ignore[type-arg]
    """A sample of folds recomputed from scratch equals the stored predictions (rules, corpus and code unchanged)."""
    stored = {p.doc.name: p for p in held}
    for repo in corpus.repos[::SAMPLE]:
        for p in _fold(corpus, repo):
            want = stored[p.doc.name]
            assert [c for c, _ in p.shown] == [c for c, _ in want.shown], p.doc.name
            assert [x for _, x in p.shown] == pytest.approx([x for _, x in want.shown], abs=2e-6), p.doc.name
            assert p.ranking[:3] == want.ranking, p.doc.name


def test_the_corpus_is_large_and_from_many_repositories(corpus: Corpus) -> None:
    assert len(corpus.docs) >= 500 and len(corpus.repos) >= 220
    assert all("/" in r and not r.endswith(("/blob", "/tree")) for r in corpus.repos)
    assert repository("source: https://github.com/Dao-AILab/flash-attention/issues/1") == "dao-ailab/flash-attention"


def test_stored_model_is_what_the_fit_script_writes(corpus: Corpus) -> None:
    text = to_json(fit(corpus))
    assert explain_fit.MODEL.read_text(encoding="utf-8") == text, "run: python benchmarks/explain_fit.py"
    assert from_json(text) == stored()


def test_the_runtime_model_ranks_and_weighs_as_the_fit_does(corpus: Corpus) -> None:
    model = stored()
    for doc in corpus.docs:
        parts = corpus.parts(doc, frozenset())
        want = probabilities(parts, model.weights)
        ranked = {r.category: r for r in model.rank(doc.patterns, doc.evidence, doc.words)}
        assert [ranked[c].probability for c in corpus.categories] == pytest.approx(want, rel=1e-9, abs=1e-12), doc.name
        confidence = distribute(scores(parts, model.weights), model.confidence)
        assert [ranked[c].confidence for c in corpus.categories] == pytest.approx(confidence, rel=1e-9), doc.name


def test_explain_answers_as_the_in_sample_predictions(corpus: Corpus) -> None:
    expected = {p.doc.name: [c for c, _ in p.shown] for p in in_sample(corpus, stored())}
    for path in (p for folder in explain_fit.FOLDERS for p in sorted(folder.glob("*.txt"))):
        doc = explain_fit.read(path)
        assert [m.category for m in explain(explain_fit.paste(path))] == expected[doc.name], doc.name


def test_leave_one_repository_out(corpus: Corpus, held: list) -> None:  # type: ignore[type-arg]
    fitted = in_sample(corpus, stored())
    table = explain_loro.table(held, fitted)
    for group, r in table.items():
        lo, ins = r["loro"], r["in_sample"]
        print(f"{group:28s} n={lo['n']:3.0f} LORO {lo['top1']:.3f}/{lo['top3']:.3f}", end=" ")
        print(f"wrong>=.9 {lo['wrong_confident']:.3%} in sample {ins['top1']:.3f}/{ins['top3']:.3f}")
    overall = table["all"]["loro"]
    print(f"ECE held out {ece(held):.3f}, in sample {ece(fitted):.3f}")
    assert overall["top1"] >= 0.90  # issue 27: top-1 >= 90% on settled cases
    assert overall["wrong_confident"] <= 0.02  # issue 27: at most 2% wrong first answers at confidence >= 0.9
    assert overall["top3"] >= 0.97
    assert overall["none"] < 0.02
    assert table["folder explain_reports"]["loro"]["top1"] >= 0.88  # no pattern was written from these at first
    assert table["folder explain_heldout"]["loro"]["top1"] >= 0.80  # collected after the rules were frozen


def test_the_confidence_is_a_probability(held: list) -> None:  # type: ignore[type-arg]
    """Held out, the first answer is right about as often as its confidence says (bins of 20 or more)."""
    for low, high, n, right in calibration_table(held):
        print(f"[{low:.2f}, {high:.2f})  n={n:4d}  right {right:.3f}")
        if n >= 20:
            assert low - 0.1 <= right <= high + 0.1, (low, high, n, right)
    assert ece(held) < 0.05
    confident = [p for p in held if p.shown and p.shown[0][1] >= 0.9]
    assert len(confident_errors(held)) <= 0.02 * len(confident)


def test_the_confidence_model_is_a_plain_logistic_regression() -> None:
    w = logistic([(1.0, 0.0), (1.0, 0.0), (1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (1.0, 0.0)], [0, 1, 1, 1, 1, 0])
    assert w[1] > 0 and logistic([(1.0,)] * 4, [1, 1, 1, 0])[0] == pytest.approx(1.0986, abs=1e-3)


def test_folds_in_parallel_give_the_serial_result(corpus: Corpus) -> None:
    small = Corpus([d for d in corpus.docs if d.repo in set(corpus.repos[::12])], corpus.categories)
    assert loro(small, workers=1) == loro(small, workers=2)
