"""Override, knobs and selection: which FA runs and why, against fake environments and fake GPUs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import commands_of, gpu_env, pip_words
from fakeenv import A100, B200, H200, T4, FakeEnv


def check(cli: Any, fenv: FakeEnv, *extra: str, env: dict[str, str] | None = None) -> Any:
    return cli("check", "--no-smoke", "--json", "--python", fenv.python, *extra, env=env)


@pytest.fixture
def server(fenv: FakeEnv) -> FakeEnv:
    """An SGLang 0.5.23-like server env: sglang, sglang-kernel, flash-attn-4 and its DSL, torch cu130."""
    fenv.torch("2.11.0+cu130")
    fenv.sgl_kernel(torch_pin="2.11.0")
    fenv.sglang()
    fenv.fa4()
    return fenv


def test_sglang_default_on_hopper_is_fa3(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, env=gpu_env(tmp_path, H200))
    sel = run.doc["selection"]
    assert sel["fa_version"] == 3 and sel["prefill"]["implementation"] == "fa3-sgl"
    assert sel["sglang_default_backend"] == "fa3"
    assert run.code == 0, run.ids()


def test_flag_fa4_uses_sglang_vendored_copy(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, "--attention-backend", "fa4", env=gpu_env(tmp_path, H200))
    assert run.doc["selection"]["decode"]["implementation"] == "fa4-sglang"
    assert run.doc["selection"]["decode"]["source"] == "flag"


def test_prefill_and_decode_differ(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(
        cli,
        server,
        "--prefill-attention-backend",
        "fa4",
        "--decode-attention-backend",
        "fa3",
        env=gpu_env(tmp_path, H200),
    )
    sel = run.doc["selection"]
    assert (sel["prefill"]["fa_version"], sel["decode"]["fa_version"]) == (4, 3)
    assert sel["fa_version"] is None
    assert [f["title"] for f in run.doc["findings"] if f["id"] == "selection.ok"] == [
        "FA4 will run for prefill: FA4 (SGLang's bundled copy)",
        "FA3 will run for decode: FA3 (sgl_kernel.flash_attn from sglang-kernel)",
    ]


def test_only_prefill_flag_leaves_decode_on_default(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    sel = check(cli, server, "--prefill-attention-backend", "fa4", env=gpu_env(tmp_path, H200)).doc["selection"]
    assert sel["decode"]["source"] == "sglang-default" and sel["decode"]["fa_version"] == 3


def test_fa3_flag_on_blackwell_is_unavailable(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, "--attention-backend", "fa3", env=gpu_env(tmp_path, B200))
    finding = run.finding("selection.unavailable")
    assert "compute capability 10.0" in finding["detail"]
    assert run.code == 1


def test_fa2_flag_is_not_an_sglang_backend(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, "--attention-backend", "fa2", env=gpu_env(tmp_path, H200))
    assert "not an SGLang attention backend" in run.finding("selection.unavailable")["detail"]


def test_ampere_default_is_not_fa(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, env=gpu_env(tmp_path, A100))
    assert run.finding("selection.not_fa")["severity"] == "info"
    assert run.doc["selection"]["sglang_default_backend"] == "triton"


def test_turing_gpu_is_unsupported(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, env=gpu_env(tmp_path, T4))
    assert "Ampere" in run.finding("gpu.unsupported")["detail"]
    assert run.code == 1


def test_nothing_usable_is_selection_none(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa4(core=False)
    run = check(cli, fenv, env=gpu_env(tmp_path, H200)).expect(1)
    finding = run.finding("selection.none")
    assert finding["severity"] == "fail" and finding["title"] == "No installed FlashAttention can run here"
    assert finding["detail"].startswith(
        "auto-detection found no usable FA implementation: nvidia-cutlass-dsl-libs-core"
    )
    assert [pip_words(c) for c in commands_of(finding)[0]] == [
        ["install", "--force-reinstall", "--no-deps", "flash-attn-4==4.0.0b36"],
        ["install", "--force-reinstall", "--no-deps"]
        + [f"nvidia-cutlass-dsl{p}==4.8.1" for p in ("", "-libs-base", "-libs-core", "-libs-cu12", "-libs-cu13")],
    ]
    assert len(commands_of(finding)) == 1  # nothing pins a version: no remedy (3)


def test_override_unset_is_ok(cli: Any, server: FakeEnv) -> None:
    finding = check(cli, server).finding("override.unset")
    assert finding["severity"] == "ok"
    assert "does not read it" in finding["detail"]


@pytest.mark.parametrize(
    "value",
    [
        "5",
        "fa3",
        "3.0",
        "",
        " 3",
        "3 ",
        "\uff13",
        "03",
        "9" * 400,
        "3\n",
        "\x1b[31m3",
        "-3",
        "+3",
        "4\x00"[:1] + "\x7f",
    ],
)
def test_override_invalid_values(cli: Any, server: FakeEnv, tmp_path: Path, value: str) -> None:
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": value}
    run = check(cli, server, env=env)
    finding = run.finding("override.invalid")
    assert run.code == 1
    assert finding["remedies"][0]["commands"] == ["unset SGLANG_FLASHATTENTION_VERSION"]
    assert finding["remedies"][1]["commands"] == ["export SGLANG_FLASHATTENTION_VERSION=3"]
    assert "\x1b" not in run.stdout and len(finding["evidence"]["value"]) < 80


def test_override_2_is_rejected_by_sglang(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "2"}
    finding = check(cli, server, env=env).finding("override.unavailable")
    assert "SGLang 0.5.23 has no fa2 backend" in finding["detail"]
    assert "invalid choice: 'fa2'" in finding["detail"] and "FA2 is only a fallback" in finding["detail"]


def test_override_collects_every_reason(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.sglang("0.6.0", accepted=(3,))  # a release the catalog does not hold: its own files are read
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "3"}
    finding = check(cli, fenv, env=env).finding("override.unavailable")
    assert "not installed" in finding["detail"]
    env["SGLANG_FLASHATTENTION_VERSION"] = "4"
    assert "has no fa4 backend" in check(cli, fenv, env=env).finding("override.unavailable")["detail"]


def test_override_3_on_blackwell_names_gpu_reason(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    env = {**gpu_env(tmp_path, B200), "SGLANG_FLASHATTENTION_VERSION": "3"}
    finding = check(cli, server, env=env).finding("override.unavailable")
    assert "compute capability 10.0" in finding["detail"]
    assert [r["commands"] for r in finding["remedies"][:2]] == [
        ["unset SGLANG_FLASHATTENTION_VERSION"],
        ["export SGLANG_FLASHATTENTION_VERSION=4"],
    ]


def test_override_active_says_how_sglang_relates(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "4"}
    run = check(cli, server, env=env)
    active = run.finding("override.active")
    assert "--attention-backend fa4" in active["detail"] and "does not read" in active["detail"]
    assert run.doc["selection"]["prefill"]["source"] == "override"
    assert run.code == 0


def test_sglang_that_reads_the_variable_is_named(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.sgl_kernel(torch_pin="2.11.0")
    fenv.sglang("0.6.0", reads_override=True)  # a release the catalog does not hold: its own files are read
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "3"}
    assert (
        "reads SGLANG_FLASHATTENTION_VERSION itself" in check(cli, fenv, env=env).finding("override.active")["detail"]
    )


def test_override_and_flags_disagree(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "3"}
    run = check(cli, server, "--attention-backend", "fa4", env=env)
    assert run.finding("selection.conflict")["severity"] == "warn"
    assert run.code == 0
    assert check(cli, server, "--strict", "--attention-backend", "fa4", env=env).code == 1


def test_override_without_sglang_picks_package(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa2(with_cute=False)
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "2"}
    run = check(cli, fenv, env=env).expect(0)
    assert run.finding("override.active")["title"] == "SGLANG_FLASHATTENTION_VERSION=2 pins FA2"
    assert run.doc["selection"]["prefill"]["implementation"] == "fa2"
    assert "no SGLang flag" in run.finding("override.active")["detail"]


@pytest.mark.parametrize(
    ("name", "value", "fid"),
    [
        ("SGLANG_USE_SGL_FA3_KERNEL", "maybe", "knob.invalid"),
        ("SGLANG_USE_SGL_FA3_KERNEL", "false", "knob.active"),
        ("SGLANG_INKLING_FA4_USE_PIP", "1", "knob.ignored"),
        ("VLLM_FLASH_ATTN_VERSION", "3", "knob.ignored"),
        ("VLLM_FLASH_ATTN_VERSION", "four", "knob.ignored"),  # vLLM is not installed: nothing reads it
        ("FLASH_ATTENTION_ARCH", "sm_100a", "knob.conflict"),
        ("FLASH_ATTENTION_ARCH", "sm_90", "knob.active"),
        ("CUTE_DSL_ARCH", "hopper!", "knob.invalid"),
        ("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE", "knob.conflict"),
        ("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "", "knob.ignored"),  # read only when the cache is on
        ("FLASH_ATTENTION_FORCE_BUILD", "TRUE", "knob.active"),
    ],
)
def test_knobs(cli: Any, server: FakeEnv, tmp_path: Path, name: str, value: str, fid: str) -> None:
    run = check(cli, server, env={**gpu_env(tmp_path, H200), name: value})
    finding = run.finding(fid)
    assert finding["evidence"]["variable"] == name
    assert finding["severity"] == "info" or finding["remedies"]


def test_real_sglang_0_5_23_wheel_layout(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    """The published sglang 0.5.23, sglang-kernel 0.4.10 and flash-attn-4 metadata, files as their RECORDs list."""
    fenv.torch("2.14.1+cu130")
    fenv.cutlass_dsl()
    fenv.fixture("flash_attn_4-4.0.0b36.dist-info")
    fenv.fixture("sglang_kernel-0.4.10.dist-info")
    fenv.fixture(
        "sglang-0.5.23.dist-info",
        keep=lambda rel: rel.startswith(
            ("sglang/kernels", "sglang/srt/layers", "sglang/__init__", "sglang/srt/__init__")
        ),
    )
    backend = fenv.site / "sglang/srt/layers/attention/flashattention_backend.py"
    backend.write_text("if self.fa_impl_ver == 3:\n    pass\nelif self.fa_impl_ver == 4:\n    pass\n")
    run = check(cli, fenv, "--attention-backend", "fa4", env=gpu_env(tmp_path, H200))
    sel = run.doc["selection"]
    assert sel["prefill"]["implementation"] == "fa4-sglang" and sel["prefill"]["problems"] == []
    versions = {p["distribution"]: p["version"] for p in run.doc["packages"]}
    assert versions["sglang"] == "0.5.23" and versions["sglang-kernel"] == "0.4.10"
    # torch 2.14.1 matches sglang-kernel's pin; sglang's own unmet requirements are reported as `pip check` would
    req = run.finding("package.requirement")
    assert req["evidence"]["distribution"] == "sglang", run.ids()
    unmet = {re.split(r"[=<>!~\[;]", u["requirement"])[0] for u in req["evidence"]["unmet"]}
    assert "orjson" in unmet and not unmet & {"torch", "sglang-kernel", "flash-attn-4"}
    assert [f["id"] for f in run.doc["findings"] if f["severity"] == "fail"] == ["package.requirement"]


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("flashinfr", "did you mean `flashinfer`?"),
        ("tritn", "did you mean `triton`?"),
        ("fa-3", "did you mean `fa3`?"),
        ("FA3 ", "use `fa3`"),
        ("flash_attn", "SGLang knows fa3 and fa4"),
    ],
)
def test_backend_typos_fail_as_sglang_would(cli: Any, server: FakeEnv, tmp_path: Path, name: str, hint: str) -> None:
    """SGLang exits at start-up on a name outside ATTENTION_BACKEND_CHOICES; so does the check."""
    run = check(cli, server, "--attention-backend", name, env=gpu_env(tmp_path, H200)).expect(1)
    assert "selection.not_fa" not in run.ids()
    finding = run.finding("selection.unavailable")
    assert finding["title"] == f"{name} is selected for prefill and decode but cannot run"
    assert f"argument --attention-backend: invalid choice: '{name}'" in finding["detail"]
    assert hint in finding["detail"]
    assert "--attention-backend fa3" in finding["remedies"][0]["text"]
    # The flag pins; the variable is not set. The check to run looks at the same interpreter, without the flag.
    assert commands_of(finding)[1] == [f"fa-doctor check --python {server.python}"]


def test_real_non_fa_backend_still_runs(cli: Any, server: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, server, "--attention-backend", "flashinfer", env=gpu_env(tmp_path, H200)).expect(0)
    finding = run.finding("selection.not_fa")
    assert finding["title"] == "prefill and decode: flashinfer runs, not FlashAttention"
    assert finding["detail"] == (
        "--attention-backend flashinfer; flashinfer is not FlashAttention. FA runs only with "
        "--attention-backend fa3|fa4 (SGLang's default here is fa3)."
    )
