"""Option values as the command line gives them, turned into what CheckOptions holds."""

from __future__ import annotations


def parse_gpus(value: str | None) -> tuple[int, ...] | None:
    """`--gpus 0,2` (already validated by the CLI) as unique CUDA indices, in the order given."""
    if value is None:
        return None
    return tuple(dict.fromkeys(int(p.strip()) for p in value.split(",")))


def parse_gpu_arch(value: str) -> tuple[str, ...]:
    """`--gpu-arch sm_90,sm_100a` or `9.0,10.0`: the GPUs a CI image is built for. ValueError says what is wrong."""
    from fa_doctor.diagnose.checks.binary import parse_gpu_arch as parse

    return parse(value)
