"""What `check` makes of real SGLang, sgl-kernel and vLLM releases: fake environments built from their released
METADATA (tests/corpus) and the excerpts of their source files in tests/fixtures/servers (test_server_facts.py
ties each excerpt to its wheel). Each behaviour here was wrong at commit 423dd1a (issue 25), so these tests fail
there; they import only what that commit had, so they fail on their assertions, not on an import.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import wheelhouse
from conftest import gather_facts, vary
from fakeenv import FakeEnv
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from fa_doctor.catalog import releases
from fa_doctor.commands.check import run_checks
from fa_doctor.diagnose.checks.knobs import check_knobs
from fa_doctor.diagnose.derive import derive
from fa_doctor.diagnose.plan import recipes
from fa_doctor.model.actions import PipInstall
from fa_doctor.model.facts import BackendFlags
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.options import CheckOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "servers"
# What the released wheels hold (test_server_facts.py checks these against the catalog): the FA4 copy inside each
# sgl-kernel wheel (its RECORD), and SGLang's own vendored FA4 package (the module its backend's wrapper imports).
KERNEL_COPY = {"0.3.14.post1": "flash_attn/cute", "0.3.16.post5": "flash_attn/cute", "0.3.21": "flash_attn_origin/cute"}
VENDORED = {"0.5.9": "sglang/jit_kernel/flash_attention/cute"}


def _texts(name: str) -> dict[str, str]:
    folder = FIXTURES / name
    # Stored as `<path in the wheel>.txt`: released code, not ours to lint.
    return {str(p.relative_to(folder)).removesuffix(".txt"): p.read_text(encoding="utf-8")
            for p in folder.rglob("*.txt")}  # fmt: skip


# ---- SGLang releases on a Hopper server ------------------------------------------------------------------------


def _metadata(version: str) -> str:
    (path,) = (wheelhouse.CORPUS / "sglang").glob(f"sglang-{version}-*.whl.metadata")
    return path.read_text(encoding="utf-8")


def _replace(fenv: FakeEnv, name: str, version: str, files: dict[str, str | bytes]) -> None:
    for info in fenv.site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        shutil.rmtree(info)
    fenv.dist(name, version, files)


def _flash_ops(where: Path) -> bytes:
    """A real shared object with sm_80 and sm_90a cubins, as sgl-kernel's flash_ops carries (binfake builds it)."""
    import binfake

    binfake.need_toolchain()
    return binfake.extension(
        where, "flash_ops.abi3.so", entries=[binfake.Entry("sm_80"), binfake.Entry("sm_90a")]
    ).read_bytes()


def _server(fenv: FakeEnv, version: str, *, kernel: str | None = "0.3.21", torch: str = "2.9.1") -> None:
    """SGLang `version` as its wheel installs it: its real METADATA, the excerpts of its files (and its vendored FA4
    package, empty), and every requirement that applies on Linux x86-64 at a version it admits (the kernel with the
    FA4 copy the catalog records for it)."""
    fenv.torch(f"{torch}+cu128", "12.8")
    fenv.cutlass_dsl()
    have = {"torch", "nvidia-cutlass-dsl", "einops", "apache-tvm-ffi", "torch-c-dlpack-ext"}
    if kernel:
        copy = KERNEL_COPY[kernel]
        files: dict[str, str | bytes] = {"sgl_kernel/__init__.py": "", "sgl_kernel/flash_attn.py": "",
                                         "sgl_kernel/flash_ops.abi3.so": _flash_ops(fenv.root)}  # fmt: skip
        if copy:
            files |= {f"{copy}/__init__.py": "", f"{copy}/interface.py": "", "sgl_kernel/_fa4_interface.py": ""}
        fenv.dist("sgl-kernel", kernel, files)
    text = _metadata(version)
    where = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}
    for line in re.findall(r"^Requires-Dist: (.+)$", text, re.M):
        req = Requirement(line)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if (req.marker is not None and not req.marker.evaluate(where)) or name in (
            "torch",
            "sgl-kernel",
            "sglang-kernel",
        ):
            continue
        if name in have and not str(req.specifier).startswith("=="):
            continue
        pins = re.findall(r"(?:==|>=|~=)\s*([\w.]+)", str(req.specifier))
        chosen = next(v for v in [*pins, "1.0"] if SpecifierSet(str(req.specifier)).contains(v, prereleases=True))
        _replace(fenv, name, chosen, {f"{name.replace('-', '_')}/__init__.py": ""})
    sources = dict(_texts(f"sglang-{version}"))
    if version in VENDORED:
        folder = VENDORED[version]
        sources |= {f"{folder}/__init__.py": "", f"{folder}/interface.py": ""}
    fenv.dist("sglang", version, {"sglang/__init__.py": "", **sources}, top_level=["sglang"], metadata=text)


