"""Everything the probes found, in one frozen bundle that checks read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a run loads them with the probes, which start before
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
    gpu_arch: tuple[str, ...] = ()  # --gpu-arch sm_90,...: the fleet's GPUs, for a CI job without one
    nvcc: str | None = None  # the CUDA compiler a source build here would use (probes.environment); None: none
    git: str | None = None  # git on PATH (a build from a clone needs it)

    @property
    def capabilities(self) -> list[tuple[int, int]]:
        """The visible GPUs' capabilities; with none visible, those `--gpu-arch` names (a CPU CI job judges for the
        fleet as its GPUs would)."""
        seen = {d.capability for d in self.gpus.devices if d.capability is not None}
        if not self.gpus.devices:
            seen = {divmod(int(arch.removeprefix("sm_")), 10) for arch in self.gpu_arch}
        return sorted(seen)

    @property
    def first_capability(self) -> tuple[int, int] | None:
        """What the server reads: the capability of GPU 0 of those it sees (else the first `--gpu-arch`)."""
        if self.gpus.devices:
            return self.gpus.devices[0].capability
        return divmod(int(self.gpu_arch[0].removeprefix("sm_")), 10) if self.gpu_arch else None

    @property
    def torch_cuda(self) -> tuple[int, int] | None:
        if self.torch is None or not self.torch.cuda:
            return None
        parts = self.torch.cuda.split(".")
        try:
            return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            return None
