"""`check` and `explain` classify with one table (tests/test_smoke_classify.py pins the classifier's answers)."""

from __future__ import annotations

from fa_doctor.knowledge import explain, load
from fa_doctor.knowledge.classify import classify

SAMPLES = [
    ("ImportError", "/x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"),
    ("ImportError", "undefined symbol: cudaLaunchKernelExC"),
    ("ModuleNotFoundError", "No module named 'cutlass.cute'"),
    ("RuntimeError", "CUDA error: no kernel image is available for execution on the device"),
    ("ImportError", "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /x/y.so)"),
    ("ImportError", "Can not import FA3 in sgl_kernel. Please check your installation."),
]


def test_explain_agrees_with_the_smoke_cause() -> None:
    """The text a smoke child reports, pasted into explain, names the same failure mode."""
    for exc, msg in SAMPLES:
        cause = classify(exc, msg, []).cause
        top = explain(f"{exc}: {msg}")[0]
        entry = next(e for e in load() if e.id == top.id)
        assert entry.smoke_cause == cause, (msg, top.id, entry.smoke_cause, cause)


def test_runtime_symbols_are_cuda_runtime_not_torch_abi() -> None:
    p = classify("ImportError", "undefined symbol: cudaLaunchKernelExC", [])
    assert p.cause == "cuda_runtime" and dict(p.evidence) == {
        "exception": "ImportError",
        "symbol": "cudaLaunchKernelExC",
    }
