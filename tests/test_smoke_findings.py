"""smoke_findings() and skipped_finding() on hand-made results: one test per finding id, remedies per cause."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fa_doctor.knowledge.classify import ImportProblem, classify
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.intents import ReinstallSame
from fa_doctor.render.shell import finding_dict, remedy_lines
from fa_doctor.smoke import CaseResult, SmokeResult
from fa_doctor.smoke.findings import skipped_finding, smoke_findings

PY = "/opt/venv/bin/python"
PHASES = {"import": 9.1, "import_torch": 5.0, "first_call": 3.9, "check": 12.0, "total": 25.4}
CALLS: list[tuple[str, ImportProblem | None]] = []


def reinstall(key: str, problem: ImportProblem | None) -> tuple[Remedy, ...]:
    CALLS.append((key, problem))
    return (Remedy(f"(2) Reinstall {key}", (f"{PY} -m pip install --force-reinstall {key}",)),)


def case(name: str = "varlen_bf16_d128_causal", err: float | None = 0.006, **kw: Any) -> CaseResult:
    fields: dict[str, Any] = {
        "name": name,
        "function": "flash_attn_varlen_func",
        "dtype": "bfloat16",
        "head_dim": 128,
        "causal": True,
        "max_abs_err": err,
        "tolerance": 0.03,
        "passed": err is not None and err <= 0.03,
        "seconds": 3.9,
        "error": None,
    }
    fields.update(kw)
    return CaseResult(**fields)


def result(status: str, **kw: Any) -> SmokeResult:
    fields: dict[str, Any] = {
        "key": "fa4",
        "module": "flash_attn.cute",
        "api": "cute",
        "status": status,
        "phases": PHASES,
        "python": PY,
        "timeout": 300.0,
        "device_name": "NVIDIA H200",
        "cache_dir": "/home/u/.cache/fa-doctor/cute-dsl",
        "environment": {"torch": "2.11.0+cu130", "torch_cuda": "13.0", "nvidia-cutlass-dsl": "4.8.1"},
    }
    fields.update(kw)
    return SmokeResult(**fields)


def one(r: SmokeResult) -> Finding:
    CALLS.clear()
    findings = smoke_findings(r, reinstall=reinstall)
    assert len(findings) == 1
    f = findings[0]
    doc = finding_dict(f)
    assert json.loads(json.dumps(doc)) == doc  # evidence is JSON
    assert doc["evidence"]["implementation"] == r.key
    if f.severity is not Severity.OK:
        assert f.remedies, f.id
    return f


def test_passed() -> None:
    r = result(
        "passed",
        cases=(case(), case("varlen_bf16_d128_noncausal", 0.002, causal=False)),
        warnings=("UserWarning: Argument aux_data ... cannot be converted to a JitArgument (x.py:1)",),
    )
    f = one(r)
    assert f.id == "smoke.passed" and f.severity is Severity.OK and not f.remedies
    assert "on NVIDIA H200" in f.title
    assert "varlen_bf16_d128_causal: max abs err 0.006 <= tolerance 0.03, 3.90 s" in f.detail
    assert "phases: import 9.10 s, first call 3.90 s, check 12.00 s, total 25.40 s" in f.detail
    assert "1 warning(s) on first use" in f.detail
    assert f.evidence["phases"]["first_call"] == 3.9


def test_mismatch() -> None:
    r = result("mismatch", cases=(case(), case("varlen_fp16_d128_causal", 0.51, dtype="float16", tolerance=0.005)))
    f = one(r)
    assert f.id == "smoke.mismatch" and f.severity is Severity.FAIL
    assert "1 of 2" in f.title
    assert "varlen_fp16_d128_causal: max abs err 0.51 > tolerance 0.005" in f.detail
    assert "varlen_bf16_d128_causal" not in f.detail
    assert f.evidence["failing_cases"] == ["varlen_fp16_d128_causal"]
    assert CALLS == [("fa4", None)] and f.remedies[-1].text == "(2) Reinstall fa4"


def test_failed_names_the_exact_error() -> None:
    msg = "CUDA error: no kernel image is available for execution on the device"
    problem = classify("RuntimeError", msg, [])
    r = result(
        "failed",
        key="fa2",
        module="flash_attn",
        api="fa2",
        error=problem,
        cases=(case(err=None, passed=False, error=f"RuntimeError: {msg}"),),
    )
    f = one(r)
    assert f.id == "smoke.failed" and f.severity is Severity.FAIL
    assert f"RuntimeError: {msg}" in f.title and f"RuntimeError: {msg}" in f.detail
    assert f.evidence["cause"] == "no_kernel_image" and f.evidence["error"] == f"RuntimeError: {msg}"
    assert "compute_cap" in remedy_lines(f.remedies[0])[0]
    assert [("fa2", problem)] == CALLS


@pytest.mark.parametrize(
    ("signal", "rc", "phase", "words"),
    [
        ("SIGSEGV", -11, "first_call", "killed by SIGSEGV during first call"),
        (None, 3, "import", "exited with code 3"),
        (None, None, None, "could not be started"),
    ],
)
def test_crashed(signal: str | None, rc: int | None, phase: str | None, words: str) -> None:
    tail = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n  File x.py"
    f = one(result("crashed", signal=signal, returncode=rc, last_phase=phase, stderr_tail=tail))
    assert f.id == "smoke.crashed" and f.severity is Severity.FAIL
    assert words in f.title and "Fatal Python error" in f.detail
    assert f.evidence["signal"] == signal and f.evidence["returncode"] == rc
    assert remedy_lines(f.remedies[0]) == (f"{PY} -X faulthandler -c 'import flash_attn.cute'",)
    assert CALLS == [("fa4", None)]


def test_timeout_hints_at_the_fa4_jit_and_the_option() -> None:
    f = one(result("timeout", timeout=60.0, last_phase="first_call", phases={"import": 9.0, "total": 60.1}))
    assert f.id == "smoke.timeout" and f.severity is Severity.FAIL
    assert "within 60 s" in f.title and "it was in first call" in f.detail
    assert "JIT-compiles" in f.detail
    assert remedy_lines(f.remedies[0]) == ("fa-doctor check --timeout 600",)
    assert "compile cache" in f.remedies[1].text
    f = one(result("timeout", key="fa2", api="fa2", timeout=400.0))
    assert remedy_lines(f.remedies[0]) == ("fa-doctor check --timeout 800",)
    assert remedy_lines(f.remedies[1]) == ("nvidia-smi",)


def import_failed(exc: str, message: str, chain: tuple[str, ...] = (), **kw: Any) -> Finding:
    problem = classify(exc, message, list(chain))
    return one(result("import_failed", error=problem, **kw))


def test_import_failed_torch_abi() -> None:
    so = "/x/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"
    f = import_failed(
        "ImportError", f"{so}: undefined symbol: _ZN3c104cuda9SetDeviceEi", key="fa2", module="flash_attn", api="fa2"
    )
    assert f.id == "import.failed" and f.severity is Severity.FAIL
    assert "`import flash_attn` fails" in f.title
    assert f.evidence["cause"] == "torch_abi"
    assert f.evidence["error"] == f"ImportError: {so}: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert f.evidence["details"]["symbol"] == "_ZN3c104cuda9SetDeviceEi"
    assert "torch 2.11.0+cu130" in f.remedies[0].text
    assert remedy_lines(f.remedies[0])[0].startswith(f"{PY} -c ")
    assert f.remedies[-1].text == "(2) Reinstall fa2" and CALLS[0][1] is not None


def test_import_failed_cxx11_abi() -> None:
    f = import_failed("ImportError", "x.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs")
    assert "cxx11abiTRUE or cxx11abiFALSE" in f.remedies[0].text


def test_import_failed_glibc() -> None:
    f = import_failed("ImportError", "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by x)")
    assert f.evidence["cause"] == "glibc" and "GLIBC_2.32" in f.remedies[0].text
    assert remedy_lines(f.remedies[0]) == ("ldd --version",)


def test_import_failed_cuda_runtime() -> None:
    f = import_failed("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory")
    assert f.evidence["details"]["cuda_major"] == 12 and "libcudart.so.12" in f.remedies[0].text


def test_import_failed_cutlass_pins_the_installed_dsl_version() -> None:
    f = import_failed("ModuleNotFoundError", "No module named 'cutlass'")
    assert f.evidence["cause"] == "cute_dsl_missing"
    intent = f.remedies[0].intent
    assert isinstance(intent, ReinstallSame) and intent.specs == ("nvidia-cutlass-dsl-libs-core==4.8.1",)
    assert "4.8.1 ships in nvidia-cutlass-dsl-libs-core" in intent.text
    cmds = [c for r in f.remedies for c in remedy_lines(r)]
    assert not any(c.endswith("pip install flash-attn-4") for c in cmds)  # a bare install would pull torch
    assert "--target" in f.remedies[1].text


def test_import_failed_cutlass_before_the_split_names_the_metapackage() -> None:
    """DSL 4.5.2 (what flash-attn-4 b16-b19 accept) has no libs-core: `cutlass` is in the metapackage's wheel,
    and a remedy naming nvidia-cutlass-dsl-libs-core==4.5.2 could never resolve (catalog: releases.VERSIONS)."""
    problem = classify("ModuleNotFoundError", "No module named 'cutlass'", [])
    env = {"torch": "2.9.1+cu128", "torch_cuda": "12.8", "nvidia-cutlass-dsl": "4.5.2"}
    (f,) = smoke_findings(result("import_failed", error=problem, environment=env), reinstall=reinstall)
    intent = f.remedies[0].intent
    assert isinstance(intent, ReinstallSame) and intent.specs == ("nvidia-cutlass-dsl==4.5.2",)


def test_import_failed_driver_and_sgl_and_unknown() -> None:
    f = import_failed("RuntimeError", "CUDA driver version is insufficient for CUDA runtime version")
    assert remedy_lines(f.remedies[0]) == ("nvidia-smi",)
    f = import_failed(
        "ImportError",
        "Can not import FA3 in sgl_kernel. Please check your installation.",
        ("OSError: odd",),
        key="fa3-sgl",
        module="sgl_kernel.flash_attn",
        api="sgl",
    )
    assert f.evidence["cause"] == "sgl_kernel_fa3" and f.evidence["chain"] == ["OSError: odd"]
    assert remedy_lines(f.remedies[0]) == (f"{PY} -c 'import sgl_kernel.flash_ops'",)
    assert "caused by: OSError: odd" in f.detail
    f = import_failed("KeyError", "'x'")
    assert remedy_lines(f.remedies[0]) == (f"{PY} -c 'import flash_attn.cute'",)


def test_import_failed_module_missing() -> None:
    f = import_failed("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'")
    assert """find_spec("flash_attn_2_cuda")""" in remedy_lines(f.remedies[0])[0]
    f = import_failed("ModuleNotFoundError", "No module named 'torch'")
    assert remedy_lines(f.remedies[0]) == () and "torch.missing" in f.remedies[0].text  # that finding names the torch


@pytest.mark.parametrize(("require_gpu", "severity"), [(False, Severity.INFO), (True, Severity.FAIL)])
def test_skipped(require_gpu: bool, severity: Severity) -> None:
    f = skipped_finding("no GPU", require_gpu=require_gpu)
    assert f.id == "smoke.skipped" and f.severity is severity and f.remedies
    assert "no GPU" in f.title
    assert json.loads(json.dumps(finding_dict(f)))["evidence"] == {"reason": "no GPU", "require_gpu": require_gpu}


def test_result_to_dict_is_json() -> None:
    r = result("failed", cases=(case(),), error=classify("RuntimeError", "boom", ["ValueError: inner"]))
    doc: dict[str, Any] = r.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["error"]["chain"] == ["ValueError: inner"] and doc["cases"][0]["max_abs_err"] == 0.006


def test_failed_before_any_call_when_the_child_sees_no_gpu() -> None:
    problem = classify("RuntimeError", "torch.cuda.is_available() is False (torch 2.11.0+cpu, CUDA None)", [])
    problem = ImportProblem(
        problem.cause, problem.summary, problem.message, (), {**problem.evidence, "stage": "device"}
    )
    f = one(result("failed", error=problem))
    assert f.id == "smoke.failed" and "no kernel could run" in f.title
    assert "torch.cuda.is_available()" in remedy_lines(f.remedies[0])[0]
