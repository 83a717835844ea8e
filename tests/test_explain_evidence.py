"""Evidence beyond the patterns (evidence.py), the reasons explain gives, what --python's machine says (verify.py)."""

from __future__ import annotations

import pytest

from fa_doctor.knowledge import CONFIRMED, RULED_OUT, explain, reweigh, verdicts
from fa_doctor.knowledge.match import featurise, normalise
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


# ---------------------------------------------------------------------------------------------- structure (issue 27)
@pytest.mark.parametrize(
    ("text", "feature"),
    [
        (
            "ImportError: /v/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: "
            "__nvJitLinkComplete_12_4, version libnvJitLink.so.12",
            "ev:symbol-versioned-cuda",
        ),
        ("ImportError: /v/lib/libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1", "ev:symbol-in-cuda"),
        (
            "ImportError: /x/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
            "undefined symbol: hipGetDevicePropertiesR0600",
            "ev:symbol-rocm",
        ),
        ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8", "ev:cuda-requirement"),
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]]',
            "ev:gpu-not-visible",
        ),
        ("INFO No platform detected, vLLM is running on UnspecifiedPlatform", "ev:gpu-not-visible"),
        ("CUDA_VISIBLE_DEVICES= python -m vllm.entrypoints.openai.api_server", "ev:visible-devices-empty"),
        ("ModuleNotFoundError: No module named 'einops'", "ev:missing-kind-dependency"),
        ("ModuleNotFoundError: No module named 'dropout_layer_norm'", "ev:missing-kind-fa-optional"),
        ("ModuleNotFoundError: No module named 'cutlass.cute'", "ev:missing-kind-dsl"),
        ("the GPU is an NVIDIA H800", "ev:gpu-hopper"),
        ("on my RTX 4090", "ev:gpu-ampere"),
        ("AMD Instinct MI300X", "ev:gpu-amd"),
        ("RuntimeError: FlashAttention-3 is only supported on Hopper GPUs (sm90)", "ev:fa3-refused"),
        (
            "`flshattF` is not supported because:\n  xFormers wasn't build with CUDA support\n"
            "`cutlassF` is not supported because:\n  xFormers wasn't build with CUDA support\n  dtype=torch.float32",
            "ev:operators-unbuilt",
        ),
        ("requires device with capability > (9, 0) but your GPU has capability (8, 6) (too old)", "ev:cap-ampere"),
    ],
)
def test_structure_names_what_failed_and_where(text: str, feature: str) -> None:
    assert feature in ev(text)


def test_an_operator_list_is_read_for_what_every_operator_shares() -> None:
    """xFormers lists each operator's reasons; a capability line of one operator is not the shared cause."""
    got = ev(
        "`fa3F@0.0.0` is not supported because:\n requires device with capability > (9, 0)\n"
        " xFormers wasn't build with CUDA support\n`fa2F@0.0.0` is not supported because:\n"
        " xFormers wasn't build with CUDA support\n dtype=torch.float32"
    )
    assert "ev:operators-unbuilt" in got
    assert "ev:fa3-refused" not in got  # the operator fa3F is not FlashAttention-3 refusing the GPU


