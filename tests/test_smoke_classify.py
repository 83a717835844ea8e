"""classify() against the real failure texts collected in shared/reference/fa-packages.md section 5."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.smoke.classify import CAUSES, classify

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
    doc = p.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    with pytest.raises(TypeError):
        p.evidence["x"] = 1  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(
    st.text(max_size=200),
    st.lists(st.text(max_size=80), max_size=3),
    st.from_regex(r"_Z[0-9A-Za-z_]{0,40}", fullmatch=True),
)
def test_any_text_gives_a_known_cause(message: str, chain: list[str], symbol: str) -> None:
    assert classify("Error", message, chain).cause in CAUSES
    p = classify("ImportError", f"x.so: undefined symbol: {symbol}", chain)
    assert p.cause == "torch_abi" and p.summary
