"""Remedies built from facts: the facts behind each choice (channels, wheels, pins, attribution) and their wording."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import gather_facts, gpu_env, vary
from fakeenv import H200, FakeEnv

from fa_doctor.diagnose.checks import remedies, unmet
from fa_doctor.diagnose.derive.requires import requires
from fa_doctor.diagnose.plan import recipes
from fa_doctor.diagnose.plan.expand import expand
from fa_doctor.diagnose.plan.torch import torch_channel
from fa_doctor.knowledge.classify import ImportProblem
from fa_doctor.model import actions as A
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.render.shell import finding_dict, fix_command, remedy_lines


def _pips(rs: tuple[Remedy, ...]) -> list[A.PipInstall]:
    return [a for r in rs for a in r.actions if isinstance(a, A.PipInstall)]


@pytest.mark.parametrize(
    ("torch_mm", "driver_cuda", "channel", "guess"),
    [
        ((2, 7), "12.4", "cu118", False),
        ((2, 7), "12.8", "cu128", False),
        ((2, 8), "13.0", "cu129", False),
        ((2, 9), "13.0", "cu130", False),
        ((2, 10), "12.9", "cu129", False),  # 2.9, 2.10 and 2.13 have cu129 too (the catalog's channel table)
        ((2, 13), "12.9", "cu129", False),
        ((2, 12), "12.8", "cu126", False),  # 2.12 dropped cu128
        ((2, 14), "13.2", "cu132", False),
        ((2, 11), None, "cu126", True),  # nvidia-smi alone: the driver's CUDA version is unknown
        ((2, 20), "13.0", None, False),
        ((2, 9), "11.8", None, False),
    ],
)
def test_torch_channel_depends_on_the_release(
    fenv: FakeEnv, torch_mm: tuple[int, int], driver_cuda: str | None, channel: str | None, guess: bool
) -> None:
    fenv.torch()
    facts = gather_facts(fenv)
    facts = dataclasses.replace(facts, gpus=dataclasses.replace(facts.gpus, cuda_driver_version=driver_cuda))
    got, why = torch_channel(facts, torch_mm)
    assert got == channel, why
    assert ("a guess" in why) is guess


def test_package_none_says_install_not_reinstall(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch("2.11.0+cu130")
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=gpu_env(tmp_path, H200))
    (remedy,) = run.finding("package.none")["remedies"]
    assert remedy["text"].startswith("(2) Install flash-attn-4[cu13]==4.0.0b") and "einstall" not in remedy["text"]
    # The hint acts on the environment it was computed for, not on fa-doctor's own (issue 14).
    assert remedy["fix"] == f"fa-doctor fix --apply --python {fenv.python} --only package.none"
    (action,) = remedy["actions"]
    assert action["kind"] == "pip-install" and action["constraints"] == ["torch==2.11.0"]
    assert "--force-reinstall" not in action["options"]


def test_fa2_release_wheel_next_to_the_source_build(fenv: FakeEnv) -> None:
    fenv.torch("2.8.0+cu128", "12.8")
    fenv.fa2(native=False, with_cute=False)
    facts = gather_facts(fenv)
    wheel, build = recipes.reinstall(facts, "fa2")
    (url,) = _pips((wheel,))[0].requirements
    abi = "TRUE" if facts.torch and facts.torch.cxx11_abi else "FALSE"
    assert url.endswith(f"flash_attn-2.8.3+cu12torch2.8cxx11abi{abi}-cp311-cp311-linux_x86_64.whl")
    assert _pips((wheel,))[0].options == ("--force-reinstall", "--no-deps")
    tools, source = _pips((build,))
    assert "ninja" in tools.requirements and tools.constraints == ("torch==2.8.0",)
    assert source.options == ("--force-reinstall", "--no-deps", "--no-build-isolation", "--no-cache-dir")
    assert source.env == (("MAX_JOBS", "4"),) and "hours" in build.text and "nvcc" in build.text


def test_fa2_without_a_release_wheel_only_builds_and_puts_fa4_back(fenv: FakeEnv) -> None:
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.fa2(native=False)
    fenv.fa4()
    (build,) = recipes.reinstall(gather_facts(fenv), "fa2")
    assert _pips((build,))[-1].requirements == ("flash-attn-4==4.0.0b36",)
    assert "2.8.3.post2" in build.text


def test_sglang_kernel_pin_is_the_one_being_installed(fenv: FakeEnv) -> None:
    """sglang requires sglang-kernel 0.4.10, built for torch 2.14.1; the installed 0.4.9 pins 2.11 (the
    installed torch): the remedy names 2.14.1 and installs nothing that would move torch."""
    fenv.torch("2.11.0+cu130", "13.0")
    fenv.sgl_kernel(version="0.4.9", torch_pin="2.11.0")
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, requires=["sglang-kernel==0.4.10", "torch==2.14.1"])
    (remedy,) = recipes.reinstall(gather_facts(fenv), "fa3-sgl")
    assert "torch 2.14.1 exactly" in remedy.text and "torch 2.11.0" in remedy.text
    assert not _pips((remedy,))


def test_sglang_kernel_never_installed_is_a_new_install(fenv: FakeEnv) -> None:
    fenv.torch("2.14.1+cu130", "13.0")
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, requires=["sglang-kernel==0.4.10", "torch==2.14.1"])
    (remedy,) = recipes.reinstall(gather_facts(fenv), "fa3-sgl")
    (action,) = _pips((remedy,))
    assert (
        remedy.text.startswith("(2) Install sglang-kernel")
        and "sglang 0.5.23 requires sglang-kernel==0.4.10" in remedy.text
    )
    assert action.requirements == ("sglang-kernel==0.4.10",) and "--force-reinstall" not in action.options
    assert "torch==2.14.1" in action.constraints


def test_planted_requirement_is_refused(fenv: FakeEnv) -> None:
    fenv.torch("2.14.1+cu130", "13.0")
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, requires=["sglang-kernel==0.4.10$(touch PWNED)"])
    facts = gather_facts(fenv)
    assert requires(facts, facts.scan.first("sglang"), "sglang-kernel") is None  # type: ignore[arg-type]
    (remedy,) = recipes.reinstall(facts, "fa3-sgl")
    assert all("PWNED" not in c for c in remedy_lines(remedy))


def test_missing_module_is_attributed_to_the_server(fenv: FakeEnv) -> None:
    """On the H200: with --attention-backend fa4 SGLang's import dies on orjson, a requirement of sglang."""
    fenv.torch("2.14.1+cu130", "13.0")
    fenv.fa4()
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, requires=["orjson", "flash-attn-4>=4.0.0b18"])
    facts = gather_facts(fenv)
    problem = ImportProblem("module_missing", "No module named 'orjson'", "missing", (), {"module": "orjson"})
    head, intent = unmet.for_problem(facts, "fa4-sglang", problem)
    (install,) = expand(intent, facts)
    assert "orjson, a requirement of sglang 0.5.23" in head.text and "not the cause" in head.text
    (action,) = _pips((install,))
    assert action.requirements == ("orjson",) and "torch==2.14.1" in action.constraints
    cutlass = ImportProblem("module_missing", "No module named 'einops_x'", "missing", (), {"module": "einops_x"})
    assert unmet.for_problem(facts, "fa4", cutlass) == remedies.reinstall("fa4")
    assert expand(remedies.reinstall("fa4")[0], facts) == recipes.reinstall(facts, "fa4")


