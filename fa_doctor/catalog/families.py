"""Which FA family a distribution belongs to, over the catalog's data (docs/catalog.md); the implementations are
re-exported for the checks."""

from __future__ import annotations

import re

from fa_doctor.catalog import names
from fa_doctor.catalog.implementations import BY_KEY as BY_KEY
from fa_doctor.catalog.implementations import FA4_SGLANG as FA4_SGLANG
from fa_doctor.catalog.implementations import IMPLEMENTATIONS as IMPLEMENTATIONS
from fa_doctor.catalog.implementations import Implementation as Implementation
from fa_doctor.catalog.names import GUARDED_TOP_LEVEL as GUARDED_TOP_LEVEL


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Flash_Attn.4` and `flash-attn.4` are the same distribution."""
    out = name.lower().replace("_", "-").replace(".", "-")
    return re.sub(r"-{2,}", "-", out) if "--" in out else out  # the scan calls this once per distribution


# Distribution names that make up an FA stack besides the implementations themselves.
FA_DISTRIBUTIONS = frozenset(d for impl in IMPLEMENTATIONS for d in impl.distributions) - set(names.SERVERS)
_KNOWN = FA_DISTRIBUTIONS | frozenset(names.RELATED)
# Unknown forks are caught by name shape, without opening every distribution's files.
_INTERESTING = re.compile(r"flash|attn|^fa\d|sgl|cutlass")
# Substrings every interesting name contains: a cheap pre-filter before the sets and the regex.
_CHEAP = re.compile("fa|flash|attn|sgl|cutlass|torch|vllm|kernel|quack|tvm|transformers")
_RUNTIME = frozenset(names.FA4_RUNTIME)
_OWN_ROW = frozenset((names.SGLANG, names.VLLM, names.TORCH, names.KERNELS, names.TRANSFORMERS))


def is_interesting(name: str) -> bool:
    return _CHEAP.search(name) is not None and (name in _KNOWN or _INTERESTING.search(name) is not None)


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
