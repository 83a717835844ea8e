"""`fix --apply`: actions run one at a time in the target interpreter, a fake `python` recording every call."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from fa_doctor.actions import EditFile, MovePath, PipInstall, PipUninstall, RunCommand, SetEnv, UnsetEnv, move_aside
from fa_doctor.fixes.apply import apply

N = "SGLANG_FLASHATTENTION_VERSION"
SEP = "\x1f"
FAKE = r"""#!/bin/sh
here=$(dirname "$0")
log="$here/calls.log"
{
  printf 'CALL\037%s' "$0"; for a in "$@"; do printf '\037%s' "$a"; done; printf '\037MAX_JOBS=%s\n' "$MAX_JOBS"
} >> "$log"
prev=
for a in "$@"; do
  if [ "$prev" = "-c" ] && [ -f "$a" ]; then printf 'CONSTRAINTS\037%s\n' "$(tr '\n' '\037' < "$a")" >> "$log"; fi
  prev=$a
done
mode() { sed -n "s/^$1=//p" "$here/behaviour" 2>/dev/null | head -n 1; }
case " $* " in
  *" --version "*)
    [ "$(mode pip)" = missing ] && { echo "No module named pip" >&2; exit 1; }
    v=$(mode pip-version); echo "pip ${v:-24.0} from /fake/pip (python 3.11)"; exit 0;;
  *" --dry-run "*) m=$(mode dry);;
  *" install "*) m=$(mode install);;
  *" uninstall "*) m=$(mode uninstall);;
  *) m=;;
esac
case "$m" in
  network)
    echo "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(':" >&2
    echo "Failed to establish a new connection: [Errno 101] Network is unreachable')'" >&2
    echo "ERROR: No matching distribution found for flash-attn-4" >&2; exit 1;;
  conflict) echo "ERROR: ResolutionImpossible: conflicting dependencies" >&2; exit 1;;
  hang) sleep 60;;
  fail-before) echo "ERROR: Failed building wheel for flash-attn" >&2; exit 1;;
  fail-after) echo "Installing collected packages: flash-attn-4"; echo "ERROR: could not write" >&2; exit 1;;
  fail) exit 3;;
