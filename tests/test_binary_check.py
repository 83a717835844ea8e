"""check_binaries on fake environments holding real compiled extensions (gcc + objcopy, built at test time)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from binfake import Entry, extension, library, need_toolchain
from conftest import commands_of, gather_facts, vary
from fakeenv import FIXTURES, FakeEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.diagnose.checks import binary
from fa_doctor.diagnose.checks.binary import check_binaries, parse_gpu_arch
from fa_doctor.diagnose.derive.inventory import assess_all
from fa_doctor.diagnose.plan.planner import plan
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.probes.extensions import PATTERNS
from fa_doctor.render.shell import finding_dict

PY = f"{sys.version_info[0]}{sys.version_info[1]}"
FA2_SO = f"flash_attn_2_cuda.cpython-{PY}-x86_64-linux-gnu.so"
FA2_CUBINS = [Entry("sm_80"), Entry("sm_90", compressed=True)]  # flash-attn 2.8.3 release wheels: no PTX
SGL_CUBINS = [Entry("sm_80"), Entry("sm_86"), Entry("sm_90a")]  # sglang-kernel 0.4.10 flash_ops, measured


@pytest.fixture(autouse=True)
def toolchain(request: pytest.FixtureRequest) -> None:
    if not request.node.name.startswith("test_parse"):  # parsing --gpu-arch needs no compiler
        need_toolchain()


def torch_libs(
    fenv: FakeEnv, build: Path, defines: list[str], version: str = "2.11.0+cu130", cuda: str = "13.0"
) -> Path:
    """torch in the fake env, with a real libc10.so exporting `defines`; returns it to link against."""
    fenv.torch(version, cuda)
    c10 = library(build / "torch", "libc10.so", defines or ["_ZN3c106unusedEv"])
    (fenv.site / "torch" / "lib" / "libc10.so").write_bytes(c10.read_bytes())
    return c10


def install(fenv: FakeEnv, name: str, version: str, files: dict[str, str | bytes], **kw: Any) -> None:
    fenv.dist(name, version, files, **kw)


def fa2(
    fenv: FakeEnv,
    tmp_path: Path,
    *,
    entries: list[Entry] | None = None,
    calls: tuple[str, ...] = (),
    cudart: str = "libcudart.so.13",
    torch_defines: tuple[str, ...] = ("_ZN3c104fakeEv",),
    libs: tuple[Path, ...] = (),
    flags: tuple[str, ...] = (),
) -> Path:
    build = tmp_path / "build"
    c10 = torch_libs(fenv, build, list(torch_defines))
    rt = library(build / "deps", cudart, ["cudaMalloc"])
    so = extension(
        build,
        FA2_SO,
        entries=FA2_CUBINS if entries is None else entries,
        calls=("cudaMalloc", *calls),
        libs=(rt, c10, *libs),
        flags=flags,
    )
    files: dict[str, str | bytes] = {"flash_attn/__init__.py": "", FA2_SO: so.read_bytes()}
    install(fenv, "flash-attn", "2.8.3", files, top_level=["flash_attn", "flash_attn_2_cuda"])
    return fenv.site / FA2_SO


def run(facts: Facts, gpu_arch: tuple[str, ...] | None = None) -> list[Finding]:
    """The check, then the planner (which writes the installs the check asked for), as `check` runs them."""
    return plan(check_binaries(facts, assess_all(facts), gpu_arch), facts)


def by_id(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def failing(findings: list[Finding]) -> list[str]:
    return sorted(f.id for f in findings if f.severity is Severity.FAIL)


def assert_remedied(findings: list[Finding]) -> None:
    """Every non-ok finding has commands, and every finding survives the JSON renderer's round trip."""
    for f in findings:
        assert json.loads(json.dumps(finding_dict(f))) == json.loads(json.dumps(finding_dict(f), default=str))
        if f.severity is not Severity.OK:
            assert f.remedies and all(commands_of(f)), f"{f.id} has no commands"


# ---- kernel images -------------------------------------------------------------------------------------------