@pytest.mark.parametrize(
    ("text", "category", "entry"),
    [
        # The misses issue 27 lists, as they read in real reports:
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver "
            "to a newer version, or use an earlier cuda container: unknown",
            "driver-too-old",
            "driver.insufficient",
        ),
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
            "no-gpu",
            "nogpu.not-visible",
        ),
        (
            "INFO 05-14 04:44:35 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n"
            "RuntimeError: Failed to infer device type",
            "no-gpu",
            "nogpu.not-visible",
        ),
        (
            "RuntimeError: Flash attention currently doesn't support training with head_dim greater than 64 on sm86",
            "dtype-shape",
            "shape.head-dim",
        ),
        ("RuntimeError: FlashAttentionHopper only supports Hopper GPUs or newer.", "fa3-unavailable", "fa3.capability"),
        ("WARNING: Flash Attention 3 not available, using PyTorch SDPA fallback", "fa3-unavailable", ""),
        (
            "/opt/rocm/bin/hipcc -c csrc/flash_attn_ck/mha_fwd.hip -o build/mha_fwd.o --offload-arch=gfx1100\n"
            "error: command '/opt/rocm/bin/hipcc' failed with exit code 1",
            "rocm",
            "rocm.platform",
        ),
        (
            "ImportError: Requires Flash-Attention version >=2.7.1,<=2.7.4 but got 2.8.0.post2.",
            "api-mismatch",
            "api.version-gate",
        ),
        (
            "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
            "    PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.1.0+cu118)",
            "abi-mismatch",
            "abi.xformers-build",
        ),
        (
            "ImportError: /v/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: "
            "__nvJitLinkComplete_12_4, version libnvJitLink.so.12",
            "cuda-runtime",
            "cuda.runtime-symbol",
        ),
        (
            '  File "/v/site-packages/transformer_engine/pytorch/attention/inference.py", line 9, in <module>\n'
            "    from einops import rearrange\nModuleNotFoundError: No module named 'einops'",
            "missing-module",
            "missing.dependency",
        ),
    ],
)
def test_issue_27_misses_get_their_category(text: str, category: str, entry: str) -> None:
    first = explain(text)[0]
    assert first.category == category and first.reasons
    assert not entry or first.id == entry


# ---------------------------------------------------------------------------------------------- confidence
def test_a_paste_nothing_but_words_decide_is_a_guess() -> None:
    from fa_doctor.knowledge.model import GUESS, UNSUPPORTED

    ms = explain("RuntimeError: flash attention failed somehow")
    assert ms[0].standing == "guess" and ms[0].confidence <= UNSUPPORTED < GUESS


def test_answers_are_labelled_and_their_confidences_add_up_to_at_most_one() -> None:
    from fa_doctor.knowledge.model import SHOWN_MIN

    ms = explain("ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", limit=14)
    assert ms[0].standing == "likely" and ms[0].confidence >= 0.9
    assert all(m.standing == ("possible" if m.confidence >= SHOWN_MIN else "unlikely") for m in ms[1:])
    assert sum(m.confidence for m in ms) <= 1.0 + 1e-6
    assert len(ms) == 3  # the first three, then only answers at least SHOWN_MIN likely


@pytest.mark.parametrize(
    ("symbol", "version", "kind"),
    [
        ("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "cuda-library"),
        ("__nvJitLinkAddData_12_1", "", "cuda-library"),
        ("cudaGetDriverEntryPointByVersion", "libcudart.so.12", "cuda-runtime"),
        ("ncclCommRegister", "", "cuda-library"),
        ("cuTensorMapEncodeTiled", "", "cuda-driver"),
        ("hipGetDevicePropertiesR0600", "", "rocm"),
        ("_PyThreadState_UncheckedGet", "", "python"),
        ("__cxa_call_terminate", "", "cxx-runtime"),
        ("_ZNSt6thread6_StateD2Ev", "", "cxx-runtime"),
        ("_ZN3c104cuda9SetDeviceEi", "", "torch"),
        ("_ZN5flash12run_mha_fwdERNS_16Flash_fwd_paramsE", "", "other"),
    ],
)
def test_whose_symbol_is_missing(symbol: str, version: str, kind: str) -> None:
    from fa_doctor.knowledge.extract import symbol_kind

    assert symbol_kind(symbol, version) == kind


def test_a_versioned_symbol_the_loader_cannot_find_is_read_whole() -> None:
    from fa_doctor.knowledge.match import match

    _, found = match(
        (),
        "ImportError: /v/lib/libcudnn.so.9: symbol cudaGetDriverEntryPointByVersion version libcudart.so.12 "
        "not defined in file libcudart.so.12 with link time reference",
        1,
    )
    assert found["symbol"] == "cudaGetDriverEntryPointByVersion" and found["symbol_version"] == "libcudart.so.12"
    assert found["symbol_kind"] == "cuda-runtime" and found["library"] == "libcudart.so.12"
