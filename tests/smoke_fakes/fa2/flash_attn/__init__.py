"""Fake FA2 `flash_attn`: the real signatures (positional order included), torch math inside."""

from __future__ import annotations

import os
from typing import Any

import fake_attention

__version__ = "2.8.3"

if os.environ.get("FAKE_FA_PRINT_ENV"):
    print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), flush=True)


def flash_attn_varlen_func(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    **_: Any,
) -> Any:
    return fake_attention.varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)


def flash_attn_with_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    k: Any = None,
    v: Any = None,
    rotary_cos: Any = None,
    rotary_sin: Any = None,
    cache_seqlens: Any = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    **_: Any,
) -> Any:
    if not hasattr(cache_seqlens, "dtype"):
        raise TypeError("this fake wants cache_seqlens as an int32 tensor")
    return fake_attention.kvcache(q, k_cache, v_cache, cache_seqlens, softmax_scale, causal)
