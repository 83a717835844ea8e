"""The versioned JSON envelope: one document on stdout, always."""

from __future__ import annotations

import json

from fa_doctor.report import Report
from fa_doctor.scrub import scrub_tree


def render_json(report: Report) -> str:
    # ensure_ascii: odd bytes in paths or variables (lone surrogates) must not break the one document on stdout.
    return json.dumps(scrub_tree(report.to_dict()), indent=2, sort_keys=False, ensure_ascii=True, default=str)
