"""No override value, however odd, produces a traceback or a wrong exit code."""

from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import gpu_env
from fakeenv import H200, make_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fa_doctor.commands.check import run_checks
from fa_doctor.diagnose.derive import derive
from fa_doctor.model.facts import Facts
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import Result as Report
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.probes.gather import gather


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    root = tmp_path_factory.mktemp("fuzz")
    env = make_env(root)
    env.torch()
    env.sgl_kernel(torch_pin="2.11.0")
    env.sglang()
    env.fa4()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in gpu_env(root, H200).items():
            mp.setenv(k, v)
        return gather(CheckOptions(python=env.python), {})


def report_for(facts: Facts, value: str) -> Report:
    f = dataclasses.replace(facts, env={**facts.env, OVERRIDE: value})
    findings = run_checks(f, derive(f), CheckOptions())
    return Report("check", tuple(findings))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=64))
def test_any_value_is_classified(facts: Facts, value: str) -> None:
    report = report_for(facts, value)
    ids = {f.id for f in report.findings}
    assert not any(i.startswith("internal.") for i in ids)
    if re.fullmatch(r"[234]", value):
        assert "override.invalid" not in ids
        assert report.exit_code in (0, 1)
        assert ("override.active" in ids) != ("override.unavailable" in ids)
    else:
        assert "override.invalid" in ids
        assert report.exit_code == 1


@pytest.mark.parametrize("value", ["2", "3", "4"])
def test_documented_values(facts: Facts, value: str) -> None:
    ids = {f.id for f in report_for(facts, value).findings}
    expected = "override.unavailable" if value == "2" else "override.active"  # SGLang has no FA2 backend
    assert expected in ids


def test_huge_value_is_bounded(facts: Facts) -> None:
    report = report_for(facts, "4" * 1_000_000)
    finding = next(f for f in report.findings if f.id == "override.invalid")
    assert len(finding.detail) < 1000
