"""What `check` (and `exec`, which runs it first) is asked to do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fa_doctor.model.facts import BackendFlags


@dataclass(frozen=True, slots=True)
class CheckOptions:
    python: str | None = None
    python_why: str = ""  # how it was chosen: "--python", "$VIRTUAL_ENV", "$CONDA_PREFIX", "python3 on PATH", ...
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
    python_flags: tuple[str, ...] = ()  # exec: COMMAND's interpreter options (-I, -E, -S, -W error, -X ...)
    cwd: str | None = None  # exec: the folder COMMAND starts in (its sys.path[0] for `python -m`)

    @property
    def target_args(self) -> tuple[str, ...]:
        """The options that say which environment (and launch) the findings are about, for `fa-doctor fix`
        hints: following one must act on the same interpreter, not on fa-doctor's own."""
        out: list[str] = []
        if self.python and self.python_why in ("--python", ""):  # a bare run in the same shell finds the others
            out += ["--python", self.python]
        flags = {"--attention-backend": self.flags.attention, "--prefill-attention-backend": self.flags.prefill}
        flags["--decode-attention-backend"] = self.flags.decode
        out += [word for option, value in flags.items() if value for word in (option, value)]
        if self.gpu_arch:
            out += ["--gpu-arch", ",".join(self.gpu_arch)]
        return tuple(out)
