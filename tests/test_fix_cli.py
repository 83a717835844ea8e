"""`fa-doctor fix` through the CLI: --unset-override for eval, env files, --plan, and --apply end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv

from fa_doctor.commands.fix import plan_steps
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.render.shell import fix_command


def fa_doctor(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def test_unset_override_prints_only_shell_code_and_it_works(tmp_path: Path) -> None:
    run = fa_doctor("fix", "--unset-override", "--shell", "bash")
    assert run.returncode == 0 and run.stdout == "unset SGLANG_FLASHATTENTION_VERSION\n"
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f'export SGLANG_FLASHATTENTION_VERSION=5; eval "$({sys.executable} -m fa_doctor fix '
            '--unset-override --shell bash)"; echo "[${SGLANG_FLASHATTENTION_VERSION-unset}]"',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.stdout.strip() == "[unset]"


def test_set_writes_a_valid_value_only() -> None:
    assert fa_doctor("fix", "--unset-override", "--set", "3", "--shell", "sh").stdout == (
        "export SGLANG_FLASHATTENTION_VERSION=3\n"
    )
    bad = fa_doctor("fix", "--unset-override", "--set", "$(touch PWNED)")
    assert bad.returncode == 2 and bad.stdout == "" and "--set" in bad.stderr


def test_env_file_dry_run_then_for_real(tmp_path: Path) -> None:
    env = tmp_path / "server.env"
    original = b"# server\r\nA=1\r\nSGLANG_FLASHATTENTION_VERSION=5\r\nB='x y'"
    env.write_bytes(original)
    env.chmod(0o600)
    dry = fa_doctor("fix", "--unset-override", "--env-file", str(env), "--dry-run")
    assert dry.returncode == 0 and "-SGLANG_FLASHATTENTION_VERSION=5" in dry.stdout
    assert env.read_bytes() == original and len(list(tmp_path.iterdir())) == 1  # nothing written, no backup
    real = fa_doctor("fix", "--unset-override", "--env-file", str(env), "--shell", "bash")
    assert real.returncode == 0 and real.stdout == "unset SGLANG_FLASHATTENTION_VERSION\n"
    assert env.read_bytes() == b"# server\r\nA=1\r\nB='x y'" and env.stat().st_mode & 0o777 == 0o600
    backups = [p for p in tmp_path.iterdir() if p != env]
    assert len(backups) == 1 and backups[0].read_bytes() == original


def test_env_file_that_cannot_be_written_fails_and_stays(tmp_path: Path) -> None:
    run = fa_doctor("fix", "--unset-override", "--env-file", str(tmp_path / "missing.env"), "--json")
    doc = json.loads(run.stdout)
    assert run.returncode == 1 and [f["id"] for f in doc["findings"]] == ["fix.edit_failed"]


@pytest.mark.parametrize(
    "text",
    [
        ": ${SGLANG_FLASHATTENTION_VERSION:=3}\n",
        "read -r SGLANG_FLASHATTENTION_VERSION <<< 3\n",
        "printf -v SGLANG_FLASHATTENTION_VERSION %s 3\n",
        "export 'SGLANG_FLASHATTENTION_VERSION'=3\n",
        "SGLANG_FLASHATTENTION_\\\nVERSION=3\n",
    ],
)
def test_env_file_that_sets_it_another_way_fails_naming_the_line(tmp_path: Path, text: str) -> None:
    """Issue 26: these were "does not set the override", exit 0; sourcing them sets it."""
    env = tmp_path / "launch.sh"
    env.write_text("# pinned\n" + text)
    run = fa_doctor("fix", "--unset-override", "--shell", "bash", "--env-file", str(env))
    assert run.returncode == 1 and f"{env}:2:" in run.stderr, run.stderr
    assert run.stdout == "unset SGLANG_FLASHATTENTION_VERSION\n"  # the shell code is printed all the same
    assert env.read_text() == "# pinned\n" + text and [p.name for p in tmp_path.iterdir()] == ["launch.sh"]
    doc = json.loads(fa_doctor("fix", "--unset-override", "--json", "--env-file", str(env)).stdout)
    assert doc["exit_code"] == 1 and [f["id"] for f in doc["findings"]] == ["fix.edit_failed"]


def test_plan_is_the_default_and_changes_nothing(tmp_path: Path) -> None:
    stray = tmp_path / "p" / "flash_attn"
    stray.mkdir(parents=True)
    (stray / "__init__.abi3.so").touch()
    run = fa_doctor("fix", "--no-smoke", "--json", cwd=tmp_path / "p")
    doc = json.loads(run.stdout)
    moves = [s for s in doc["plan"] if s["action"]["kind"] == "move-path"]
    assert moves and moves[0]["action"]["path"] == str(stray) and moves[0]["finding"] == "package.unmanaged"
    assert all(s["action"]["kind"] != "run" for s in doc["plan"])  # diagnostics are not repairs
    assert stray.is_dir()


def test_apply_moves_the_stray_folder_aside_and_rechecks(tmp_path: Path) -> None:
    """The issue's data-loss repro, now repaired: the package folder itself is moved, the parent stays."""
    home = tmp_path / "p"
    stray = home / "flash_attn"
    stray.mkdir(parents=True)
    (stray / "__init__.abi3.so").touch()
    (home / "keep.txt").write_text("mine")
    run = fa_doctor("fix", "--apply", "--yes", "--only", "package.unmanaged", "--no-smoke", "--json", cwd=home)
    doc = json.loads(run.stdout)
    assert "package.unmanaged" in doc["fixed"] and "package.unmanaged" not in doc["remaining"]
    assert not stray.exists() and (home / "keep.txt").read_text() == "mine"
    backup = [p for p in home.iterdir() if p.name.startswith("flash_attn.")]
    assert len(backup) == 1 and (backup[0] / "__init__.abi3.so").exists()
    assert "fix.applied" in [f["id"] for f in doc["findings"]]


