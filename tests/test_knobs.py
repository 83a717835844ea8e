"""Knob facts, as read in the released code (fa_doctor/diagnose/checks/knobs.py docstring): one test per rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import H200, FakeEnv

from fa_doctor.diagnose.checks.knobs import check_knobs
from fa_doctor.model.actions import SetEnv, UnsetEnv
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.install import Distribution, DistributionScan
from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts
from fa_doctor.render.shell import remedy_lines


def facts(env: dict[str, str], *caps: tuple[int, int], dists: dict[str, str] | None = None) -> Facts:
    """Hand-made facts: these variables, GPUs of these capabilities, these distributions (name -> version)."""
    target = TargetFacts("/venv/bin/python", "/venv/bin/python", (3, 11, 9), "cpython", "/venv", (), "x86_64",
                         "glibc 2.36", True, False)  # fmt: skip
    devices = tuple(GpuDevice(i, i, f"GPU{i}", c, 81920, None) for i, c in enumerate(caps))
    gpus = GpuFacts("test", devices, "580.159.04" if devices else None, None, None, ())
    found = tuple(
        Distribution(name, name, version, "/venv/lib/site", f"/venv/lib/site/{name}-{version}.dist-info")
        for name, version in (dists or {}).items()
    )
    scan = DistributionScan(found, len(found), ("/venv/lib/site",), {d.normalized: d.version for d in found})
    return Facts(target, gpus, None, scan, env, None)


def one(found: list[Finding], fid: str | None = None) -> Finding:
    assert len(found) == 1, found
    if fid:
        assert found[0].id == fid, found[0]
    return found[0]


# ---- SGLANG_USE_SGL_FA3_KERNEL (sglang 0.5.23 EnvBool / EnvField.get) ----------------------------------------


@pytest.mark.parametrize("value", ["maybe", "", "2", "enabled"])
def test_invalid_fa3_kernel_flag_is_a_warning_that_the_default_applies(value: str) -> None:
    f = one(check_knobs(facts({"SGLANG_USE_SGL_FA3_KERNEL": value}, (9, 0))), "knob.invalid")
    assert f.severity is Severity.WARN
    assert 'using default "True"' in f.detail and "sgl_kernel" in f.detail
    assert f.remedies[0].actions == (UnsetEnv("SGLANG_USE_SGL_FA3_KERNEL"),)


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "Yes", "y"])
def test_fa3_kernel_true_spellings_are_the_default(value: str) -> None:
    assert check_knobs(facts({"SGLANG_USE_SGL_FA3_KERNEL": value}, (9, 0))) == []


@pytest.mark.parametrize("value", ["false", "0", "NO", "n"])
def test_fa3_kernel_false_spellings_take_the_hub(value: str) -> None:
    f = one(check_knobs(facts({"SGLANG_USE_SGL_FA3_KERNEL": value}, (9, 0))), "knob.active")
    assert f.severity is Severity.WARN and "not installed" in f.detail
    with_kernels = facts({"SGLANG_USE_SGL_FA3_KERNEL": value}, (9, 0), dists={"kernels": "0.17.2"})
    assert one(check_knobs(with_kernels)).severity is Severity.INFO


# ---- SGLANG_IS_FLASHINFER_AVAILABLE (get_bool_env_var: only true/1 are true) -----------------------------------


@pytest.mark.parametrize("value", ["yes", "y", "on", "enabled", "no"])
def test_flashinfer_flag_other_than_true_1_means_false(value: str) -> None:
    f = one(check_knobs(facts({"SGLANG_IS_FLASHINFER_AVAILABLE": value})), "knob.invalid")
    assert f.severity is Severity.WARN and "only true/1" in f.detail and "triton" in f.detail


@pytest.mark.parametrize("value", ["true", "True", "1", "false", "FALSE", "0"])
def test_flashinfer_flag_accepted_spellings(value: str) -> None:
    assert check_knobs(facts({"SGLANG_IS_FLASHINFER_AVAILABLE": value})) == []


# ---- FLASH_ATTENTION_TRITON_AMD_ENABLE (flash-attn 2.8.3.post2: == "TRUE") -------------------------------------


def test_triton_amd_exact_true_on_nvidia_fails() -> None:
    f = one(check_knobs(facts({"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}, (9, 0))), "knob.conflict")
    assert f.severity is Severity.FAIL


@pytest.mark.parametrize("value", ["true", "True", "1", "yes", " TRUE"])
def test_triton_amd_other_spellings_do_nothing(value: str) -> None:
    f = one(check_knobs(facts({"FLASH_ATTENTION_TRITON_AMD_ENABLE": value}, (9, 0))), "knob.ignored")
    assert f.severity is Severity.INFO and 'exactly "TRUE"' in f.detail
    assert f.remedies[0].actions == (UnsetEnv("FLASH_ATTENTION_TRITON_AMD_ENABLE"),)
    # without an NVIDIA GPU the user probably wanted the AMD backend, and does not get it
    g = one(check_knobs(facts({"FLASH_ATTENTION_TRITON_AMD_ENABLE": value})), "knob.ignored")
    assert g.severity is Severity.WARN
    assert g.remedies[0].actions == (SetEnv("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE"),)


def test_triton_amd_false_is_silent() -> None:
    assert check_knobs(facts({"FLASH_ATTENTION_TRITON_AMD_ENABLE": "FALSE"}, (9, 0))) == []


# ---- VLLM_FLASH_ATTN_VERSION (read up to vllm 0.14.1; 0.15.0 and 0.16.0 do not) --------------------------------


@pytest.mark.parametrize("vllm", ["0.15.0", "0.16.0", "0.17.1rc1"])
def test_vllm_from_0_15_ignores_it(vllm: str) -> None:
    f = one(check_knobs(facts({"VLLM_FLASH_ATTN_VERSION": "3"}, (9, 0), dists={"vllm": vllm})), "knob.ignored")
    assert f.severity is Severity.WARN and "--attention-config.flash_attn_version" in f.detail


@pytest.mark.parametrize("vllm", ["0.14.1", "0.10.1.1"])
def test_vllm_up_to_0_14_reads_it(vllm: str) -> None:
    f = one(check_knobs(facts({"VLLM_FLASH_ATTN_VERSION": "3"}, (9, 0), dists={"vllm": vllm})), "knob.active")
    assert f.severity is Severity.INFO and f.title.endswith("pins vLLM's FA3")


@pytest.mark.parametrize(
    ("value", "caps", "fid", "severity"),
    [
        ("four", ((9, 0),), "knob.invalid", Severity.FAIL),  # int() raises at start-up
        (" 3", ((9, 0),), "knob.active", Severity.INFO),  # int(" 3") == 3: vLLM accepts it
        ("5", ((9, 0),), "knob.invalid", Severity.FAIL),
        ("3", ((8, 0),), "knob.conflict", Severity.FAIL),  # FA3 is SM 9.x only: FA unavailable
        ("3", ((10, 0),), "knob.conflict", Severity.WARN),  # Blackwell: falls back to FA2
        ("4", ((9, 0),), "knob.conflict", Severity.FAIL),
        ("4", ((10, 0),), "knob.active", Severity.INFO),
        ("2", ((8, 0),), "knob.active", Severity.INFO),
        ("2", ((7, 5),), "knob.conflict", Severity.FAIL),
        ("3", (), "knob.active", Severity.INFO),  # no GPU seen: nothing to compare
    ],
)
def test_vllm_0_14_values(value: str, caps: tuple[tuple[int, int], ...], fid: str, severity: Severity) -> None:
    f = one(check_knobs(facts({"VLLM_FLASH_ATTN_VERSION": value}, *caps, dists={"vllm": "0.14.1"})), fid)
    assert f.severity is severity, f


def test_vllm_not_installed() -> None:
    f = one(check_knobs(facts({"VLLM_FLASH_ATTN_VERSION": "four"}, (9, 0))), "knob.ignored")
    assert f.severity is Severity.INFO and "not installed" in f.title


# ---- FLASH_ATTENTION_ARCH (FA4 kernel path) and CUTE_DSL_ARCH (compilation target) -----------------------------


@pytest.mark.parametrize(
    ("value", "caps", "fid", "severity"),
    [
        ("sm_90", ((9, 0),), "knob.active", Severity.INFO),
        ("90", ((9, 0),), "knob.active", Severity.INFO),
        ("SM_100a", ((10, 0),), "knob.active", Severity.INFO),
        ("sm_103", ((10, 0),), "knob.active", Severity.INFO),  # same kernel path (SM100)
        ("sm_100a", ((9, 0),), "knob.conflict", Severity.FAIL),
        ("sm_90", ((10, 0),), "knob.conflict", Severity.FAIL),  # wgmma is SM90 only
        ("sm_80", ((9, 0),), "knob.conflict", Severity.WARN),  # runs, without the SM90 kernels
        ("sm_120", (), "knob.active", Severity.INFO),
        ("Sm_90", ((9, 0),), "knob.invalid", Severity.FAIL),  # FA4's regex: `sm` or `SM` only
        (" sm_90", ((9, 0),), "knob.invalid", Severity.FAIL),
        ("hopper", ((9, 0),), "knob.invalid", Severity.FAIL),
        ("9", ((9, 0),), "knob.invalid", Severity.FAIL),  # at least two digits
    ],
)
def test_fa4_kernel_path(value: str, caps: tuple[tuple[int, int], ...], fid: str, severity: Severity) -> None:
    f = one(check_knobs(facts({"FLASH_ATTENTION_ARCH": value}, *caps)), fid)
    assert f.severity is severity, f
    assert "compil" not in f.title  # it picks the kernel path, not the compilation target


@pytest.mark.parametrize(
    ("value", "caps", "fid"),
    [
        ("sm_90a", ((9, 0),), "knob.active"),
        ("sm_80", ((8, 6),), "knob.active"),  # sm_80 SASS runs on sm_86
        ("sm_86", ((8, 0),), "knob.conflict"),
        ("sm_100a", ((9, 0),), "knob.conflict"),
        ("sm_90a", ((10, 0),), "knob.conflict"),
        ("sm_100a", (), "knob.active"),
        ("hopper!", ((9, 0),), "knob.invalid"),
        ("90", ((9, 0),), "knob.invalid"),
    ],
)
def test_cute_dsl_target(value: str, caps: tuple[tuple[int, int], ...], fid: str) -> None:
    one(check_knobs(facts({"CUTE_DSL_ARCH": value}, *caps)), fid)


def test_every_remedy_is_an_action_and_every_value_is_shown_escaped() -> None:
    hostile = "$(touch PWNED)\n`x`"
    env = {
        name: hostile
        for name in (
            "SGLANG_USE_SGL_FA3_KERNEL",
            "SGLANG_IS_FLASHINFER_AVAILABLE",
            "VLLM_FLASH_ATTN_VERSION",
            "FLASH_ATTENTION_ARCH",
            "CUTE_DSL_ARCH",
            "SGLANG_INKLING_FA4_USE_PIP",
        )
    }
    found = check_knobs(facts(env, (9, 0), dists={"vllm": "0.14.1"}))
    assert len(found) == len(env)
    for f in found:
        assert "\n" not in f.title + f.detail, f
        assert f.remedies and all(r.actions for r in f.remedies)
        assert all("PWNED" not in c for r in f.remedies for c in remedy_lines(r))


# ---- end to end, through the real CLI against a fake environment ------------------------------------------------


def test_cli_vllm_0_14_1_reads_the_variable(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch("2.9.1+cu128")
    fenv.dist("vllm", "0.14.1")
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python,
              env={**gpu_env(tmp_path, H200), "VLLM_FLASH_ATTN_VERSION": "four"})  # fmt: skip
    finding = run.finding("knob.invalid")
    assert finding["evidence"]["vllm"] == "0.14.1" and "int()" in finding["detail"]
    assert ["unset VLLM_FLASH_ATTN_VERSION"] in [r["commands"] for r in finding["remedies"]]
