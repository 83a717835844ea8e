"""`fix --apply` as a transaction: every step proven first, each change journalled, a failure undone.

The target is a fake venv whose `python -m pip` really rewrites its site folder as pip does (tests/fix_apply_fake.py),
so "put back as it was" is checked byte for byte; the last tests run the real pip of this venv.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path

import pytest
from fix_apply_fake import Target, fake_git, path_with, unchanged

from fa_doctor.fix.apply import ApplyResult, apply
from fa_doctor.model.actions import (
    BuildFromClone,
    EditFile,
    MovePath,
    PipInstall,
    PipUninstall,
    RunCommand,
    SetEnv,
    UnsetEnv,
    move_aside,
)
from fa_doctor.process import interrupt

N = "SGLANG_FLASHATTENTION_VERSION"
REPO = "https://github.com/Dao-AILab/flash-attention.git"


@pytest.fixture
def t(tmp_path: Path) -> Target:
    target = Target(tmp_path)
    target.dist("torch", "2.11.0")
    target.dist("flash-attn-4", "4.0.0b35")
    return target


def pip(*reqs: str, constraints: tuple[str, ...] = ("torch==2.11.0",), **kw: object) -> PipInstall:
    options: tuple[str, ...] = kw.pop("options", ("--no-deps", "--force-reinstall"))  # type: ignore[assignment]
    return PipInstall("/planned/python", reqs or ("flash-attn-4==4.0.0b36",), options, constraints, **kw)  # type: ignore[arg-type]


def run(t: Target, actions: list[object], **kw: object) -> ApplyResult:
    return apply(actions, python=str(t.python), timeout=kw.pop("timeout", 30), sys_path=t.sys_path, **kw)  # type: ignore[arg-type]


def stray(t: Target) -> MovePath:
    folder = t.root / "work" / "flash_attn"
    folder.mkdir(parents=True)
    (folder / "__init__.abi3.so").write_bytes(b"\x7fELF")
    return move_aside(str(folder), str(folder.parent))


def test_everything_runs_in_order_from_a_folder_of_its_own(t: Target, tmp_path: Path) -> None:
    move = stray(t)
    env_file = tmp_path / "server.env"
    env_file.write_text(f"A=1\n{N}=5\n")
    lines: list[str] = []
    result = run(
        t, [UnsetEnv(N), pip(env=(("MAX_JOBS", "4"),)), move, EditFile(str(env_file), N)], progress=lines.append
    )
    assert result.ok and not unchanged(result) and result.not_run == () and result.journal is None
    assert result.manual == (UnsetEnv(N),)
    assert result.ran[0].message == "installed flash-attn-4 4.0.0b36 (was flash-attn-4 4.0.0b35)".replace(
        "was flash-attn-4 ", "was "
    )
    assert (t.site / "flash_attn_4-4.0.0b36.dist-info").is_dir() and not (
        t.site / "flash_attn_4-4.0.0b35.dist-info"
    ).exists()
    dry, real = t.installs(dry=True)[0], t.installs(dry=False)[0]
    assert real[:4] == ["-m", "pip", "install", "--no-deps"] and real[-1] == "flash-attn-4==4.0.0b36"
    assert dry[3:6] == ["--dry-run", "--report", dry[5]] and dry[5].endswith(".json")
    cwds = {str(c["cwd"]) for c in t.calls()}
    assert all(os.path.basename(c).startswith("fa-doctor-apply-") for c in cwds), cwds  # never the caller's cwd
    assert all(c["max_jobs"] == "4" for c in t.calls() if "install" in c["argv"])  # type: ignore[operator]
    assert not Path(move.path).exists() and Path(move.backup, "__init__.abi3.so").exists()
    assert env_file.read_text() == "A=1\n"
    assert t.leftovers() == []  # the saved copy of 4.0.0b35 is dropped once the transaction holds
    assert lines[0] == "Proving 3 step(s) before changing anything"


@pytest.mark.parametrize(
    ("modes", "words"),
    [
        ({"dry": "network"}, "the package index cannot be reached (dry run)"),
        ({"dry": "conflict"}, "pip cannot resolve this install (dry run)"),
        ({"pip": "missing"}, "pip does not run in"),
        ({"pip_version": "21.3"}, "cannot prove an install (--dry-run --report needs pip 22.2"),
    ],
)
def test_a_step_that_cannot_be_proven_refuses_the_whole_plan(t: Target, modes: dict[str, str], words: str) -> None:
    """The move comes first in the plan, the unprovable install second: the move does not happen either."""
    t.behave(**modes)
    move = stray(t)
    before = t.snapshot()
    result = run(t, [move, pip()])
    assert result.failed and result.failed.status == "refused" and words in result.failed.message, result.failed
    assert unchanged(result) and result.ran == () and [s.action for s in result.refused] == [pip()]
    assert Path(move.path).is_dir() and t.snapshot() == before
    assert t.installs(dry=False) == []
    assert "nothing was changed" in result.state


# The step timeout of the plans with a hanging step: the test waits it out, so it is short; every other step of
# those plans (the supervisor, the fake pip) ends in about 0.1 s, so even a loaded machine stays far inside it.
HANG_LIMIT = 2


def test_a_dry_run_that_hangs_is_bounded(t: Target) -> None:
    t.behave(dry="hang")
    result = run(t, [pip()], timeout=HANG_LIMIT)
    assert result.failed and f"did not finish in {HANG_LIMIT} s" in result.failed.message and unchanged(result)


@pytest.mark.parametrize(
    ("mode", "words"),
    [("fail-before", "failed (exit 1)"), ("fail-after", "failed (exit 1)"), ("enospc", "failed (exit 1)"),
     ("hang", f"timed out after {HANG_LIMIT} s"), ("sigkill-self", "failed (exit -9)")],
)  # fmt: skip
def test_a_failing_install_is_put_back_byte_for_byte(t: Target, mode: str, words: str) -> None:
    """The earlier move and the half-done install are undone; the site is as it was, with no saved copies left."""
    move = stray(t)
    before = t.snapshot()
    t.behave(install=mode)
    result = run(t, [move, pip(), RunCommand(("true",))], timeout=HANG_LIMIT)
    assert result.failed and words in result.failed.message and result.failed.left_unchanged, result.failed
    assert "its changes were undone" in result.failed.message
    assert [s.status for s in result.undone] == ["undone"] and result.ran == () and unchanged(result)
    assert t.snapshot() == before and Path(move.path).is_dir() and not Path(move.backup).exists()
    assert t.leftovers() == [] and "as it was before" in result.state
    assert result.manual == (RunCommand(("true",)),)


def test_a_later_failure_undoes_an_earlier_install(t: Target) -> None:
    """Two owners of the same files: both reinstalls proven first; the second fails, the first is put back."""
    t.dist("flash-attn", "2.8.3", {"flash_attn/cute/interface.py": "old\n"})
    before = t.snapshot()
    first, second = pip("flash-attn-4==4.0.0b36"), pip("flash-attn==2.8.3")
    t.behave(install="fail-on:flash-attn")  # the first install succeeds, the second fails half-way
    result = run(t, [first, second])
    assert result.failed and result.failed.action == second and [s.action for s in result.undone] == [first]
    assert t.snapshot() == before and t.leftovers() == []
    t.behave(dry="conflict")
    ran = len(t.installs(dry=False))
    result = run(t, [first, second])
    assert result.failed and result.failed.status == "refused" and len(t.installs(dry=False)) == ran


def test_an_install_without_the_torch_constraint_never_runs(t: Target) -> None:
    """An install that resolves dependencies must hold torch; with --no-deps pip installs exactly what it names,
    so torch cannot move (and pip's report is checked for torch all the same)."""
    resolving = ("--force-reinstall",)
    result = run(t, [pip(constraints=(), options=resolving)])
    assert result.failed and "does not hold torch at 2.11.0" in result.failed.message and t.installs() == []
    result = run(t, [pip(constraints=("torch>=2",), options=resolving)])
    assert result.failed and "no torch==2.11.0 constraint" in result.failed.message
    result = run(t, [pip("torch==2.11.0", constraints=(), options=("--no-deps",))])
    assert result.failed and "would replace torch 2.11.0" in result.failed.message and t.installs() == []
    assert run(t, [pip(constraints=())]).ok  # the planner's `--force-reinstall --no-deps NAME==VERSION`


def test_an_unparseable_torch_version_refuses_every_install(tmp_path: Path) -> None:
    t = Target(tmp_path)
    t.dist("torch", "2.13.0.custom-build")
    result = run(t, [pip(constraints=("torch==2.13.0.custom-build",))])
    assert result.failed and "is not a PEP 440 version" in result.failed.message and t.installs() == []


def test_pip_may_not_move_torch_unless_the_step_is_an_allowed_torch_move(t: Target) -> None:
    t.behave(dry="pulls:torch==2.12.0")
    step = pip("flash-attn-4==4.0.0b36", options=("--force-reinstall",))
    result = run(t, [step])
    assert result.failed and "replace torch 2.11.0 with 2.12.0" in result.failed.message
    assert t.installs(dry=False) == []
    assert run(t, [step], torch_moves=[step]).ok


def test_a_server_pin_is_never_changed(t: Target) -> None:
    t.dist("sglang", "0.5.23")
    (t.site / "sglang-0.5.23.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\nRequires-Dist: sglang-kernel==0.4.10\n"
    )
    t.dist("sglang-kernel", "0.4.10")
    t.behave(dry="pulls:sglang-kernel==0.4.11")
    result = run(t, [pip()])
    assert result.failed and "replace sglang-kernel 0.4.10, which the server pins, with 0.4.11" in result.failed.message
    t.behave(dry="pulls:sglang-kernel==0.4.10")
    result = run(t, [pip()])
    assert result.failed and "though the step does not name it" in result.failed.message


def two_torches(t: Target) -> Path:
    """The server's torch in the venv's site; a shadowed copy in a user site later on the path."""
    user = t.root / "user-site"
    user.mkdir()
    (user / "torch").mkdir()
    (user / "torch" / "__init__.py").write_text("")
    info = user / "torch-2.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n")
    (info / "RECORD").write_text("torch/__init__.py,,\ntorch-2.9.0.dist-info/METADATA,,\n")
    return user


