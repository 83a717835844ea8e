"""Turn an exception text (and its __cause__/__context__ chain) into a named cause a user can act on.

The rules are the knowledge base's (fa_doctor/knowledge/errors.json, the table `fa-doctor explain` matches
pasted errors against), so a smoke-test failure in `check` and the same text pasted into `explain` get the
same diagnosis. This module keeps the smoke test's contract: `ImportProblem` and its `CAUSES`. The whole chain
is matched, not only the outermost message: a wrapper such as sgl_kernel's "Can not import FA3" hides the real
reason in __context__.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

CAUSES = (
    "torch_abi",
    "glibc",
    "cuda_runtime",
    "cute_dsl_missing",
    "no_kernel_image",
    "gpu_too_old",
    "driver_too_old",
    "no_cuda",
    "module_missing",
    "sgl_kernel_fa3",
    "unknown",
)


@dataclass(frozen=True)
class ImportProblem:
    """A classified import- or call-time error."""

    cause: str  # one of CAUSES
    summary: str  # one plain sentence for the user
    message: str  # "ExcType: message" of the outermost exception, verbatim
    chain: tuple[str, ...] = ()  # "ExcType: message" of each __cause__/__context__, nearest first
    evidence: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))

    def to_dict(self) -> dict[str, object]:
        return {
            "cause": self.cause,
            "summary": self.summary,
            "message": self.message,
            "chain": list(self.chain),
            "evidence": dict(self.evidence),
        }


def classify(exc_type: str, message: str, chain: Sequence[str]) -> ImportProblem:
    from fa_doctor.knowledge.classify import classify as by_table

    return by_table(exc_type, message, chain)


def demangle(symbol: str) -> str | None:
    """c++filt's reading of an Itanium symbol (bounded), or None."""
    from fa_doctor.knowledge.extract import demangle as by_cxxfilt

    return by_cxxfilt(symbol)
