"""A reader that leaves mid-report: the report was cut, so the exit code is 2, with or without
PYTHONUNBUFFERED=1 (common in container images). Unbuffered, the raw pipe write takes part of the report and
TextIOWrapper never retries the rest: before the fix that run ended with the report's own exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_samples import jsonl, report


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_cut_report_is_exit_2(tmp_path: Path, unbuffered: str) -> None:
    reports = tmp_path / "fleet.jsonl"
    reports.write_text(jsonl([report(f"node-{i:05d}") for i in range(3000)]))  # -v lists every node: > 64 KiB
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    child = subprocess.Popen(
        [sys.executable, "-m", "fa_doctor", "merge", "-v", str(reports)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.read(100)  # the report has begun
    child.stdout.close()  # and its reader leaves
    try:
        code = child.wait(timeout=120)
    finally:
        child.kill()
    assert code == 2, child.stderr.read()[-2000:]
    assert b"Traceback" not in child.stderr.read()
