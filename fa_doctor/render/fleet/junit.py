"""The fleet report as JUnit XML: one test case per node (failing node: `<failure>` listing its findings), one
per node that gave no report and per report that could not be merged (`<error>`), so a CI test view shows the
fleet node by node. Same schema rules and escaping as the node report's JUnit (`render/junit.py`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from fa_doctor import __version__
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.fleet.common import head, install_line, payload_of, summary_text, unlisted
from fa_doctor.render.junit import xml_text


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items()})
    if text:
        el.text = xml_text(text)
    return el


class FleetJunitRenderer(Renderer):
    name = "junit"

    def __init__(
        self, *, verbose: bool = False, color: bool = False, width: int = 120, timestamp: datetime | None = None
    ) -> None:
        super().__init__(verbose=verbose, color=color, width=width)
        self.timestamp = timestamp  # fixed in tests; now otherwise

    def format(self, result: Result) -> str:
        payload = payload_of(result)
        root = ET.Element("testsuites", name="fa-doctor")
        suite = _sub(root, "testsuite", name=head(result))
        props = _sub(suite, "properties")
        facts = {"fa-doctor.version": __version__, "command": result.command, "status": result.status}
        facts |= {"exit_code": str(result.exit_code), "summary": summary_text(payload)}
        facts |= {f"group.{g.fingerprint}": install_line(g.install) for g in payload.groups}
        for key, value in facts.items():
            _sub(props, "property", name=key, value=value)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        strict = result.strict
        for n in payload.nodes:
            group = payload.groups[n.group].fingerprint
            case = _sub(suite, "testcase", classname=f"fa-doctor.fleet.{group}", name=n.name, time="0.000")
            counts["tests"] += 1
            listed = "\n".join(f"{sev.value}: {fid}" for fid, sev in n.findings)
            body = "\n".join(p for p in (n.error and f"error: {n.error}", listed, f"source: {n.source}") if p)
            status = n.status.value
            if status == "fail" or (strict and status == "warn"):
                counts["failures"] += 1
                ids = ", ".join(fid for fid, _ in n.findings) or "its report failed"
                _sub(case, "failure", body, message=f"{status}: {ids}", type=f"fleet.node.{status}")
            _sub(case, "system-out", body + "\n")
        refused_more = unlisted(payload)[0]
        more = [(f"{refused_more} more reports", "not merged; counted, not listed", "fleet.refused")]
        for where, why, kind in [
            *((u.node, u.why, "fleet.unreachable") for u in payload.unreachable),
            *((r.source, r.why, "fleet.refused") for r in payload.refused),
            *(more if refused_more else []),
        ]:
            case = _sub(suite, "testcase", classname=f"fa-doctor.{kind}", name=where, time="0.000")
            counts["tests"] += 1
            counts["errors"] += 1
            _sub(case, "error", why, message=why, type=kind)
        if result.error and not counts["tests"]:
            case = _sub(suite, "testcase", classname="fa-doctor", name=head(result), time="0.000")
            _sub(case, "error", result.error, message=result.error, type="fa-doctor.error")
            counts["tests"], counts["errors"] = 1, 1
        total = result.timings.get("total", 0.0)
        seconds = f"{total:.3f}" if total == total and total >= 0 else "0.000"
        stamp = (self.timestamp or datetime.now(timezone.utc)).replace(microsecond=0, tzinfo=None)
        attrs = {key: str(n) for key, n in counts.items()} | {"time": seconds}
        suite.attrib.update(attrs | {"timestamp": stamp.isoformat(), "hostname": "fleet", "id": "0"})
        suite.attrib["package"] = "fa-doctor"
        root.attrib.update({k: v for k, v in attrs.items() if k != "skipped"})
        ET.SubElement(suite, "system-out")
        ET.SubElement(suite, "system-err")
        ET.indent(root)
        body_bytes: bytes = ET.tostring(root, encoding="us-ascii", xml_declaration=False)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body_bytes.decode("ascii") + "\n"
