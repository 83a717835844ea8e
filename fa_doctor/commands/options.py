"""What `check` (and `exec`, which runs it first) is asked to do."""

from __future__ import annotations

from collections.abc import Mapping

from fa_doctor.facts import BackendFlags
from fa_doctor.frozen import field, frozen


@frozen
class CheckOptions:
    python: str | None = None
    flags: BackendFlags = field(default_factory=BackendFlags)
    smoke: bool = True
    smoke_all: bool = False
    require_gpu: bool = False
    strict: bool = False
    timeout: float = 300.0
    use_cache: bool = True
    fresh: bool = False  # --fresh: run the kernels even when a stored verdict's fingerprint holds
    gpu_indices: tuple[int, ...] | None = None  # --gpus: smoke-test only these CUDA indices
    gpu_arch: tuple[str, ...] | None = None  # --gpu-arch: judge compiled extensions against these (no GPU needed)
    gpu_timeout: float = 10.0
    scan_timeout: float = 60.0
    env: Mapping[str, str] | None = None

    @property
    def target_args(self) -> tuple[str, ...]:
        """The options that say which environment (and launch) the findings are about, for `fa-doctor fix`
        hints: following one must act on the same interpreter, not on fa-doctor's own."""
        out: list[str] = []
        if self.python:
            out += ["--python", self.python]
        for option, value in (
            ("--attention-backend", self.flags.attention),
            ("--prefill-attention-backend", self.flags.prefill),
            ("--decode-attention-backend", self.flags.decode),
        ):
            if value:
                out += [option, value]
        if self.gpu_arch:
            out += ["--gpu-arch", ",".join(self.gpu_arch)]
        return tuple(out)


def parse_gpus(value: str | None) -> tuple[int, ...] | None:
    """`--gpus 0,2` (already validated by the CLI) as unique CUDA indices, in the order given."""
    if value is None:
        return None
    return tuple(dict.fromkeys(int(p.strip()) for p in value.split(",")))


def parse_gpu_arch(value: str) -> tuple[str, ...]:
    """`--gpu-arch sm_90,sm_100a` or `9.0,10.0`: the GPUs a CI image is built for. ValueError says what is wrong."""
    from fa_doctor.checks.binary import parse_gpu_arch as parse

    return parse(value)
