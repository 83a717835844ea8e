"""Kernel smoke test: run a tiny FlashAttention call in a child of the target interpreter (docs/smoke.md). This
module holds the result types `runner.run_smoke` produces; importing it imports neither torch nor FA."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fa_doctor.knowledge.classify import ImportProblem

APIS = ("fa2", "fa3", "sgl", "cute", "vllm")
HEADS, KV_HEADS = 4, 2
VARLEN_SEQLENS = (37, 64)
DECODE_SEQLENS, DECODE_CACHE_LEN = (19, 40), 64
# ~4x the error measured on an H200 (FA4 bf16 d128: 0.002-0.008); fp16 has 3 more mantissa bits (docs/smoke.md).
TOLERANCE = {"bfloat16": 0.03, "float16": 0.005}
# (dtype, head_dim, causal): bf16 d128 and d64, causal and not, then fp16 d128 causal.
_VARLEN = (*[("bfloat16", d, causal) for d in (128, 64) for causal in (True, False)], ("float16", 128, True))
_KVCACHE_APIS = frozenset({"fa2", "fa3", "sgl"})
_SHORT = {"bfloat16": "bf16", "float16": "fp16"}
_NOT_PLAIN = ("phases", "environment", "cases", "error", "loaded")  # converted by SmokeResult.to_dict, or left out


@dataclass(frozen=True, slots=True)
class SmokeTarget:
    key: str  # "fa2" | "fa3" | "fa3-sgl" | "fa4" | "fa4-sglang" | "vllm-fa"
    module: str  # what to import, e.g. "flash_attn.cute"
    api: str  # calling convention: one of APIS


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    function: str
    dtype: str
    head_dim: int
    causal: bool
    max_abs_err: float | None
    tolerance: float
    passed: bool
    seconds: float | None
    error: str | None  # "Type: message" when the call raised, or why the output could not be compared


@dataclass(frozen=True, slots=True)
class SmokeResult:
    key: str
    module: str
    api: str
    status: str  # "passed" | "mismatch" | "failed" | "crashed" | "timeout" | "import_failed"
    phases: Mapping[str, float] = field(default_factory=dict)  # import, first_call, check, ..., total (seconds)
    cases: tuple[CaseResult, ...] = ()
    error: ImportProblem | None = None
    signal: str | None = None
    returncode: int | None = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    warnings: tuple[str, ...] = ()
    module_file: str | None = None
    flash_attn_origin: str | None = None
    visible_devices: str | None = None
    cache_dir: str | None = None
    device_name: str | None = None
    python: str = ""
    timeout: float = 0.0
    last_phase: str | None = None  # the phase that was running when the child died or timed out
    environment: Mapping[str, str] = field(default_factory=dict)  # torch version, cxx11abi, dist versions
    loaded: tuple[str, ...] = ()  # every file the child's import and kernels loaded (module files, mapped .so)

    def __post_init__(self) -> None:
        object.__setattr__(self, "phases", MappingProxyType(dict(self.phases)))
        object.__setattr__(self, "environment", MappingProxyType(dict(self.environment)))

    def to_dict(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_PLAIN}
        return {
            **out,
            "warnings": list(self.warnings),
            "phases": dict(self.phases),
            "environment": dict(self.environment),
            "cases": [asdict(c) for c in self.cases],
            "error": self.error.to_dict() if self.error else None,
        }


def cache_folder(env: Mapping[str, str], name: str) -> str:
    """$XDG_CACHE_HOME/fa-doctor/<name>, under ~/.cache when that is unset or relative (invalid, says the XDG spec)."""
    base = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fa-doctor", name)


def case_specs(api: str) -> tuple[dict[str, Any], ...]:
    """The calls the child makes, first call first; the benchmark reuses them for its floor."""
    specs: list[dict[str, Any]] = []
    for dtype, head_dim, causal in _VARLEN:
        name = f"varlen_{_SHORT[dtype]}_d{head_dim}_{'causal' if causal else 'noncausal'}"
        specs.append(_spec(name, "flash_attn_varlen_func", dtype, head_dim, causal, VARLEN_SEQLENS))
    if api in _KVCACHE_APIS:
        spec = _spec("kvcache_bf16_d128_decode", "flash_attn_with_kvcache", "bfloat16", 128, True, DECODE_SEQLENS)
        specs.append({**spec, "cache_len": DECODE_CACHE_LEN})
    return tuple(specs)


def _spec(name: str, fn: str, dtype: str, d: int, causal: bool, lens: tuple[int, ...]) -> dict[str, Any]:
    call = dict(zip(("name", "function", "dtype", "head_dim", "causal"), (name, fn, dtype, d, causal), strict=True))
    return call | {"seqlens": list(lens), "heads": HEADS, "kv_heads": KV_HEADS, "tolerance": TOLERANCE[dtype]}
