"""Refit explain's evidence model (fa_doctor/knowledge/model.json) from the labelled corpus.

The corpus is every report in tests/explain_cases/, explain_reports/, explain_dev/ and explain_heldout/: a file is
named `<category>__<slug>.txt`, its first line `source: <thread URL>` (the repository is owner/name of that URL),
then optional `label:` / `relabel:` lines, then the paste. tests/test_explain_loro.py checks that the stored file
equals what this script writes.   Run:  python benchmarks/explain_fit.py [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from explain_learn import Corpus, Doc, fit, to_json  # noqa: E402

from fa_doctor.knowledge import CATEGORIES  # noqa: E402

FOLDERS = tuple(ROOT / "tests" / f for f in ("explain_cases", "explain_reports", "explain_dev", "explain_heldout"))
MODEL = ROOT / "fa_doctor" / "knowledge" / "model.json"
_HEADER = re.compile(r"^(?:label|relabel):")


def paste(path: Path) -> str:
    """The report's paste: the file without its source line and its label lines."""
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 1
    while i < len(lines) and _HEADER.match(lines[i]):
        i += 1
    return "\n".join(lines[i:])


def read(path: Path) -> Doc:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return Doc.of(f"{path.parent.name}/{path.name}", first, path.stem.split("__", 1)[0], paste(path))


def corpus() -> Corpus:
    return Corpus([read(p) for folder in FOLDERS for p in sorted(folder.glob("*.txt"))], CATEGORIES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether model.json is up to date")
    args = parser.parse_args()
    text = to_json(fit(corpus()))
    if args.check:
        same = MODEL.read_text(encoding="utf-8") == text
        print("model.json is up to date" if same else "model.json differs from a refit")
        return 0 if same else 1
    MODEL.write_text(text, encoding="utf-8")
    print(f"wrote {MODEL.relative_to(ROOT)} ({len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