def test_duplicate_torch_is_never_uninstalled_and_only_the_shadowed_copy_moves(t: Target) -> None:
    user = two_torches(t)
    path = [*t.sys_path, str(user)]
    before = t.snapshot()
    for step in (PipUninstall("/p/python", ("torch",)), PipUninstall("/p/python", ("Torch",))):
        result = apply([step], python=str(t.python), timeout=30, sys_path=path)
        assert result.failed and "never uninstalls it" in result.failed.message
    server_copy = move_aside(str(t.site / "torch-2.11.0.dist-info"), str(t.site))
    result = apply([server_copy], python=str(t.python), timeout=30, sys_path=path)
    assert result.failed and "holds the torch 2.11.0 the server imports" in result.failed.message
    folder = move_aside(str(t.site / "torch"), str(t.site))
    assert apply([folder], python=str(t.python), timeout=30, sys_path=path).failed
    assert t.snapshot() == before and t.calls() == []
    shadowed = move_aside(str(user / "torch-2.9.0.dist-info"), str(user))
    assert apply([shadowed], python=str(t.python), timeout=30, sys_path=path).ok
    assert (user / "torch-2.9.0.dist-info.fa-doctor-backup").is_dir() and t.snapshot() == before


def test_a_name_with_two_copies_is_never_replaced_by_pip(t: Target) -> None:
    other = t.root / "user-site"
    other.mkdir()
    info = other / "flash_attn_4-4.0.0b30.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash-attn-4\nVersion: 4.0.0b30\n")
    result = apply([pip()], python=str(t.python), timeout=30, sys_path=[*t.sys_path, str(other)])
    assert result.failed and "has 2 copies on the path" in result.failed.message and t.installs(dry=False) == []
    result = apply([PipUninstall("/p/python", ("flash-attn-4",))], python=str(t.python), timeout=30,
                   sys_path=[*t.sys_path, str(other)])  # fmt: skip
    assert result.failed and "has 2 copies" in result.failed.message