esac
echo "Successfully done"
"""


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    """A `python` that records its argv (and the constraints file it was given) and fails on demand."""
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python"
    python.write_text(FAKE)
    python.chmod(0o755)
    return python


def behave(python: Path, **modes: str) -> None:
    (python.parent / "behaviour").write_text("".join(f"{k.replace('_', '-')}={v}\n" for k, v in modes.items()))


def calls(python: Path) -> list[list[str]]:
    log = python.parent / "calls.log"
    return [line.split(SEP) for line in log.read_text().splitlines()] if log.exists() else []


def installs(python: Path) -> list[list[str]]:
    return [c[1:-1] for c in calls(python) if c[0] == "CALL" and "install" in c]


def pip(python: str = "/planned/python", **kw: object) -> PipInstall:
    defaults: dict[str, object] = {
        "requirements": ("flash-attn-4==4.0.0b36",),
        "options": ("--no-deps", "--force-reinstall"),
        "constraints": ("torch==2.11.0", "sglang-kernel==0.4.10"),
        "env": (("MAX_JOBS", "4"),),
    }
    return PipInstall(python, **{**defaults, **kw})  # type: ignore[arg-type]


def stray(tmp_path: Path) -> tuple[Path, MovePath]:
    site = tmp_path / "site"
    (site / "flash_attn").mkdir(parents=True)
    (site / "flash_attn" / "__init__.abi3.so").write_bytes(b"\x7fELF")
    return site, move_aside(str(site / "flash_attn"), str(site))


def test_everything_runs_in_order_in_the_target_interpreter(fake: Path, tmp_path: Path) -> None:
    site, move = stray(tmp_path)
    env_file = tmp_path / "server.env"
    env_file.write_text(f"A=1\n{N}=5\n")
    lines: list[str] = []
    result = apply(
        [UnsetEnv(N), pip(), move, EditFile(str(env_file), N), PipUninstall("/planned/python", ("flash-attn",))],
        python=str(fake),
        timeout=30,
        progress=lines.append,
    )
    assert result.ok and not result.unchanged and result.not_run == ()
    assert result.manual == (UnsetEnv(N),)  # the calling shell's business
    assert [s.message for s in result.ran][2:] == [f"edited {env_file} (backup {env_file}.fa-doctor.bak)", "done"]
    dry, real = installs(fake)[:2]
    assert real[:4] == [str(fake), "-m", "pip", "install"]  # the target's python, not the planned one
    assert dry == [*real[:4], "--dry-run", "--timeout", "15", "--retries", "1", *real[4:]]
    assert real[4:7] == ["--no-deps", "--force-reinstall", "-c"] and real[-1] == "flash-attn-4==4.0.0b36"
    constraints = [c for c in calls(fake) if c[0] == "CONSTRAINTS"]
    assert constraints and all(c[1:] == ["torch==2.11.0", "sglang-kernel==0.4.10", ""] for c in constraints)
    assert all(c[-1] == "MAX_JOBS=4" for c in calls(fake) if "install" in c)
    assert not (site / "flash_attn").exists() and (site / "flash_attn.fa-doctor-backup" / "__init__.abi3.so").exists()
    assert env_file.read_text() == "A=1\n"
    assert [c[2:5] for c in calls(fake) if "uninstall" in c] == [["-m", "pip", "uninstall"]]
    assert len(lines) == 8 and lines[0].startswith("[1/4] Install")


@pytest.mark.parametrize(
    ("modes", "words"),
    [
        ({"dry": "network"}, "the package index cannot be reached; nothing was changed"),
        ({"dry": "conflict"}, "pip cannot resolve this install (dry run); nothing was changed"),
        ({"pip": "missing"}, "pip does not run in"),
    ],
)
def test_an_install_that_cannot_work_stops_before_changing_anything(
    fake: Path, tmp_path: Path, modes: dict[str, str], words: str
) -> None:
    behave(fake, **modes)
    site, move = stray(tmp_path)
    result = apply([pip(), move], python=str(fake), timeout=30)
    assert result.failed and words in result.failed.message, result.failed
    assert result.unchanged and result.failed.left_unchanged and result.not_run == (move,) and result.ran == ()
    assert not [c for c in installs(fake) if "--dry-run" not in c]  # the real install never ran
    assert (site / "flash_attn").is_dir()


def test_a_dry_run_that_hangs_is_bounded(fake: Path) -> None:
    behave(fake, dry="hang")
    start = time.monotonic()
    result = apply([pip()], python=str(fake), timeout=2)
    assert time.monotonic() - start < 20
    assert result.failed and "did not finish in 2 s" in result.failed.message and result.unchanged


@pytest.mark.parametrize(
    ("mode", "unchanged", "words"),
    [
        ("fail-before", True, "failed (exit 1); nothing was changed"),
        ("fail-after", False, "the environment may be partly changed"),
        ("hang", True, "timed out after 2 s"),
    ],
)
def test_a_failing_install_says_whether_it_changed_anything(fake: Path, mode: str, unchanged: bool, words: str) -> None:
    behave(fake, install=mode)
    result = apply([pip(), RunCommand(("true",))], python=str(fake), timeout=2)
    assert result.failed and words in result.failed.message and result.failed.left_unchanged is unchanged
    assert result.not_run == (RunCommand(("true",)),)


def test_old_pip_has_no_dry_run(fake: Path) -> None:
    behave(fake, pip_version="21.3")
    assert apply([pip(constraints=())], python=str(fake), timeout=30).ok
    assert [c for c in installs(fake) if "--dry-run" in c] == [] and len(installs(fake)) == 1
    assert not [c for c in calls(fake) if c[0] == "CONSTRAINTS"]


def test_moves_refuse_to_leave_the_root(tmp_path: Path, fake: Path) -> None:
    outside = tmp_path / "home"
    (outside / "flash_attn").mkdir(parents=True)
    site = tmp_path / "site"
    site.mkdir()
    (site / "link").symlink_to(outside)  # inside the root by name, outside it on disk
    move = move_aside(str(site / "link" / "flash_attn"), str(site))
    result = apply([move], python=str(fake), timeout=5)
    assert result.failed and "outside" in result.failed.message and result.unchanged
    assert (outside / "flash_attn").is_dir() and not (outside / "flash_attn.fa-doctor-backup").exists()


def test_moves_never_overwrite_and_never_delete(tmp_path: Path, fake: Path) -> None:
    site, move = stray(tmp_path)
    (site / "flash_attn.fa-doctor-backup").mkdir()  # an earlier backup: os.rename would replace an empty folder
    result = apply([move], python=str(fake), timeout=5)
    assert result.failed and "exists; not moved" in result.failed.message
    assert (site / "flash_attn" / "__init__.abi3.so").exists()
    gone = apply([move_aside(str(site / "nothing"), str(site))], python=str(fake), timeout=5)
    assert gone.failed and "gone already" in gone.failed.message


def test_an_env_file_that_cannot_be_edited_stops_the_run(tmp_path: Path, fake: Path) -> None:
    env_file = tmp_path / "server.env"
    env_file.write_text(f"{N}=$(cat /etc/fa)\n")
    result = apply([EditFile(str(env_file), N), RunCommand(("true",))], python=str(fake), timeout=5)
    assert result.failed and "edit it by hand" in result.failed.message and result.unchanged
    assert env_file.read_text() == f"{N}=$(cat /etc/fa)\n"
    assert apply([EditFile(str(env_file), N, "9")], python=str(fake), timeout=5).failed


def test_a_failing_command_stops_the_run(tmp_path: Path, fake: Path) -> None:
    site, move = stray(tmp_path)
    behave(fake, uninstall="fail")
    result = apply(
        [RunCommand((sys.executable, "-c", "print('ok')")), PipUninstall("/p/python", ("flash-attn",)), move],
        python=str(fake),
        timeout=10,
    )
    assert [s.output.strip() for s in result.ran] == ["ok"]
    assert result.failed and "exited 3" in result.failed.message and result.not_run == (move,)
    assert result.failed.left_unchanged  # pip said nothing about uninstalling
    assert (site / "flash_attn").is_dir()


def test_only_shell_actions_means_nothing_runs(fake: Path) -> None:
    result = apply([SetEnv(N, "3"), UnsetEnv("CUTE_DSL_ARCH")], python=str(fake), timeout=5)
    assert result.ok and result.unchanged and result.ran == () and len(result.manual) == 2
    assert calls(fake) == []


def test_real_pip_with_an_unreachable_index(tmp_path: Path) -> None:
    """The real pip of the test venv, an index on a closed port: classified from pip's own words."""
    python = os.path.join(os.path.dirname(sys.executable), "python")
    target = tmp_path / "target"
    action = PipInstall(
        python,
        ("flash-attn-4==4.0.0b36",),
        ("--no-deps", "--target", str(target), "--index-url", "http://127.0.0.1:9/simple", "--no-cache-dir"),
    )
    result = apply([action], python=python, timeout=60)
    assert result.failed and "the package index cannot be reached; nothing was changed" in result.failed.message
    assert result.unchanged and not target.exists()


def wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel with real metadata, for pip's own resolver."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b'=').decode()},{len(c)}"
        for p, c in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, c in files.items():
            zf.writestr(p, c)
    return path


@pytest.mark.parametrize(("pin", "ok"), [("demo-pkg==1.0", True), ("demo-pkg==2.0", False)])
def test_real_pip_against_a_local_wheel_folder(tmp_path: Path, pin: str, ok: bool) -> None:
    """The dry run and the install as real pip reads them: a pin the wheels satisfy installs, one they do not
    stops at the dry run with nothing installed."""
    python = os.path.join(os.path.dirname(sys.executable), "python")
    wheel(tmp_path / "wheels", "demo_pkg", "1.0")
    target = tmp_path / "target"
    options = ("--no-deps", "--no-index", "--find-links", str(tmp_path / "wheels"), "--target", str(target))
    action = PipInstall(python, ("demo-pkg",), options, constraints=(pin,))
    result = apply([action], python=python, timeout=120)
    if ok:
        assert result.ok, result.failed
        assert (target / "demo_pkg" / "__init__.py").read_text() == "__version__ = '1.0'\n"
    else:
        assert (
            result.failed and "pip cannot resolve this install (dry run); nothing was changed" in result.failed.message
        )
        assert result.unchanged and not target.exists()
