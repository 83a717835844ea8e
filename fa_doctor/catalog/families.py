"""Which FA family a distribution belongs to, over the catalog's data (fa_doctor/catalog, docs/families.md)."""

from __future__ import annotations

import re

from fa_doctor.catalog import names
from fa_doctor.catalog.implementations import (
    BY_KEY,
    FA2,
    FA3,
    FA3_SGL,
    FA4,
    FA4_SGLANG,
    IMPLEMENTATIONS,
    VLLM_FA,
    Implementation,
)
from fa_doctor.catalog.names import GUARDED_TOP_LEVEL

__all__ = [
    "BY_KEY",
    "FA2",
    "FA3",
    "FA3_SGL",
    "FA4",
    "FA4_SGLANG",
    "FA_DISTRIBUTIONS",
    "GUARDED_TOP_LEVEL",
    "IMPLEMENTATIONS",
    "RELATED_DISTRIBUTIONS",
    "VLLM_FA",
    "Implementation",
    "family_of",
    "is_interesting",
    "normalize",
]


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Flash_Attn.4` and `flash-attn.4` are the same distribution."""
    out = name.lower().replace("_", "-").replace(".", "-")
    return re.sub(r"-{2,}", "-", out) if "--" in out else out  # the scan calls this once per distribution


# Distribution names that make up an FA stack besides the implementations themselves.
FA_DISTRIBUTIONS = frozenset(d for impl in IMPLEMENTATIONS for d in impl.distributions) - set(names.SERVERS)
RELATED_DISTRIBUTIONS = frozenset(names.RELATED)
# Unknown forks are caught by name shape, without opening every distribution's files.
_INTERESTING = re.compile(r"flash|attn|^fa\d|sgl|cutlass")
# Substrings every interesting name contains: a cheap pre-filter before the sets and the regex.
_CHEAP = re.compile("fa|flash|attn|sgl|cutlass|torch|vllm|kernel|quack|tvm|transformers")
_RUNTIME = frozenset(names.FA4_RUNTIME)
_OWN_ROW = frozenset((names.SGLANG, names.VLLM, names.TORCH, names.KERNELS, names.TRANSFORMERS))


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
    if normalized_name in _RUNTIME or normalized_name.startswith(names.CUTLASS_DSL):
        return "fa4-runtime"
    if normalized_name in _OWN_ROW:
        return normalized_name
    return "other"
