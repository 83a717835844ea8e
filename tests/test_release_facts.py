"""Each release fact issue 14 found wrong, held against the released artifacts the catalog was read from.

Every test here failed on the code before the catalog: a remedy that names a package version that does not
exist, an install that could never resolve, a knob value reported fine that the released code rejects.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import gather_facts, gpu_env, vary
from fakeenv import B200, FIXTURES, H200, FakeEnv

from fa_doctor.catalog import ecosystem, knobs, releases
from fa_doctor.diagnose.plan import recipes
from fa_doctor.diagnose.plan.torch import torch_channel
from fa_doctor.model import actions as A
from fa_doctor.model.finding import Remedy

SGLANG_METADATA = (FIXTURES / "sglang-0.5.23.dist-info" / "METADATA").read_text(encoding="utf-8")


def _pips(remedies: tuple[Remedy, ...] | list[Remedy]) -> list[A.PipInstall]:
    return [a for r in remedies for a in r.actions if isinstance(a, A.PipInstall)]


# ---- what the index holds ---------------------------------------------------------------------------------


def test_flash_attn_4_has_only_pre_releases_so_the_install_names_one(fenv: FakeEnv) -> None:
    """A bare `flash-attn-4` (or `flash-attn-4[cu13]`) never resolves: pip skips pre-releases unless named."""
    assert ecosystem.prerelease_only("flash-attn-4") and "0.0.1" in releases.YANKED["flash-attn-4"]
    fenv.torch("2.11.0+cu130", "13.0")
    (action,) = _pips((recipes.fa4(gather_facts(fenv), "fa4"),))
    (req,) = action.requirements
    assert req == f"flash-attn-4[cu13]=={ecosystem.latest('flash-attn-4', pre=True)}"
    assert ecosystem.exists("flash-attn-4", req.split("==")[1])


def test_dsl_split_packages_exist_only_from_4_6_0() -> None:
    """flash-attn-4 b20-b26 pin nvidia-cutlass-dsl==4.6.0.dev0, for which libs-core and libs-cu12 do not exist."""
    assert (
        ecosystem.requirement_on("flash-attn-4", "4.0.0b22", "nvidia-cutlass-dsl") == "nvidia-cutlass-dsl==4.6.0.dev0"
    )
    assert not ecosystem.exists("nvidia-cutlass-dsl-libs-core", "4.6.0.dev0")
    assert ecosystem.dsl_closure("4.6.0.dev0", 13) == ("nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13")
    # 4.6-4.8.1 require libs-cu12 whatever the CUDA; [cu13] adds libs-cu13 (it does not replace it).
    assert ecosystem.dsl_closure("4.8.1", 13) == tuple(
        f"nvidia-cutlass-dsl-libs-{p}" for p in ("base", "core", "cu12", "cu13")
    )
    assert ecosystem.dsl_closure("4.8.1", 12) == tuple(f"nvidia-cutlass-dsl-libs-{p}" for p in ("base", "core", "cu12"))


def test_fa4_repair_on_dsl_4_6_0_dev0_names_only_packages_that_exist(fenv: FakeEnv) -> None:
    fenv.torch("2.9.1+cu128", "12.8")
    fenv.dist("nvidia-cutlass-dsl", "4.6.0.dev0", {}, requires=["nvidia-cutlass-dsl-libs-base==4.6.0.dev0"])
    fenv.dist("nvidia-cutlass-dsl-libs-base", "4.6.0.dev0", {"nvidia_cutlass_dsl/dsl_packages/cutlass/__init__.py": ""})
    fenv.dist("flash-attn-4", "4.0.0b22", {"flash_attn/cute/__init__.py": ""})
    (reinstall_fa4, reinstall_dsl) = _pips((recipes.fa4(gather_facts(fenv), "fa4"),))
    assert reinstall_fa4.requirements == ("flash-attn-4==4.0.0b22",)
    assert reinstall_dsl.requirements == ("nvidia-cutlass-dsl==4.6.0.dev0", "nvidia-cutlass-dsl-libs-base==4.6.0.dev0")
    assert all(ecosystem.exists(*r.split("==")) for r in reinstall_dsl.requirements)


def test_sglang_pins_read_from_the_real_wheels() -> None:
    assert ecosystem.pin("sglang", "0.5.23", "sglang-kernel") == "0.4.10"
    assert ecosystem.pin("sglang", "0.5.23", "torch") == "2.14.1"
    assert ecosystem.pin("sglang-kernel", "0.4.10", "torch") == "2.14.1"
    assert ecosystem.pin("sglang-kernel", "0.4.6.post1", "torch") is None  # declares no torch at all
    assert "0.5.17" in ecosystem.releases_pinning("sglang", "torch", "2.11.0+cu130")


def test_pypi_builds_cuda_major() -> None:
    """sglang-kernel 0.4.0/0.4.1 on PyPI already link libcudart.so.12 (their torch, 2.9.1, is a CUDA 12 build);
    from 0.4.2 on (torch 2.11 and later: cuda-toolkit 13) they are CUDA 13 builds."""
    assert ecosystem.pypi_torch_cuda("2.9.1") == 12 and ecosystem.pypi_torch_cuda("2.11.0") == 13
    assert ecosystem.sgl_kernel_cuda("0.4.0") == 12 and ecosystem.sgl_kernel_cuda("0.4.1") == 12
    assert ecosystem.sgl_kernel_cuda("0.4.10") == 13


@pytest.mark.parametrize("release", ["2.9", "2.10", "2.13"])
def test_cu129_channels(release: str) -> None:
    assert "cu129" in ecosystem.torch_channels(tuple(int(p) for p in release.split(".")))  # type: ignore[arg-type]


def test_cpu_torch_on_blackwell_gets_a_channel_with_blackwell_code(fenv: FakeEnv) -> None:
    """torch >= 2.7's cu126 wheels carry no sm_100/sm_120 code: the oldest channel is the wrong guess there."""
    fenv.torch("2.13.0+cpu", cuda=None)
    facts = vary(gather_facts(fenv), caps=((10, 0),))
    facts = dataclasses.replace(facts, gpus=dataclasses.replace(facts.gpus, cuda_driver_version=None))
    channel, why = torch_channel(facts, (2, 13))
    assert channel == "cu129" and "12.8" in why
    hopper = vary(gather_facts(fenv), caps=((9, 0),))
    hopper = dataclasses.replace(hopper, gpus=dataclasses.replace(hopper.gpus, cuda_driver_version=None))
    assert torch_channel(hopper, (2, 13))[0] == "cu126"