def test_remedy_three_only_when_something_pins(fenv: FakeEnv) -> None:
    fenv.torch()
    facts = gather_facts(fenv)
    assert not remedies.if_pinned(facts)
    assert remedies.if_pinned(vary(facts, env={"SGLANG_FLASHATTENTION_VERSION": "3"}))
    assert remedy_lines(remedies.auto_detect(facts)) == ("fa-doctor check",)


def test_fix_commands(fenv: FakeEnv) -> None:
    fenv.torch()
    unset, set3 = expand(remedies.unset_override(3), gather_facts(fenv))  # alternatives: one block each
    assert remedy_lines(unset) == ("unset SGLANG_FLASHATTENTION_VERSION",)
    assert remedy_lines(set3) == ("export SGLANG_FLASHATTENTION_VERSION=3",)
    assert fix_command(unset, "override.invalid") == 'eval "$(fa-doctor fix --unset-override)"'
    assert fix_command(set3, "override.invalid") == 'eval "$(fa-doctor fix --unset-override --set 3)"'
    assert fix_command(remedies.auto_detect(), "x") == 'eval "$(fa-doctor fix --unset-override)"'
    assert fix_command(Remedy("text only"), "x") is None
    d = finding_dict(Finding("a.b", Severity.FAIL, "t", remedies=(unset,)))["remedies"][0]
    assert d["actions"][0] == {"kind": "unset-env", "name": "SGLANG_FLASHATTENTION_VERSION"}
    assert d["fix"].startswith("eval")
    assert remedy_lines(dataclasses.replace(unset)) == remedy_lines(unset)  # no doubled lines


def test_stray_module_is_moved_not_deleted(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: Any) -> None:
    """`rm -rf` of the parent (the working directory) before; now the package folder itself, moved aside."""
    fenv.torch("2.11.0+cu130")
    work = tmp_path / "p"
    (work / "flash_attn").mkdir(parents=True)
    (work / "flash_attn" / "__init__.abi3.so").write_bytes(b"")
    monkeypatch.chdir(work)
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python)
    (remedy,) = run.finding("package.unmanaged")["remedies"]
    (action,) = remedy["actions"]
    assert action == {
        "kind": "move-path",
        "path": str(work / "flash_attn"),
        "backup": str(work / "flash_attn.fa-doctor-backup"),
        "root": str(work),
    }
    assert not any(c.startswith("rm ") for c in remedy["commands"])
