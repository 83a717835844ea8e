"""The real smoke child, real torch (CPU build, device="cpu"), fake FA modules on the child's search path.

The scenarios (tests/smoke_fakes/scenarios.py) all start at once in a module fixture; the tests read their
results. The fakes are described in tests/smoke_fakes/README.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from smoke_fakes.scenarios import CXX_TORCH_SYMBOL, FA2, FAKES, HANG_TIMEOUT, OLD_ABI_SYMBOL, PYTHON, Run, run_all

from fa_doctor.knowledge.classify import ImportProblem
from fa_doctor.model.finding import Remedy, Severity
from fa_doctor.render.shell import finding_dict
from fa_doctor.smoke import SmokeResult, SmokeTarget
from fa_doctor.smoke.findings import smoke_findings
from fa_doctor.smoke.runner import run_smoke


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fake extensions")
    return run_all(tmp_path_factory.mktemp("smoke"))


def no_reinstall(key: str, problem: ImportProblem | None) -> tuple[Remedy, ...]:
    return (Remedy(f"reinstall {key}", (f"pip install {key}",)),)


def only_finding(result: SmokeResult) -> dict[str, Any]:
    findings = smoke_findings(result, reinstall=no_reinstall)
    assert len(findings) == 1
    doc = finding_dict(findings[0])
    json.dumps(doc)  # evidence must be JSON-serialisable
    if findings[0].severity is not Severity.OK:
        assert findings[0].remedies
        if doc["id"] != "smoke.timeout":
            assert doc["remedies"][-1]["text"] == f"reinstall {result.key}"
    return doc


def test_every_scenario_reports_within_its_timeout(runs: dict[str, Any]) -> None:
    for name, run in runs.items():
        if isinstance(run, Run):
            # A child killed on timeout gets up to a few seconds to be reaped and have its pipes drained.
            assert run.seconds < run.timeout + 5, (name, run.seconds)


def test_correct_implementation_passes_with_phases_and_live_progress(runs: dict[str, Any]) -> None:
    run: Run = runs["ok"]
    r = run.result
    assert r.status == "passed", r.stderr_tail
    names = [c.name for c in r.cases]
    assert names == [
        "varlen_bf16_d128_causal",
        "varlen_bf16_d128_noncausal",
        "varlen_bf16_d64_causal",
        "varlen_bf16_d64_noncausal",
        "varlen_fp16_d128_causal",
        "kvcache_bf16_d128_decode",
    ]
    for case in r.cases:
        assert case.passed and case.error is None
        assert case.max_abs_err is not None and case.max_abs_err <= case.tolerance
        assert case.seconds is not None
    assert {"import", "import_torch", "first_call", "check", "total"} <= set(r.phases)
    assert r.phases["total"] >= r.phases["import"] >= r.phases["import_torch"]
    assert run.progress == ["importing flash_attn", "running first FA kernel call", "checking against fp32 reference"]
    assert r.module_file == str(FAKES / "fa2" / "flash_attn" / "__init__.py")
    assert r.flash_attn_origin == r.module_file
    assert r.environment["torch"].startswith("2.") and r.returncode == 0 and r.signal is None
    assert "CUDA_VISIBLE_DEVICES=<unset>" in r.stdout_tail  # the env is inherited untouched
    assert r.visible_devices is None and r.cache_dir is None and r.device_name is None
    doc = only_finding(r)
    assert doc["id"] == "smoke.passed" and "varlen_fp16_d128_causal: max abs err" in doc["detail"]
    assert "phases: import" in doc["detail"]


def test_visible_devices_reaches_the_child(runs: dict[str, Any]) -> None:
    r = runs["pinned"].result
    assert r.status == "passed"
    assert "CUDA_VISIBLE_DEVICES=3" in r.stdout_tail
    assert r.visible_devices == "3"


@pytest.mark.parametrize("name", ["wrong", "nan"])
def test_wrong_numbers_are_a_mismatch(runs: dict[str, Any], name: str) -> None:
    r = runs[name].result
    assert r.status == "mismatch" and len(r.cases) == 6
    assert not any(c.passed for c in r.cases)
    if name == "wrong":
        assert all(c.max_abs_err is not None and 0.4 < c.max_abs_err < 0.6 for c in r.cases)
    else:
        assert all(c.max_abs_err is None and "non-finite" in (c.error or "") for c in r.cases)
    doc = only_finding(r)
    assert doc["id"] == "smoke.mismatch"
    assert len(doc["evidence"]["failing_cases"]) == 6


def test_raising_call_is_failed_and_classified(runs: dict[str, Any]) -> None:
    r = runs["raises"].result
    assert r.status == "failed"
    assert r.error is not None and r.error.cause == "gpu_too_old"
    assert r.error.message == "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    assert r.error.evidence["stage"] == "call" and "fake_attention.py" in str(r.error.evidence["traceback"])
    assert all(c.error == r.error.message for c in r.cases)  # every case is still tried and reported
    doc = only_finding(r)
    assert doc["id"] == "smoke.failed" and doc["evidence"]["cause"] == "gpu_too_old"


def test_segfault_is_crashed_with_signal_and_python_traceback(runs: dict[str, Any]) -> None:
    r = runs["segfault"].result
    assert r.status == "crashed"
    assert r.signal == "SIGSEGV" and r.returncode == -11
    assert r.last_phase == "first_call"
    assert "Fatal Python error" in r.stderr_tail and "fake_attention.py" in r.stderr_tail  # faulthandler
    assert "import" in r.phases and "first_call" not in r.phases
    doc = only_finding(r)
    assert doc["id"] == "smoke.crashed" and "SIGSEGV" in doc["title"] and "first call" in doc["title"]


def test_hang_is_killed_at_the_timeout(runs: dict[str, Any]) -> None:
    run: Run = runs["hang"]
    r = run.result
    assert r.status == "timeout"
    assert HANG_TIMEOUT <= run.seconds < HANG_TIMEOUT + 5
    assert r.timeout == HANG_TIMEOUT and r.signal is None
    assert r.last_phase == "first_call" and "import" in r.phases and "first_call" not in r.phases
    assert run.progress == ["importing flash_attn", "running first FA kernel call"]
    doc = only_finding(r)
    assert doc["id"] == "smoke.timeout" and "--timeout" in json.dumps(doc["remedies"])


def test_warning_on_first_call_is_recorded_not_a_failure(runs: dict[str, Any]) -> None:
    r = runs["warn"].result
    assert r.status == "passed"
    assert any("cannot be converted to a JitArgument" in w for w in r.warnings)
    # Once per place (the varlen and the kvcache entry points), though every call warns; deprecation notes are
    # left out, as Python hides them by default.
    assert len(r.warnings) == 2 and not any("Deprecation" in w for w in r.warnings)
    assert "warning(s) on first use" in only_finding(r)["detail"]


def test_floods_of_output_keep_only_bounded_tails(runs: dict[str, Any]) -> None:
    r = runs["noisy"].result
    assert r.status == "passed"
    assert 0 < len(r.stdout_tail) <= 4096 and 0 < len(r.stderr_tail) <= 4096
    assert r.stdout_tail.rstrip().endswith("noise") and r.stderr_tail.rstrip().endswith("noise")


def test_undefined_torch_symbol_is_torch_abi(runs: dict[str, Any]) -> None:
    r = runs["abi"].result
    assert r.status == "import_failed"
    assert r.error is not None and r.error.cause == "torch_abi"
    assert r.error.evidence["symbol"] == CXX_TORCH_SYMBOL
    assert r.error.evidence["abi"] == "torch_version"
    if shutil.which("c++filt"):
        assert r.error.evidence["demangled"] == "c10::cuda::SetDevice(int)"
    assert "flash_attn_2_cuda" in str(r.error.evidence["library"])
    assert "undefined symbol" in r.error.message and r.error.evidence["stage"] == "module"
    doc = only_finding(r)
    assert doc["id"] == "import.failed" and doc["evidence"]["cause"] == "torch_abi"
    assert CXX_TORCH_SYMBOL in doc["evidence"]["error"]


def test_sgl_kernel_wrapper_keeps_the_real_cause(runs: dict[str, Any]) -> None:
    r = runs["sgl"].result
    assert r.status == "import_failed" and r.error is not None
    assert r.error.message == "ImportError: Can not import FA3 in sgl_kernel. Please check your installation."
    assert any(OLD_ABI_SYMBOL in c for c in r.error.chain)
    assert r.error.cause == "torch_abi" and r.error.evidence["abi"] == "cxx11"
    assert only_finding(r)["id"] == "import.failed"


def test_missing_cutlass_and_unusable_cache_dir(runs: dict[str, Any]) -> None:
    r = runs["nocutlass"].result
    assert r.status == "import_failed" and r.error is not None
    assert r.error.cause == "cute_dsl_missing" and r.error.evidence["module"] == "cutlass"
    assert r.cache_dir is None and any("compile cache disabled" in w for w in r.warnings)
    doc = only_finding(r)
    assert "Install flash-attn-4 and its CuTe DSL runtime" in doc["remedies"][0]["text"]


def test_broken_torch_is_an_import_failure_of_torch(runs: dict[str, Any]) -> None:
    r = runs["no_torch"].result
    assert r.status == "import_failed" and r.error is not None
    assert r.error.evidence["stage"] == "torch" and r.error.cause == "module_missing"
    assert "import" not in r.phases


def test_fa4_cache_cold_then_warm_then_disabled(runs: dict[str, Any]) -> None:
    run: Run = runs["cute"]
    cold, warm, off = run.result
    cache = runs["tmp"] / "cache" / "cute-dsl"
    assert cold.status == warm.status == off.status == "passed"
    assert len(cold.cases) == 5  # FA4 has no flash_attn_with_kvcache
    # One folder per identity (FA4/CuTe variables, versions, GPU): see test_hardening_smoke for what changes it.
    assert cold.cache_dir == warm.cache_dir and off.cache_dir is None
    assert cold.cache_dir is not None and Path(cold.cache_dir).parent == cache
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert len(list((Path(cold.cache_dir) / "flash-attn").iterdir())) == 5
    assert json.loads((Path(cold.cache_dir) / "identity.json").read_text())["module"] == "flash_attn.cute"
    assert not (cache.parent / "unused").exists()
    # The fake compiles (sleeps 0.3 s and warns) only on a cache miss: a lower bound for the cold run; the warm
    # run's proof is that nothing warned (a time bound on it failed once under two suites at once).
    assert cold.phases["first_call"] >= 0.3
    assert any("JitArgument" in w for w in cold.warnings) and not warm.warnings
    assert cold.flash_attn_origin is not None and cold.flash_attn_origin.startswith("__path__=")
    assert run.progress[:3] == [
        "importing flash_attn.cute",
        "compiling FA4 kernels (first run)",
        "checking against fp32 reference",
    ]
    assert run.progress[4] == "running first FA kernel call"  # warm cache expected on the second run
    assert run.progress[7] == "compiling FA4 kernels (first run)"  # cache disabled


def test_interpreter_that_cannot_start_is_crashed() -> None:
    r = run_smoke("/nonexistent/python3", FA2, device="cpu", timeout=5)
    assert r.status == "crashed" and r.returncode is None and "cannot start" in r.stderr_tail
    assert "could not be started" in only_finding(r)["title"]


def test_unknown_api_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="unknown FA api"):
        run_smoke(PYTHON, SmokeTarget("x", "flash_attn", "nope"), device="cpu")


def test_cuda_requested_but_torch_sees_no_gpu(runs: dict[str, Any]) -> None:
    r = runs["no_gpu"].result  # this torch is a CPU build
    assert r.status == "failed" and r.error is not None
    assert r.error.cause == "no_cuda" and r.error.evidence["stage"] == "device"
    assert r.cases == () and "import" in r.phases
    doc = only_finding(r)
    assert doc["id"] == "smoke.failed" and "no kernel could run" in doc["title"]


def test_benchmark_dry_run_measures_everything(runs: dict[str, Any]) -> None:
    done = runs["benchmark"].result
    # Exit 1 (a target missed) is possible on a loaded CI machine; 2 would mean a run failed.
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((runs["tmp"] / "bench.json").read_text())
    assert set(report["best"]) == {"import_floor", "floor", "cold", "warm"}
    assert report["smoke"]["cold"]["status"] == report["smoke"]["warm"]["status"] == "passed"
    # The warm run used the cold run's cache: the fake compiles (sleeps, warns) only on a miss, so the proof is that
    # only the cold run warned. (Comparing their first_call times failed under two suites at once: 0.19 s vs 0.18 s.)
    cold, warm = report["smoke"]["cold"], report["smoke"]["warm"]
    assert any("JitArgument" in w for w in cold["warnings"]) and not warm["warnings"]
    assert set(report["targets"]) == {"cold_vs_floor", "warm_vs_import"} and "cold <= 1.25 x floor" in done.stdout
