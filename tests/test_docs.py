"""docs/findings.md lists exactly the finding ids the code can produce."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ID = re.compile(
    r'"((?:gpu|torch|package|override|knob|selection|smoke|import|internal|binary|explain|fix|exec|fleet|target)\.[a-z_]+)"'
)


def test_every_finding_id_is_documented() -> None:
    in_code = {m for p in (ROOT / "fa_doctor").rglob("*.py") for m in ID.findall(p.read_text())}
    documented = set(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", (ROOT / "docs" / "findings.md").read_text(), re.M))
    assert in_code == documented


def test_readme_names_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python -m pytest" in readme and "fa-doctor check" in readme
