"""Everything the probes found, in one frozen bundle that checks read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fa_doctor.model.install import DistributionScan, SglangFacts
from fa_doctor.model.machine import GpuFacts, TargetFacts, TorchBuild


@dataclass(frozen=True, slots=True)
class BackendFlags:
    """SGLang's --attention-backend / --prefill-attention-backend / --decode-attention-backend."""

    attention: str | None = None
    prefill: str | None = None
    decode: str | None = None

    @property
    def any(self) -> bool:
        return any((self.attention, self.prefill, self.decode))


@dataclass(frozen=True, slots=True)
class Facts:
    target: TargetFacts
    gpus: GpuFacts
    torch: TorchBuild | None
    scan: DistributionScan
    env: Mapping[str, str]
    sglang: SglangFacts | None
    flags: BackendFlags = field(default_factory=BackendFlags)

    @property
    def capabilities(self) -> list[tuple[int, int]]:
        return sorted({d.capability for d in self.gpus.devices if d.capability is not None})

    @property
    def torch_cuda(self) -> tuple[int, int] | None:
        if self.torch is None or not self.torch.cuda:
            return None
        parts = self.torch.cuda.split(".")
        try:
            return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            return None
