"""A hostile round on `fix --apply`: each case sets a trap, runs a small plan, and checks the one promise:
either every step completed, or the site is exactly as it was (or the result names what remains).

Cases by area (ids in CASES): proofs that must refuse, runs that must be undone, interrupts, builds, and
undo failures that must be reported as the state left behind.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fix_apply_fake import Target, fake_git, path_with, unchanged

from fa_doctor.fix.apply import ApplyResult, apply
from fa_doctor.model.actions import Action, BuildFromClone, EditFile, MovePath, PipInstall, PipUninstall, move_aside
from fa_doctor.process import interrupt

REPO = "https://github.com/Dao-AILab/flash-attention.git"
OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"
HELD = ("torch==2.11.0",)
HANG_LIMIT = 2  # the step timeout of a case whose step hangs (waited out): the other steps end in about 0.1 s


@dataclass
class Ctx:
    t: Target
    tmp: Path
    mp: pytest.MonkeyPatch
    sys_path: list[str] = field(default_factory=list)
    python: str = ""
    timeout: float = 20
    progress: Callable[[str], None] | None = None
    planted: list[str] = field(default_factory=list)  # made by the trap itself while apply runs: not apply's doing


def pip(
    *reqs: str, options: tuple[str, ...] = ("--no-deps", "--force-reinstall"), held: tuple[str, ...] = HELD
) -> PipInstall:
    return PipInstall("/p/python", reqs or ("flash-attn-4==4.0.0b36",), options, held)


def stray(c: Ctx, name: str = "flash_attn") -> MovePath:
    folder = c.tmp / "work" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    return move_aside(str(folder), str(folder.parent))


def second_site(c: Ctx, name: str, version: str) -> None:
    other = c.tmp / "other-site"
    pkg = name.replace("-", "_")
    (other / pkg).mkdir(parents=True, exist_ok=True)
    info = other / f"{pkg}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{info.name}/METADATA,,\n")
    c.sys_path.append(str(other))


def server(c: Ctx) -> None:
    c.t.dist("sglang", "0.5.23")
    (c.t.site / "sglang-0.5.23.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\nRequires-Dist: sglang-kernel==0.4.10\n"
    )
    c.t.dist("sglang-kernel", "0.4.10")


def toolkit(c: Ctx) -> list[Action]:
    """What a build needs here (a CUDA torch, an nvcc); no action of its own."""
    for name, value in c.t.cuda_toolkit().items():
        c.mp.setenv(name, value)
    return []


def signal_at(c: Ctx, prefix: str, sig: int, delay: float = 0.0) -> None:
    def progress(line: str) -> None:
        if line.startswith(prefix) and ": " not in line[len(prefix) :]:
            if delay:
                signal.setitimer(signal.ITIMER_REAL, delay)
            else:
                signal.raise_signal(sig)

    c.mp.setattr(signal, "_fa_test_sig", sig, raising=False)
    c.progress = progress


def no_space(c: Ctx) -> None:
    def fail(*a: object, **k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    c.mp.setattr(os, "link", fail)
    c.mp.setattr("shutil.copy2", fail)


def read_only_site(c: Ctx) -> None:
    real = os.access
    c.mp.setattr(os, "access", lambda p, m, **k: False if str(p) == str(c.t.site) and m == os.W_OK else real(p, m))


def appears_later(c: Ctx, prefix: str, path: Callable[[Ctx], Path]) -> None:
    def progress(line: str) -> None:
        if line.startswith(prefix) and ": " not in line[len(prefix) :]:
            path(c).mkdir(parents=True, exist_ok=True)
            c.planted.append(str(path(c)))

    c.progress = progress


# (setup, actions, expected): expected is "ok", "refused", "undone", "skipped" or "partial".
Case = tuple[Callable[[Ctx], None], Callable[[Ctx], list[Action]], str, str]
P = pytest.param


def _cases() -> list[object]:
    nothing: Callable[[Ctx], None] = lambda c: None  # noqa: E731
    one = lambda c: [pip()]  # noqa: E731
    move_then_pip = lambda c: [stray(c), pip()]  # noqa: E731
    build = lambda c: [*toolkit(c), BuildFromClone("/p/python", REPO, "hopper", ("--no-deps",), HELD)]  # noqa: E731
    return [
        # ---- proofs: the index, pip itself, torch ----
        P(
            lambda c: c.t.behave(dry="network"),
            move_then_pip,
            "refused",
            "index cannot be reached",
            id="index-unreachable",
        ),
        P(lambda c: c.t.behave(dry="conflict"), move_then_pip, "refused", "cannot resolve", id="resolution-impossible"),
        P(
            lambda c: (c.t.behave(dry="hang"), setattr(c, "timeout", HANG_LIMIT)),
            move_then_pip,
            "refused",
            "did not finish",
            id="dry-run-hangs",
        ),
        P(lambda c: c.t.behave(pip="missing"), one, "refused", "pip does not run", id="pip-missing"),
        P(lambda c: c.t.behave(pip_version="21.3"), one, "refused", "needs pip 22.2", id="pip-21.3"),
        P(lambda c: c.t.behave(pip_version="22.1"), one, "refused", "needs pip 22.2", id="pip-22.1"),
        P(
            nothing,
            lambda c: [pip(options=("--force-reinstall",), held=())],
            "refused",
            "does not hold torch",
            id="no-torch-constraint",
        ),
        P(
            nothing,
            lambda c: [pip(options=("--force-reinstall",), held=("torch>=2",))],
            "refused",
            "does not hold torch",
            id="torch-range-only",
        ),
        P(
            nothing,
            lambda c: [pip(options=("--force-reinstall",), held=("torch==2.12.0",))],
            "refused",
            "does not hold torch",
            id="torch-other-version",
        ),
        P(
            lambda c: (
                c.t.dist("torch", "2.13.0.custom-build"),
                (c.t.site / "torch-2.11.0.dist-info").rename(c.tmp / "x"),
            ),
            lambda c: [pip(held=("torch==2.13.0.custom-build",))],
            "refused",
            "not a PEP 440",
            id="torch-unparseable",
        ),
        P(
            lambda c: c.t.behave(dry="pulls:torch==2.12.0"),
            lambda c: [pip(options=("--force-reinstall",))],
            "refused",
            "replace torch 2.11.0 with 2.12.0",
            id="pulls-torch",
        ),
        P(
            lambda c: (server(c), c.t.behave(dry="pulls:sglang-kernel==0.4.11")),
            one,
            "refused",
            "which the server pins",
            id="pulls-server-pin-other",
        ),
        P(
            lambda c: (server(c), c.t.behave(dry="pulls:sglang-kernel==0.4.10")),
            one,
            "refused",
            "does not name it",
            id="pulls-server-pin-same",
        ),
        P(lambda c: second_site(c, "flash-attn-4", "4.0.0b30"), one, "refused", "2 copies", id="two-copies-replaced"),
        P(
            lambda c: (c.t.site / "flash_attn_4-4.0.0b35.dist-info" / "RECORD").unlink(),
            one,
            "refused",
            "no readable RECORD",
            id="no-record",
        ),
        P(
            lambda c: (c.t.site / "flash_attn_4-4.0.0b35.dist-info" / "RECORD").write_text(""),
            one,
            "refused",
            "no readable RECORD",
            id="empty-record",
        ),
        P(read_only_site, one, "refused", "not writable", id="read-only-site"),
        P(
            lambda c: setattr(c, "python", str(c.tmp / "nope" / "python")),
            one,
            "refused",
            "not an executable",
            id="python-missing",
        ),
        P(lambda c: c.t.python.chmod(0o644), one, "refused", "not an executable", id="python-not-executable"),
        # ---- proofs: what pip would read from the caller's directory ----
        P(nothing, lambda c: [pip("./flash-attention/hopper")], "refused", "not a package name", id="relative-path"),
        P(nothing, lambda c: [pip("/tmp/evil")], "refused", "not a package name", id="absolute-path"),
        P(nothing, lambda c: [pip("file:///tmp/x.whl")], "refused", "not a package name", id="file-url"),
        P(nothing, lambda c: [pip("x @ file:///tmp/x")], "refused", "not a package name", id="file-url-named"),
        P(nothing, lambda c: [pip("x==1", options=("-e", "."))], "refused", "did not make", id="editable"),
        P(
            nothing,
            lambda c: [pip("x==1", options=("-r", "req.txt"))],
            "refused",
            "did not make",
            id="requirements-file",
        ),
        P(
            nothing,
            lambda c: [pip("x==1", options=("--requirement=req.txt",))],
            "refused",
            "did not make",
            id="requirement-eq",
        ),
        P(
            nothing,
            lambda c: [pip("x==1", options=("--constraint=/etc/x",))],
            "refused",
            "did not make",
            id="constraint-eq",
        ),
        # ---- proofs: uninstalls and moves ----
        P(
            nothing,
            lambda c: [PipUninstall("/p/python", ("torch",))],
            "refused",
            "never uninstalls",
            id="uninstall-torch",
        ),
        P(
            server,
            lambda c: [PipUninstall("/p/python", ("sglang_kernel",))],
            "refused",
            "never uninstalls",
            id="uninstall-pin",
        ),
        P(
            lambda c: second_site(c, "flash-attn-4", "4.0.0b30"),
            lambda c: [PipUninstall("/p/python", ("flash-attn-4",))],
            "refused",
            "2 copies",
            id="uninstall-duplicate",
        ),
        P(
            nothing,
            lambda c: [PipUninstall("/p/python", ("nothing-here",))],
            "refused",
            "not installed",
            id="uninstall-absent",
        ),
        P(
            lambda c: (c.tmp / "work" / "flash_attn.fa-doctor-backup").mkdir(parents=True),
            lambda c: [stray(c)],
            "refused",
            "exists; not moved",
            id="move-destination-taken",
        ),
        P(
            nothing,
            lambda c: [move_aside(str(c.tmp / "work" / "gone"), str(c.tmp / "work"))],
            "refused",
            "gone already",
            id="move-source-gone",
        ),
        P(
            lambda c: (
                (c.tmp / "out" / "flash_attn").mkdir(parents=True),
                (c.tmp / "w2").mkdir(),
                (c.tmp / "w2" / "l").symlink_to(c.tmp / "out"),
            ),
            lambda c: [move_aside(str(c.tmp / "w2" / "l" / "flash_attn"), str(c.tmp / "w2"))],
            "refused",
            "outside",
            id="move-through-symlink",
        ),
        P(
            nothing,
            lambda c: [move_aside(str(c.t.site / "torch-2.11.0.dist-info"), str(c.t.site))],
            "refused",
            "the server imports",
            id="move-server-torch-metadata",
        ),
        P(
            nothing,
            lambda c: [move_aside(str(c.t.site / "torch"), str(c.t.site))],
            "refused",
            "the server imports",
            id="move-server-torch-folder",
        ),
        P(
            nothing,
            lambda c: [move_aside(str(c.t.site), str(c.t.site.parent))],
            "refused",
            "the server imports",
            id="move-site-holding-torch",
        ),
        P(
            nothing,
            lambda c: [move_aside(str(c.t.site / "torch" / "__init__.py"), str(c.t.site))],
            "refused",
            "the server imports",
            id="move-inside-torch",
        ),
        P(nothing, lambda c: [EditFile(str(c.tmp / "s.env"), OVERRIDE)], "refused", "", id="edit-missing-file"),
        P(
            lambda c: (c.tmp / "s.env").write_text(f"{OVERRIDE}=$(curl x|sh)\n"),
            lambda c: [stray(c), EditFile(str(c.tmp / "s.env"), OVERRIDE)],
            "refused",
            "",
            id="edit-command-substitution",
        ),
        P(
            nothing,
            lambda c: [EditFile(str(c.tmp / "s.env"), "LD_PRELOAD")],
            "refused",
            "edits only",
            id="edit-other-variable",
        ),
        P(
            nothing,
            lambda c: [EditFile(str(c.tmp / "s.env"), OVERRIDE, "5; rm -rf /")],
            "refused",
            "2, 3 or 4",
            id="edit-bad-value",
        ),
        # ---- builds ----
        P(
            lambda c: c.mp.setenv("PATH", str(c.tmp / "empty-bin")),
            build,
            "refused",
            "git is not installed",
            id="build-no-git",
        ),
        P(
            lambda c: c.mp.setenv("PATH", path_with(fake_git(c.tmp / "gb", "clone-fails"))),
            build,
            "refused",
            "git clone of",
            id="build-clone-fails",
        ),
        P(
            lambda c: c.mp.setenv("PATH", path_with(fake_git(c.tmp / "gb", "unreachable"))),
            lambda c: [*build(c), stray(c)],
            "skipped",
            "cannot be reached",
            id="build-source-unreachable",
        ),
        P(
            lambda c: (c.mp.setenv("PATH", path_with(fake_git(c.tmp / "gb"))), planted_cwd(c)),
            build,
            "ok",
            "",
            id="build-planted-setup-in-cwd",
        ),
        P(
            lambda c: (c.mp.setenv("PATH", path_with(fake_git(c.tmp / "gb"))), c.t.behave(dry="network")),
            build,
            "refused",
            "index cannot be reached",
            id="build-index-unreachable",
        ),
        # ---- runs that fail: everything put back ----
        P(
            lambda c: c.t.behave(install="fail-before"),
            move_then_pip,
            "undone",
            "failed (exit 1)",
            id="install-fails-early",
        ),
        P(
            lambda c: c.t.behave(install="fail-after"),
            move_then_pip,
            "undone",
            "failed (exit 1)",
            id="install-fails-half-way",
        ),
        P(lambda c: c.t.behave(install="enospc"), move_then_pip, "undone", "failed", id="disk-full-during-install"),
        P(
            lambda c: (c.t.behave(install="hang"), setattr(c, "timeout", HANG_LIMIT)),
            move_then_pip,
            "undone",
            f"timed out after {HANG_LIMIT} s",
            id="install-hangs",
        ),
        P(lambda c: c.t.behave(install="sigkill-self"), move_then_pip, "undone", "exit -9", id="pip-killed"),
        P(
            lambda c: (c.t.dist("flash-attn", "2.8.3"), c.t.behave(install="fail-on:flash-attn")),
            lambda c: [pip(), pip("flash-attn==2.8.3")],
            "undone",
            "failed",
            id="second-owner-fails",
        ),
        P(
            lambda c: (c.t.dist("flash-attn", "2.8.3"), c.t.behave(uninstall="fail")),
            lambda c: [pip(), PipUninstall("/p/python", ("flash-attn",))],
            "undone",
            "exited 3",
            id="uninstall-fails",
        ),
        P(no_space, move_then_pip, "undone", "No space left", id="disk-full-during-snapshot"),
        P(
            lambda c: appears_later(c, "[2/2]", lambda c: Path(stray_backup(c))),
            lambda c: [pip(), stray(c)],
            "undone",
            "appeared since the proof",
            id="move-destination-appears",
        ),
        # ---- interrupts ----
        P(
            lambda c: signal_at(c, "[2/3]", signal.SIGINT),
            lambda c: [pip(), stray(c), pip("flash-attn-4==4.0.0b37")],
            "undone",
            "",
            id="sigint-between-steps",
        ),
        P(
            lambda c: signal_at(c, "[2/2]", signal.SIGTERM),
            lambda c: [stray(c), pip()],
            "undone",
            "",
            id="sigterm-between-steps",
        ),
        P(
            lambda c: (c.t.behave(install="hang"), signal_at(c, "[1/1]", signal.SIGINT, 0.5)),
            one,
            "undone",
            "interrupted by SIGINT",
            id="sigint-during-install",
        ),
        P(
            lambda c: (c.t.behave(install="hang"), signal_at(c, "[2/2]", signal.SIGHUP, 0.5)),
            move_then_pip,
            "undone",
            "interrupted by SIGHUP",
            id="sighup-during-install",
        ),
        P(
            lambda c: signal_at(c, "Proving", signal.SIGINT),
            move_then_pip,
            "refused-signal",
            "",
            id="sigint-while-proving",
        ),
        # ---- an undo that cannot be done is named, not hidden ----
        P(
            lambda c: (
                c.t.behave(install="fail-before"),
                appears_later(c, "[2/2]", lambda c: c.tmp / "work" / "flash_attn"),
            ),
            move_then_pip,
            "partial",
            "exists again",
            id="undo-blocked",
        ),
    ]


def stray_backup(c: Ctx) -> str:
    return str(c.tmp / "work" / "flash_attn.fa-doctor-backup")


def planted_cwd(c: Ctx) -> None:
    cwd = c.tmp / "caller"
    (cwd / "flash-attention" / "hopper").mkdir(parents=True)
    for p in (cwd / "setup.py", cwd / "flash-attention" / "hopper" / "setup.py"):
        p.write_text("open('PWNED', 'w')\n")
    (cwd / "src" / "hopper").mkdir(parents=True)
    (cwd / "src" / "hopper" / "setup.py").write_text("open('PWNED', 'w')\n")
    c.mp.chdir(cwd)


CASES = _cases()


@pytest.mark.parametrize(("setup", "actions", "expected", "words"), CASES)
def test_hostile(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setup: Callable[[Ctx], None],
    actions: Callable[[Ctx], list[Action]],
    expected: str,
    words: str,
) -> None:
    t = Target(tmp_path / "t")
    t.dist("torch", "2.11.0", {"torch/_C.so": "ELF"})
    (t.site / "torch-2.11.0.dist-info" / "top_level.txt").write_text("torch\n")
    t.dist("flash-attn-4", "4.0.0b35")
    c = Ctx(t, tmp_path, monkeypatch, list(t.sys_path), str(t.python))
    old_alarm = signal.signal(signal.SIGALRM, lambda *_: signal.raise_signal(getattr(signal, "_fa_test_sig", 2)))
    try:
        setup(c)
        plan = actions(c)
        work_before = sorted(str(p) for p in (tmp_path / "work").rglob("*")) if (tmp_path / "work").exists() else []
        before = t.snapshot()
        with interrupt.handled():
            result = apply(plan, python=c.python, timeout=c.timeout, sys_path=c.sys_path, progress=c.progress)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
    assert not list(tmp_path.rglob("PWNED"))
    assert t.leftovers() == [] or expected == "partial"
    work_after = sorted(str(p) for p in (tmp_path / "work").rglob("*")) if (tmp_path / "work").exists() else []
    work_after = [p for p in work_after if p not in c.planted or p in work_before]
    check(result, expected, words, before == t.snapshot(), work_before == work_after)


def check(result: ApplyResult, expected: str, words: str, site_same: bool, work_same: bool) -> None:
    text = " ".join(s.message for s in (*result.refused, *result.skipped, *([result.failed] if result.failed else [])))
    text += " " + " ".join(s.message for s in result.ran)
    assert words in text, (expected, result)
    if expected == "ok":
        assert result.ok, result
    elif expected in ("refused", "refused-signal"):
        assert not result.ok and unchanged(result) and site_same and work_same, result
        assert expected == "refused-signal" or result.refused
    elif expected == "skipped":
        assert result.ok and result.skipped and result.ran, result
    elif expected == "undone":
        assert not result.ok and unchanged(result) and site_same and work_same, result
        assert "as it was" in result.state or "nothing was changed" in result.state, result.state
    elif expected == "partial":
        assert not result.ok and result.ran and result.ran[0].status == "kept", result
        assert "partly changed" in result.state and result.journal, result.state


def test_the_round_is_big_enough() -> None:
    assert len(CASES) >= 40
