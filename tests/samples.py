"""A hand-made, fully typed `check` result for renderer tests: every section filled, hostile strings included."""

from __future__ import annotations

import dataclasses

from fa_doctor.diagnose.derive.selection import PhaseChoice, Selection
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.install import Distribution
from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts, TorchBuild
from fa_doctor.model.result import CheckPayload, DeviceSmoke, PackageRow, Result, SmokeSection
from fa_doctor.smoke import CaseResult, SmokeResult

SITE = "/opt/venv/lib/python3.12/site-packages"
H200 = GpuDevice(0, 0, "NVIDIA H200", (9, 0), 143771, "GPU-00000000-1111-2222-3333-444444444444")


def target() -> TargetFacts:
    return TargetFacts(
        python="/opt/venv/bin/python",
        executable="/opt/venv/bin/python",
        version=(3, 12, 3),
        implementation="cpython",
        prefix="/opt/venv",
        sys_path=("/opt/venv/lib/python312.zip", SITE),
        machine="x86_64",
        libc="glibc 2.39",
        in_venv=True,
        no_site=False,
    )


def payload() -> CheckPayload:
    choice = PhaseChoice("prefill", "fa3", 3, "fa3-sgl", "override", "SGLANG_FLASHATTENTION_VERSION=3 pins FA3")
    smoke = SmokeResult(
        "fa4",
        "flash_attn.cute",
        "cute",
        "passed",
        phases={"import": 9.8, "first_call": 2.9, "total": 27.1},
        cases=(
            CaseResult(
                "varlen_bf16_d128_causal", "flash_attn_varlen_func", "bf16", 128, True, 0.0078, 0.03, True, 2.81, None
            ),
        ),
    )
    return CheckPayload(
        target=target(),
        gpus=GpuFacts("nvml", (H200,), "580.159.04", "13.0", None, ("nvml: 1 GPU",)),
        torch=TorchBuild("2.11.0+cu130", "13.0", None, True, f"{SITE}/torch"),
        packages=(
            PackageRow(
                Distribution(
                    "flash-attn-4", "flash-attn-4", "4.0.0b36", SITE, f"{SITE}/flash_attn_4-4.0.0b36.dist-info"
                ),
                "fa4",
            ),
        ),
        selection=Selection(choice, dataclasses.replace(choice, phase="decode"), "fa3", "Hopper"),
        smoke=SmokeSection(("fa4",), (DeviceSmoke(H200, smoke),), {"fa4": {"0": "passed"}}),
    )


def findings() -> tuple[Finding, ...]:
    return (
        Finding(
            "gpu.found", Severity.OK, "1 GPU(s) visible (via nvml)", "GPU 0: NVIDIA H200 (sm_90)", {"source": "nvml"}
        ),
        Finding(
            "override.invalid",
            Severity.FAIL,
            "SGLANG_FLASHATTENTION_VERSION has an invalid value",
            "SGLANG_FLASHATTENTION_VERSION='5' is not one of the documented values 2, 3 or 4.",
            {"variable": "SGLANG_FLASHATTENTION_VERSION", "value": "'5'", "valid": [2, 3, 4]},
            (
                Remedy(
                    "(1) Unset it.", ("unset SGLANG_FLASHATTENTION_VERSION", "export SGLANG_FLASHATTENTION_VERSION=3")
                ),
            ),
        ),
        Finding(
            "knob.ignored",
            Severity.WARN,
            "flash-attn[cu13] built for [sm80, sm121]",
            "Brackets must survive: [sm80, sm121] and flash-attn[triton]. Commas, 100% and :: too.",
            {"api_key": "s3cret", "devices": [{"index": 0, "name": "NVIDIA H200"}]},
            (Remedy("Reinstall.", ("/opt/venv/bin/python -m pip install 'flash-attn-4[cu13]'",)),),
        ),
        Finding(
            "selection.not_fa",
            Severity.INFO,
            "decode: flashinfer runs, not FlashAttention",
            "Version 2.8.3\x1b[2;1H\x1b[2K\x1b[32mStatus: OK\x1b]0;pwned\x07 is hostile.",
        ),
    )


def sample() -> Result:
    return Result("check", findings(), payload(), {"total": 0.0421, "smoke": 27.1})
