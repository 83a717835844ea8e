"""torch itself: what to install when it is missing, and which CUDA build (catalog channel) replaces a CPU build."""

from __future__ import annotations

from fa_doctor.catalog import ecosystem, names, urls
from fa_doctor.diagnose.derive.requires import public, requires, version_of
from fa_doctor.diagnose.plan.recipes import keep, pip_install
from fa_doctor.model.actions import RunCommand
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy


def _cu(channel: str) -> tuple[int, int]:
    return int(channel[2:-1]), int(channel[-1])  # cu128 -> (12, 8)


def torch_channel(facts: Facts, torch_mm: tuple[int, int] | None) -> tuple[str | None, str]:
    """(channel, why): the newest channel of this torch release that the driver runs and the GPUs need."""
    channels = ecosystem.torch_channels(torch_mm) if torch_mm else ()
    if not channels or torch_mm is None:
        return None, "the CUDA channels of this torch release are not in fa-doctor's catalog"
    floor = max((ecosystem.MIN_CUDA_FOR_MAJOR.get(c[0], (0, 0)) for c in facts.capabilities), default=(0, 0))
    if not (usable := [c for c in channels if _cu(c) >= floor]):
        return None, f"no channel of torch {torch_mm[0]}.{torch_mm[1]} carries code for these GPUs"
    gpu_note = f" (these GPUs need CUDA >= {floor[0]}.{floor[1]} builds)" if floor > (0, 0) else ""
    major, _, minor = (facts.gpus.cuda_driver_version or "").partition(".")
    cap = (int(major), int(minor or 0)) if major.isdigit() and (minor or "0").isdigit() else None
    if cap is None:
        return usable[0], (
            f"a guess: the driver's CUDA version is unknown, so this picks the oldest usable channel of torch "
            f"{torch_mm[0]}.{torch_mm[1]}{gpu_note} (`nvidia-smi` prints `CUDA Version`: pick the newest channel "
            "not above it)"
        )
    if not (fits := [c for c in usable if _cu(c) <= cap]):
        return None, f"the driver supports CUDA {cap[0]}.{cap[1]}, older than every usable channel{gpu_note}"
    return fits[-1], f"the newest channel for the driver's CUDA {cap[0]}.{cap[1]}{gpu_note}"


def install_torch(facts: Facts) -> Remedy:
    """What to install when torch is missing: the server's pin, else an FA package's, else any torch."""
    dists = (facts.scan.first(name) for name in (*names.SERVERS, *names.SGL_KERNELS, names.FLASH_ATTN_4))
    specs = (requires(facts, dist, names.TORCH) for dist in dists if dist)
    spec = next((s for s in specs if s and s != names.TORCH), names.TORCH)
    return Remedy(
        f"Install torch ({spec}, what the installed FA packages and server declare) into the interpreter that runs "
        "the server; the CUDA channel comes from its index (see torch.cpu_build once it is installed).",
        actions=(pip_install(facts, (spec,), (), keep(facts)),),
    )


def cuda_torch(facts: Facts, version: str) -> Remedy:
    """The same torch release as a CUDA build: an explicit `+cuXYZ` local version, so pip swaps only torch."""
    base = version_of(public(version))
    parts = (base or "").split(".")
    mm = (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else None
    channel, why = torch_channel(facts, mm)
    if base is None or channel is None:
        return Remedy(
            f"Install a CUDA build of torch {base or ''} from {urls.TORCH_INDEX}/ ({why}).",
            actions=(RunCommand(("nvidia-smi",)),),
        )
    others = tuple(c for c in keep(facts) if not c.startswith(f"{names.TORCH}=="))
    return Remedy(
        f"Install the CUDA build of torch {base} ({channel}: {why}); naming the build replaces only torch (the "
        "same release) and adds the CUDA libraries it needs. torchvision/torchaudio CPU builds must be swapped the "
        "same way. This replaces torch: `fa-doctor fix --apply` takes it only with --allow-torch-change.",
        actions=(
            pip_install(
                facts, (f"{names.TORCH}=={base}+{channel}",), ("--index-url", urls.torch_channel_index(channel)), others
            ),
        ),
        replaces_torch=True,
    )
