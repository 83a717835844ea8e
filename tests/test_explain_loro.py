"""explain generalises: leave-one-repository-out (LORO) over all 408 labelled reports, calibration, the stored model.

Every report of tests/explain_cases/ and tests/explain_reports/ is scored by a model whose counts, feature
filter, weights and calibration were fitted without the report's repository (benchmarks/explain_loro.py prints
the table per category; `pytest -s` prints it here). Deterministic: counting, a fixed grid, isotonic regression.
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
from explain_learn import Corpus, ece, fit, in_sample, loro, probabilities, repository  # noqa: E402

from fa_doctor.knowledge import explain  # noqa: E402
from fa_doctor.knowledge.model import from_json, stored, to_json  # noqa: E402


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return explain_fit.corpus()


def test_the_corpus_is_large_and_from_many_repositories(corpus: Corpus) -> None:
    assert len(corpus.docs) >= 400 and len(corpus.repos) >= 100
    assert all("/" in r and not r.endswith(("/blob", "/tree")) for r in corpus.repos)
    assert repository("source: https://github.com/Dao-AILab/flash-attention/issues/1") == "dao-ailab/flash-attention"


def test_stored_model_is_what_the_fit_script_writes(corpus: Corpus) -> None:
    text = to_json(fit(corpus))
    assert explain_fit.MODEL.read_text(encoding="utf-8") == text, "run: python benchmarks/explain_fit.py"
    assert from_json(text) == stored()


def test_the_runtime_model_ranks_as_the_fit_does(corpus: Corpus) -> None:
    model = stored()
    for doc in corpus.docs:
        want = probabilities(corpus.parts(doc, frozenset()), model.weights)
        got = {r.category: r.probability for r in model.rank(doc.patterns, doc.evidence, doc.words)}
        assert [got[c] for c in corpus.categories] == pytest.approx(want, rel=1e-9, abs=1e-12), doc.name


def test_explain_answers_as_the_in_sample_predictions(corpus: Corpus) -> None:
    expected = {p.doc.name: [c for c, _ in p.shown] for p in in_sample(corpus, stored())}
    for path in (p for folder in explain_fit.FOLDERS for p in sorted(folder.glob("*.txt"))):
        doc = explain_fit.read(path)
        text = path.read_text(encoding="utf-8").split("\n", 1)[1]
        text = "\n".join(line for line in text.split("\n") if not line.startswith(("label:", "relabel:")))
        assert [m.category for m in explain(text)] == expected[doc.name], doc.name


def test_leave_one_repository_out(corpus: Corpus) -> None:
    held = loro(corpus, workers=2)
    fitted = in_sample(corpus, stored())
    table = explain_loro.table(held, fitted)
    for group, r in table.items():
        lo, ins = r["loro"], r["in_sample"]
        print(f"{group:28s} n={lo['n']:3.0f} LORO {lo['top1']:.3f}/{lo['top3']:.3f}", end=" ")
        print(f"in sample {ins['top1']:.3f}/{ins['top3']:.3f}")
    overall = table["all"]["loro"]
    calibration_error = ece(held)
    print(f"ECE held out {calibration_error:.3f}, in sample {ece(fitted):.3f}")
    assert overall["top1"] >= 0.91
    assert overall["top3"] >= 0.97
    assert overall["none"] < 0.02
    assert calibration_error < 0.1
    assert table["folder explain_reports"]["loro"]["top1"] >= 0.85  # the reports no pattern was written from


def test_folds_in_parallel_give_the_serial_result(corpus: Corpus) -> None:
    small = Corpus([d for d in corpus.docs if d.repo in set(corpus.repos[::6])], corpus.categories)
    assert loro(small, workers=1) == loro(small, workers=2)