def test_fa2_runs_on_hopper_and_lists_what_it_serves(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path)
    findings = run(vary(gather_facts(fenv), caps=((9, 0),)))
    assert failing(findings) == []
    (summary,) = by_id(findings, "binary.archs")
    assert summary.severity is Severity.OK
    row = summary.evidence["extensions"][FA2_SO]
    assert row["cubins"] == {"sm_80": 1, "sm_90": 1} and row["ptx"] == {} and row["compressed_entries"] == 1
    assert "9.0-9.9" in row["runs_on"] and "GPU 0 (GPU0, 9.0)" in summary.detail


def test_fa2_without_sm120_predicts_no_kernel_image_on_rtx50(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path)
    findings = run(vary(gather_facts(fenv), caps=((12, 0),)))
    (bad,) = by_id(findings, "binary.no_kernel_image")
    assert bad.severity is Severity.FAIL and "no kernel image is available" in bad.detail
    assert bad.evidence["capability"] == "12.0" and bad.evidence["cubins"] == {"sm_80": 1, "sm_90": 1}
    assert any("FLASH_ATTN_CUDA_ARCHS=120" in c for c in commands_of(bad)[0])
    assert_remedied(findings)


def test_ptx_is_jit_compiled_when_the_driver_is_new_enough(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, entries=[Entry("sm_80"), Entry("compute_80")])
    facts = vary(gather_facts(fenv), caps=((12, 0),))
    findings = run(facts)
    assert failing(findings) == []
    (summary,) = by_id(findings, "binary.archs")
    assert summary.severity is Severity.INFO and "only by JIT on GPU 0" in summary.detail
    assert_remedied(findings)
    old_driver = dataclasses.replace(facts, gpus=dataclasses.replace(facts.gpus, cuda_driver_version="12.4"))
    (bad,) = by_id(run(old_driver), "binary.no_kernel_image")
    assert "needs a driver for CUDA 13" in bad.detail


def test_arch_specific_ptx_does_not_help_other_gpus(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, entries=[Entry("sm_90a"), Entry("compute_90a")])
    assert failing(run(vary(gather_facts(fenv), caps=((9, 0),)))) == []
    assert failing(run(vary(gather_facts(fenv), caps=((10, 0),)))) == ["binary.no_kernel_image"]


def test_one_finding_per_capability(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path)
    findings = run(vary(gather_facts(fenv), caps=((12, 0), (12, 0), (9, 0))), ("sm_120",))
    (bad,) = by_id(findings, "binary.no_kernel_image")
    assert bad.evidence["targets"] == ["GPU 0 (GPU0, 12.0)", "GPU 1 (GPU1, 12.0)", "--gpu-arch sm_120"]


def test_family_cubins_serve_newer_members(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, entries=[Entry("sm_100f"), Entry("sm_120a")])
    facts = gather_facts(fenv)
    assert failing(run(vary(facts, caps=((10, 3), (10, 0))))) == []
    ids = failing(run(vary(facts, caps=((12, 1),))))  # GB10: sm_120a is 12.0 only
    assert ids == ["binary.no_kernel_image"]


def test_gpu_arch_option_judges_a_gpu_less_ci_runner(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path)
    facts = gather_facts(fenv)  # no GPU
    findings = run(facts, parse_gpu_arch("sm_90,sm_100"))
    (bad,) = by_id(findings, "binary.no_kernel_image")
    assert bad.evidence["targets"] == ["--gpu-arch sm_100"]
    nothing = run(facts)
    assert failing(nothing) == []
    (summary,) = by_id(nothing, "binary.archs")
    assert summary.severity is Severity.INFO and "nothing to judge against" in summary.detail
    assert_remedied(nothing)
    assert any("--gpu-arch" in c for cmds in commands_of(summary) for c in cmds)


def test_sgl_kernel_fa3_on_blackwell_points_to_fa4(fenv: FakeEnv, tmp_path: Path) -> None:
    build = tmp_path / "build"
    c10 = torch_libs(fenv, build, ["_ZN3c104fakeEv"])
    so = extension(build, "flash_ops.abi3.so", entries=SGL_CUBINS, calls=["_ZN3c104fakeEv"], libs=[c10])
    files: dict[str, str | bytes] = {
        "sgl_kernel/__init__.py": "",
        "sgl_kernel/flash_attn.py": "",
        "sgl_kernel/flash_ops.abi3.so": so.read_bytes(),
    }
    install(fenv, "sglang-kernel", "0.4.10", files, requires=["torch==2.11.0"])
    facts = gather_facts(fenv)
    assert failing(run(vary(facts, caps=((9, 0), (8, 6))))) == []
    findings = run(vary(facts, caps=((10, 0),)))
    (bad,) = by_id(findings, "binary.no_kernel_image")
    assert bad.evidence["implementation"] == "fa3-sgl" and "sm_90a x1" in bad.detail
    assert any("flash-attn-4" in c for cmds in commands_of(bad) for c in cmds)
    assert_remedied(findings)


