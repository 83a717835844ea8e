"""The CI formats: GitHub workflow commands, JUnit XML, a Markdown job summary (regenerate goldens with
FA_DOCTOR_REGOLD=1).

Each format is read back the way its consumer reads it: the workflow commands by a port of the runner's parser
(actions/runner `ActionCommand.TryParseV2`/`TryParse` and `ActionCommandManager`'s stop-commands), the XML by
junitparser and ElementTree against the attributes the JUnit schemas require, the Markdown by markdown-it with
GitHub's table extension.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import junitparser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from fa_doctor.commands.failed import error_result, interrupted_result
from fa_doctor.diagnose.derive.selection import PhaseChoice, Selection
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.install import Distribution
from fa_doctor.model.lines import Lines
from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts, TorchBuild
from fa_doctor.model.result import CheckPayload, PackageRow, Result
from fa_doctor.render.base import renderer_for
from fa_doctor.render.github import GithubRenderer, escape_data, escape_property, workflow_command
from fa_doctor.render.junit import JunitRenderer
from fa_doctor.render.markdown import MarkdownRenderer, fenced, inline

GOLDEN = Path(__file__).parent / "golden"
HOSTILE = "50% done: a, b :: c\r\nline 2 ::error::x ##[add-mask]y | `tick` <b>&amp; [link](http://x) *em*"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FA_DOCTOR_REGOLD"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def sample(*, strict: bool = False) -> Result:
    phase = PhaseChoice("prefill", "fa3", 3, "fa3-sgl", "override", "SGLANG_FLASHATTENTION_VERSION=3")
    payload = CheckPayload(
        target=TargetFacts(
            python="/opt/venv/bin/python",
            executable="/opt/venv/bin/python3.12",
            version=(3, 12, 3),
            implementation="cpython",
            prefix="/opt/venv",
            sys_path=("/opt/venv/lib/python3.12/site-packages",),
            machine="x86_64",
            libc="glibc 2.39",
            in_venv=True,
            no_site=False,
        ),
        gpus=GpuFacts(
            source="nvml",
            devices=(GpuDevice(0, 0, "NVIDIA H200", (9, 0), 143771, "GPU-1"),),
            driver_version="580.159.04",
            cuda_driver_version="13.0",
            visible_devices=None,
            attempts=("nvml",),
        ),
        torch=TorchBuild("2.11.0+cu130", "13.0", None, True, "/opt/venv/lib/python3.12/site-packages/torch"),
        packages=(
            PackageRow(
                Distribution(
                    "sgl-kernel",
                    "sgl-kernel",
                    "0.4.10",
                    "/opt/venv/lib/python3.12/site-packages",
                    "/opt/venv/lib/python3.12/site-packages/sgl_kernel-0.4.10.dist-info",
                ),
                "fa3-sgl",
            ),
        ),
        selection=Selection(phase, replace(phase, phase="decode"), "fa3", "Hopper: SGLang picks fa3"),
    )
    findings = (
        Finding("gpu.found", Severity.OK, "1 GPU(s) visible (via nvml)", "GPU 0: NVIDIA H200 (sm_90)"),
        Finding(
            "override.invalid",
            Severity.FAIL,
            "SGLANG_FLASHATTENTION_VERSION has an invalid value",
            "SGLANG_FLASHATTENTION_VERSION='5' is not one of the documented values 2, 3 or 4.",
            {"variable": "SGLANG_FLASHATTENTION_VERSION", "value": "'5'"},
            (Remedy("Unset it, or pick 3.", ("unset SGLANG_FLASHATTENTION_VERSION", "export X=3")),),
        ),
        Finding(
            "knob.ignored",
            Severity.WARN,
            "flash-attn[cu13] built for [sm80, sm121]",
            "Brackets must survive: [sm80, sm121]; so must 100% and a, b :: c.",
            {"api_key": "s3cret"},
            (Remedy("Reinstall.", ("/opt/venv/bin/python -m pip install 'flash-attn-4[cu13]'",)),),
        ),
        Finding(
            "smoke.skipped",
            Severity.INFO,
            "Kernel smoke test skipped: --no-smoke",
            "No FlashAttention kernel was run, so only the static checks speak for this install.",
            {"reason": "--no-smoke"},
        ),
        Finding(
            "package.broken",
            Severity.FAIL,
            "flash-attn 2.8.3 will not import | `flash_attn_2_cuda` is missing",
            Lines(
                ["The <compiled> extension ```flash_attn_2_cuda``` is missing.", "RECORD lists it; the file is gone."]
            ),
            {"files": ("a.so", "b.py")},
            (Remedy("Reinstall it:", ("pip install --force-reinstall 'flash-attn==2.8.3'  # ```fences```",)),),
        ),
    )
    return Result("check", findings, payload, {"probe.gpu": 0.012, "total": 0.0421}, strict=strict)


FIXED = datetime(2026, 12, 2, 18, 0, 0, tzinfo=timezone.utc)


def junit(result: Result) -> str:
    return JunitRenderer(timestamp=FIXED, hostname="ci-runner-1").render(result)


# ---- GitHub: the runner's own reading of each line ---------------------------------------------------------


@dataclass
class Command:
    name: str
    properties: dict[str, str]
    data: str


REGISTERED = {"error", "warning", "notice", "debug", "group", "endgroup", "add-mask", "echo", "add-matcher"}
REGISTERED |= {"remove-matcher", "save-state", "set-output", "add-path", "stop-commands"}


def _unescape(text: str, pairs: tuple[tuple[str, str], ...]) -> str:
    for token, replacement in pairs:
        text = text.replace(replacement, token)
    return text


_DATA = (("\r", "%0D"), ("\n", "%0A"), ("%", "%25"))
_PROPERTY = (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25"))
_V1 = ((";", "%3B"), ("\r", "%0D"), ("\n", "%0A"), ("]", "%5D"), ("%", "%25"))


def parse_line(line: str, registered: set[str]) -> Command | None:
    """actions/runner ActionCommand.TryParseV2, then the old `##[...]` TryParse, as the runner tries them."""
    message = line.lstrip()
    if message.startswith("::") and (end := message.find("::", 2)) >= 0:
        info = message[2:end]
        name, _, props = info.partition(" ")
        if name in registered:
            properties = {}
            for prop in (p for p in props.strip().split(",") if p):
                key, eq, value = prop.partition("=")
                if eq and key and value:
                    properties[key] = _unescape(value, _PROPERTY)
            return Command(name, properties, _unescape(message[end + 2 :], _DATA))
    if (start := line.find("##[")) >= 0 and (rb := line.find("]", start)) >= 0:
        name = line[start + 3 : rb].partition(" ")[0]
        if name in registered:
            return Command(name, {}, _unescape(line[rb + 1 :], _V1))
    return None


def run_commands(text: str) -> list[Command]:
    """What ActionCommandManager obeys: every command, except between stop-commands and its token."""
    registered, stop, obeyed = set(REGISTERED), None, []
    for line in re.split("\r\n|\r|\n", text):  # .NET's ReadLine, not str.splitlines (which splits on \x85 too)
        command = parse_line(line, registered)
        if command is None:
            continue
        if stop is not None:
            if command.name == stop:
                registered.discard(stop)
                stop = None
            continue
        if command.name == "stop-commands":
            stop = command.data
            registered.add(stop)
        obeyed.append(command)
    assert stop is None, "commands were stopped and never resumed"
    return obeyed


def test_escaping_is_the_toolkits() -> None:
    assert escape_data("100%\r\nnext :: a,b") == "100%25%0D%0Anext :: a,b"
    assert escape_property("100%\r\nnext :: a,b") == "100%25%0D%0Anext %3A%3A a%2Cb"
    # % first: an escape sequence already in the text is not read back as one.
    assert escape_data("%0A") == "%250A" and escape_property("%3A,") == "%253A%2C"
    line = workflow_command("error", HOSTILE, title=HOSTILE, file="")
    assert "\n" not in line and "\r" not in line and "file=" not in line  # empty properties are left out
    (command,) = run_commands(line)
    assert (command.name, command.properties, command.data) == ("error", {"title": HOSTILE}, HOSTILE)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_any_text_round_trips_through_the_runner(title: str, message: str) -> None:
    commands = run_commands(workflow_command("warning", message, title=title))
    assert len(commands) == 1
    # The runner trims the properties (ActionCommand.cs), so the writer does it first: what it says is what is read.
    assert commands[0].data == message and commands[0].properties == ({"title": title.strip()} if title.strip() else {})


def test_github_golden() -> None:
    text = GithubRenderer().render(sample())
    commands = run_commands(text)
    annotations = [(c.name, c.properties["title"]) for c in commands if c.name in ("error", "warning", "notice")]
    assert annotations == [
        ("error", "SGLANG_FLASHATTENTION_VERSION has an invalid value [override.invalid]"),
        ("error", "flash-attn 2.8.3 will not import | `flash_attn_2_cuda` is missing [package.broken]"),
        ("warning", "flash-attn[cu13] built for [sm80, sm121] [knob.ignored]"),
        ("notice", "Kernel smoke test skipped: --no-smoke [smoke.skipped]"),
    ]
    first = next(c for c in commands if c.name == "error")
    assert first.data.splitlines() == [
        "SGLANG_FLASHATTENTION_VERSION='5' is not one of the documented values 2, 3 or 4.",
        "Fix: Unset it, or pick 3.",
        "    unset SGLANG_FLASHATTENTION_VERSION",
        "    export X=3",
    ]
    assert text.splitlines()[-1] == "fa-doctor check: FAIL — 2 failing, 1 warning(s), 1 ok, 1 info (exit 1)"
    golden("report.github.txt", text)


def test_github_strict_makes_warnings_errors() -> None:
    kinds = {
        c.properties.get("title", "")[-14:]: c.name for c in run_commands(GithubRenderer().render(sample(strict=True)))
    }
    assert kinds["[knob.ignored]"] == "error"


def test_github_hostile_text_commands_nothing() -> None:
    """Finding text that holds workflow commands, in every place a finding's text is written, obeys none."""
    bad = "::add-mask::secret\n##[add-mask]secret\n::stop-commands::x\n::endgroup::"
    findings = tuple(Finding(f"t.{s.value}", s, bad, bad, remedies=(Remedy(bad, (bad,)),)) for s in Severity)
    text = GithubRenderer().render(Result("check", findings, sample().payload))
    names = [c.name for c in run_commands(text)]
    assert "add-mask" not in names and names.count("stop-commands") == 1 and names.count("endgroup") == 1
    assert names.count("error") == names.count("warning") == names.count("notice") == 1