def _check(fenv: FakeEnv, *, attention: str | None = None, prefill: str | None = None, decode: str | None = None,
           **env: str) -> tuple[Any, Any, list[Finding]]:  # fmt: skip
    """(facts, selection, findings) of `check` without the smoke test, on one H100/H200 (sm_90), these flags."""
    facts = vary(gather_facts(fenv, **env), caps=((9, 0),), flags=BackendFlags(attention, prefill, decode))
    derived = derive(facts)
    return facts, derived.selection, run_checks(facts, derived, CheckOptions())


def _failing(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.id, f.detail) for f in findings if f.severity in (Severity.FAIL, Severity.WARN)]


@pytest.mark.parametrize("version", ["0.5.8", "0.5.9"])
def test_healthy_sglang_0_5_8_and_0_5_9_on_hopper_pass(fenv: FakeEnv, version: str) -> None:
    """Before: the source scan read `fa_impl_ver == 4` as "accepts 4 only" and failed SGLang's own default, fa3."""
    _server(fenv, version)
    _, sel, findings = _check(fenv)
    assert _failing(findings) == []
    assert (sel.prefill.backend, sel.prefill.implementation, sel.prefill.problems) == ("fa3", "fa3-sgl", ())
    doc = sel.to_dict()
    assert str(doc.get("sglang_rules")).startswith(f"SGLang {version}'s rules from fa-doctor's catalog")
    assert doc.get("catalog_generated_on") == releases.GENERATED_ON


def test_fa4_on_0_5_8_is_the_sgl_kernel_copy(fenv: FakeEnv) -> None:
    """Before: FA4 was looked for in the flash-attn-4 package, "not installed"; 0.5.8 calls sgl_kernel.flash_attn(
    ..., ver=4), whose _fa4_interface imports sgl-kernel 0.3.21's own flash_attn_origin/cute."""
    _server(fenv, "0.5.8")
    facts, sel, findings = _check(fenv, attention="fa4")
    assert _failing(findings) == []
    assert (sel.prefill.implementation, sel.prefill.problems) == ("fa4-sglang", ())
    ok = next(f for f in findings if f.id == "selection.ok")
    assert "sgl-kernel 0.3.21 (flash_attn_origin.cute)" in ok.detail and "flash-attn-4 package is not used" in ok.detail
    assert facts.sglang is not None and facts.sglang.fa4_module == "flash_attn_origin.cute"


def test_fa4_on_0_5_9_is_its_vendored_copy(fenv: FakeEnv) -> None:
    """0.5.9's backend imports sglang.jit_kernel.flash_attention_v4, which imports the copy inside the sglang wheel
    (released file, tests/fixtures/servers/sglang-0.5.9): not sgl-kernel's, not flash-attn-4."""
    _server(fenv, "0.5.9")
    facts = gather_facts(fenv)
    assert facts.sglang is not None
    assert (facts.sglang.fa4_module, facts.sglang.fa4_vendored) == ("sglang.jit_kernel.flash_attention.cute", True)


@pytest.mark.parametrize("version", ["0.5.3", "0.5.5"])
def test_prefill_fa4_on_0_5_3_to_0_5_7_passes(fenv: FakeEnv, version: str) -> None:
    """Before: no `fa_impl_ver == N` in the source, so "FA3 only", and prefill fa4 failed. The registry maps fa4 to
    fa_impl_ver=4; what stops it depends on the model (0.5.3: non-MLA at start-up; MLA's absorbed path), noted."""
    kernel = "0.3.14.post1" if version == "0.5.3" else "0.3.16.post5"
    _server(fenv, version, kernel=kernel, torch="2.8.0")
    _, sel, findings = _check(fenv, prefill="fa4")
    assert [f for f in findings if f.severity is Severity.FAIL] == []
    prefill = sel.prefill
    assert (prefill.version, prefill.implementation, prefill.problems) == (4, "fa4-sglang", ())
    assert "models" in prefill.why  # the model-dependent refusal, in SGLang's words


def test_decode_fa4_on_0_5_4_to_0_5_7_is_the_servers_own_error(fenv: FakeEnv) -> None:
    _server(fenv, "0.5.5", kernel="0.3.16.post5", torch="2.8.0")
    _, _, findings = _check(fenv, decode="fa4")
    (finding,) = [f for f in findings if f.id == "selection.unavailable"]
    assert finding.title.endswith("is selected for decode but cannot run")
    assert (
        "SGLang 0.5.5 raises `ValueError: FA4 backend is only supported for prefill. Please use "
        "`--prefill-attention-backend fa4` instead.` at start-up (server_args.py) with `--decode-attention-backend fa4`"
    ) in finding.detail