def test_what_has_no_record_is_never_replaced_or_removed(t: Target) -> None:
    t.dist("flash-attn", "2.8.3", record=False)
    for step in (pip("flash-attn==2.8.3"), PipUninstall("/p/python", ("flash-attn",))):
        result = run(t, [step])
        assert result.failed and "no readable RECORD" in result.failed.message


def test_an_uninstall_is_undone_from_the_saved_files(t: Target) -> None:
    t.dist("flash-attn", "2.8.3", {"flash_attn/x.so": "ELF"})
    before = t.snapshot()
    t.behave(install="fail-before")
    result = run(t, [PipUninstall("/p/python", ("flash-attn",)), pip()])
    assert result.failed and [s.action for s in result.undone] == [PipUninstall("/p/python", ("flash-attn",))]
    assert t.snapshot() == before


def test_requirements_from_the_working_directory_are_refused(t: Target) -> None:
    for req in ("./flash-attention/hopper", "/abs/path", "file:///tmp/x.whl", "~/x"):
        result = run(t, [pip(req)])
        assert result.failed and "not a package name or an https URL" in result.failed.message, req
    result = run(t, [pip("x==1", options=("-r", "requirements.txt"))])
    assert result.failed and "reads files fa-doctor did not make" in result.failed.message
    assert t.installs() == []