def test_patterns_match_the_real_sglang_kernel_record() -> None:
    record = (FIXTURES / "sglang_kernel-0.4.10.dist-info" / "RECORD").read_text().splitlines()
    rx = re.compile("|".join(f"(?:{p})" for p in PATTERNS["fa3-sgl"]))
    assert [r.split(",")[0] for r in record if rx.fullmatch(r.split(",")[0])] == ["sgl_kernel/flash_ops.abi3.so"]


def test_vllm_extensions_are_found_without_a_record(fenv: FakeEnv, tmp_path: Path) -> None:
    build = tmp_path / "build"
    torch_libs(fenv, build, [])
    so = extension(build, "_vllm_fa3_C.abi3.so", entries=[Entry("sm_90a")])
    files: dict[str, str | bytes] = {
        "vllm/__init__.py": "",
        "vllm/vllm_flash_attn/__init__.py": "",
        "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so": so.read_bytes(),
    }
    install(fenv, "vllm", "0.11.0", files, top_level=["vllm"])  # fa-doctor skips vllm's large RECORD
    findings = run(vary(gather_facts(fenv), caps=((8, 0),)))
    (bad,) = by_id(findings, "binary.no_kernel_image")
    assert bad.evidence["file"].endswith("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")


# ---- CUDA runtime, GLIBC, torch symbols ----------------------------------------------------------------------


def test_cuda12_extension_under_cuda13_torch(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, cudart="libcudart.so.12")
    facts = vary(gather_facts(fenv), caps=((9, 0),))
    (bad,) = by_id(run(facts), "binary.cudart_mismatch")
    assert "libcudart.so.12" in bad.detail and bad.evidence["torch_cuda"] == "13.0"
    assert by_id(run(vary(facts, cuda="12.8")), "binary.cudart_mismatch") == []


def test_newer_glibc_symbol_version(fenv: FakeEnv, tmp_path: Path) -> None:
    newc = library(tmp_path / "build" / "deps", "libnewc.so.6", ["gnu_new_thing"], version="GLIBC_2.99")
    fa2(fenv, tmp_path, calls=("gnu_new_thing",), libs=(newc,))
    facts = vary(gather_facts(fenv), caps=((9, 0),))
    assert facts.target.libc and facts.target.libc.startswith("glibc 2.")
    findings = run(facts)
    (bad,) = by_id(findings, "binary.glibc")
    assert bad.evidence["glibc_needed"] == "GLIBC_2.99" and bad.evidence["symbols"] == ["gnu_new_thing"]
    assert_remedied(findings)
    assert by_id(run(vary(facts, target=dataclasses.replace(facts.target, libc="glibc 3.0"))), "binary.glibc") == []


def test_newer_glibcxx_than_the_libstdcxx_it_would_load(fenv: FakeEnv, tmp_path: Path) -> None:
    fake = library(tmp_path / "build" / "cxx", "libstdc++.so.6", ["_ZSt10new_thingv"], version="GLIBCXX_3.4.99")
    fa2(fenv, tmp_path, calls=("_ZSt10new_thingv",), libs=(fake,), flags=("-Wl,-rpath,$ORIGIN/cxx",))
    facts = vary(gather_facts(fenv), caps=((9, 0),))
    (bad,) = by_id(run(facts), "binary.glibc")  # the system's libstdc++ has no GLIBCXX_3.4.99
    assert bad.evidence["glibcxx_missing"] == ["GLIBCXX_3.4.99"] and "libstdc++.so.6" in bad.detail
    (fenv.site / "cxx").mkdir()
    (fenv.site / "cxx" / "libstdc++.so.6").write_bytes(fake.read_bytes())  # RUNPATH $ORIGIN/cxx now finds it
    assert by_id(run(facts), "binary.glibc") == []