def test_apply_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    home = tmp_path / "p"
    (home / "flash_attn").mkdir(parents=True)
    (home / "flash_attn" / "__init__.abi3.so").touch()
    run = fa_doctor("fix", "--apply", "--no-smoke", cwd=home)
    assert run.returncode == 2 and "--yes" in run.stderr and (home / "flash_attn").is_dir()


def test_plan_steps_pick_one_runnable_remedy_per_finding_worst_first(fenv: FakeEnv) -> None:
    from fa_doctor.model.actions import MovePath, RunCommand, UnsetEnv

    root = str(fenv.site)
    move = MovePath(f"{root}/flash_attn", f"{root}/flash_attn.bak", root)
    findings = [
        Finding("a.warn", Severity.WARN, "w", remedies=(Remedy("diag", actions=(RunCommand(("nvidia-smi",)),)),)),
        Finding(
            "b.fail",
            Severity.FAIL,
            "f",
            remedies=(Remedy("(1)", actions=(UnsetEnv("X"),)), Remedy("(2)", actions=(move,))),
        ),
        Finding("c.fail", Severity.FAIL, "same repair", remedies=(Remedy("(2)", actions=(move,)),)),
        Finding("d.ok", Severity.OK, "fine", remedies=(Remedy("x", actions=(move,)),)),
    ]
    steps = plan_steps(findings)
    # b: its env remedy is for `fix --unset-override`, so the move; c: the same move, run once; a: diagnostics.
    assert [(s.finding, type(s.action).__name__) for s in steps] == [("b.fail", "MovePath")]
    assert [s.finding for s in plan_steps(findings, only=("c.fail",))] == ["c.fail"]


@pytest.mark.parametrize("args", [["--plan", "--apply"], ["--unset-override", "--apply"]])
def test_exclusive_modes_are_usage_errors(cli: Any, args: list[str]) -> None:
    assert cli("fix", *args).code == 2


def test_fix_command_names_only_what_fix_can_do() -> None:
    from fa_doctor.model.actions import MovePath, RunCommand, SetEnv, UnsetEnv

    move = MovePath("/opt/p/flash_attn", "/opt/p/flash_attn.bak", "/opt/p")
    assert (
        fix_command(Remedy("m", actions=(move,)), "package.unmanaged")
        == "fa-doctor fix --apply --only package.unmanaged"
    )
    assert fix_command(Remedy("u", actions=(UnsetEnv("SGLANG_FLASHATTENTION_VERSION"),)), "override.invalid") == (
        'eval "$(fa-doctor fix --unset-override)"'
    )
    assert fix_command(Remedy("d", actions=(RunCommand(("nvidia-smi",)),)), "gpu.none") is None
    assert fix_command(Remedy("c", actions=(SetEnv("CUDA_VISIBLE_DEVICES", "0"),)), "gpu.mixed") is None
    assert fix_command(Remedy("m", actions=(move,)), "explain.match") is None


def test_a_repair_that_moves_torch_is_held_back_and_said(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    """A CPU torch next to a GPU: its repair swaps torch, which fix plans only with --allow-torch-change."""
    from conftest import gpu_env
    from fakeenv import H200

    fenv.torch("2.13.0+cpu", cuda=None)
    fenv.fa4()
    env = gpu_env(tmp_path, H200)
    run = cli("fix", "--plan", "--json", "--no-smoke", "--python", fenv.python, env=env)
    assert not [s for s in run.doc["plan"] if s["finding"] == "torch.cpu_build"]
    held = run.finding("fix.needs_torch_change")
    assert held["evidence"]["findings"] == ["torch.cpu_build"]
    allowed = cli("fix", "--plan", "--json", "--no-smoke", "--allow-torch-change", "--python", fenv.python, env=env)
    (step,) = [s for s in allowed.doc["plan"] if s["finding"] == "torch.cpu_build"]
    assert "torch==2.13.0+cu126" in step["command"]
    assert "fix.needs_torch_change" not in allowed.ids()
