"""Node-level findings: one bad or different GPU is enough to crash a tensor-parallel server."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace

from fa_doctor.diagnose.contain import collected
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.machine import GpuDevice


def restrict(facts: Facts, wanted: Sequence[int] | None) -> tuple[Facts, list[int]]:
    """Keep the GPUs `--gpus` names (CUDA indices as the server sees them); return the ones not visible."""
    if wanted is None:
        return facts, []
    present = {d.index for d in facts.gpus.devices}
    missing = [i for i in dict.fromkeys(wanted) if i not in present]
    kept = tuple(d for d in facts.gpus.devices if d.index in wanted)
    return replace(facts, gpus=replace(facts.gpus, devices=kept)), missing


@collected
def check_node(facts: Facts, missing: Sequence[int], visible: Sequence[int]) -> Iterator[Finding]:
    if missing:
        yield Finding(
            "gpu.missing",
            Severity.FAIL,
            f"--gpus names GPU(s) that are not visible: {', '.join(map(str, missing))}",
            f"Visible CUDA indices: {', '.join(map(str, visible)) or 'none'}. A GPU that fell off the bus or is "
            "hidden by CUDA_VISIBLE_DEVICES cannot serve its tensor-parallel rank.",
            {"requested_missing": list(missing), "visible": list(visible)},
            (Remedy("Check the node's GPUs and CUDA_VISIBLE_DEVICES.", ("nvidia-smi -L",)),),
        )
    kinds: dict[tuple[str, str], list[int]] = defaultdict(list)
    for d in facts.gpus.devices:
        kinds[(d.name, f"{d.capability[0]}.{d.capability[1]}" if d.capability else "?")].append(d.index)
    if len(kinds) > 1:
        groups = [{"name": n, "capability": c, "gpus": idx} for (n, c), idx in kinds.items()]
        largest = ",".join(str(i) for i in max(kinds.values(), key=len))
        from fa_doctor.model.actions import SetEnv  # here: a healthy check builds no remedy

        text = "; ".join(f"GPU {','.join(map(str, g['gpus']))}: {g['name']} (cc {g['capability']})" for g in groups)
        yield Finding(
            "gpu.mixed",
            Severity.WARN,
            "The visible GPUs differ" + (" in compute capability" if len({c for _, c in kinds}) > 1 else " in model"),
            f"{text}. SGLang picks its attention backend from GPU 0's capability; a kernel built or chosen for "
            "one kind can fail on the other, and tensor-parallel ranks then disagree.",
            {"groups": groups},
            (
                Remedy(
                    "Serve from one kind of GPU: pin a homogeneous set.",
                    actions=(SetEnv("CUDA_VISIBLE_DEVICES", largest),),
                ),
            ),
        )


@collected
def compare_smoke(key: str, per_device: Sequence[tuple[GpuDevice, str]]) -> Iterator[Finding]:
    """Per-device smoke statuses of one implementation: they must all agree."""
    if len({status for _, status in per_device}) < 2:
        return
    from fa_doctor.model.actions import RunCommand, SetEnv

    bad = [(d, s) for d, s in per_device if s != "passed"]
    good = [d.index for d, s in per_device if s == "passed"]
    yield Finding(
        "smoke.inconsistent",
        Severity.FAIL,
        f"{key}: the smoke test gives different results on different GPUs",
        f"Passed on GPU {', '.join(map(str, good)) or 'none'}; "
        + "; ".join(f"GPU {d.index} ({d.name}): {s}" for d, s in bad)
        + ". One bad GPU is enough to crash a tensor-parallel server.",
        {"implementation": key, "per_gpu": {str(d.index): s for d, s in per_device}},
        (
            Remedy(
                "Take the failing GPU(s) out of service and have them checked (nvidia-smi -q, dmesg for Xid "
                "errors); meanwhile serve from the GPUs that pass.",
                actions=(
                    RunCommand(("nvidia-smi", "-q", "-d", "ECC,RETIRED_PAGES_SERVICE")),
                    SetEnv("CUDA_VISIBLE_DEVICES", ",".join(map(str, good)))
                    if good
                    else RunCommand(("nvidia-smi", "-L")),
                ),
            ),
        ),
    )
