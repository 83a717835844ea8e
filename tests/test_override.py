"""checks/override.py on gathered facts: the finding a user reads for each kind of SGLANG_FLASHATTENTION_VERSION,
word for word where the words carry the decision, and every remedy in order."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import commands_of, gather_facts, pip_installs, vary
from fakeenv import make_env

from fa_doctor.diagnose.checks.override import best_valid, check_override, shown
from fa_doctor.diagnose.derive import derive, parse_override
from fa_doctor.diagnose.derive.inventory import assess_all
from fa_doctor.diagnose.plan.planner import plan
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Severity
from fa_doctor.probes.environment import OVERRIDE

HOPPER, BLACKWELL = (9, 0), (10, 0)
UNSET = f"unset {OVERRIDE}"
AUTO = [UNSET, "fa-doctor check"]
NOT_READ = (
    f"The installed SGLang 0.5.23 does not read {OVERRIDE} itself: it takes effect only where your launcher turns it "
    "into that flag."
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    env = make_env(tmp_path_factory.mktemp("server"))
    env.torch("2.11.0+cu130")
    env.sgl_kernel(torch_pin="2.11.0")
    env.sglang()
    env.fa4()
    return vary(gather_facts(env), caps=(HOPPER,))


@pytest.fixture(scope="module")
def fa2_only(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    env = make_env(tmp_path_factory.mktemp("fa2"))
    env.torch()
    env.fa2(with_cute=False)
    return vary(gather_facts(env), caps=(HOPPER,))


@pytest.fixture(scope="module")
def broken_fa4(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    """FA4 installed without nvidia-cutlass-dsl-libs-core: installed, will not import."""
    env = make_env(tmp_path_factory.mktemp("fa4"))
    env.torch()
    env.fa4(core=False)
    return vary(gather_facts(env), caps=(HOPPER,))


@pytest.fixture(scope="module")
def sglang_broken(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    """SGLang without sglang-kernel and FA4 without libs-core: two reasons FA4 cannot work."""
    env = make_env(tmp_path_factory.mktemp("sglang-broken"))
    env.torch()
    env.sglang()
    env.fa4(core=False)
    return vary(gather_facts(env), caps=(HOPPER,))


def run(facts: Facts, value: str | None, **changes: object) -> tuple:
    env = dict(facts.env)
    env.pop(OVERRIDE, None)
    if value is not None:
        env[OVERRIDE] = value
    f = dataclasses.replace(facts, env=env, **changes)  # type: ignore[arg-type]
    findings = check_override(f, assess_all(f))
    assert len(findings) == 1
    (planned,) = plan(findings, f)  # the planner writes the installs the check asked for
    return planned, derive(f).pinned


def test_shown_escapes_and_bounds() -> None:
    assert shown("3") == "'3'"
    assert shown("\x1b[31m3") == "'\\x1b[31m3'"
    assert shown("\uff13") == "'\\uff13'"
    assert shown("4" * 40) == "'" + "4" * 40 + "'"
    assert shown("4" * 41) == "'" + "4" * 40 + "' ... (41 characters)"
    assert shown("abcdef", limit=3) == "'abc' ... (6 characters)"


@pytest.mark.parametrize(("raw", "pinned"), [(None, None), ("2", 2), ("3", 3), ("4", 4)])
def test_parse_override(raw: str | None, pinned: int | None) -> None:
    assert parse_override(raw) == pinned


@pytest.mark.parametrize("raw", ["", "5", "1", "03", "3 ", "\uff13", "34", "fa3"])
def test_parse_override_rejects(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_override(raw)


def test_invalid_value_is_shown_and_fixed(server: Facts) -> None:
    finding, pinned = run(server, "5")
    assert pinned is None
    assert (finding.id, finding.severity, finding.title) == (
        "override.invalid",
        Severity.FAIL,
        f"{OVERRIDE} has an invalid value",
    )
    assert finding.detail == (
        f"{OVERRIDE}='5' is not one of the documented values 2, 3 or 4 (unset means auto-detection). A launcher that "
        "passes it on ends in errors such as `ValueError: Invalid version: self.fa_impl_ver=5`."
    )
    assert dict(finding.evidence) == {"variable": OVERRIDE, "value": "'5'", "valid": [2, 3, 4]}
    # Alternatives, one paste block each: pasting (1) whole never sets what it unsets.
    assert commands_of(finding) == [[UNSET], [f"export {OVERRIDE}=3"], AUTO]
    assert OVERRIDE in finding.remedies[1].text and "3" in finding.remedies[1].text


def test_invalid_hostile_value_is_shown_escaped(server: Facts) -> None:
    finding, _ = run(server, "\x1b[2J" + "9" * 100)
    assert finding.evidence["value"] == "'\\x1b[2J" + "9" * 36 + "' ... (104 characters)"
    assert f"{OVERRIDE}={finding.evidence['value']} is not one" in finding.detail


@pytest.mark.parametrize(
    ("facts_name", "caps", "suggested"),
    [
        ("server", (HOPPER,), 3),
        ("server", (BLACKWELL,), 4),
        ("fa2_only", (HOPPER,), 2),
        ("broken_fa4", (HOPPER,), None),
    ],
)
def test_invalid_value_suggests_what_works_here(
    request: pytest.FixtureRequest, facts_name: str, caps: tuple, suggested: int | None
) -> None:
    facts = vary(request.getfixturevalue(facts_name), caps=caps)
    assert best_valid(facts, assess_all(facts)) == suggested
    finding, _ = run(facts, "fa3")
    alternative = [[f"export {OVERRIDE}={suggested}"]] if suggested else []
    assert commands_of(finding) == [[UNSET], *alternative, AUTO]


def test_best_valid_prefers_3_then_4_then_2(server: Facts, fa2_only: Facts) -> None:
    assert best_valid(server, assess_all(server)) == 3
    no_kernel = dataclasses.replace(server, sglang=dataclasses.replace(server.sglang, accepted_versions=frozenset({4})))
    assert best_valid(no_kernel, assess_all(no_kernel)) == 4
    assert best_valid(fa2_only, assess_all(fa2_only)) == 2


def test_unset(server: Facts, fa2_only: Facts) -> None:
    finding, pinned = run(server, None)
    assert pinned is None
    assert (finding.id, finding.severity, finding.title) == (
        "override.unset",
        Severity.OK,
        f"{OVERRIDE} is not set: auto-detection decides",
    )
    assert finding.detail == (
        "When set to 3 or 4 it stands for SGLang's `--attention-backend fa3|fa4`. "
        "The installed SGLang 0.5.23 does not read it itself."
    )
    assert dict(finding.evidence) == {"variable": OVERRIDE} and finding.remedies == ()
    reads = dataclasses.replace(server.sglang, reads_override=True)
    assert run(server, None, sglang=reads)[0].detail.endswith("The installed SGLang 0.5.23 reads it itself.")
    assert run(fa2_only, None)[0].detail == "When set to 3 or 4 it stands for SGLang's `--attention-backend fa3|fa4`."


def test_active_with_sglang(server: Facts) -> None:
    finding, pinned = run(server, "3")
    assert pinned == 3
    assert (finding.id, finding.severity, finding.title) == ("override.active", Severity.INFO, f"{OVERRIDE}=3 pins FA3")
    assert finding.detail == (
        "FA3 (sgl_kernel.flash_attn from sglang-kernel) is installed and supports the visible GPUs. "
        "It corresponds to SGLang's `--attention-backend fa3`. " + NOT_READ
    )
    assert dict(finding.evidence) == {
        "variable": OVERRIDE,
        "value": "3",
        "implementation": "fa3-sgl",
        "sglang_flag": "--attention-backend fa3",
        "sglang_reads_it": False,
    }
    assert finding.remedies == ()
    four, _ = run(server, "4")
    assert four.evidence["implementation"] == "fa4-sglang" and four.evidence["sglang_flag"] == "--attention-backend fa4"
    reads = dataclasses.replace(server.sglang, reads_override=True)
    finding, _ = run(server, "4", sglang=reads)
    assert finding.detail.endswith(
        f"It corresponds to SGLang's `--attention-backend fa4`; the installed SGLang 0.5.23 reads {OVERRIDE} itself."
    )
    assert finding.evidence["sglang_reads_it"] is True


def test_active_claims_no_gpu_support_without_a_gpu(server: Facts) -> None:
    """No GPU visible: the pin's detail says what the claim rests on, not "supports the visible GPUs" (issue 26)."""
    bare = dataclasses.replace(server, gpus=dataclasses.replace(server.gpus, devices=()))
    finding, _ = run(bare, "3")
    assert "visible GPUs" not in finding.detail and "no GPU seen: not proven here" in finding.detail
    named = dataclasses.replace(bare, gpu_arch=("sm_90",))
    finding, _ = run(named, "3")
    assert "is supported on sm_90 (from --gpu-arch); no GPU here ran it" in finding.detail


