"""Evidence beyond the patterns (evidence.py), the reasons explain gives, what --python's machine says (verify.py)."""

from __future__ import annotations

import pytest

from fa_doctor.knowledge import explain
from fa_doctor.knowledge.features import featurise
from fa_doctor.knowledge.match import normalise
from fa_doctor.knowledge.verify import CONFIRMED, RULED_OUT, reweigh, verdicts
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.install import DistributionScan
from fa_doctor.model.machine import GpuDevice, GpuFacts, TargetFacts, TorchBuild


def ev(text: str) -> dict[str, str]:
    return featurise(normalise(text)).evidence


@pytest.mark.parametrize(
    ("text", "feature"),
    [
        (
            "RuntimeError: FlashAttention forward only supports head dimension at most 256, got 512",
            "ev:headdim-over-256",
        ),
        (
            "`flshattF@v2.3.6` is not supported because: max(query.shape[-1] != value.shape[-1]) > 512",
            "ev:headdim-over-256",
        ),
        ("head_dim 100 is not supported", "ev:headdim-odd"),
        ("GPU with CUDA capability 7 0 is not supported", "ev:cap-pre-ampere"),
        ("FlashAttention2 requires compute capability >= 8, but found (7, 5).", "ev:cap-pre-ampere"),
        ("nvc++-Error-Unknown switch: -fwrapv", "ev:compiler-flag"),
        ("ValueError: not enough values to unpack (expected 8, got 7)", "ev:unpack"),
        (
            "ImportError: Requires Flash-Attention version >=2.7.1,<=2.7.4 but got 2.8.0.post2.",
            "ev:version-requirement",
        ),
        ("error: unable to create file csrc/x/y.cpp: Filename too long", "ev:long-path"),
        (
            "Building wheel for flash-attn (setup.py) ... error\nModuleNotFoundError: No module named 'torch'",
            "ev:missing-in-build",
        ),
        (
            'Traceback:\n  File "/v/lib/python3.10/site-packages/xformers/ops/fmha/flash.py", line 1',
            "ev:frame-xformers",
        ),
        ("RuntimeError: something\nValueError: the last one", "ev:exc-valueerror"),
    ],
)
def test_rules_name_the_evidence(text: str, feature: str) -> None:
    assert feature in ev(text)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # The misses issue 16 lists, as they read in real reports:
        ("RuntimeError: FlashAttention only supports head dimensions up to 256", "dtype-shape"),
        ("GPU with CUDA capability 7 5 is not supported for Flash Attention V2", "arch-unsupported"),
        ("nvc++-Error-Unknown switch: -fwrapv", "build-failure"),
        ("ValueError: not enough values to unpack (expected 8, got 7)", "api-mismatch"),
        (
            "ValueError: Unknown attention backend: 'ASCEND'. Valid options are: FLASH_ATTN, ROCM_ATTN, TORCH_SDPA",
            "selection-override",
        ),
        (
            "Cloning into 'C:/x/flash-attention/csrc/composable_kernel'...\n"
            "error: unable to create file library/src/device_gemm_xdl_instance.cpp: Filename too long",
            "build-failure",
        ),
    ],
)
def test_issue_16_misses_get_their_category(text: str, category: str) -> None:
    first = explain(text)[0]
    assert first.category == category and first.reasons


def test_nothing_of_flashattentions_world_is_no_match() -> None:
    assert explain("the weather is nice today") == []
    assert explain("KeyError: 'total'\nTraceback (most recent call last):") == []


def test_the_cpu_case_does_not_offer_a_likely_second_answer() -> None:
    ms = explain(
        "ValueError: Flash Attention 2 is not available on CPU. Please make sure torch can access a CUDA device."
    )
    assert ms[0].category == "no-gpu" and all(m.confidence < 0.2 for m in ms[1:])


def test_confidence_orders_the_answers_and_stays_inside_0_1() -> None:
    ms = explain("ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    assert [m.confidence for m in ms] == sorted((m.confidence for m in ms), reverse=True)
    assert all(0 < m.confidence < 1 for m in ms) and ms[0].confidence > 0.9


# ---------------------------------------------------------------------------------------------- the machine
def facts(
    gpu: tuple[str, tuple[int, int]] | None = ("NVIDIA A100", (8, 0)),
    torch: str = "2.8.0+cu128",
    cuda: str | None = "12.8",
    hip: str | None = None,
    driver_cuda: str = "12.9",
) -> Facts:
    target = TargetFacts(
        "/v/bin/python", "/v/bin/python", (3, 11, 9), "cpython", "/v", (), "x86_64", "glibc 2.35", True, False
    )
    devices = (GpuDevice(0, 0, gpu[0], gpu[1], 81920, None),) if gpu else ()
    gpus = GpuFacts("test", devices, "570.0", driver_cuda, None, ())
    return Facts(target, gpus, TorchBuild(torch, cuda, hip, True, "/v/torch"), DistributionScan((), 0, ()), {}, None)


def finding(fid: str, severity: Severity = Severity.FAIL) -> Finding:
    return Finding(fid, severity, f"title of {fid}")


def test_failing_checks_confirm_and_facts_rule_out() -> None:
    said = verdicts(facts(), [finding("binary.undefined_symbol"), finding("binary.archs", Severity.OK)])
    assert said["abi-mismatch"].state == CONFIRMED and "binary.undefined_symbol" in said["abi-mismatch"].findings
    assert said["no-gpu"].state == RULED_OUT and "A100" in said["no-gpu"].reason
    assert said["rocm"].state == RULED_OUT
    assert said["arch-unsupported"].state == RULED_OUT and said["glibc"].state == RULED_OUT
    assert said["driver-too-old"].state == RULED_OUT and said["fa3-unavailable"].state == CONFIRMED


def test_the_machine_decides_between_close_hypotheses() -> None:
    old = verdicts(facts(gpu=("Tesla T4", (7, 5)), driver_cuda="12.2"), [finding("gpu.unsupported")])
    assert old["arch-unsupported"].state == CONFIRMED and old["driver-too-old"].state == CONFIRMED
    rocm = verdicts(facts(gpu=None, torch="2.8.0+rocm6.3", cuda=None, hip="6.3"), [])
    assert rocm["rocm"].state == CONFIRMED
    probs = reweigh(
        {"abi-mismatch": 0.45, "arch-unsupported": 0.55},
        verdicts(facts(), [finding("binary.undefined_symbol"), finding("binary.archs", Severity.OK)]),
    )
    assert probs["abi-mismatch"] > probs["arch-unsupported"] and sum(probs.values()) == pytest.approx(1)


def test_explain_reranks_with_the_machine_and_says_so() -> None:
    text = (
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "undefined symbol: _ZN3c104cuda9SetDeviceEi"
    )
    plain = explain(text)
    here = explain(text, facts(), findings=[finding("binary.undefined_symbol"), finding("binary.archs", Severity.OK)])
    assert all(m.verdict == "" for m in plain)
    assert here[0].category == "abi-mismatch" and here[0].verdict == CONFIRMED and here[0].verdict_reason
    ruled = [m for m in here if m.category == "arch-unsupported"]
    assert not ruled or (ruled[0].verdict == RULED_OUT and ruled[0].confidence < here[0].confidence)
    assert explain(text, facts()) == explain(text, facts(), findings=None)  # facts alone: remedies, no verdicts
