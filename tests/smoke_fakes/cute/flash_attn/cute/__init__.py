"""Fake FA4 `flash_attn.cute` (no flash_attn/__init__.py, like the flash-attn-4 wheel).

Simulates the CuTe DSL JIT: the first call of each shape "compiles" for FAKE_COMPILE_SECONDS and warns like
the DSL does, unless FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 and the cache folder already holds that shape.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import fake_attention

__version__ = "0.0.0"
_compiled: set[str] = set()


def _jit(key: str) -> None:
    if key in _compiled:
        return
    _compiled.add(key)
    cache = os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "")
    enabled = os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED") == "1" and cache
    entry = os.path.join(cache, f"{key}.o") if enabled else ""
    if entry and os.path.exists(entry):
        return
    warnings.warn("Argument aux_data of type NoneType cannot be converted to a JitArgument", stacklevel=3)
    time.sleep(float(os.environ.get("FAKE_COMPILE_SECONDS", "0")))
    if entry:
        with open(entry, "w") as f:
            f.write("compiled\n")


def flash_attn_varlen_func(
    q: Any,
    k: Any,
    v: Any,
    qv: Any = None,
    cu_seqlens_q: Any = None,
    cu_seqlens_k: Any = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    **_: Any,
) -> tuple[Any, Any]:
    if qv is not None or cu_seqlens_q is None or cu_seqlens_k is None:
        raise TypeError("cu_seqlens must be passed by keyword (the 4th positional argument is qv)")
    _jit(f"varlen_{q.dtype}_{q.shape[-1]}_{causal}".replace("torch.", ""))
    return fake_attention.varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal), None