def test_fa2_wheel_matrix_excludes_what_was_never_built() -> None:
    assert ecosystem.fa2_wheel("2.8.3", (2, 8), 12, True, (3, 12), "linux_x86_64")
    assert ecosystem.fa2_wheel("2.8.3", (2, 4), 12, True, (3, 13), "linux_x86_64") is None  # excluded pair
    assert ecosystem.fa2_wheel("2.8.3", (2, 9), 12, True, (3, 12), "linux_x86_64") is None  # torch 2.9: none


def test_fa2_rebuild_never_reuses_the_wheel_cache(fenv: FakeEnv) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa2(native=False, with_cute=False)
    build = _pips(recipes.fa2(gather_facts(fenv)))[-1]
    assert "--no-cache-dir" in build.options and "--no-build-isolation" in build.options


# ---- knobs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "gpu", "fid"),
    [
        ("sm_90", H200, "knob.conflict"),  # wgmma needs exactly sm_90a
        ("sm_90a", H200, "knob.active"),
        ("sm90a", H200, "knob.invalid"),  # Arch["sm90a"]: KeyError
        ("sm_100", B200, "knob.conflict"),  # tcgen05 needs an a/f suffix
        ("sm_100a", B200, "knob.active"),
        ("sm_100f", B200, "knob.active"),
        ("sm_100a", H200, "knob.conflict"),
    ],
)
def test_cute_dsl_arch_as_dsl_4_8_1_reads_it(
    cli: Any, fenv: FakeEnv, tmp_path: Path, value: str, gpu: str, fid: str
) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa4()
    run = cli(
        "check", "--no-smoke", "--json", "--python", fenv.python, env={**gpu_env(tmp_path, gpu), "CUTE_DSL_ARCH": value}
    )
    (finding,) = [f for f in run.doc["findings"] if f["evidence"].get("variable") == "CUTE_DSL_ARCH"]
    assert finding["id"] == fid, finding["detail"]
    assert knobs.dsl_arch_runs_fa4(value, (9, 0) if gpu == H200 else (10, 0)) is None or fid != "knob.active"