def test_github_many_annotations_say_so() -> None:
    findings = tuple(Finding(f"x.f{i}", Severity.FAIL, f"failure {i}") for i in range(12))
    text = GithubRenderer().render(Result("check", findings))
    assert sum(c.name == "error" for c in run_commands(text)) == 12
    assert "GitHub shows 10 error annotations per step" in text.splitlines()[-1]


def test_github_error_result() -> None:
    text = GithubRenderer().render(error_result("check", "--python '/x': no such file"))
    (command,) = run_commands(text)
    assert command.name == "error" and command.data == "--python '/x': no such file"
    assert command.properties == {"title": "fa-doctor check could not run"}
    assert text.splitlines()[-1].endswith("(exit 2)")


# ---- JUnit ---------------------------------------------------------------------------------------------------

# What JUnit schemas require: Ant's (windyroad JUnit.xsd, inside <testsuites>) and Jenkins'/surefire junit-10.xsd.
REQUIRED = {
    "testsuite": {"name", "tests", "failures", "errors", "time", "timestamp", "hostname", "id", "package"},
    "testcase": {"name", "classname", "time"},
    "failure": {"type"},
    "error": {"type"},
    "property": {"name", "value"},
}
ALLOWED_ON_ROOT = {"name", "time", "tests", "failures", "errors"}  # junit-10.xsd: no other attribute