def test_active_without_sglang(fa2_only: Facts) -> None:
    finding, pinned = run(fa2_only, "2")
    assert pinned == 2
    assert finding.detail == (
        "FA2 (flash-attn) is installed and supports the visible GPUs. SGLang has no FA2 backend (FA2 is only a "
        "fallback inside its FA3 path), so no SGLang flag matches it."
    )
    assert finding.evidence["sglang_flag"] is None and finding.evidence["sglang_reads_it"] is None


def test_unavailable_names_every_reason(server: Facts) -> None:
    finding, pinned = run(vary(server, caps=(BLACKWELL,)), "3")
    assert pinned == 3
    assert (finding.id, finding.severity, finding.title) == (
        "override.unavailable",
        Severity.FAIL,
        f"{OVERRIDE}=3 cannot work here",
    )
    reasons = finding.evidence["reasons"]
    assert len(reasons) == 1 and "compute capability 10.0" in reasons[0]
    assert finding.detail == (
        f"FA3 is pinned, but: {reasons[0]}. It corresponds to SGLang's `--attention-backend fa3`. " + NOT_READ
    )
    assert finding.evidence["implementation"] == "fa3-sgl" and finding.evidence["value"] == "3"
    # fa3-sgl imports fine (the GPU is the problem): no reinstall, but the version that works here.
    assert commands_of(finding) == [[UNSET], [f"export {OVERRIDE}=4"], AUTO]


