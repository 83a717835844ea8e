"""Provenance of tests/explain_heldout/: the rules frozen before it was collected, and each report as labelled.

  python benchmarks/explain_manifest.py freeze   # record the rules' sha256, before a report is collected
  python benchmarks/explain_manifest.py label    # record every report's sha256, after labelling, before any run
  python benchmarks/explain_manifest.py check    # are the rules still the frozen ones? is every report unchanged?

The rules are everything that decides an answer and is written by hand: fa_doctor/knowledge/*.py, errors.json
and scripts/explain_learn.py (model.json is not: it is data refitted from the corpus by the frozen code).
`label` refuses to run when the rules differ from the frozen ones, so the measure on the held-out reports is a
measure of the rules as they were before anyone read those reports. tests/test_explain_heldout.py checks that
every report still has the hash it had when it was labelled.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tests" / "explain_heldout"
MANIFEST = HELDOUT / "MANIFEST.json"


def rule_files() -> list[Path]:
    knowledge = ROOT / "fa_doctor" / "knowledge"
    return [*sorted(knowledge.glob("*.py")), knowledge / "errors.json", ROOT / "scripts" / "explain_learn.py"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): sha256(p) for p in rule_files()}


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ""
    return done.stdout.strip()


def _write(doc: dict[str, Any]) -> None:
    MANIFEST.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def freeze() -> int:
    today = datetime.date.today().isoformat()
    changed = _git("status", "--porcelain", "--", *rules())
    doc: dict[str, Any] = {
        "frozen": {
            "at": today,
            "head": _git("rev-parse", "HEAD"),
            "uncommitted": bool(changed),  # the rules are these hashes; HEAD is where the tree stood
            "rules": rules(),
        },
        "reports": {},
    }
    _write(doc)
    print(f"froze {len(doc['frozen']['rules'])} rule files at {doc['frozen']['head'][:12]}")
    return 0


def label() -> int:
    doc = json.loads(MANIFEST.read_text(encoding="utf-8"))
    if doc["frozen"]["rules"] != rules():
        print("the rules differ from the frozen ones: label the held-out reports before changing them")
        return 1
    reports = doc["reports"]
    today = datetime.date.today().isoformat()
    for path in sorted(HELDOUT.glob("*.txt")):
        source = path.read_text(encoding="utf-8").split("\n", 1)[0].removeprefix("source: ").strip()
        entry = reports.get(path.name)
        if entry and entry["sha256"] != sha256(path):
            print(f"{path.name} changed after it was labelled")
            return 1
        reports.setdefault(path.name, {"sha256": sha256(path), "source": source, "labelled": today})
    _write(doc)
    print(f"{len(reports)} reports recorded")
    return 0


def check() -> int:
    doc = json.loads(MANIFEST.read_text(encoding="utf-8"))
    frozen = doc["frozen"]["rules"] == rules()
    changed = [n for n, e in doc["reports"].items() if sha256(HELDOUT / n) != e["sha256"]]
    print(f"rules {'as frozen' if frozen else 'changed since the freeze'}; {len(changed)} reports changed")
    return 0 if frozen and not changed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("freeze", "label", "check"))
    step = parser.parse_args().step
    return {"freeze": freeze, "label": label, "check": check}[step]()


if __name__ == "__main__":
    sys.exit(main())
