"""`fix --apply --dry-run` (with or without `--yes`): the plan and every proof, and nothing changed.

A real venv (tests/fakeenv.py) whose `python -m pip` is the fake pip of tests/fix_apply_fake.py, logging every call:
the venv's files are hashed before and after, and pip may run only its own `--dry-run`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import FakeEnv
from fix_apply_fake import SitePip

from fa_doctor.commands.fix import FixOptions, run
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import PlanStep

ROOT = Path(__file__).resolve().parents[1]


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under `root` by content (bytecode caches left out: running Python writes them)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
        if "__pycache__" not in p.parts
    }


@pytest.fixture
def target(fenv: FakeEnv, tmp_path: Path) -> tuple[FakeEnv, SitePip, Path]:
    """A stray compiled `flash_attn` in the working directory shadows flash-attn-4: a plan of pip installs (FA4 and
    its DSL, the same versions again) and a move."""
    fenv.torch()
    fenv.fa4()
    work = tmp_path / "work"
    (work / "flash_attn").mkdir(parents=True)
    (work / "flash_attn" / "__init__.abi3.so").write_bytes(b"\x7fELF")
    return fenv, SitePip(fenv.site, tmp_path / "pipctl"), work


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "CUDA_HOME": str(tmp_path / "no-cuda"), "PYTHONPATH": str(ROOT)}  # fmt: skip


def never(steps: tuple[PlanStep, ...]) -> bool:
    raise AssertionError("a dry run asks nothing: it changes nothing")


def test_apply_dry_run_proves_and_changes_nothing(
    target: tuple[FakeEnv, SitePip, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fenv, pip, work = target
    monkeypatch.chdir(work)  # the target's working directory: where the stray module is found
    before = tree(tmp_path / "venv"), tree(work)
    check = CheckOptions(python=fenv.python, smoke=False, env=env_for(tmp_path))
    result = run(FixOptions(check, apply=True, dry_run=True), confirm=never)
    assert (tree(tmp_path / "venv"), tree(work)) == before
    assert pip.installs(dry=False) == [] and pip.installs(dry=True), "only pip's own dry run ran"
    payload = result.payload
    assert payload is not None and payload.mode == "plan" and payload.dry_run and payload.plan  # type: ignore[attr-defined]
    applied = payload.applied  # type: ignore[attr-defined]
    assert applied.dry_run and applied.ran == () and "nothing was changed" in applied.state
    planned = {type(s.action).__name__ for s in payload.plan}  # type: ignore[attr-defined]
    assert planned == {"PipInstall", "MovePath"}, payload
    assert {s.action for s in applied.proven} == {s.action for s in payload.plan}  # type: ignore[attr-defined]
    proven = [f for f in result.findings if f.id == "fix.proven"]
    assert proven and all(f.title.startswith("Would run: ") for f in proven)


def test_apply_dry_run_shows_what_would_be_refused(
    target: tuple[FakeEnv, SitePip, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fenv, pip, work = target
    monkeypatch.chdir(work)
    pip.behave(dry="conflict")
    check = CheckOptions(python=fenv.python, smoke=False, env=env_for(tmp_path))
    before = tree(tmp_path / "venv")
    result = run(FixOptions(check, apply=True, dry_run=True), confirm=never)
    refused = [f for f in result.findings if f.id == "fix.refused"]
    assert refused and all(f.title.startswith("Would be refused: ") for f in refused)
    assert all("pip cannot resolve" in f.detail for f in refused)
    # The move is another finding's repair: a refused install does not hold it back.
    assert [f.title for f in result.findings if f.id == "fix.proven"] == [
        f"Would run: Move {str(work / 'flash_attn')!r} aside to {str(work / 'flash_attn.fa-doctor-backup')!r} "
        "(nothing is deleted)"
    ]
    assert tree(tmp_path / "venv") == before and pip.installs(dry=False) == []
    assert result.exit_code == 1


def test_cli_apply_dry_run_yes_installs_nothing(target: tuple[FakeEnv, SitePip, Path], tmp_path: Path) -> None:
    fenv, pip, work = target
    before = tree(tmp_path / "venv"), tree(work)
    args = ["fix", "--apply", "--dry-run", "--yes", "--no-smoke", "--json", "--python", fenv.python]
    done = subprocess.run([sys.executable, "-m", "fa_doctor", *args], env=env_for(tmp_path), capture_output=True,
                          text=True, timeout=300, cwd=work)  # fmt: skip
    assert pip.installs(dry=False) == [] and pip.installs(dry=True), "only pip's own dry run ran"
    assert (tree(tmp_path / "venv"), tree(work)) == before
    doc = json.loads(done.stdout)
    assert doc.get("dry_run"), {k: doc.get(k) for k in ("mode", "dry_run", "error", "applied")}
    assert doc["mode"] == "plan" and doc["applied"]["dry_run"] and "nothing was changed" in doc["applied"]["state"]
    assert doc["applied"]["ran"] == [] and {s["action"]["kind"] for s in doc["plan"]} == {"pip-install", "move-path"}
    assert [s["action"] for s in doc["applied"]["proven"]] == [s["action"] for s in doc["plan"]]
    assert [f for f in doc["findings"] if f["id"] == "fix.proven" and f["title"].startswith("Would run: ")]
