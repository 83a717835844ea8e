"""What fa-doctor knows about each FlashAttention implementation (see docs/families.md).

Pure data: distribution names, import paths, supported compute capabilities. Facts come from
Dao-AILab/flash-attention, sgl-project/sglang and vllm-project/vllm sources (cited in docs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Flash_Attn.4` and `flash-attn-4` are the same distribution."""
    out = name.lower().replace("_", "-").replace(".", "-")
    return re.sub(r"-{2,}", "-", out) if "--" in out else out  # the scan calls this once per distribution


@dataclass(frozen=True)
class Implementation:
    """One way of getting an FA version into a process."""

    key: str  # stable id used in findings and JSON: fa2, fa3-sgl, fa3, fa4, fa4-sglang, vllm-fa
    version: int  # FA major version it implements (2, 3 or 4)
    label: str
    distributions: tuple[str, ...]  # normalised names, preferred first
    module: str  # what a server imports
    native: tuple[str, ...] = ()  # compiled modules that must exist beside it (dotted)
    majors: frozenset[int] = frozenset()  # compute-capability majors it can run on
    capabilities: frozenset[tuple[int, int]] = frozenset()  # exact (major, minor) when narrower
    min_torch_cuda: tuple[int, int] | None = None
    note: str = ""

    def supports(self, capability: tuple[int, int]) -> bool:
        if self.capabilities:
            return capability in self.capabilities
        return capability[0] in self.majors

    @property
    def capability_text(self) -> str:
        if self.capabilities:
            return ", ".join(f"{a}.{b}" for a, b in sorted(self.capabilities))
        return ", ".join(f"{m}.x" for m in sorted(self.majors))


FA2 = Implementation(
    key="fa2",
    version=2,
    label="FA2 (flash-attn)",
    distributions=("flash-attn",),
    module="flash_attn",
    native=("flash_attn_2_cuda",),
    majors=frozenset({8, 9, 10, 11, 12}),
    note="release wheels carry sm_80/sm_90 (+sm_100/sm_120 when built with CUDA >= 12.8), no PTX",
)
FA3_SGL = Implementation(
    key="fa3-sgl",
    version=3,
    label="FA3 (sgl_kernel.flash_attn from sglang-kernel)",
    distributions=("sglang-kernel", "sgl-kernel"),
    module="sgl_kernel.flash_attn",
    native=("sgl_kernel.flash_ops",),
    # flash_ops ships cubins sm_80, sm_86, sm_90a only; SGLang's own gate is major in {8, 9}.
    majors=frozenset({8, 9}),
    min_torch_cuda=(12, 3),
)
FA3 = Implementation(
    key="fa3",
    version=3,
    label="FA3 (flash_attn_interface from flash-attn-3)",
    distributions=("flash-attn-3", "flashattn-hopper"),
    module="flash_attn_interface",
    majors=frozenset({8, 9}),
    note="hopper/ build: sm_80 and sm_90a cubins, no sm_100/sm_120, no PTX",
)
FA4 = Implementation(
    key="fa4",
    version=4,
    label="FA4 (flash_attn.cute from flash-attn-4)",
    distributions=("flash-attn-4", "fa4", "flash-attn-cute"),
    module="flash_attn.cute",
    majors=frozenset({8, 9, 10, 11, 12}),
    note="JIT-compiled by the CuTe DSL (nvidia-cutlass-dsl) on first call",
)
FA4_SGLANG = Implementation(
    key="fa4-sglang",
    version=4,
    label="FA4 (SGLang's vendored copy)",
    distributions=("sglang",),
    module="sglang.kernels.ops.attention.flash_attn.cute",
    majors=frozenset({8, 9, 10, 11, 12}),
    note="sm_12x goes through flash_attention_v4_sm120",
)
VLLM_FA = Implementation(
    key="vllm-fa",
    version=2,
    label="vLLM's bundled vllm_flash_attn",
    distributions=("vllm", "vllm-flash-attn"),
    module="vllm.vllm_flash_attn",
    majors=frozenset({8, 9, 10, 11, 12}),
)

IMPLEMENTATIONS: tuple[Implementation, ...] = (FA2, FA3_SGL, FA3, FA4, FA4_SGLANG, VLLM_FA)
BY_KEY = {impl.key: impl for impl in IMPLEMENTATIONS}

# Distribution names that make up an FA stack besides the implementations themselves.
FA_DISTRIBUTIONS = frozenset(d for impl in IMPLEMENTATIONS for d in impl.distributions) - {"sglang", "vllm"}
RELATED_DISTRIBUTIONS = frozenset(
    {
        "torch",
        "sglang",
        "vllm",
        "kernels",
        "sgl-fa4",
        "quack-kernels",
        "apache-tvm-ffi",
        "torch-c-dlpack-ext",
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-core",
        "nvidia-cutlass-dsl-libs-cu12",
        "nvidia-cutlass-dsl-libs-cu13",
        "flashinfer-python",
        "transformers",
    }
)
# Unknown forks are caught by name shape, without opening every distribution's files.
_INTERESTING = re.compile(r"flash|attn|^fa\d|sgl|cutlass")
# Substrings every interesting name contains: a cheap pre-filter before the sets and the regex.
_CHEAP = re.compile("fa|flash|attn|sgl|cutlass|torch|vllm|kernel|quack|tvm|transformers")


def is_interesting(normalized_name: str) -> bool:
    if _CHEAP.search(normalized_name) is None:
        return False
    return (
        normalized_name in FA_DISTRIBUTIONS
        or normalized_name in RELATED_DISTRIBUTIONS
        or _INTERESTING.search(normalized_name) is not None
    )


def family_of(normalized_name: str) -> str:
    """The family a distribution is reported under in the inventory."""
    for impl in IMPLEMENTATIONS:
        if normalized_name in impl.distributions and impl.key not in ("fa4-sglang", "vllm-fa"):
            return impl.key
    if normalized_name.startswith("nvidia-cutlass-dsl") or normalized_name in {
        "quack-kernels",
        "apache-tvm-ffi",
        "torch-c-dlpack-ext",
    }:
        return "fa4-runtime"
    if normalized_name in {"sglang", "vllm", "torch", "kernels", "transformers"}:
        return normalized_name
    return "other"


# Top-level import names whose files two distributions must never share.
GUARDED_TOP_LEVEL = ("flash_attn", "flash_attn_interface", "flash_attn_3", "sgl_kernel", "hopper", "triton_kernels")