def check_schema_rules(text: str) -> ET.Element:
    root = ET.fromstring(text.encode("ascii"))  # ASCII only: any console or file encoding reads it
    assert root.tag == "testsuites" and set(root.attrib) <= ALLOWED_ON_ROOT
    for el in root.iter():
        missing = REQUIRED.get(el.tag, set()) - set(el.attrib)
        assert not missing, (el.tag, missing)
    for suite in root.iter("testsuite"):
        tags = [c.tag for c in suite]
        assert tags[0] == "properties" and tags[-2:] == ["system-out", "system-err"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.attrib["timestamp"])  # no zone: Ant's pattern
        assert re.fullmatch(r"\d+(\.\d{1,3})?", suite.attrib["time"])  # surefire's time pattern
        cases = suite.findall("testcase")
        assert int(suite.attrib["tests"]) == len(cases)
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(suite.attrib[attr]) == sum(len(c.findall(tag)) for c in cases), attr
        for case in cases:
            assert len([c for c in case if c.tag in ("failure", "error", "skipped")]) <= 1
    for attr in ("tests", "failures", "errors"):
        assert root.attrib[attr] == root.find("testsuite").attrib[attr]  # type: ignore[union-attr]
    return root


def test_junit_golden_and_parsed_by_junitparser(tmp_path: Path) -> None:
    text = junit(sample())
    check_schema_rules(text)
    path = tmp_path / "report.xml"
    path.write_text(text, encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert suite.name == "fa-doctor check"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (5, 2, 0, 1)
    cases = {case.name: case for case in suite}
    broken = cases["package.broken: flash-attn 2.8.3 will not import | `flash_attn_2_cuda` is missing"]
    assert broken.classname == "fa-doctor.package" and not broken.is_passed
    (failure,) = broken.result
    assert isinstance(failure, junitparser.Failure) and failure.type == "package.broken (fail)"
    assert failure.message == "flash-attn 2.8.3 will not import | `flash_attn_2_cuda` is missing"
    assert "Fix: Reinstall it:" in (failure.text or "")
    assert "pip install --force-reinstall 'flash-attn==2.8.3'" in (failure.text or "")
    assert "RECORD lists it" in (broken.system_out or "")
    assert cases["smoke.skipped: Kernel smoke test skipped: --no-smoke"].is_skipped
    assert cases["gpu.found: 1 GPU(s) visible (via nvml)"].is_passed
    warn = cases["knob.ignored: flash-attn[cu13] built for [sm80, sm121]"]
    assert warn.is_passed and (warn.system_out or "").startswith("warn: ")  # a warning does not fail the job
    props = {p.name: p.value for p in suite.properties()}
    assert props["exit_code"] == "1" and props["selection"].startswith("Selected: FA3 [fa3-sgl]")
    assert (
        "api_key: &lt;hidden&gt;" in text and "s3cret" not in text
    )  # the boundary scrubbed it before the renderer saw it
    golden("report.junit.xml", text)


def test_junit_strict_fails_warnings_and_internal_is_an_error() -> None:
    crash = Finding("internal.check_crashed", Severity.FAIL, "check_x raised KeyError", "Traceback ...")
    result = replace(sample(strict=True), findings=(*sample().findings, crash))
    root = check_schema_rules(junit(result))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == ("6", "3", "1")
    (error,) = [c for c in suite.iter("testcase") if c.find("error") is not None]
    assert error.attrib["classname"] == "fa-doctor.internal"


@pytest.mark.parametrize(
    "result", [error_result("check", "--python '/x': no such file"), interrupted_result("exec", 15)]
)
def test_junit_could_not_run_is_one_errored_case(result: Result) -> None:
    root = check_schema_rules(junit(result))
    (case,) = root.iter("testcase")
    error = case.find("error")
    assert error is not None and error.attrib["message"] == result.error
    assert root.attrib["errors"] == "1" and root.attrib["tests"] == "1"


def test_junit_survives_characters_xml_forbids() -> None:
    """The boundary makes control characters visible; the writer must hold even when one slips past it."""
    evil = "a\x00b\x01c\x1bd\x0b\ud800e\ufffe\tf\r\ng"
    result = Result("check", (Finding("x.evil", Severity.FAIL, evil, evil, {evil: evil}, (Remedy(evil, (evil,)),)),))
    root = check_schema_rules(JunitRenderer(timestamp=FIXED, hostname=evil).format(result))
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.attrib["message"].startswith("a\\x00b\\x01c\\x1bd\\x0b\\ud800e\\ufffe\t")
    assert root.find("testsuite").attrib["hostname"].startswith("a\\x00b")  # type: ignore[union-attr]


def test_junit_defaults_to_now_and_this_host() -> None:
    suite = ET.fromstring(JunitRenderer().render(sample())).find("testsuite")
    assert suite is not None and suite.attrib["hostname"]
    stamp = datetime.fromisoformat(suite.attrib["timestamp"]).replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - stamp).total_seconds()) < 60