@pytest.mark.parametrize(
    ("enabled", "folder", "fid", "severity"),
    [
        (None, "/nonexistent-root-only/x", "knob.ignored", "info"),  # the cache is off: the folder is never read
        ("1", "/etc/hostname/fa4-cache", "knob.invalid", "fail"),  # mkdir fails: import flash_attn.cute raises
        ("1", "", "knob.invalid", "fail"),
    ],
)
def test_fa4_cache_dir_only_matters_when_the_cache_is_on(
    cli: Any, fenv: FakeEnv, tmp_path: Path, enabled: str | None, folder: str, fid: str, severity: str
) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa4()
    env = {**gpu_env(tmp_path, H200), "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": folder}
    if enabled:
        env["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = enabled
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=env)
    finding = run.finding(fid)
    assert finding["severity"] == severity and finding["evidence"]["variable"] == "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"


def test_fa4_cache_dir_that_can_be_created_is_fine(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa4()
    env = {
        **gpu_env(tmp_path, H200),
        "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "1",
        "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": str(tmp_path / "new" / "cache"),
    }
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=env)
    assert not [f for f in run.doc["findings"] if f["evidence"].get("variable") == "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"]


def test_vllm_0_15_accepts_2_or_3_not_4(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.dist("vllm", "0.15.0", {"vllm/__init__.py": ""})
    run = cli(
        "check",
        "--no-smoke",
        "--json",
        "--python",
        fenv.python,
        env={**gpu_env(tmp_path, B200), "VLLM_FLASH_ATTN_VERSION": "4"},
    )
    finding = run.finding("knob.ignored")
    assert "accepts 2 or 3, not 4" in finding["detail"] and "(2, 3 or 4)" not in finding["detail"]


def test_explain_says_fa4_runs_on_12x() -> None:
    from fa_doctor.knowledge import load

    texts = " ".join(r.text for e in load() for r in e.remedies)
    assert "9.0-11.x" not in texts and "FA4: 9.0-12.x" in texts


# ---- the server's pins, on the real sglang 0.5.23 wheel METADATA --------------------------------------------


def _sglang_over_torch_2_11(fenv: FakeEnv) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa4()
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, top_level=["sglang"], metadata=SGLANG_METADATA)


def test_sglang_0_5_23_pins_torch_2_14_1_and_the_consistent_alternatives(
    cli: Any, fenv: FakeEnv, tmp_path: Path
) -> None:
    """Installed with --no-deps over torch 2.11: no install keeps both, so the report says so and offers the
    sglang release built for torch 2.11 (0.5.17, from the catalog) or torch 2.14.1, marked as replacing torch."""
    _sglang_over_torch_2_11(fenv)
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=gpu_env(tmp_path, H200))
    req = run.finding("package.requirement")
    assert "requires torch==2.14.1, found torch 2.11.0" in req["detail"]
    texts = [r["text"] for r in req["remedies"]]
    assert any("no install can satisfy both" in t for t in texts)
    keep = next(r for r in req["remedies"] if r["text"].startswith("(a) Keep torch"))
    (action,) = keep["actions"]
    assert action["requirements"] == ["sglang==0.5.17"] and action["constraints"] == ["torch==2.11.0"]
    move = next(r for r in req["remedies"] if r["text"].startswith("(b) Move torch"))
    assert move["replaces_torch"] and "--allow-torch-change" in move["fix"]
    assert move["actions"][0]["requirements"][0] == "torch==2.14.1"
    fix = next(r["fix"] for r in req["remedies"] if r["fix"])
    assert f"--python {fenv.python}" in fix


