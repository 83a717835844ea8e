"""How well `fa-doctor explain` generalises: leave-one-repository-out (LORO) over every labelled report.

For each repository (owner/name of a report's source URL), everything fitted from data (feature counts, the
feature filter, the three evidence weights, the calibration table) is fitted on the other repositories only,
the weights and calibration by an inner LORO over those; the held-out repository's reports are then scored.
Hand-written parts (errors.json's patterns, evidence.RULES and HINTS) are the same in every fold: see
docs/errors.md, "How explain ranks", for which of them were written after reading which reports.

Prints, per category and overall: reports, LORO top-1 / top-3, and the in-sample figures of the shipped model
beside them; the expected calibration error (ECE) of the first answer's confidence, held out and in sample;
the share of reports with no category.   Run:  python benchmarks/explain_loro.py [--json] [--misses]
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

from explain_learn import Prediction, ece, fit, in_sample, loro


def rates(preds: Sequence[Prediction]) -> dict[str, float]:
    n = len(preds)
    top1 = sum(1 for p in preds if p.shown and p.shown[0][0] == p.doc.category)
    top3 = sum(1 for p in preds if p.doc.category in [c for c, _ in p.shown[:3]])
    return {"n": n, "top1": top1 / n, "top3": top3 / n, "none": sum(1 for p in preds if not p.shown) / n}


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
    args = parser.parse_args()
    start = time.perf_counter()
    c = corpus()
    held = loro(c, workers=os.cpu_count() or 1)
    fitted = in_sample(c, fit(c))
    seconds = time.perf_counter() - start
    doc = {
        "reports": len(c.docs),
        "repositories": len(c.repos),
        "ece_loro": ece(held),
        "ece_in_sample": ece(fitted),
        "seconds": seconds,
        "table": table(held, fitted),
    }
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['reports']} reports from {doc['repositories']} repositories, LORO in {seconds:.1f} s")
    print(f"{'':28s} {'n':>4s}  {'LORO top1':>9s} {'top3':>6s}  {'in-sample top1':>14s} {'top3':>6s}")
    for group, r in doc["table"].items():  # type: ignore[attr-defined]
        lo, ins = r["loro"], r["in_sample"]
        print(f"{group:28s} {lo['n']:4d}  {lo['top1']:9.3f} {lo['top3']:6.3f}  {ins['top1']:14.3f} {ins['top3']:6.3f}")
    print(f"no category (LORO): {doc['table']['all']['loro']['none']:.3%}")  # type: ignore[index]
    print(f"ECE of the first answer: LORO {doc['ece_loro']:.3f}, in sample {doc['ece_in_sample']:.3f}")
    if args.misses:
        for p in held:
            if not p.shown or p.shown[0][0] != p.doc.category:
                print("miss", p.doc.name, [(c, round(x, 2)) for c, x in p.shown[:3]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
