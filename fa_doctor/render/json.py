"""The versioned JSON envelope: one document on stdout, always."""

from __future__ import annotations

import json

from fa_doctor.report import Report
from fa_doctor.scrub import scrub_tree


def render_json(report: Report) -> str:
    return json.dumps(scrub_tree(report.to_dict()), indent=2, sort_keys=False, ensure_ascii=False, default=str)
