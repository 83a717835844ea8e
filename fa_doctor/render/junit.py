"""JUnit XML for CI test reporters, written with ElementTree: one testsuite, a testcase per finding (per node for a
fleet), every attribute the JUnit schemas require, ASCII only (docs/render.md: "JUnit XML")."""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from fa_doctor import __version__
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.escape import _visible
from fa_doctor.render.github import finding_body
from fa_doctor.render.human import gpu_line, scalar, selection_line

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload

# Characters XML 1.0 forbids even as references: C0 controls but tab/newline/CR, surrogates, U+FFFE/U+FFFF.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_COUNTED = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def xml_text(text: str) -> str:
    """Text any XML 1.0 parser accepts: forbidden characters become visible escapes (as `render.escape` writes them)."""
    return _ILLEGAL.sub(_visible, text)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items()})
    if text:
        el.text = xml_text(text)
    return el


def _outcome(f: Finding, strict: bool) -> str | None:
    if f.id.startswith("internal."):
        return "error"
    if f.severity is Severity.FAIL or (strict and f.severity is Severity.WARN):
        return "failure"
    return "skipped" if f.id == "smoke.skipped" else None


class _Suite:
    def __init__(self, name: str, facts: dict[str, str]) -> None:
        self.root = ET.Element("testsuites", name="fa-doctor")
        self.suite = _sub(self.root, "testsuite", name=name)
        props = _sub(self.suite, "properties")
        for key, value in facts.items():
            _sub(props, "property", name=key, value=value)
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(self, classname: str, name: str, outcome: str | None = None, text: str = "", **attrs: str) -> ET.Element:
        """A testcase; with `outcome` (failure, error, skipped), its element holding `text` and `attrs`."""
        case = _sub(self.suite, "testcase", classname=classname, name=name, time="0.000")
        self.counts["tests"] += 1
        if outcome:
            self.counts[_COUNTED[outcome]] += 1
            _sub(case, outcome, text, **attrs)
        return case

    def error(self, classname: str, name: str, why: str, kind: str) -> None:
        self.case(classname, name, "error", why, message=why, type=kind)

    def xml(self, result: Result, stamp: datetime | None, host: str) -> str:
        total = result.timings.get("total", 0.0)
        seconds = f"{total:.3f}" if total == total and total >= 0 else "0.000"  # NaN or negative: none
        stamp = (stamp or datetime.now(timezone.utc)).replace(microsecond=0, tzinfo=None)
        attrs = {key: str(n) for key, n in self.counts.items()} | {"time": seconds}
        self.suite.attrib.update(attrs | {"timestamp": stamp.isoformat(), "hostname": host})
        self.suite.attrib.update(id="0", package="fa-doctor")  # Ant's schema wants both inside <testsuites>
        self.root.attrib.update({k: v for k, v in attrs.items() if k != "skipped"})  # Jenkins' schema has none
        # Ant's junit.xsd wants the suite's own output elements, even empty.
        ET.SubElement(self.suite, "system-out")
        ET.SubElement(self.suite, "system-err")
        ET.indent(self.root)
        body: bytes = ET.tostring(self.root, encoding="us-ascii", xml_declaration=False)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body.decode("ascii") + "\n"


@dataclass(kw_only=True, eq=False)
class JunitRenderer(Renderer):
    name = "junit"
    timestamp: datetime | None = None  # fixed in tests; now otherwise
    hostname: str | None = None  # fixed in tests; this host otherwise

    def format(self, result: Result) -> str:
        facts = {"fa-doctor.version": __version__, "command": result.command, "strict": scalar(result.strict)}
        facts |= {"status": result.status, "exit_code": str(result.exit_code)}
        if (payload := result.check).target is not None:
            facts |= {"python": payload.target.executable, "selection": selection_line(payload)}
            facts["gpus"] = gpu_line(payload)
        suite = _Suite(f"fa-doctor {result.command}", facts)
        if result.error:
            suite.error("fa-doctor", f"fa-doctor {result.command}", result.error, "fa-doctor.error")
        for f in result.findings:
            outcome = _outcome(f, result.strict)
            attrs = {"message": f.title}
            if outcome != "skipped":
                attrs["type"] = f.id if outcome == "error" else f"{f.id} ({f.severity.value})"
            classname, name = f"fa-doctor.{f.id.split('.', 1)[0]}", f"{f.id}: {f.title}"
            case = suite.case(classname, name, outcome, "" if outcome == "skipped" else finding_body(f), **attrs)
            # What the testcase printed: severity, detail, fixes and evidence, one fact a line.
            lines = [f"{f.severity.value}: {f.title} [{f.id}]", finding_body(f)]
            lines += [f"{key}: {scalar(value)}" for key, value in f.evidence.items()]
            _sub(case, "system-out", "\n".join(line for line in lines if line) + "\n")
        host = self.hostname if self.hostname is not None else socket.gethostname()
        return suite.xml(result, self.timestamp, xml_text(host) or "localhost")

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        facts = {"fa-doctor.version": __version__, "command": result.command, "status": result.status}
        facts |= {"exit_code": str(result.exit_code), "summary": payload.summary()}
        facts |= {f"group.{g.fingerprint}": g.install.line() for g in payload.groups}
        suite = _Suite(payload.head(result.command), facts)
        for n in payload.nodes:
            listed = "\n".join(f"{sev.value}: {fid}" for fid, sev in n.findings)
            body = "\n".join(p for p in (n.error and f"error: {n.error}", listed, f"source: {n.source}") if p)
            status = n.status.value
            failed = status == "fail" or (result.strict and status == "warn")
            ids = ", ".join(fid for fid, _ in n.findings) or "its report failed"
            attrs = {"message": f"{status}: {ids}", "type": f"fleet.node.{status}"} if failed else {}
            classname = f"fa-doctor.fleet.{payload.groups[n.group].fingerprint}"
            case = suite.case(classname, n.name, "failure" if failed else None, body, **attrs)
            _sub(case, "system-out", body + "\n")
        lists = payload.others()
        (unreachable, _), (refused, more) = lists["unreachable"], lists["refused"]
        rows = [(w, y, "fleet.unreachable") for w, y in unreachable] + [(w, y, "fleet.refused") for w, y in refused]
        rows += [(f"{more} more reports", "not merged; counted, not listed", "fleet.refused")] if more else []
        for where, why, kind in rows:
            suite.error(f"fa-doctor.{kind}", where, why, kind)
        if result.error and not suite.counts["tests"]:
            suite.error("fa-doctor", payload.head(result.command), result.error, "fa-doctor.error")
        return suite.xml(result, self.timestamp, "fleet")