def test_torch_symbol_missing_from_libtorch_predicts_undefined_symbol(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, calls=("_ZN3c104fakeEv", "_ZNK2at6Tensor4gone", "cuGreenCtxDestroy"), torch_defines=())
    findings = run(vary(gather_facts(fenv), caps=((9, 0),)))
    (bad,) = by_id(findings, "binary.undefined_symbol")
    assert bad.evidence["missing"] == ["_ZN3c104fakeEv", "_ZNK2at6Tensor4gone"]  # the driver symbol is not torch's
    assert "undefined symbol: _ZN3c104fakeEv" in bad.detail and "2.11.0+cu130" in bad.detail
    assert_remedied(findings)


def test_torch_symbols_exported_give_no_finding(fenv: FakeEnv, tmp_path: Path) -> None:
    fa2(fenv, tmp_path, calls=("_ZN3c104fakeEv",), torch_defines=("_ZN3c104fakeEv",))
    assert failing(run(vary(gather_facts(fenv), caps=((9, 0),)))) == []


# ---- garbage, budget, nothing installed ------------------------------------------------------------------------


def test_stub_extension_is_unreadable_not_a_crash(fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa2()  # its flash_attn_2_cuda .so is 4 bytes
    findings = run(gather_facts(fenv))
    (warn,) = by_id(findings, "binary.unreadable")
    assert warn.severity is Severity.WARN and "too short" in warn.detail
    assert_remedied(findings)


def test_budget_exhausted_is_said_not_hidden(fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fa2(fenv, tmp_path)
    monkeypatch.setattr(binary, "BUDGET_SECONDS", -1.0)
    (summary,) = run(vary(gather_facts(fenv), caps=((12, 0),)))
    assert summary.id == "binary.archs" and "budget ran out" in summary.detail


def test_nothing_installed_nothing_said(fenv: FakeEnv) -> None:
    fenv.torch()
    assert run(gather_facts(fenv)) == []


# ---- --gpu-arch ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("sm_90,sm_100", ("sm_90", "sm_100")),
        (" 9.0 , 12.1 ", ("sm_90", "sm_121")),
        ("90,90,sm_90a", ("sm_90",)),
        ("SM_100F", ("sm_100",)),
        ("compute_80", ("sm_80",)),
    ],
)
def test_parse_gpu_arch(text: str, parsed: tuple[str, ...]) -> None:
    assert parse_gpu_arch(text) == parsed


@pytest.mark.parametrize("text", ["", ",", "sm_90,", "hopper", "sm_9", "sm_2000", "10.12", "sm_90;sm_100", "9" * 500])
def test_parse_gpu_arch_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--gpu-arch"):
        parse_gpu_arch(text)


def test_extension_outside_record_is_found_on_the_search_path(fenv: FakeEnv, tmp_path: Path) -> None:
    """A source build copied in by hand: RECORD does not list the .so, an import would still load it."""
    build = tmp_path / "build"
    torch_libs(fenv, build, [])
    so = extension(build, FA2_SO, entries=FA2_CUBINS)
    install(fenv, "flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}, top_level=["flash_attn"])
    (fenv.site / FA2_SO).write_bytes(so.read_bytes())
    (bad,) = by_id(run(vary(gather_facts(fenv), caps=((12, 0),))), "binary.no_kernel_image")
    assert bad.evidence["file"] == str(fenv.site / FA2_SO)


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_parse_gpu_arch_is_total(text: str) -> None:
    """Anything a user (or a CI variable) passes: normalised sm_ names or a ValueError naming the option."""
    try:
        parsed = parse_gpu_arch(text)
    except ValueError as exc:
        assert "--gpu-arch" in str(exc)
    else:
        assert parsed and all(re.fullmatch(r"sm_\d{2,3}", a) for a in parsed)


def test_unreadable_torch_library_means_no_claim(fenv: FakeEnv, tmp_path: Path) -> None:
    """A missing symbol might live in the library that could not be read: nothing is claimed, the gap is said."""
    fa2(fenv, tmp_path, calls=("_ZN3c104fakeEv",), torch_defines=())
    (fenv.site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"\x7fELF truncated")
    findings = run(vary(gather_facts(fenv), caps=((9, 0),)))
    assert by_id(findings, "binary.undefined_symbol") == []
    (summary,) = by_id(findings, "binary.archs")
    assert "torch symbols not checked: libtorch_cuda.so" in summary.detail
