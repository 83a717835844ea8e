"""`fix --apply` end to end: the planner's repairs for two copies of torch, --timeout, Ctrl-C between steps,
and the printed FA3 build pasted into a real shell in a directory with a planted setup.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv
from fix_apply_fake import unchanged
from test_cli_signals import paused

from fa_doctor.model.actions import BuildFromClone, PipUninstall
from fa_doctor.render.shell import render


def two_copies(fenv: FakeEnv, tmp_path: Path, *names: tuple[str, str, str]) -> dict[str, str]:
    """Each (name, first version, shadowed version): one copy on PYTHONPATH (first), one in the venv's site."""
    first = tmp_path / "first"
    for name, v1, v2 in names:
        pkg = name.replace("-", "_")
        fenv.dist(name, v1, {f"{pkg}/__init__.py": ""}, top_level=[pkg], where=first)
        fenv.dist(name, v2, {f"{pkg}/__init__.py": ""}, top_level=[pkg])
    return {"PYTHONPATH": str(first), "PATH": os.environ.get("PATH", "")}


def test_duplicate_torch_plan_moves_only_the_shadowed_metadata(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    env = two_copies(fenv, tmp_path, ("torch", "2.11.0", "2.9.0"))
    run = cli("fix", "--plan", "--no-smoke", "--json", "--python", fenv.python, "--only", "package.duplicate", env=env)
    plan = run.doc["plan"]
    assert plan and all(s["action"]["kind"] == "move-path" for s in plan)
    assert [s["action"]["path"] for s in plan] == [str(fenv.site / "torch-2.9.0.dist-info")]
    every = [a for f in run.doc["findings"] for r in f["remedies"] for a in r["actions"]]
    assert not [a for a in every if a["kind"] == "pip-uninstall"]
    run = cli("fix", "--apply", "--yes", "--no-smoke", "--json", "--python", fenv.python, "--only",
              "package.duplicate", env=env)  # fmt: skip
    assert "package.duplicate" in run.doc["fixed"], run.doc["findings"]
    assert (tmp_path / "first" / "torch-2.11.0.dist-info").is_dir()  # the server's copy is untouched
    assert (fenv.site / "torch-2.9.0.dist-info.fa-doctor-backup").is_dir()


def test_timeout_reaches_each_step(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fa_doctor.commands import fix
    from fa_doctor.model.result import Result

    seen: list[float | None] = []

    def capture(options: fix.FixOptions, *args: object) -> Result:
        seen.append(options.timeout)
        return Result("fix")

    monkeypatch.setattr(fix, "run", capture)
    cli("fix", "--apply", "--yes", "--no-smoke", "--json", "--timeout", "7")
    cli("fix", "--apply", "--yes", "--no-smoke", "--json")
    assert seen == [7.0, None]


def test_ctrl_c_between_steps_reports_what_ran_and_undoes_it(fenv: FakeEnv, tmp_path: Path) -> None:
    env = two_copies(fenv, tmp_path, ("torch", "2.11.0", "2.9.0"), ("flash-attn-4", "4.0.0b36", "4.0.0b30"))
    before = sorted(p.name for p in fenv.site.iterdir())
    args = ["fix", "--apply", "--yes", "--no-smoke", "--json", "--python", fenv.python, "--only", "package.duplicate"]
    done = paused(args, "apply-2", signal.SIGINT, env=env)
    assert done.returncode == 130, done.stderr
    doc = json.loads(done.stdout)
    (state,) = [f for f in doc["findings"] if f["id"] == "fix.state"]
    assert state["title"].startswith("Interrupted: 0 step(s) in effect, 1 undone, 1 not run")
    assert len(state["evidence"]["undone"]) == 1 and len(state["evidence"]["not_run"]) == 1
    assert state["evidence"]["signal"] == signal.SIGINT and "as it was before" in state["evidence"]["state"]
    assert [f["id"] for f in doc["findings"]].count("fix.undone") == 1
    assert sorted(p.name for p in fenv.site.iterdir()) == before


def test_apply_never_runs_an_uninstall_of_torch(fenv: FakeEnv) -> None:
    from fa_doctor.fix.apply import apply

    fenv.torch()
    result = apply([PipUninstall(fenv.python, ("torch",))], python=fenv.python, timeout=30)
    assert result.failed and "never uninstalls it" in result.failed.message and unchanged(result)


PLANT = "import os; open(os.path.join(os.environ['MARK'], 'PWNED'), 'w')\n"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_the_printed_fa3_build_clones_into_a_fresh_folder(tmp_path: Path, shell: str) -> None:
    """Pasted in a directory holding ./flash-attention/hopper/setup.py and a pip/ package: neither runs; the
    clone and the build happen in a new mktemp -d folder; the caller's directory is the same afterwards."""
    caller = tmp_path / "caller"
    (caller / "flash-attention" / "hopper").mkdir(parents=True)
    (caller / "flash-attention" / "hopper" / "setup.py").write_text(PLANT)
    (caller / "pip").mkdir()
    (caller / "pip" / "__main__.py").write_text(PLANT)
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "git").write_text(
        '#!/bin/sh\n[ "$1" = clone ] && mkdir -p "$6/hopper" && pwd > "$MARK/clone-cwd"\n'
    )  # argv: clone --depth 1 -- URL src
    (fakebin / "python").write_text(
        f"#!{sys.executable}\nimport os, sys\nopen(os.path.join(os.environ['MARK'], 'pip'), 'w').write("
        "os.getcwd() + '\\n' + ' '.join(sys.argv[1:]) + '\\n' + sys.stdin.read())\n"
    )
    for f in fakebin.iterdir():
        f.chmod(0o755)
    repo = "https://github.com/Dao-AILab/flash-attention.git"
    options = ("--no-build-isolation", "--no-deps")
    action = BuildFromClone(str(fakebin / "python"), repo, "hopper", options, ("torch==2.11.0",), (("MAX_JOBS", "4"),))
    env = {"PATH": f"{fakebin}:/usr/bin:/bin", "MARK": str(tmp_path), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    done = subprocess.run([shell, "-c", render(action, shell)], cwd=caller, env=env, capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists()
    clone_cwd = (tmp_path / "clone-cwd").read_text().strip()
    cwd, argv, constraints = (tmp_path / "pip").read_text().split("\n", 2)
    assert cwd == clone_cwd and Path(cwd).parent == tmp_path / "tmp" and Path(cwd).name.startswith("tmp.")
    assert oct(Path(cwd).stat().st_mode & 0o777) == "0o700"
    assert argv.endswith("-c /dev/stdin ./src/hopper") and constraints == "torch==2.11.0\n"
    assert sorted(p.name for p in caller.iterdir()) == ["flash-attention", "pip"]
