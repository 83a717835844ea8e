"""fa_doctor.knowledge.classify is a drop-in for fa_doctor.smoke.classify.classify: the pinned tests of the
smoke classifier (tests/test_smoke_classify.py) run here again against the knowledge base's answer."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_smoke_classify as pinned

from fa_doctor.knowledge.classify import classify


@pytest.fixture(autouse=True)
def knowledge_classify(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(pinned, "classify", classify)
    yield


# Deliberate differences from today's smoke classifier (issue 10): a CUDA runtime or driver symbol is not a
# torch ABI problem.
DIFFERENT = {"test_symbol_without_library"}

# Every other pinned test, collected again under this module so the fixture above swaps the classifier in.
for _name in dir(pinned):
    if _name.startswith("test_") and _name not in DIFFERENT:
        globals()[f"{_name}_from_knowledge"] = getattr(pinned, _name)


def test_runtime_symbols_are_cuda_runtime_not_torch_abi() -> None:
    p = classify("ImportError", "undefined symbol: cudaLaunchKernelExC", [])
    assert p.cause == "cuda_runtime" and dict(p.evidence) == {
        "exception": "ImportError",
        "symbol": "cudaLaunchKernelExC",
    }


def test_the_swap_really_happened() -> None:
    assert pinned.classify is classify


def test_driver_symbols_are_driver_too_old() -> None:
    p = classify("ImportError", "x.so: undefined symbol: cuGreenCtxDestroy", [])
    assert p.cause == "driver_too_old" and p.evidence["symbol"] == "cuGreenCtxDestroy"
    assert p.summary == "The NVIDIA driver is too old for the CUDA version this build uses."
