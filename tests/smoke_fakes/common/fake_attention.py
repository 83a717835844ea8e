"""Attention in plain torch math, with switchable misbehaviour, for the fake FA modules."""

from __future__ import annotations

import ctypes
import math
import os
import time
import warnings
from typing import Any

import torch


def misbehave() -> str:
    """Act out FAKE_FA_MODE before the math; returns the mode for after-the-math effects."""
    mode = os.environ.get("FAKE_FA_MODE", "ok")
    if mode == "raises":
        raise RuntimeError("FlashAttention only supports Ampere GPUs or newer.")
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang":
        time.sleep(3600)
    if mode == "noisy":
        # Straight to the file descriptors, like a C library would, and more than a pipe buffer holds.
        for fd in (1, 2):
            os.write(fd, b"x" * 100_000 + b"\nnoise\n")
    if mode == "warn":
        warnings.warn("Argument aux_data of type NoneType cannot be converted to a JitArgument", stacklevel=2)
        warnings.warn("cutlass.utils.LayoutEnum is deprecated", DeprecationWarning, stacklevel=2)
    return mode


def _attend(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    groups = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(groups, dim=1)
    v = v.float().repeat_interleave(groups, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        rows, cols = torch.arange(lq, device=q.device), torch.arange(lk, device=q.device)
        mask = cols[None, :] > rows[:, None] + (lk - lq)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def _finish(out: Any, dtype: Any, mode: str) -> Any:
    if mode == "wrong":
        out = out + 0.5
    if mode == "nan":
        out = out * float("nan")
    return out.to(dtype)


def varlen(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, scale: float | None, causal: bool) -> Any:
    mode = misbehave()
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    parts = []
    for i in range(len(cu_q) - 1):
        qs, qe, ks, ke = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        parts.append(_attend(q[qs:qe], k[ks:ke], v[ks:ke], scale, causal))
    return _finish(torch.cat(parts), q.dtype, mode)


def kvcache(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any, scale: float | None, causal: bool) -> Any:
    mode = misbehave()
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    rows = [
        _attend(q[b], k_cache[b, : int(n)], v_cache[b, : int(n)], scale, causal) for b, n in enumerate(cache_seqlens)
    ]
    return _finish(torch.stack(rows), q.dtype, mode)
