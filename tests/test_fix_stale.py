"""A `fix --apply` that was SIGKILLed half-way leaves its journal and saved copies: the next apply names them and
changes nothing until they are resolved, by `undo` (the venv put back file for file) or `discard_journal`.

The target is a real venv (tests/fakeenv.py) whose `python -m pip` is the fake pip of tests/fix_apply_fake.py: it
removes the installed copy, then hangs, and fa-doctor is killed with SIGKILL (no code of fa-doctor runs)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from fakeenv import FakeEnv
from fix_apply_fake import SitePip

from fa_doctor.commands.fix import FixOptions, run
from fa_doctor.model.options import CheckOptions

try:
    from fa_doctor.fix import journal as stale
except ImportError:  # before the journal was named (the tests then fail on what the next apply does)
    stale = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` by content (bytecode caches left out: running Python writes them)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if "__pycache__" in path.parts:
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return out


@pytest.fixture
def half_changed(
    fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[FakeEnv, SitePip, dict[str, str], dict[str, str]]:
    """A venv whose `fix --apply` was SIGKILLed after pip removed flash-attn-4 (the site half-changed)."""
    fenv.torch()
    fenv.fa2(native=False)
    fenv.fa4()
    pip = SitePip(fenv.site, tmp_path / "pipctl")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the journal folders of this test only
    env = {"PATH": os.environ.get("PATH", ""), "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(temp),
           "CUDA_HOME": str(tmp_path / "no-cuda"), "PYTHONPATH": str(ROOT)}  # fmt: skip
    before = tree(fenv.root / "venv")
    pip.behave(install="spawn-late")
    code = (  # the transaction `fix --apply --only package.conflict` runs: flash-attn-4 reinstalled, torch held
        "from fa_doctor.fix.apply import apply; from fa_doctor.model.actions import PipInstall; "
        f"apply([PipInstall({fenv.python!r}, ('flash-attn-4==4.0.0b36',), ('--force-reinstall', '--no-deps'), "
        f"('torch==2.11.0',))], python={fenv.python!r}, timeout=120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    spawned = pip.bin / "spawned"
    deadline = time.monotonic() + 90
    while not spawned.exists() and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.05)
    assert spawned.exists(), "pip never started"
    if stale is not None:  # while it runs, it is named as running: never touched, and no second apply starts
        (busy,) = stale.find(fenv.python, [str(fenv.site)])
        assert busy.running == parent.pid and stale.undo(busy) and stale.discard(busy)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    pip_pid = int(spawned.read_text().split()[0])
    while os.path.exists(f"/proc/{pip_pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    spawned.unlink()
    pip.behave()
    assert not list(fenv.site.glob("flash_attn_4-*.dist-info")), "the kill came after pip removed the old copy"
    return fenv, pip, before, env


def options(fenv: FakeEnv, env: dict[str, str], **kw: object) -> FixOptions:
    return FixOptions(CheckOptions(python=fenv.python, smoke=False, env=env), **kw)  # type: ignore[arg-type]


def fix_ids(result: object) -> list[str]:
    return [f.id for f in result.findings if f.id.startswith("fix.") and f.id != "fix.not_doable"]  # type: ignore[attr-defined]


def test_a_sigkilled_apply_is_named_and_blocks_the_next_until_undone(
    half_changed: tuple[FakeEnv, SitePip, dict[str, str], dict[str, str]],
) -> None:
    fenv, pip, before, env = half_changed
    installs = len(pip.installs())
    again = run(options(fenv, env, apply=True))
    (named,) = [f for f in again.findings if f.id == "fix.stale_journal"]
    assert named.severity.value == "fail" and named.evidence["state"] == "running"
    journal = named.evidence["journal"]
    assert journal and Path(journal).is_file() and "saved flash-attn-4 4.0.0b36" in str(named.detail)
    assert "(undo: " in str(named.detail) and "<function" not in str(named.detail)  # the undo in words
    (saved,) = named.evidence["saved"]
    assert Path(saved).parent == fenv.site and Path(saved).name.startswith(".fa-doctor-undo-")
    assert [r.commands for r in named.remedies] == [
        (f"fa-doctor fix --undo --python {fenv.python}",),
        (f"fa-doctor fix --discard-journal --python {fenv.python}",),
    ]
    assert len(pip.installs()) == installs, "nothing was proven or installed over the half-changed venv"
    assert again.exit_code == 1

    undone = run(options(fenv, env, undo=True))
    assert fix_ids(undone) == ["fix.resolved"]
    assert tree(fenv.root / "venv") == before  # flash-attn-4 back, file for file; the saved copy gone
    assert not Path(journal).exists() and stale.find(fenv.python, [str(fenv.site)]) == []
    after = run(options(fenv, env, apply=True, dry_run=True))
    assert "fix.stale_journal" not in fix_ids(after) and "fix.proven" in fix_ids(after)


def test_discard_keeps_the_environment_and_drops_the_journal(
    half_changed: tuple[FakeEnv, SitePip, dict[str, str], dict[str, str]],
) -> None:
    fenv, _pip, _before, env = half_changed
    left = tree(fenv.root / "venv")
    (found,) = stale.find(fenv.python, [str(fenv.site)])
    dropped = run(options(fenv, env, discard_journal=True))
    assert fix_ids(dropped) == ["fix.resolved"]
    assert found.journal and not Path(found.journal).exists()
    assert tree(fenv.root / "venv") == {k: v for k, v in left.items() if ".fa-doctor-undo-" not in k}
    assert stale.find(fenv.python, [str(fenv.site)]) == []
    nothing = run(options(fenv, env, undo=True))
    assert fix_ids(nothing) == ["fix.no_journal"]


def test_saved_copies_without_their_journal_are_named_and_put_back(
    half_changed: tuple[FakeEnv, SitePip, dict[str, str], dict[str, str]],
) -> None:
    """The temporary folder was cleaned (a reboot): the saved folder's own manifest is enough to put it back."""
    import shutil

    fenv, _pip, before, _env = half_changed
    (found,) = stale.find(fenv.python, [str(fenv.site)])
    assert found.journal
    shutil.rmtree(Path(found.journal).parent)
    (orphan,) = stale.find(fenv.python, [str(fenv.site)])
    assert orphan.journal is None and orphan.folders == found.folders
    assert "saved flash-attn-4 4.0.0b36" in orphan.changes[0]
    assert stale.undo(orphan) == []
    assert tree(fenv.root / "venv") == before
