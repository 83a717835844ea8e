"""How well `fa-doctor explain` generalises: leave-one-repository-out (LORO) over every labelled report.

For each repository (owner/name of a report's source URL), everything fitted from data (feature counts, the
feature filter, the three evidence weights, the confidence model) is fitted on the other repositories only,
the weights and the confidence model by an inner LORO over those; the held-out repository's reports are then
scored. Hand-written parts (errors.json's patterns, the evidence and structure rules and their hints, the
thresholds of knowledge/model.py) are the same in every fold: see docs/errors.md, "How explain ranks", for
which of them were written after reading which reports.

Prints, per category and per folder: reports, LORO top-1 / top-3, and the in-sample figures of the shipped
model beside them; the calibration table of the first answer's confidence (bins: count, observed rate of
being right) held out; the wrong first answers at confidence >= 0.9; the expected calibration error (ECE).
Run:  python benchmarks/explain_loro.py [--json] [--misses] [--folder NAME] [--write]

--write stores every held-out prediction in tests/explain_loro.json: tests/test_explain_loro.py recomputes a sample
of the folds and checks them equal to the stored ones, then checks the figures on the whole stored run (a full
LORO takes minutes on two cores: one fold per repository, each with its own inner LORO).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explain_fit import ROOT, corpus

sys.path.insert(0, str(ROOT))

from explain_learn import Corpus, Prediction, calibration_table, confident_errors, ece, fit, in_sample, loro

CONFIDENT = 0.9
STORED = ROOT / "tests" / "explain_loro.json"


def dump(held: Sequence[Prediction]) -> str:
    """The held-out predictions as stored in tests/explain_loro.json (confidences to 6 decimals)."""
    doc = {
        p.doc.name: {
            "repo": p.doc.repo,
            "category": p.doc.category,
            "shown": [[c, round(x, 6)] for c, x in p.shown],
            "ranking": list(p.ranking[:3]),
        }
        for p in sorted(held, key=lambda p: p.doc.name)
    }
    return json.dumps({"version": 1, "predictions": doc}, indent=0, sort_keys=True) + "\n"


def load(corpus: Corpus, text: str) -> list[Prediction]:
    """Stored predictions as Prediction objects of the corpus's reports (the order of loro(): by repository)."""
    stored = json.loads(text)["predictions"]
    out = []
    for d in (d for repo in corpus.repos for d in corpus.by_repo[repo]):
        p = stored[d.name]
        out.append(Prediction(d, tuple((c, float(x)) for c, x in p["shown"]), tuple(p["ranking"]), 0.0))
    return out


def rates(preds: Sequence[Prediction]) -> dict[str, float]:
    n = len(preds)
    top1 = sum(1 for p in preds if p.shown and p.shown[0][0] == p.doc.category)
    top3 = sum(1 for p in preds if p.doc.category in p.ranking[:3])
    wrong = len(confident_errors(preds, CONFIDENT))
    return {
        "n": n,
        "top1": top1 / n,
        "top3": top3 / n,
        "none": sum(1 for p in preds if not p.shown) / n,
        "wrong_confident": wrong / n,
    }


def table(held: Sequence[Prediction], fitted: Sequence[Prediction]) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {"loro": rates, "in_sample": rates}} per category, per folder and for all reports."""
    order = {p.doc.name: i for i, p in enumerate(fitted)}
    fitted = [fitted[order[p.doc.name]] for p in held]  # loro() goes repository by repository
    groups: dict[str, list[int]] = {"all": list(range(len(held)))}
    for i, p in enumerate(held):
        groups.setdefault(p.doc.category, []).append(i)
        groups.setdefault("folder " + p.doc.name.split("/")[0], []).append(i)
    return {
        g: {"loro": rates([held[i] for i in idx]), "in_sample": rates([fitted[i] for i in idx])}
        for g, idx in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0].startswith("folder"), kv[0]))
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    parser.add_argument("--misses", action="store_true", help="list the reports LORO gets wrong")
    parser.add_argument("--folder", help="the calibration table and misses of this corpus folder only")
    parser.add_argument("--write", action="store_true", help=f"store the predictions in {STORED.relative_to(ROOT)}")
    args = parser.parse_args()
    start = time.perf_counter()
    c = corpus()
    held = loro(c, workers=os.cpu_count() or 1)
    fitted = in_sample(c, fit(c))
    seconds = time.perf_counter() - start
    if args.write:
        STORED.write_text(dump(held), encoding="utf-8")
    some = [p for p in held if not args.folder or p.doc.name.startswith(args.folder + "/")]
    doc = {
        "reports": len(c.docs),
        "repositories": len(c.repos),
        "ece_loro": ece(held),
        "ece_in_sample": ece(fitted),
        "seconds": seconds,
        "table": table(held, fitted),
        "calibration": [{"low": lo, "high": hi, "n": n, "right": rate} for lo, hi, n, rate in calibration_table(some)],
        "confident_errors": [p.doc.name for p in confident_errors(some, CONFIDENT)],
    }
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['reports']} reports from {doc['repositories']} repositories, LORO in {seconds:.1f} s")
    print(f"{'':28s} {'n':>4s}  {'LORO top1':>9s} {'top3':>6s} {'wrong>=.9':>9s}  {'in-sample top1':>14s} {'top3':>6s}")
    for group, r in doc["table"].items():  # type: ignore[attr-defined]
        lo, ins = r["loro"], r["in_sample"]
        print(
            f"{group:28s} {lo['n']:4d}  {lo['top1']:9.3f} {lo['top3']:6.3f} {lo['wrong_confident']:9.3%}"
            f"  {ins['top1']:14.3f} {ins['top3']:6.3f}"
        )
    print(f"no category (LORO): {doc['table']['all']['loro']['none']:.3%}")  # type: ignore[index]
    print(f"ECE of the first answer: LORO {doc['ece_loro']:.3f}, in sample {doc['ece_in_sample']:.3f}")
    print(f"calibration of the first answer, LORO{' (' + args.folder + ')' if args.folder else ''}:")
    for row in doc["calibration"]:  # type: ignore[attr-defined]
        print(f"  [{row['low']:.2f}, {row['high']:.2f}{']' if row['high'] == 1.0 else ')'}  n={row['n']:4d}", end="")
        print(f"  right {row['right']:.3f}" if row["n"] else "")
    for name in doc["confident_errors"]:  # type: ignore[attr-defined]
        print("wrong at >= 0.9:", name)
    if args.misses:
        for p in some:
            if not p.shown or p.shown[0][0] != p.doc.category:
                print("miss", p.doc.name, [(c, round(x, 2)) for c, x in p.shown[:3]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
