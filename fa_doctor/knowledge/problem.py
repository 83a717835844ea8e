"""What a classified import or call error is: the causes `check`'s smoke test and `explain` share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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


@dataclass(frozen=True, slots=True)
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
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "chain": list(self.chain), "evidence": dict(self.evidence)}
