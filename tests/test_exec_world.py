"""exec judges COMMAND's world (issue 23): the interpreter, its options, the environment after `env`, the
working folder, as the server will get them; built for real (target venvs, the real CLI in a child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakeenv import FakeEnv, make_env

FA_DOCTOR = [sys.executable, "-m", "fa_doctor"]


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FA_DOCTOR_", "PYTHONPATH"))}
    return subprocess.run(
        [*FA_DOCTOR, *args], capture_output=True, text=True, timeout=120, env={**base, **(env or {})}, cwd=cwd
    )


def bad(doc: dict[str, Any]) -> set[str]:
    return {f["id"] for f in doc["findings"] if f["severity"] in ("warn", "fail")}


def healthy(fenv: FakeEnv) -> FakeEnv:
    fenv.torch()
    fenv.fa4()
    return fenv


def stray(folder: Path) -> Path:
    """A folder with a `flash_attn` package that is not FA4's: put first on sys.path, it shadows the real one."""
    (folder / "flash_attn").mkdir(parents=True)
    (folder / "flash_attn" / "__init__.py").write_text("raise ImportError('a stray flash_attn')\n")
    return folder


EXEC = ("exec", "--json", "--no-smoke", "--allow-no-gpu", "--")


def test_a_command_that_does_not_resolve_is_a_shells_127(tmp_path: Path) -> None:
    done = run("exec", "--json", "--", "no-such-server-xyz", "--port", "1", cwd=tmp_path)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr == "fa-doctor exec: no-such-server-xyz: command not found\n"
    missing = run("exec", "--", str(tmp_path / "nope" / "python"), "-m", "sglang.launch_server")
    assert missing.returncode == 127 and missing.stderr.count("\n") == 1


def test_pythonpath_in_command_is_what_the_target_sees(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    assert run(*EXEC, python, "-c", "pass").returncode == 0
    shadowed = run(*EXEC, "env", f"PYTHONPATH={stray(tmp_path / 'pp')}", python, "-c", "pass")
    assert shadowed.returncode == 1 and "package.broken" in bad(json.loads(shadowed.stderr))


def test_the_working_folder_of_env_c_is_sys_path_0(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    done = run(*EXEC, "env", "-C", str(stray(tmp_path / "srv")), python, "-m", "sglang.launch_server")
    assert done.returncode == 1 and "package.broken" in bad(json.loads(done.stderr))


def test_python_dash_i_ignores_pythonpath_as_the_server_will(fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    elsewhere = tmp_path / "fa"
    fenv.dist("flash-attn-4", "4.0.0b36", {"flash_attn/cute/__init__.py": ""}, where=elsewhere)
    env = {"PYTHONPATH": str(elsewhere)}  # fa-doctor's shell has it; `python -I` drops it
    plain = json.loads(run(*EXEC, fenv.python, "-c", "pass", env=env).stderr)
    isolated = run(*EXEC, fenv.python, "-I", "-c", "pass", env=env)
    assert "package.none" not in bad(plain)
    assert isolated.returncode == 1 and "package.none" in bad(json.loads(isolated.stderr))


def test_fa_doctor_python_does_not_replace_commands_interpreter(fenv: FakeEnv, tmp_path: Path) -> None:
    good = healthy(fenv).python
    broken = make_env(tmp_path / "b")
    broken.torch()
    done = run(*EXEC, broken.python, "-c", "pass", env={"FA_DOCTOR_PYTHON": good})
    doc = json.loads(done.stderr)
    assert done.returncode == 1 and doc["target"]["python"] == broken.python
    assert {"exec.python_differs", "package.none"} <= bad(doc)


def test_a_bare_check_judges_the_active_venv_and_says_so(fenv: FakeEnv) -> None:
    healthy(fenv)
    done = run("check", "--json", "--no-smoke", env={"VIRTUAL_ENV": str(fenv.root / "venv")})
    doc = json.loads(done.stdout)
    assert doc["target"]["python"] == str(fenv.root / "venv" / "bin" / "python")
    chosen = next(f for f in doc["findings"] if f["id"] == "target.chosen")
    assert "$VIRTUAL_ENV" in chosen["title"] and done.returncode == 0


def test_judging_fa_doctors_own_venv_while_another_is_active_warns(fenv: FakeEnv) -> None:
    healthy(fenv)
    own = run("check", "--json", "--no-smoke", "--python", sys.executable, env={"VIRTUAL_ENV": str(fenv.root / "venv")})
    warned = next(f for f in json.loads(own.stdout)["findings"] if f["id"] == "target.own")
    assert warned["severity"] == "warn" and "--python" in " ".join(warned["remedies"][0]["commands"])
