"""Which of explain's hypotheses this machine confirms or rules out, from the target's facts and check's findings;
a verdict multiplies the model's probability by a hand-set likelihood ratio (docs/explain.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from fa_doctor.model.finding import Finding, Severity

if TYPE_CHECKING:
    from fa_doctor.model.facts import Facts

CONFIRMED, RULED_OUT = "confirmed", "ruled out"
LIKELIHOOD = {CONFIRMED: 4.0, RULED_OUT: 0.25}

# category -> check findings that, failing (or warning), confirm it on this machine.
_CONFIRMED_BY: dict[str, tuple[str, ...]] = {
    "abi-mismatch": ("binary.undefined_symbol",),
    "arch-unsupported": ("gpu.unsupported", "binary.no_kernel_image"),
    "glibc": ("binary.glibc",),
    "cuda-runtime": ("binary.cudart_mismatch",),
    "no-gpu": ("gpu.none", "torch.cpu_build"),
    "missing-module": ("package.none", "package.broken", "package.shadowed", "torch.missing"),
    "selection-override": ("override.invalid", "override.unavailable", "selection.unavailable", "knob.invalid"),
    "fa3-unavailable": ("override.unavailable", "selection.unavailable"),
    "api-mismatch": ("package.conflict",),
}

# Findings that state a fact of the machine whatever their severity (a missing GPU is info without the kernel test).
_FACTS = frozenset(["gpu.none", "torch.cpu_build"])


@dataclass(frozen=True, slots=True)
class Verdict:
    state: str  # CONFIRMED or RULED_OUT
    reason: str
    findings: tuple[str, ...] = ()  # check's finding ids behind it


def verdicts(facts: Facts, findings: Sequence[Finding]) -> dict[str, Verdict]:
    """category -> what this machine says about it (categories it says nothing about are absent)."""
    bad: dict[str, list[Finding]] = {}
    for f in findings:
        if f.severity in (Severity.FAIL, Severity.WARN) or (f.id in _FACTS and f.severity is Severity.INFO):
            bad.setdefault(f.id, []).append(f)
    out: dict[str, Verdict] = {}
    for category, ids in _CONFIRMED_BY.items():
        if hit := [i for i in ids if i in bad]:
            titles = "; ".join(bad[i][0].title for i in hit)
            out[category] = Verdict(CONFIRMED, f"`fa-doctor check` finds it here: {titles}", tuple(hit))
    requirement = [f for f in bad.get("package.requirement", []) if "torch" in f"{f.title} {f.detail}".lower()]
    if requirement and "abi-mismatch" not in out:
        out["abi-mismatch"] = Verdict(
            CONFIRMED, f"torch differs from a build's pin: {requirement[0].title}", ("package.requirement",)
        )
    for category, verdict in _from_facts(facts, findings).items():
        out.setdefault(category, verdict)
    return out


def _from_facts(facts: Facts, findings: Sequence[Finding]) -> dict[str, Verdict]:
    out: dict[str, Verdict] = {}
    yes, no = partial(Verdict, CONFIRMED), partial(Verdict, RULED_OUT)
    torch, caps = facts.torch, facts.capabilities
    ids = {f.id for f in findings}
    gpus = ", ".join(f"{d.name} ({d.capability[0]}.{d.capability[1]})" for d in facts.gpus.devices if d.capability)
    if torch is not None and torch.hip:
        out["rocm"] = yes(f"torch {torch.version} is a ROCm build (HIP {torch.hip})")
    elif torch is not None and torch.cuda and facts.gpus.devices:
        out["rocm"] = no(f"torch {torch.version} is a CUDA build and the GPUs are NVIDIA's ({gpus})")
    if torch is not None and torch.cuda and facts.gpus.devices:
        out["no-gpu"] = no(f"torch {torch.version} has CUDA {torch.cuda} and sees {gpus}")
    if caps and all(c >= (8, 0) for c in caps) and "binary.archs" in ids:
        out["arch-unsupported"] = no(
            f"every GPU is Ampere or newer ({gpus}) and the installed extensions carry code for them"
        )
    if caps and all(c < (9, 0) for c in caps):
        out["fa3-unavailable"] = yes(f"FlashAttention-3 needs a Hopper GPU (9.0); this machine has {gpus}")
    if "binary.archs" in ids:  # the compiled extensions were read
        if "binary.undefined_symbol" not in ids and torch is not None:
            out["abi-mismatch"] = no(
                f"every torch symbol the installed extensions need is exported by torch {torch.version}"
            )
        if "binary.glibc" not in ids:
            out["glibc"] = no(f"the installed extensions' glibc/libstdc++ needs are met ({facts.target.libc})")
    cuda = facts.gpus.cuda_driver_version
    driver, runtime = _version(cuda), facts.torch_cuda
    if driver and runtime and driver < runtime:
        out["driver-too-old"] = yes(f"the driver supports CUDA {cuda}, torch is built for a newer CUDA")
    elif driver and runtime:
        out["driver-too-old"] = no(f"the driver supports CUDA {cuda}, enough for torch's CUDA")
    return out


def _version(text: str | None) -> tuple[int, int] | None:
    parts = (text or "").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def reweigh(probabilities: Mapping[str, float], found: Mapping[str, Verdict]) -> dict[str, float]:
    """The model's probabilities times each verdict's likelihood ratio, renormalised."""
    raw = {c: p * (LIKELIHOOD[found[c].state] if c in found else 1.0) for c, p in probabilities.items()}
    total = sum(raw.values()) or 1.0
    return {c: p / total for c, p in raw.items()}