def test_fa3_repair_in_the_sgl_kernel_era_names_sgl_kernel_at_the_servers_pin(fenv: FakeEnv) -> None:
    """Before: sglang 0.4.6-0.5.9 require sgl-kernel, but the repair looked for (and printed) sglang-kernel."""
    _server(fenv, "0.5.9", kernel=None)
    facts = gather_facts(fenv)
    (remedy,) = recipes.reinstall(facts, "fa3-sgl")
    (action,) = remedy.actions
    assert isinstance(action, PipInstall) and action.requirements == ("sgl-kernel==0.3.21",)
    assert "torch==2.9.1" in action.constraints and "sglang 0.5.9 requires sgl-kernel==0.3.21" in remedy.text


def test_a_kernel_that_declares_no_torch_is_held_to_the_servers(fenv: FakeEnv) -> None:
    """sgl-kernel 0.3.21 declares no torch; the sglang releases that pin it pin torch 2.9.1: not installable over
    torch 2.11."""
    _server(fenv, "0.5.9", kernel=None, torch="2.11.0")
    (remedy,) = recipes.reinstall(gather_facts(fenv), "fa3-sgl")
    assert not any(isinstance(a, PipInstall) for a in remedy.actions)
    assert "built against torch 2.9.1 exactly" in remedy.text


def test_vllm_from_0_17_accepts_4() -> None:
    """Before: "accepts 2 or 3, not 4" for every vLLM after 0.14 (the catalog reads each release's Literal)."""
    from fa_doctor.model.facts import Facts
    from fa_doctor.model.install import Distribution, DistributionScan

    dist = Distribution("vllm", "vllm", "0.17.0", "/site", "/site/vllm-0.17.0.dist-info")
    scan = DistributionScan((dist,), 1, ("/site",), {"vllm": "0.17.0"})
    facts = Facts(_target(), _gpus(), None, scan, {"VLLM_FLASH_ATTN_VERSION": "4"}, None)
    (finding,) = check_knobs(facts)
    assert finding.id == "knob.ignored" and "it accepts 2, 3 or 4." in finding.detail and "not 4" not in finding.detail
    old = dataclasses.replace(facts, scan=DistributionScan((dataclasses.replace(dist, version="0.16.0"),), 1, (), {}))
    assert "accepts 2 or 3, not 4" in check_knobs(old)[0].detail


def _target() -> Any:
    from fa_doctor.model.machine import TargetFacts

    return TargetFacts("/venv/bin/python", "/venv/bin/python", (3, 11, 9), "cpython", "/venv", (), "x86_64",
                       "glibc 2.36", True, False)  # fmt: skip


def _gpus() -> Any:
    from fa_doctor.model.machine import GpuDevice, GpuFacts

    return GpuFacts("test", (GpuDevice(0, 0, "GPU0", (10, 0), 81920, None),), "580.159.04", None, None, ())


# ---- pins and Requires-Python honoured by what is printed -----------------------------------------------------------


def test_fa4_install_honours_the_servers_pins(fenv: FakeEnv) -> None:
    """0.5.14 pins flash-attn-4==4.0.0b15; 0.5.16 pins nvidia-cutlass-dsl==4.6.0, which the newest betas exclude."""
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.dist("sglang", "0.5.14", {"sglang/__init__.py": ""}, metadata=_metadata("0.5.14"))
    (remedy,) = recipes.reinstall(gather_facts(fenv), "fa4")
    assert remedy.actions[0].requirements == ("flash-attn-4[cu13]==4.0.0b15",)  # type: ignore[attr-defined]


def test_keep_torch_alternative_honours_requires_python(fenv: FakeEnv) -> None:
    """sglang 0.5.22 and 0.5.23 need Python >= 3.11: a Python 3.10 server over torch 2.14.1 is not offered them."""
    fenv.torch("2.14.1+cu130", "13.0")
    fenv.dist("sglang", "0.5.21", {"sglang/__init__.py": ""}, metadata=_metadata("0.5.21"))
    facts = gather_facts(fenv)
    py310 = vary(facts, target=dataclasses.replace(facts.target, version=(3, 10, 14)))
    texts = [r.text for r in recipes.alternatives(py310, "sglang", "torch==2.13.0", [])]
    assert not any("sglang==0.5.2" in t for t in texts) and any("No sglang release" in t for t in texts)
    texts = [r.text for r in recipes.alternatives(facts, "sglang", "torch==2.13.0", [])]
    assert any("install sglang==0.5.23" in t for t in texts)


def test_newer_releases_than_the_catalog_are_said(fenv: FakeEnv) -> None:
    fenv.torch("2.14.1+cu130", "13.0")
    fenv.fa4()
    fenv.dist("flash-attn-4", "4.0.0b99", {})
    for info in fenv.site.glob("flash_attn_4-4.0.0b36.dist-info"):
        shutil.rmtree(info)
    _, _, findings = _check(fenv)
    (finding,) = [f for f in findings if f.id == "package.newer_than_catalog"]
    assert finding.severity is Severity.INFO and releases.GENERATED_ON in finding.title
    assert "flash-attn-4 4.0.0b99" in finding.detail and finding.remedies