def test_unavailable_2_with_sglang(server: Facts) -> None:
    finding, _ = run(server, "2")
    assert finding.evidence["implementation"] is None and finding.evidence["sglang_flag"] is None
    assert finding.detail.startswith("FA2 is pinned, but: SGLang 0.5.23 has no fa2 backend")
    assert "SGLang has no FA2 backend" in finding.detail
    assert commands_of(finding) == [[UNSET], [f"export {OVERRIDE}=3"], AUTO]


def test_pinned_fa_that_will_not_import_gets_a_reinstall(broken_fa4: Facts) -> None:
    finding, pinned = run(broken_fa4, "4")
    assert (finding.id, pinned) == ("override.unavailable", 4)
    assert finding.detail.startswith("FA4 is pinned, but: nvidia-cutlass-dsl-libs-core is not installed")
    assert finding.detail.endswith("It corresponds to SGLang's `--attention-backend fa4`.")
    commands = commands_of(finding)
    assert len(commands) == 3
    assert commands[0] == [UNSET] and commands[2] == AUTO
    installs = [pip_installs(c) for c in commands[1]]
    assert [names for names, _ in installs] == [
        ["flash-attn-4"],
        [
            "nvidia-cutlass-dsl",
            "nvidia-cutlass-dsl-libs-base",
            "nvidia-cutlass-dsl-libs-core",
            "nvidia-cutlass-dsl-libs-cu12",  # DSL 4.8.1 requires it whatever the CUDA ([cu13] adds libs-cu13)
            "nvidia-cutlass-dsl-libs-cu13",
        ],
    ]
    assert all("--force-reinstall" in options for _, options in installs)
    assert "Reinstall" in finding.remedies[1].text


def test_unavailable_joins_every_reason(sglang_broken: Facts) -> None:
    finding, _ = run(sglang_broken, "4")
    reasons = finding.evidence["reasons"]
    assert len(reasons) == 2 and reasons[1].startswith("SGLang imports sgl_kernel (merge_state_v2) even for FA4")
    assert finding.detail.startswith(f"FA4 is pinned, but: {reasons[0]}; {reasons[1]}. It corresponds to SGLang's")
