"""GPU and torch findings: what the server's CUDA stack looks like."""

from __future__ import annotations

from collections.abc import Iterator

from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.contain import collected
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity


@collected
def check_gpus(facts: Facts, require_gpu: bool = False, static_only: bool = False) -> Iterator[Finding]:
    """`static_only`: a CPU CI job (`--no-smoke` or `--gpu-arch`) expects no GPU: its absence is information."""
    gpus = facts.gpus
    evidence = gpus.to_dict()
    if not gpus.devices:
        why = "; ".join(gpus.attempts) or "no probe found a GPU"
        if gpus.visible_devices is not None and gpus.source != "none":
            why = f"CUDA_VISIBLE_DEVICES={gpus.visible_devices!r} hides every GPU"
        judged = f" Judged for --gpu-arch {','.join(facts.gpu_arch)}." if facts.gpu_arch else ""
        yield Finding(
            "gpu.none",
            Severity.FAIL if require_gpu else Severity.INFO if static_only else Severity.WARN,
            "No NVIDIA GPU is visible",
            f"{why}. Package and override checks still run; the kernel smoke test cannot.{judged}",
            evidence,
            (
                remedies.run(
                    "Run on the GPU machine, or check the driver and CUDA_VISIBLE_DEVICES.",
                    ("nvidia-smi",),
                    ("printenv", "CUDA_VISIBLE_DEVICES"),
                ),
            ),
        )
        return
    described = "; ".join(
        f"GPU {d.index}: {d.name}" + (f" (sm_{d.capability[0]}{d.capability[1]})" if d.capability else "")
        for d in gpus.devices
    )
    described += f"; driver {gpus.driver_version}" if gpus.driver_version else ""
    yield Finding(
        "gpu.found", Severity.OK, f"{len(gpus.devices)} GPU(s) visible (via {gpus.source})", described, evidence
    )
    if unknown := [d for d in gpus.devices if d.capability is None]:
        said = ", ".join(
            f"GPU {d.index} {d.name} ({'reported ' + repr(d.capability_raw) if d.capability_raw else 'not reported'})"
            for d in unknown
        )
        yield Finding(
            "gpu.capability_unknown",
            Severity.WARN,
            "A GPU's compute capability cannot be read",
            f"{said}. Which FlashAttention can run depends on it (FA3 needs 8.x/9.0, FA4 9.0/10.x/11.x, FA2 8.0 "
            "or newer), so no implementation is judged against this GPU; the smoke test still runs on it.",
            {"devices": [d.to_dict() for d in unknown]},
            (
                remedies.run(
                    "Ask the driver directly; an old nvidia-smi or a MIG/vGPU setup may not report it.",
                    ("nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv"),
                ),
            ),
        )
    if old := [d for d in gpus.devices if d.capability is not None and d.capability < (8, 0)]:
        names = ", ".join(
            f"GPU {d.index} {d.name} (compute capability {'.'.join(map(str, d.capability or ()))})" for d in old
        )
        yield Finding(
            "gpu.unsupported",
            Severity.FAIL,
            "A GPU is too old for any FlashAttention",
            f"{names}: FA2, FA3 and FA4 all need compute capability 8.0 (Ampere) or newer "
            "(`FlashAttention only supports Ampere GPUs or newer.`).",
            {"devices": [d.to_dict() for d in old]},
            (
                Remedy(
                    "Use a non-FA attention backend on this GPU (SGLang: --attention-backend triton or flashinfer; "
                    "transformers: attn_implementation='sdpa'), or exclude it with CUDA_VISIBLE_DEVICES."
                ),
            ),
        )


@collected
def check_torch(facts: Facts) -> Iterator[Finding]:
    if (torch := facts.torch) is None:
        from fa_doctor.model.intents import InstallTorch  # here: a healthy check builds no remedy

        yield Finding(
            "torch.missing",
            Severity.FAIL,
            "torch is not installed in the target interpreter",
            f"Every FA implementation runs on torch; {facts.target.executable} has none.",
            {"python": facts.target.executable},
            (remedies.planned(InstallTorch()),),
        )
    elif not torch.cuda:
        from fa_doctor.model.intents import CudaTorch

        yield Finding(
            "torch.cpu_build",
            Severity.FAIL if facts.gpus.devices else Severity.INFO,
            f"torch {torch.version} is a build without CUDA",
            "No FA kernel can run with it"
            + (" although a GPU is visible." if facts.gpus.devices else " (fine for a CPU-only CI preflight)."),
            torch.to_dict(),
            (remedies.planned(CudaTorch(torch.version or "")),),
        )
    else:
        yield Finding(
            "torch.found",
            Severity.OK,
            f"torch {torch.version} (CUDA {torch.cuda})",
            f"C++11 ABI: {torch.cxx11_abi}; at {torch.location}",
            torch.to_dict(),
        )