def test_sglang_kernel_remedy_follows_the_servers_pin(fenv: FakeEnv) -> None:
    """Not an unpinned `pip install sglang-kernel` (which backtracks to 0.4.6.post1): sglang's own 0.4.10, and
    since 0.4.10 is built for torch 2.14.1 exactly, no install of it is offered over torch 2.11."""
    _sglang_over_torch_2_11(fenv)
    (remedy,) = recipes.sgl_kernel(gather_facts(fenv))
    assert "sglang 0.5.23 requires sglang-kernel==0.4.10" in remedy.text and "torch 2.14.1 exactly" in remedy.text
    assert not _pips((remedy,))


def test_orjson_is_sglangs_requirement_not_the_dsl(fenv: FakeEnv) -> None:
    from fa_doctor.diagnose.checks import unmet
    from fa_doctor.diagnose.plan.expand import expand
    from fa_doctor.knowledge.classify import ImportProblem

    _sglang_over_torch_2_11(fenv)
    facts = gather_facts(fenv)
    problem = ImportProblem("module_missing", "No module named 'orjson'", "missing", (), {"module": "orjson"})
    head, intent = unmet.for_problem(facts, "fa4-sglang", problem)
    assert "orjson, a requirement of sglang 0.5.23" in head.text
    planned = expand(intent, facts)
    (install,) = _pips(planned)
    assert install.requirements == ("orjson",) and "torch==2.11.0" in install.constraints
    assert not any(r.startswith("torch") for r in install.requirements)


def test_dsl_before_the_split_is_not_missing_libs_core(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    """DSL 4.5.2 (flash-attn-4 b16-b19) has no libs-core release: its absence is no fault."""
    fenv.torch("2.9.1+cu128", "12.8")
    fenv.dist("nvidia-cutlass-dsl", "4.5.2", {"cutlass/__init__.py": "", "cutlass/cute/__init__.py": ""})
    fenv.dist("nvidia-cutlass-dsl-libs-base", "4.5.2", {"nvidia_cutlass_dsl/libs/__init__.py": ""})
    fenv.dist("flash-attn-4", "4.0.0b18", {"flash_attn/cute/__init__.py": ""})
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=gpu_env(tmp_path, H200))
    assert "nvidia-cutlass-dsl-libs-core" not in str(run.doc["findings"])


def test_a_new_fa4_beta_is_a_catalog_change_only(fenv: FakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `scripts/regen_catalog.py` writes for a new beta (its version and requirements) is all the planner
    needs: the install names it and its DSL closure follows its own pin."""
    versions = {**releases.VERSIONS, "flash-attn-4": (*releases.VERSIONS["flash-attn-4"], "4.0.0b99")}
    requires = dict(releases.REQUIRES)
    requires["flash-attn-4"] = {**requires["flash-attn-4"], "4.0.0b99": ("nvidia-cutlass-dsl>=4.8.1",)}
    monkeypatch.setattr(releases, "VERSIONS", versions)
    monkeypatch.setattr(releases, "REQUIRES", requires)
    fenv.torch("2.11.0+cu130", "13.0")
    (action,) = _pips((recipes.fa4(gather_facts(fenv), "fa4"),))
    assert action.requirements == ("flash-attn-4[cu13]==4.0.0b99",)
    assert ecosystem.requirement_on("flash-attn-4", "4.0.0b99", "nvidia-cutlass-dsl") == "nvidia-cutlass-dsl>=4.8.1"
