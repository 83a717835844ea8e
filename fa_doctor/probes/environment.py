"""The environment variables that pin or steer an FA version, captured once."""

from __future__ import annotations

import os
from collections.abc import Mapping

OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"

# Exact names fa-doctor validates (docs/findings.md lists what each one does).
KNOBS = (
    OVERRIDE,
    "SGLANG_USE_SGL_FA3_KERNEL",
    "SGLANG_INKLING_FA4_USE_PIP",
    "SGLANG_IS_FLASHINFER_AVAILABLE",
    "SGLANG_CACHE_DIR",
    "VLLM_FLASH_ATTN_VERSION",
    "VLLM_ATTENTION_BACKEND",
    "VLLM_BATCH_INVARIANT",
    "FLASH_ATTENTION_ARCH",
    "CUTE_DSL_ARCH",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE",
    "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED",
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",
    "FLASH_ATTENTION_FORCE_BUILD",
    "FLASH_ATTN_CUDA_ARCHS",
    "CUDA_VISIBLE_DEVICES",
    "HF_HUB_OFFLINE",
)


# Not knobs, but facts a check needs: where the dynamic loader looks (the libstdc++ an extension would load).
CONTEXT = ("LD_LIBRARY_PATH",)


def capture(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs that are set (empty strings included: an empty override is a mistake worth naming)."""
    source = os.environ if env is None else env
    return {name: source[name] for name in (*KNOBS, *CONTEXT) if name in source}
