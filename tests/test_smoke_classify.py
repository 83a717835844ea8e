"""classify() against the real failure texts collected in shared/reference/fa-packages.md section 5."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.knowledge.base import CAUSES
from fa_doctor.knowledge.classify import classify

SO = "/usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"


@pytest.mark.parametrize(
    ("symbol", "abi"),
    [
        ("_ZN3c104cuda9SetDeviceEi", "torch_version"),  # #931, #919
        ("_ZNK3c106SymInt6sym_neERKS0_", "torch_version"),  # #2361: 2.8.3 torch-2.8 wheel on torch 2.9
        ("_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE", "torch_version"),
        ("_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", "cxx11"),  # #940
        ("_ZN3c105ErrorC2ENS_14SourceLocationESs", "cxx11"),  # publish.yml comment: old-ABI std::string
        ("_ZN5torch3jit17parseSchemaOrNameERKSsb", "cxx11"),  # sglang#5247
        ("_ZN2at13ClassSsHolder4initEv", "torch_version"),  # "Ss" inside a name is not an ABI tag
        ("_Z12run_mha_fwd_RN5flash16Flash_fwd_paramsEP11CUstream_st", "unknown"),  # vllm#16995 partial build
    ],
)
def test_undefined_symbol_is_torch_abi(symbol: str, abi: str) -> None:
    p = classify("ImportError", f"{SO}: undefined symbol: {symbol}", [])
    assert p.cause == "torch_abi"
    assert p.evidence["symbol"] == symbol
    assert p.evidence["abi"] == abi
    assert p.evidence["library"] == SO
    assert p.message == f"ImportError: {SO}: undefined symbol: {symbol}"
    if abi == "cxx11":
        assert p.evidence["extension_cxx11abi"] is ("__cxx11" in symbol)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt not installed")
def test_symbol_is_demangled_with_cxxfilt() -> None:
    p = classify("ImportError", f"{SO}: undefined symbol: _ZNK3c106SymInt6sym_neERKS0_", [])
    assert p.evidence["demangled"] == "c10::SymInt::sym_ne(c10::SymInt const&) const"


def test_sgl_kernel_common_ops_wrapper_with_symbol_in_message() -> None:
    msg = (
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!\n"
        "Attempted locations:\n  - .../sgl_kernel/sm90/common_ops.abi3.so\n"
        "Error: .../common_ops.abi3.so: undefined symbol: _ZNK3c106SymInt6sym_neERKS0_"
    )
    assert classify("ImportError", msg, []).cause == "torch_abi"


def test_glibc_version_not_found() -> None:
    msg = f"/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by {SO})"
    p = classify("ImportError", msg, [])
    assert p.cause == "glibc"
    assert p.evidence["requires"] == "GLIBC_2.32" and p.evidence["version"] == "2.32"
    assert p.evidence["library"] == "/lib/x86_64-linux-gnu/libc.so.6"
    assert p.evidence["required_by"] == SO
    assert "glibc 2.32" in p.summary


def test_glibcxx_version_not_found() -> None:
    msg = f"/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by {SO})"
    p = classify("ImportError", msg, [])
    assert p.cause == "glibc" and p.evidence["kind"] == "glibcxx" and p.evidence["version"] == "3.4.30"


@pytest.mark.parametrize(
    ("lib", "major"),
    [("libcudart.so.12", 12), ("libcublas.so.13", 13), ("libnvrtc.so.12", 12), ("libcufft.so.11", None)],
)
def test_missing_cuda_library(lib: str, major: int | None) -> None:
    p = classify("ImportError", f"{lib}: cannot open shared object file: No such file or directory", [])
    assert p.cause == "cuda_runtime" and p.evidence["library"] == lib
    assert p.evidence.get("cuda_major") == major


def test_missing_driver_library() -> None:
    p = classify("OSError", "libcuda.so.1: cannot open shared object file: No such file or directory", [])
    assert p.cause == "cuda_runtime" and "driver" in p.summary


@pytest.mark.parametrize(
    ("exc", "message", "module"),
    [
        ("ModuleNotFoundError", "No module named 'cutlass'", "cutlass"),  # --target install, #2205
        ("ModuleNotFoundError", "No module named 'cutlass.cute'", "cutlass.cute"),  # libs-core missing
        ("ModuleNotFoundError", "No module named 'quack'", "quack"),
        ("ModuleNotFoundError", "No module named 'tvm_ffi'", "tvm_ffi"),
        ("ModuleNotFoundError", "No module named 'cuda.bindings'", "cuda.bindings"),
        ("ModuleNotFoundError", "No such module cutlass.utils.ampere_utils", "cutlass.utils.ampere_utils"),  # #2234
    ],
)
def test_cute_dsl_missing(exc: str, message: str, module: str) -> None:
    p = classify(exc, message, [])
    assert p.cause == "cute_dsl_missing" and p.evidence["module"] == module


@pytest.mark.parametrize(
    ("exc", "message", "cause"),
    [
        ("RuntimeError", "CUDA error: no kernel image is available for execution on the device", "no_kernel_image"),
        ("RuntimeError", "FlashAttention only supports Ampere GPUs or newer.", "gpu_too_old"),
        ("AssertionError", "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x", "gpu_too_old"),
        (
            "ValueError",
            "Cannot use FA version 2 is not supported due to FA2 is only supported on devices with compute "
            "capability >= 8",
            "gpu_too_old",
        ),
        ("RuntimeError", "CUDA driver version is insufficient for CUDA runtime version", "driver_too_old"),
        ("RuntimeError", "cudaErrorInsufficientDriver (error code 35)", "driver_too_old"),
        ("RuntimeError", "The NVIDIA driver on your system is too old (found version 11040).", "driver_too_old"),
        ("AssertionError", "Torch not compiled with CUDA enabled", "no_cuda"),
        ("RuntimeError", "Found no NVIDIA driver on your system.", "no_cuda"),
        ("RuntimeError", "FlashAttention forward only supports head dimension at most 256", "unknown"),
    ],
)
def test_call_time_errors(exc: str, message: str, cause: str) -> None:
    assert classify(exc, message, []).cause == cause


def test_module_missing_names_the_module() -> None:
    p = classify("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'", [])
    assert p.cause == "module_missing" and p.evidence["module"] == "flash_attn_2_cuda"
    p = classify("ImportError", "cannot import name '_vllm_fa3_C' from 'vllm.vllm_flash_attn' (unknown location)", [])
    assert p.cause == "module_missing" and p.evidence == {**p.evidence, "module": "vllm.vllm_flash_attn"}
    assert p.evidence["name"] == "_vllm_fa3_C"


SGL = "Can not import FA3 in sgl_kernel. Please check your installation."


def test_sgl_kernel_wrapper_alone() -> None:
    p = classify("ImportError", SGL, ["OSError: something nobody has seen before"])
    assert p.cause == "sgl_kernel_fa3"
    assert p.chain == ("OSError: something nobody has seen before",)


def test_sgl_kernel_wrapper_defers_to_the_real_cause_in_the_chain() -> None:
    chain = ["ImportError: .../sgl_kernel/flash_ops.abi3.so: undefined symbol: _ZNK3c106SymInt6sym_neERKS0_"]
    p = classify("ImportError", SGL, chain)
    assert p.cause == "torch_abi" and p.message == f"ImportError: {SGL}"
    chain = ["ImportError: libcudart.so.13: cannot open shared object file: No such file or directory"]
    assert classify("ImportError", SGL, chain).cause == "cuda_runtime"


def test_unknown_and_serialisable() -> None:
    p = classify("KeyError", "'something'", ["ValueError: deeper"])
    assert p.cause == "unknown" and p.evidence["exception"] == "KeyError"
    assert p.to_dict() == {
        "cause": "unknown",
        "summary": "The FlashAttention module raised an error fa-doctor does not recognise; the exact text is below.",
        "message": "KeyError: 'something'",
        "chain": ["ValueError: deeper"],
        "evidence": {"exception": "KeyError"},
    }
    assert json.loads(json.dumps(p.to_dict())) == p.to_dict()
    with pytest.raises(TypeError):
        p.evidence["x"] = 1  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(
    st.text(max_size=200),
    st.lists(st.text(max_size=80), max_size=3),
    st.from_regex(r"_Z[0-9A-Za-z_]{0,40}", fullmatch=True),
)
def test_any_text_gives_a_known_cause(message: str, chain: list[str], symbol: str) -> None:
    p = classify("Error", message, chain)
    assert p.cause in CAUSES and p.message == f"Error: {message}" and p.chain == tuple(chain)
    assert p.evidence["exception"] == "Error" and p.summary.endswith(".")
    plain = classify("Error", message.replace(":", "").replace("'", "").lower(), [])
    if not any(w in plain.message.lower() for w in ("cuda", "module", "driver", "kernel", "fa3", "ampere", "compute")):
        assert plain.cause == "unknown"
    p = classify("ImportError", f"x.so: undefined symbol: {symbol}", chain)
    assert p.cause == "torch_abi" and p.summary


# What the user reads: every summary word for word, every evidence key the JSON promises.

ABI_SUMMARIES = {
    "cxx11": "The compiled extension was built with the other C++ ABI (cxx11abi TRUE/FALSE) than the installed torch.",
    "torch_version": "The compiled extension was built against a different torch version than the one installed.",
    "unknown": "The compiled extension needs a symbol no loaded library provides: a partial or mismatched build.",
}


@pytest.mark.parametrize(
    ("symbol", "abi"),
    [
        ("_ZN3c104cuda9SetDeviceEi", "torch_version"),
        ("_ZN5torch3jit17parseSchemaOrNameERKSsb", "cxx11"),
        ("_Z12run_mha_fwd_RN5flash16Flash_fwd_paramsEP11CUstream_st", "unknown"),
    ],
)
def test_torch_abi_summary_and_evidence(symbol: str, abi: str) -> None:
    p = classify("ImportError", f"{SO}: undefined symbol: {symbol}", [])
    assert p.summary == ABI_SUMMARIES[abi]
    expected = {"exception": "ImportError", "symbol": symbol, "abi": abi, "library": SO}
    if abi == "cxx11":
        expected["extension_cxx11abi"] = False
    assert {k: v for k, v in p.evidence.items() if k != "demangled"} == expected


def test_symbol_without_library() -> None:
    """A CUDA runtime symbol is not a torch ABI problem (issue 10: check and explain share one table)."""
    p = classify("ImportError", "undefined symbol: cudaLaunchKernelExC", [])
    assert p.cause == "cuda_runtime" and dict(p.evidence) == {
        "exception": "ImportError",
        "symbol": "cudaLaunchKernelExC",
    }
    q = classify("ImportError", "/x/flash_ops.so: undefined symbol: cuGreenCtxDestroy", [])
    assert q.cause == "driver_too_old"  # a driver API, not torch


def test_cxx11_extension_flag() -> None:
    sym = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    assert classify("ImportError", f"undefined symbol: {sym}", []).evidence["extension_cxx11abi"] is True


@pytest.mark.parametrize(
    ("symbol", "abi"),
    [
        ("_ZN2at6native3addEv", "torch_version"),
        ("_ZNK6caffe23foo3barEv", "torch_version"),
        ("_ZN3c10SsEv", "cxx11"),  # Ss outside any name: old-ABI std::string
        ("_ZN4SsSs1fEv", "unknown"),  # Ss only inside the 4-character name "SsSs"
        ("_ZN3foo10c10Holder1fEv", "unknown"),  # c10 inside a longer name is not the c10 namespace
        ("_ZN3fooC2ESs", "cxx11"),  # C2 (constructor) digits are not a name length
        ("_ZN3fooD1ESs", "cxx11"),
        ("_ZNS0_3fooESs", "cxx11"),  # S0_ substitution
        ("_ZN3fooIT0_E1fESs", "cxx11"),
        ("_ZN3foo1fEDv4_fSs", "cxx11"),  # Dv4_ vector length
        ("_ZN12SsSsSsSsSsSs1fEv", "unknown"),
        ("_ZN1X2SsEv", "unknown"),  # the digit after a one-letter name "X" is the next name's length
    ],
)
def test_abi_hint_reads_mangled_names(symbol: str, abi: str) -> None:
    assert classify("ImportError", f"undefined symbol: {symbol}", []).evidence["abi"] == abi


def test_demangle_needs_a_mangled_name() -> None:
    from fa_doctor.knowledge.extract import demangle

    assert demangle("cudaLaunchKernelExC") is None
    assert "demangled" not in classify("ImportError", "undefined symbol: cudaLaunchKernelExC", []).evidence
    if shutil.which("c++filt"):
        assert demangle("_ZN3c104cuda9SetDeviceEi") == "c10::cuda::SetDevice(int)"
        assert demangle("_Znot_a_real_mangling") is None


def test_glibc_summary_and_evidence() -> None:
    msg = f"/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by {SO})"
    p = classify("ImportError", msg, [])
    assert p.summary == "The compiled extension needs glibc 2.32 or newer, which this system does not have."
    assert dict(p.evidence) == {
        "exception": "ImportError",
        "requires": "GLIBC_2.32",
        "kind": "glibc",
        "version": "2.32",
        "library": "/lib/x86_64-linux-gnu/libc.so.6",
        "required_by": SO,
    }


def test_glibcxx_summary_names_libstdcxx() -> None:
    msg = "/usr/lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found"
    p = classify("ImportError", msg, [])
    assert p.summary == "The compiled extension needs libstdc++ 3.4.30 or newer, which this system does not have."
    assert dict(p.evidence) == {
        "exception": "ImportError",
        "requires": "GLIBCXX_3.4.30",
        "kind": "glibcxx",
        "version": "3.4.30",
        "library": "/usr/lib/libstdc++.so.6",
    }
    p = classify("ImportError", "version 'CXXABI_1.3.13' not found", [])
    assert p.evidence["kind"] == "cxxabi" and "libstdc++ 1.3.13" in p.summary and "library" not in p.evidence


def test_cuda_runtime_summaries() -> None:
    p = classify("ImportError", "libcudart.so.12: cannot open shared object file: No such file or directory", [])
    assert p.summary == (
        "The build needs the CUDA 12 runtime (libcudart.so.12), which is not installed where it can be found."
    )
    assert dict(p.evidence) == {"exception": "ImportError", "library": "libcudart.so.12", "cuda_major": 12}
    p = classify("ImportError", "libcufft.so.11: cannot open shared object file", [])
    assert p.summary == "The build needs the CUDA library libcufft.so.11, which is not installed where it can be found."
    assert dict(p.evidence) == {"exception": "ImportError", "library": "libcufft.so.11"}
    p = classify("ImportError", "libcudart.so: cannot open shared object file", [])
    assert "cuda_major" not in p.evidence and "CUDA library libcudart.so," in p.summary
    p = classify("OSError", "libcuda.so.1: cannot open shared object file", [])
    assert p.summary == "The NVIDIA driver library libcuda.so.1 cannot be found: no driver is installed."
    assert dict(p.evidence) == {"exception": "OSError", "library": "libcuda.so.1"}


def test_cute_dsl_summary() -> None:
    p = classify("ModuleNotFoundError", "No module named 'cutlass.cute'", [])
    assert p.summary == "FA4's CuTe DSL runtime is missing or incomplete: Python cannot import 'cutlass.cute'."
    assert dict(p.evidence) == {"exception": "ModuleNotFoundError", "module": "cutlass.cute"}
    # A DSL module later in the text still counts; a non-DSL module alone does not.
    p = classify("ModuleNotFoundError", "No module named 'einops'; No module named 'quack'", [])
    assert p.cause == "cute_dsl_missing" and p.evidence["module"] == "quack"


@pytest.mark.parametrize(
    ("message", "cause", "summary", "matched"),
    [
        (
            "CUDA driver version is insufficient for CUDA runtime version",
            "driver_too_old",
            "The NVIDIA driver is too old for the CUDA version this build uses.",
            "CUDA driver version is insufficient",
        ),
        ("CUDAERRORINSUFFICIENTDRIVER", "driver_too_old", None, "cudaErrorInsufficientDriver"),
        (
            "no kernel image is available for execution on the device",
            "no_kernel_image",
            "The build contains no GPU code for this GPU's architecture.",
            "no kernel image is available",
        ),
        (
            "FlashAttention only supports Ampere GPUs or newer.",
            "gpu_too_old",
            "This GPU is older than FlashAttention supports (it needs Ampere, compute capability 8.0, or newer).",
            "only supports Ampere GPUs or newer",
        ),
        (
            "flash_attn at sgl-kernel is only supported on sm90 and above",
            "gpu_too_old",
            None,
            "only supported on sm90 and above",
        ),
        (
            "Torch not compiled with CUDA enabled",
            "no_cuda",
            "torch in the target interpreter cannot use a GPU (CPU-only build, or no driver).",
            "Torch not compiled with CUDA enabled",
        ),
        ("torch.cuda.is_available() is False", "no_cuda", None, "torch.cuda.is_available() is False"),
        (
            "Can not import FA3 in sgl_kernel. Please check your installation.",
            "sgl_kernel_fa3",
            "sgl_kernel could not load its FA3 extension (flash_ops); the reason is hidden behind a generic message.",
            "Can not import FA3 in sgl_kernel",
        ),
    ],
)
def test_contains_rules(message: str, cause: str, summary: str | None, matched: str) -> None:
    p = classify("RuntimeError", message, [])
    assert p.cause == cause
    if summary is not None:
        assert p.summary == summary
    assert dict(p.evidence) == {"exception": "RuntimeError", "matched": matched}


def test_module_missing_summaries() -> None:
    p = classify("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'", [])
    assert p.summary == "Python cannot find the module 'flash_attn_2_cuda' in the target interpreter."
    assert dict(p.evidence) == {"exception": "ModuleNotFoundError", "module": "flash_attn_2_cuda"}
    p = classify("ImportError", "cannot import name 'flash_attn_func' from 'flash_attn' (x.py)", [])
    assert p.summary == "'flash_attn_func' cannot be imported from 'flash_attn': the install is incomplete."
    assert dict(p.evidence) == {"exception": "ImportError", "module": "flash_attn", "name": "flash_attn_func"}


def test_rules_run_in_order_over_the_chain() -> None:
    # More specific first: an undefined symbol beats a missing module in the same chain.
    chain = ["ImportError: x.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"]
    assert classify("ModuleNotFoundError", "No module named 'flash_attn_2_cuda'", chain).cause == "torch_abi"
    # A driver that is too old beats a missing kernel image; a missing kernel image beats an old GPU.
    text = "no kernel image is available; CUDA driver version is insufficient; only supports Ampere GPUs or newer"
    assert classify("RuntimeError", text, []).cause == "driver_too_old"
    assert classify("RuntimeError", "only supports Ampere GPUs or newer; no kernel image is available", []).cause == (
        "no_kernel_image"
    )
    assert classify("RuntimeError", "Found no NVIDIA driver on your system; No module named 'x'", []).cause == "no_cuda"
    assert classify("", "No module named 'x'", []).message == "No module named 'x'"


def test_library_is_read_from_a_chain_entry() -> None:
    lib = "/opt/sgl_kernel/flash_ops.abi3.so"
    p = classify("ImportError", SGL, [f"{lib}: undefined symbol: _ZN3c104cuda9SetDeviceEi"])
    assert p.cause == "torch_abi" and p.evidence["library"] == lib


def fake_cxxfilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str) -> None:
    tool = tmp_path / "c++filt"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_demangle_only_asks_cxxfilt_about_mangled_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fa_doctor.knowledge.extract import demangle

    fake_cxxfilt(monkeypatch, tmp_path, "echo 'demangled name'")
    assert demangle("_ZN1a1bEv") == "demangled name"
    assert demangle("cudaLaunchKernelExC") is None
    fake_cxxfilt(monkeypatch, tmp_path, "echo 'demangled name'; exit 1")
    assert demangle("_ZN1a1bEv") is None
    fake_cxxfilt(monkeypatch, tmp_path, ":")
    assert demangle("_ZN1a1bEv") is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert demangle("_ZN1a1bEv") is None


def test_demangle_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fa_doctor.knowledge.extract import demangle

    fake_cxxfilt(monkeypatch, tmp_path, "/bin/sleep 2.6; echo late")
    assert demangle("_ZN1a1bEv") is None