# ---- Markdown ------------------------------------------------------------------------------------------------

GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def test_markdown_golden() -> None:
    text = MarkdownRenderer().render(sample())
    assert text.startswith("## ❌ fa-doctor check: FAIL\n\n**2 failing, 1 warning(s), 1 ok, 1 info** · exit code 1")
    tokens = GFM.parse(text)
    assert [t.tag for t in tokens if t.type == "table_open"] == ["table", "table"]
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == (3 + 1) + (2 + 1)  # failing and warning rows, then the details table, each with a header
    # The hostile title is one cell, whole: the `|` and backticks inside did not split it or open a code span.
    html = GFM.render(text)
    assert "<td>flash-attn 2.8.3 will not import | `flash_attn_2_cuda` is missing</td>" in html
    assert "<td>The &lt;compiled&gt; extension ```flash_attn_2_cuda``` is missing.<br>RECORD lists it" in html
    fences = [t for t in tokens if t.type == "fence"]
    assert [f.content for f in fences][1] == "pip install --force-reinstall 'flash-attn==2.8.3'  # ```fences```\n"
    assert "<details><summary>2 passing or informational findings</summary>" in text
    golden("report.md", text)


def rendered_text(markdown: str) -> str:
    """The visible text of one paragraph's inline content, as GitHub shows it."""
    html = GFM.renderInline(markdown)
    html = html.replace("<br>", "\n")
    assert "<" not in html.replace("&lt;", ""), html  # no HTML element survived: neither a link nor a tag
    return html.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs", "Cc"))))
