"""GPU and torch findings: what the server's CUDA stack looks like."""

from __future__ import annotations

from fa_doctor.actions import RunCommand
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
                        actions=(RunCommand(("nvidia-smi",)), RunCommand(("printenv", "CUDA_VISIBLE_DEVICES"))),
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
    unknown = [d for d in gpus.devices if d.capability is None]
    if unknown:
        said = ", ".join(
            f"GPU {d.index} {d.name} ({'reported ' + repr(d.capability_raw) if d.capability_raw else 'not reported'})"
            for d in unknown
        )
        out.append(
            Finding(
                "gpu.capability_unknown",
                Severity.WARN,
                "A GPU's compute capability cannot be read",
                f"{said}. Which FlashAttention can run depends on it (FA3 needs 8.x/9.0, FA4 9.0/10.x/11.x, FA2 8.0 "
                "or newer), so no implementation is judged against this GPU; the smoke test still runs on it.",
                {"devices": [d.to_dict() for d in unknown]},
                (
                    Remedy(
                        "Ask the driver directly; an old nvidia-smi or a MIG/vGPU setup may not report it.",
                        actions=(RunCommand(("nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv")),),
                    ),
                ),
            )
        )
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


# The CUDA channels of download.pytorch.org per torch release (docs/remedies.md gives the sources).
TORCH_CHANNELS: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {
    (2, 7): ((11, 8), (12, 6), (12, 8)),
    (2, 8): ((12, 6), (12, 8), (12, 9)),
    (2, 9): ((12, 6), (12, 8), (13, 0)),
    (2, 10): ((12, 6), (12, 8), (13, 0)),
    (2, 11): ((12, 6), (12, 8), (13, 0)),
    (2, 12): ((12, 6), (13, 0), (13, 2)),
    (2, 13): ((12, 6), (13, 0), (13, 2)),
    (2, 14): ((12, 6), (13, 0), (13, 2)),
}


def torch_channel(facts: Facts, torch_mm: tuple[int, int] | None = None) -> tuple[str | None, str]:
    """(channel, why): the newest channel of this torch release that the driver's CUDA version can run.

    The channel is None when the release's channels are not known here. Without the driver's CUDA version
    (nvidia-smi alone, no NVML) the choice is a guess, and `why` says so.
    """
    channels = TORCH_CHANNELS.get(torch_mm) if torch_mm else None
    if not channels or torch_mm is None:
        return None, "the CUDA channels of this torch release are not known here"
    raw = facts.gpus.cuda_driver_version
    cap: tuple[int, int] | None = None
    if raw:
        try:
            major, _, minor = raw.partition(".")
            cap = (int(major), int(minor or 0))
        except ValueError:
            cap = None
    if cap is None:
        best = channels[0]
        return f"cu{best[0]}{best[1]}", (
            f"a guess: the driver's CUDA version is unknown, so this picks the oldest channel of torch "
            f"{torch_mm[0]}.{torch_mm[1]}"
            " (`nvidia-smi` prints `CUDA Version`: pick the newest channel not above it)"
        )
    fits = [c for c in channels if c <= cap]
    if not fits:
        return None, f"the driver supports CUDA {cap[0]}.{cap[1]}, older than every channel of this torch release"
    best = fits[-1]
    return f"cu{best[0]}{best[1]}", f"the newest channel for the driver's CUDA {cap[0]}.{cap[1]}"


def _torch_spec(facts: Facts) -> str:
    """What to install when torch is missing: the server's pin, else sglang-kernel's, else any torch."""
    for name in ("sglang", "vllm", "sglang-kernel", "sgl-kernel", "flash-attn-4"):
        dist = facts.scan.first(name)
        spec = remedies.requires(facts, dist, "torch") if dist else None
        if spec and spec != "torch":
            return spec
    return "torch"


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
                (_install_torch(facts),),
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
                (_cuda_torch(facts, torch.version or ""),),
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


def _install_torch(facts: Facts) -> Remedy:
    spec = _torch_spec(facts)
    return Remedy(
        f"Install torch ({spec}, what the installed FA packages and server declare) into the interpreter that runs "
        "the server; the CUDA channel comes from its index (see torch.cpu_build once it is installed).",
        actions=(
            remedies.pip_install(
                facts, (spec,), (), tuple(c for c in remedies.keep(facts) if not c.startswith("torch=="))
            ),
        ),
    )


def _cuda_torch(facts: Facts, version: str) -> Remedy:
    """The same torch release as a CUDA build: an explicit `+cuXYZ` local version, so pip swaps only torch."""
    base = remedies.version_of(version.split("+")[0])
    parts = (base or "").split(".")
    mm = (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else None
    channel, why = torch_channel(facts, mm)
    if base is None or channel is None:
        return Remedy(
            f"Install a CUDA build of torch {base or ''} from https://download.pytorch.org/whl/ ({why}).",
            actions=(RunCommand(("nvidia-smi",)),),
        )
    others = tuple(c for c in remedies.keep(facts) if not c.startswith("torch=="))
    return Remedy(
        f"Install the CUDA build of torch {base} ({channel}: {why}); naming the build replaces only torch and adds "
        "the CUDA libraries it needs. torchvision/torchaudio CPU builds must be swapped the same way.",
        actions=(
            remedies.pip_install(
                facts,
                (f"torch=={base}+{channel}",),
                ("--index-url", f"https://download.pytorch.org/whl/{channel}"),
                others,
            ),
        ),
    )