def test_fa3_is_built_from_a_clone_in_a_folder_of_its_own(
    t: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted setup.py in the caller's directory (and in ./flash-attention/hopper) never runs."""
    cwd = tmp_path / "caller"
    (cwd / "flash-attention" / "hopper").mkdir(parents=True)
    for p in (cwd / "setup.py", cwd / "flash-attention" / "hopper" / "setup.py"):
        p.write_text("open('PWNED', 'w')\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", path_with(fake_git(tmp_path / "fakebin")))
    for name, value in t.cuda_toolkit().items():
        monkeypatch.setenv(name, value)
    build = BuildFromClone("/p/python", REPO, "hopper", ("--no-build-isolation", "--no-deps"), ("torch==2.11.0",))
    result = run(t, [build])
    assert result.ok, result.failed
    assert not list(tmp_path.rglob("PWNED"))
    built = Path(t.bin / "built-from").read_text()
    assert built.endswith("/src/hopper") or "/build-0-" in built
    folder = Path([str(c["cwd"]) for c in t.calls() if "install" in c["argv"]][-1])  # type: ignore[operator]
    assert folder.name.startswith("build-0-") and folder.parent.name.startswith("fa-doctor-apply-")
    assert not folder.exists()  # the clone is removed afterwards
    log = (tmp_path / "fakebin" / "git.log").read_text().splitlines()
    assert log[0].startswith(f"ls-remote --exit-code -- {REPO} HEAD") and f"clone --depth 1 -- {REPO} src" in log[1]


def test_a_build_whose_source_cannot_be_reached_is_skipped(
    t: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with(fake_git(tmp_path / "fakebin", "unreachable")))
    for name, value in t.cuda_toolkit().items():
        monkeypatch.setenv(name, value)
    build = BuildFromClone("/p/python", REPO, "hopper", ("--no-deps",), ("torch==2.11.0",))
    move = stray(t)
    result = run(t, [build, move])
    assert result.ok and [s.action for s in result.skipped] == [build]
    assert "cannot be reached (fatal: unable to access" in result.skipped[0].message
    assert "the build is skipped, nothing was cloned or installed" in result.skipped[0].message
    assert [s.action for s in result.ran] == [move] and t.installs() == []


def test_a_clone_that_fails_refuses_the_plan(t: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path_with(fake_git(tmp_path / "fakebin", "clone-fails")))
    for name, value in t.cuda_toolkit().items():
        monkeypatch.setenv(name, value)
    build = BuildFromClone("/p/python", REPO, "hopper", ("--no-deps",), ("torch==2.11.0",))
    result = run(t, [build])
    assert result.failed and "git clone of" in result.failed.message and unchanged(result)


def _sigint_at(line_start: str) -> object:
    def progress(line: str) -> None:
        if line.startswith(line_start):
            signal.raise_signal(signal.SIGINT)

    return progress


def test_ctrl_c_between_steps_undoes_and_says_what_ran(t: Target) -> None:
    move = stray(t)
    before = t.snapshot()
    with interrupt.handled():
        result = run(t, [pip(), move, pip("flash-attn-4==4.0.0b37")], progress=_sigint_at("[2/3] Move"))
    assert result.interrupted == signal.SIGINT and not result.ok
    assert [s.action for s in result.undone] == [pip()] and result.failed is None  # the move never started
    assert result.not_run == (move, pip("flash-attn-4==4.0.0b37"))
    assert t.snapshot() == before and Path(move.path).is_dir()


def test_ctrl_c_during_a_step_ends_pip_and_undoes(t: Target) -> None:
    before = t.snapshot()
    t.behave(install="hang")

    def progress(line: str) -> None:
        if line.startswith("[1/1]") and ":" not in line[5:]:
            signal.setitimer(signal.ITIMER_REAL, 0.5)

    old = signal.signal(signal.SIGALRM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        with interrupt.handled():
            result = run(t, [pip()], progress=progress)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert result.interrupted == signal.SIGINT and result.failed and "interrupted by SIGINT" in result.failed.message
    assert t.snapshot() == before


def test_read_only_site_packages_is_refused(t: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """root passes every permission check, so the read-only mount is what os.access reports for it."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **k: False if str(p) == str(t.site) and m == os.W_OK else real(p, m))
    result = run(t, [pip()])
    assert result.failed and "is not writable" in result.failed.message and t.installs(dry=False) == []


def test_only_shell_actions_and_diagnostics_mean_nothing_runs(t: Target) -> None:
    result = run(t, [SetEnv(N, "3"), UnsetEnv("CUTE_DSL_ARCH"), RunCommand(("nvidia-smi",))])
    assert result.ok and unchanged(result) and result.ran == () and len(result.manual) == 3 and t.calls() == []


def test_real_pip_with_an_unreachable_index(tmp_path: Path) -> None:
    python = os.path.join(os.path.dirname(sys.executable), "python")
    target = tmp_path / "target"
    action = PipInstall(
        python,
        ("flash-attn-4==4.0.0b36",),
        ("--no-deps", "--target", str(target), "--index-url", "http://127.0.0.1:9/simple", "--no-cache-dir"),
        ("torch==0",),
    )
    result = apply([action], python=python, timeout=60, sys_path=[str(tmp_path / "empty")])
    assert result.failed and "the package index cannot be reached (dry run)" in result.failed.message
    assert unchanged(result) and not target.exists()


@pytest.mark.parametrize(("pin", "ok"), [("demo-pkg==1.0", True), ("demo-pkg==2.0", False)])
def test_real_pip_against_a_local_wheel_folder(tmp_path: Path, pin: str, ok: bool) -> None:
    from wheelhouse import wheel

    python = os.path.join(os.path.dirname(sys.executable), "python")
    (tmp_path / "wheels").mkdir()
    wheel(tmp_path / "wheels", "demo-pkg", "1.0")
    target = tmp_path / "target"
    options = ("--no-deps", "--no-index", "--find-links", str(tmp_path / "wheels"), "--target", str(target))
    result = apply([PipInstall(python, ("demo-pkg",), options, (pin,))], python=python, timeout=120, sys_path=[])
    if ok:
        assert result.ok, result.failed
        assert (target / "demo_pkg" / "__init__.py").exists()
    else:
        assert result.failed and "pip cannot resolve this install (dry run)" in result.failed.message
        assert unchanged(result) and not target.exists()


def test_the_journal_stays_when_something_went_wrong(t: Target) -> None:
    move = stray(t)
    t.behave(install="fail-before")
    result = run(t, [move, pip()])
    assert result.journal and Path(result.journal).is_file()
    assert stat.S_IMODE(os.stat(os.path.dirname(result.journal)).st_mode) == 0o700
    text = Path(result.journal).read_text()
    assert '"state": "rolled back"' in text and "moved" in text


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_of_fa_doctor_ends_pip_and_what_pip_started(t: Target) -> None:
    """No code of fa-doctor runs on SIGKILL: the parent-death signal and the supervisor end pip and its child."""
    import subprocess
    import time

    t.behave(install="spawn")
    code = (
        "import sys; sys.path.insert(0, 'tests'); from fa_doctor.fix.apply import apply; "
        "from fa_doctor.model.actions import PipInstall; "
        f"apply([PipInstall('/p/python', ('flash-attn-4==4.0.0b36',), ('--no-deps',), ('torch==2.11.0',))], "
        f"python={str(t.python)!r}, timeout=120, sys_path={t.sys_path!r})"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parent.parent)
    spawned = t.bin / "spawned"
    deadline = time.monotonic() + 60
    while not spawned.exists() and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.05)
    assert spawned.exists(), "pip never started"
    pip_pid, grandchild = map(int, spawned.read_text().split())
    assert _alive(pip_pid) and _alive(grandchild)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while (_alive(pip_pid) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pip_pid) and not _alive(grandchild)