def test_markdown_inline_shows_text_as_is(text: str) -> None:
    assert rendered_text(inline(text)) == text.replace("\r\n", "\n").replace("\r", "\n")


def test_markdown_hostile_cells() -> None:
    assert rendered_text(inline(HOSTILE)) == HOSTILE.replace("\r\n", "\n")
    for block in ("# heading", "- item", "1. item", "===", "+ x", "> quote", "    code"):
        tokens = GFM.parse("para\n" + inline(block))
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], block


@pytest.mark.parametrize("content", ["plain", "a ``` b", "````", "x `` y ````` z"])
def test_markdown_fence_is_longer_than_any_backtick_run(content: str) -> None:
    (token,) = GFM.parse(fenced([content, "second"]))
    assert token.type == "fence" and token.content == f"{content}\nsecond\n"


def test_markdown_appended_text_stays_out_of_the_table() -> None:
    only_failing = replace(sample(), findings=sample().findings[1:2])
    tokens = GFM.parse(MarkdownRenderer().render(only_failing) + "appended by a later command\n")
    assert sum(t.type == "tr_open" for t in tokens) == 2  # the header and the one finding
    assert tokens[-2].content == "appended by a later command"


def test_markdown_error_result() -> None:
    text = MarkdownRenderer().render(error_result("check", "--python '<x>': no such file"))
    assert text.startswith("## ❌ fa-doctor check: could not run") and "&lt;x&gt;" in text


def test_formats_are_chosen_by_name() -> None:
    for name, cls in (("github", GithubRenderer), ("junit", JunitRenderer), ("markdown", MarkdownRenderer)):
        assert type(renderer_for(name)) is cls and cls.name == name
