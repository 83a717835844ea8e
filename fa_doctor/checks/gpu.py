"""GPU and torch findings: what the server's CUDA stack looks like."""

from __future__ import annotations

from fa_doctor.checks import remedies
from fa_doctor.facts import Facts
from fa_doctor.finding import Finding, Remedy, Severity


def _describe(facts: Facts) -> str:
    parts = [
        f"GPU {d.index}: {d.name} (sm_{d.capability[0]}{d.capability[1]})"
        if d.capability
        else f"GPU {d.index}: {d.name}"
        for d in facts.gpus.devices
    ]
    return "; ".join(parts)


def check_gpus(facts: Facts, require_gpu: bool = False) -> list[Finding]:
    gpus = facts.gpus
    evidence = gpus.to_dict()
    if not gpus.devices:
        why = "; ".join(gpus.attempts) or "no probe found a GPU"
        if gpus.visible_devices is not None and gpus.source != "none":
            why = f"CUDA_VISIBLE_DEVICES={gpus.visible_devices!r} hides every GPU"
        return [
            Finding(
                "gpu.none",
                Severity.FAIL if require_gpu else Severity.WARN,
                "No NVIDIA GPU is visible",
                f"{why}. Package and override checks still run; the kernel smoke test cannot.",
                evidence,
                (
                    Remedy(
                        "Run on the GPU machine, or check the driver and CUDA_VISIBLE_DEVICES.",
                        ("nvidia-smi", 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'),
                    ),
                ),
            )
        ]
    out = [
        Finding(
            "gpu.found",
            Severity.OK,
            f"{len(gpus.devices)} GPU(s) visible (via {gpus.source})",
            _describe(facts) + (f"; driver {gpus.driver_version}" if gpus.driver_version else ""),
            evidence,
        )
    ]
    old = [d for d in gpus.devices if d.capability is not None and d.capability < (8, 0)]
    if old:
        names = ", ".join(
            f"GPU {d.index} {d.name} (compute capability {d.capability[0]}.{d.capability[1]})"
            for d in old
            if d.capability
        )
        out.append(
            Finding(
                "gpu.unsupported",
                Severity.FAIL,
                "A GPU is too old for any FlashAttention",
                f"{names}: FA2, FA3 and FA4 all need compute capability 8.0 (Ampere) or newer "
                "(`FlashAttention only supports Ampere GPUs or newer.`).",
                {"devices": [d.to_dict() for d in old]},
                (
                    Remedy(
                        "Use a non-FA attention backend on this GPU (SGLang: --attention-backend triton or flashinfer; "
                        "transformers: attn_implementation='sdpa'), or exclude it with CUDA_VISIBLE_DEVICES.",
                        (),
                    ),
                ),
            )
        )
    return out


# CUDA builds PyTorch publishes wheels for, newest first.
_CHANNELS = ((13, 0), (12, 9), (12, 8), (12, 6), (12, 4), (12, 1), (11, 8))


def torch_channel(facts: Facts) -> str:
    """The newest torch CUDA channel the driver can run (its CUDA version caps it)."""
    cap = (13, 0)
    raw = facts.gpus.cuda_driver_version
    if raw:
        try:
            major, _, minor = raw.partition(".")
            cap = (int(major), int(minor or 0))
        except ValueError:
            pass
    best = next((c for c in _CHANNELS if c <= cap), _CHANNELS[-1])
    return f"cu{best[0]}{best[1]}"


def check_torch(facts: Facts) -> list[Finding]:
    torch = facts.torch
    if torch is None:
        return [
            Finding(
                "torch.missing",
                Severity.FAIL,
                "torch is not installed in the target interpreter",
                f"Every FA implementation runs on torch; {facts.target.executable} has none.",
                {"python": facts.target.executable},
                (Remedy("Install the torch your FA packages were built for.", (remedies.pip(facts, "torch"),)),),
            )
        ]
    evidence = torch.to_dict()
    if not torch.cuda:
        severity = Severity.FAIL if facts.gpus.devices else Severity.INFO
        return [
            Finding(
                "torch.cpu_build",
                severity,
                f"torch {torch.version} is a build without CUDA",
                "No FA kernel can run with it"
                + (" although a GPU is visible." if facts.gpus.devices else " (fine for a CPU-only CI preflight)."),
                evidence,
                (
                    Remedy(
                        "Install a CUDA build of torch (the index URL picks the CUDA version).",
                        (
                            remedies.pip(
                                facts,
                                "--force-reinstall",
                                f"torch=={(torch.version or '').split('+')[0]}",
                                "--index-url",
                                f"https://download.pytorch.org/whl/{torch_channel(facts)}",
                            ),
                        ),
                    ),
                ),
            )
        ]
    return [
        Finding(
            "torch.found",
            Severity.OK,
            f"torch {torch.version} (CUDA {torch.cuda})",
            f"C++11 ABI: {torch.cxx11_abi}; at {torch.location}",
            evidence,
        )
    ]
