"""The fleet report in every format: golden files (FA_DOCTOR_REGOLD=1 rewrites them), real parsers for JUnit and
Markdown, and a hostile node (terminal escapes, Markdown, XML, workflow commands in its name and finding) that
reaches every format escaped."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import junitparser
import pytest
from fleet_samples import KNOB_WARN, REQUIREMENT, SMOKE_FAILED, report
from markdown_it import MarkdownIt

from fa_doctor.cli.deliver import render
from fa_doctor.fleet.merge import Merger
from fa_doctor.fleet.model import Refused, Unreachable
from fa_doctor.fleet.read import Document
from fa_doctor.fleet.verdict import fleet_result
from fa_doctor.model.result import Result
from fa_doctor.render.base import FORMATS
from fa_doctor.render.boundary import prepare
from fa_doctor.render.junit import JunitRenderer

GOLDEN = Path(__file__).parent / "golden"
EVIL = "gpu-\x1b[2K\x1b]0;pwned\x07<b>|`x`</b>\n::error::owned & \u202e"


def fleet(hostile: bool = False) -> Result:
    merger = Merger()
    docs = [report(f"gpu-{i:02d}") for i in range(4)]
    docs[2] = report("gpu-02", findings=(SMOKE_FAILED,), gpus=7)
    docs += [report(f"new-{i}", fa="4.0.0b40", findings=(REQUIREMENT, KNOB_WARN)) for i in range(2)]
    if hostile:
        evil = {**SMOKE_FAILED, "title": EVIL, "remedies": [{"text": EVIL, "commands": [EVIL]}]}
        docs.append(report(EVIL, findings=(evil,)))
    for number, doc in enumerate(docs):
        merger.add(Document(f"reports/{number}.json", doc, when=100.0))
    merger.add(Refused("reports/9.json", "not valid JSON (Expecting ',' delimiter at line 40 column 5; truncated?)"))
    # gpu-01 checked before too: the older report is not merged, and the fleet report says so
    merger.add(Document("reports/old/gpu-01.json", report("gpu-01", findings=(KNOB_WARN,)), when=50.0))
    payload = merger.payload(unreachable=[Unreachable("gpu-dead (ray:0f0f0f0f0f0f)", "no report within 600 s")])
    return fleet_result("merge", payload, {"total": 0.0421})


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FA_DOCTOR_REGOLD"):
        path.write_text(text)
    assert text == path.read_text()


def test_json_golden() -> None:
    text = render(fleet(), "json")
    doc = json.loads(text)
    assert doc["nodes"] == 6 and doc["exit_code"] == 1 and len(doc["groups"]) == 2
    assert doc["duplicates"] == [
        {"node": "gpu-01", "kept": "reports/1.json", "dropped": ["reports/old/gpu-01.json"], "reports": 2}
    ]
    assert doc["summary"]["duplicates"] == 1 and "fleet.duplicate" in [v["id"] for v in doc["verdict"]]
    assert "knob.ignored" not in next(n for n in doc["node_results"] if n["node"] == "gpu-01")["findings"]
    assert text == json.dumps(doc, indent=2, ensure_ascii=True) + "\n"  # the fast writer writes what json would
    assert doc["unreachable"][0]["node"].startswith("gpu-dead") and len(doc["refused"]) == 1
    golden("fleet.json", text)


def test_human_golden() -> None:
    text = render(fleet(), "human", width=160)
    assert "Groups (nodes with the same install fingerprint):" in text and "gpu-02 (group " in text
    golden("fleet.txt", text)
    verbose = render(fleet(), "human", verbose=True, width=160)
    assert "Nodes:" in verbose and "reports/5.json" in verbose


def test_markdown_golden_parses() -> None:
    text = render(fleet(), "markdown")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert sum(t.type == "table_open" for t in tokens) == 6  # groups, findings, outliers, refused, unreachable, twice
    golden("fleet.md", text)


def test_github_golden() -> None:
    text = render(fleet(), "github")
    assert text.count("::error ") == 3 and text.splitlines()[-1].startswith("fa-doctor merge: FAIL")
    golden("fleet.github.txt", text)


def test_junit_one_case_per_node(tmp_path: Path) -> None:
    stamp = datetime(2026, 12, 3, 12, 0, 0)
    text = JunitRenderer(timestamp=stamp).render(fleet())
    golden("fleet.junit.xml", text)
    path = tmp_path / "fleet.xml"
    path.write_text(text)
    (suite,) = list(junitparser.JUnitXml.fromfile(str(path)))
    cases = {case.name: case for case in suite}
    assert len(cases) == 6 + 1 + 1  # nodes, the unreachable node, the refused report
    assert suite.tests == 8 and suite.failures == 3 and suite.errors == 2
    assert cases["gpu-00"].is_passed and not cases["gpu-02"].is_passed
    assert "smoke.failed" in cases["gpu-02"].result[0].message


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_node_text_is_escaped(fmt: str, tmp_path: Path) -> None:
    text = render(fleet(hostile=True), fmt)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    if fmt == "json":
        doc = json.loads(text)
        assert any(n["node"].startswith("gpu-\\x1b[2K") for n in doc["node_results"])
    if fmt == "github":
        assert not any(line.lstrip().startswith("::error::owned") for line in text.splitlines())
    if fmt == "markdown":
        html = MarkdownIt("commonmark").enable("table").render(text)
        assert "<b>" not in html and "&lt;b&gt;" in html  # shown, never a tag (in cells and in fences)
    if fmt == "junit":
        path = tmp_path / "x.xml"
        path.write_text(text)
        assert len(list(next(iter(junitparser.JUnitXml.fromfile(str(path)))))) == 9


def test_the_boundary_sees_the_payload() -> None:
    clean = prepare(fleet(hostile=True))
    assert not any("\x1b" in n.name for n in clean.payload.nodes)
