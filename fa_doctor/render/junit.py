"""JUnit XML for CI test reporters (GitLab, Jenkins, GitHub test-report actions), written with ElementTree.

One testsuite `fa-doctor <command>`; one testcase per finding, its classname `fa-doctor.<check>` (the id's
prefix) so reporters group a check's findings. A failing finding (or a warning under --strict) is a
`<failure>`, an `internal.*` finding or a run fa-doctor could not finish an `<error>`, a skipped smoke test
`<skipped>`. Every attribute that Ant's JUnit.xsd (windyroad) or Jenkins' junit-10.xsd (surefire, the one
pytest checks against) requires is written: testsuite name, tests, failures, errors, time, timestamp, hostname,
id, package; testcase name, classname, time; failure and error type. The one liberty, taken by pytest too and
read by every reporter: a testcase carries its own `<system-out>`, which only Jenkins' schema allows.
The document is ASCII (everything else as character references), so no console encoding can break it.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from fa_doctor import __version__
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.github import finding_body
from fa_doctor.render.human import gpu_line, scalar, selection_line

# Characters XML 1.0 forbids even as references: C0 controls but tab/newline/CR, surrogates, U+FFFE/U+FFFF.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _legal(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_text(text: str) -> str:
    """Text any XML 1.0 parser accepts: forbidden characters become visible escapes."""
    return _ILLEGAL.sub(_legal, text)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items()})
    if text:
        el.text = xml_text(text)
    return el


def _outcome(f: Finding, strict: bool) -> str:
    if f.id.startswith("internal."):
        return "error"
    if f.severity is Severity.FAIL or (strict and f.severity is Severity.WARN):
        return "failure"
    if f.id == "smoke.skipped":
        return "skipped"
    return "passed"


def _output(f: Finding) -> str:
    """What the testcase printed: severity, detail, fixes and evidence, one fact a line."""
    lines = [f"{f.severity.value}: {f.title} [{f.id}]", finding_body(f)]
    lines += [f"{key}: {scalar(value)}" for key, value in f.evidence.items()]
    return "\n".join(line for line in lines if line) + "\n"


class JunitRenderer(Renderer):
    name = "junit"

    def __init__(
        self,
        *,
        verbose: bool = False,
        color: bool = False,
        width: int = 120,
        timestamp: datetime | None = None,
        hostname: str | None = None,
    ) -> None:
        super().__init__(verbose=verbose, color=color, width=width)
        self.timestamp, self.hostname = timestamp, hostname  # fixed in tests; now and this host otherwise

    def format(self, result: Result) -> str:
        root = ET.Element("testsuites", name="fa-doctor")
        suite = _sub(root, "testsuite", name=f"fa-doctor {result.command}")
        props = _sub(suite, "properties")
        facts = {"fa-doctor.version": __version__, "command": result.command, "strict": scalar(result.strict)}
        facts |= {"status": result.status, "exit_code": str(result.exit_code)}
        payload = result.check
        if payload.target is not None:
            facts |= {"python": payload.target.executable, "selection": selection_line(payload)}
            facts |= {"gpus": gpu_line(payload)}
        for key, value in facts.items():
            _sub(props, "property", name=key, value=value)

        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if result.error:
            case = _sub(suite, "testcase", classname="fa-doctor", name=f"fa-doctor {result.command}", time="0.000")
            _sub(case, "error", result.error, message=result.error, type="fa-doctor.error")
            counts["tests"], counts["errors"] = 1, 1
        for f in result.findings:
            prefix = f.id.split(".", 1)[0]
            case = _sub(suite, "testcase", classname=f"fa-doctor.{prefix}", name=f"{f.id}: {f.title}", time="0.000")
            outcome = _outcome(f, result.strict)
            counts["tests"] += 1
            if outcome == "failure":
                counts["failures"] += 1
                _sub(case, "failure", finding_body(f), message=f.title, type=f"{f.id} ({f.severity.value})")
            elif outcome == "error":
                counts["errors"] += 1
                _sub(case, "error", finding_body(f), message=f.title, type=f.id)
            elif outcome == "skipped":
                counts["skipped"] += 1
                _sub(case, "skipped", message=f.title)
            _sub(case, "system-out", _output(f))

        total = result.timings.get("total", 0.0)
        seconds = f"{total:.3f}" if total == total and total >= 0 else "0.000"  # NaN or negative: none
        stamp = (self.timestamp or datetime.now(timezone.utc)).replace(microsecond=0, tzinfo=None)
        host = self.hostname if self.hostname is not None else socket.gethostname()
        attrs = {key: str(n) for key, n in counts.items()} | {"time": seconds}
        suite.attrib.update(attrs | {"timestamp": stamp.isoformat(), "hostname": xml_text(host) or "localhost"})
        suite.attrib.update(id="0", package="fa-doctor")  # Ant's schema wants both inside <testsuites>
        root.attrib.update({k: v for k, v in attrs.items() if k != "skipped"})  # Jenkins' schema has no skipped here
        # Ant's junit.xsd wants the suite's own output elements, even empty.
        ET.SubElement(suite, "system-out")
        ET.SubElement(suite, "system-err")
        ET.indent(root)
        body: bytes = ET.tostring(root, encoding="us-ascii", xml_declaration=False)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body.decode("ascii") + "\n"
