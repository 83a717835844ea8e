"""`fix --unset-override --env-file`: real files on disk, every other byte kept, atomic, refusals leave no trace."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.fix.dialects import apply, detect, line_of, plan
from fa_doctor.fix.envfile import MAX_BYTES, edit

N = "SGLANG_FLASHATTENTION_VERSION"


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("before", "unset", "set4"),
    [
        # dotenv, LF, comment kept, no final newline kept
        (f"# pin\nA=1\n{N}=3\nB=2".encode(), b"# pin\nA=1\nB=2", f"# pin\nA=1\n{N}=4\nB=2".encode()),
        # CRLF profile, quoted value and a trailing comment
        (
            f'A=1\r\nexport {N}="3" # FA3\r\nB=2\r\n'.encode(),
            b"A=1\r\nB=2\r\n",
            f'A=1\r\nexport {N}="4" # FA3\r\nB=2\r\n'.encode(),
        ),
        # several exports on one line: only ours goes
        (f"export A=1 {N}='3' B=2\n".encode(), b"export A=1 B=2\n", f"export A=1 {N}='4' B=2\n".encode()),
        # dotenv with blanks around `=`
        (f"{N} = 3\nC=x\n".encode(), b"C=x\n", f"{N} = 4\nC=x\n".encode()),
        # systemd: several assignments, one quoted with a blank; only ours is rewritten
        (
            f'[Service]\nEnvironment=A=1 {N}=3 "C=x y"\nExecStart=/srv/run\n'.encode(),
            b'[Service]\nEnvironment=A=1 "C=x y"\nExecStart=/srv/run\n',
            f'[Service]\nEnvironment=A=1 {N}=4 "C=x y"\nExecStart=/srv/run\n'.encode(),
        ),
        (
            f'Environment="{N}=3" B=2\n'.encode(),
            b"Environment=B=2\n",
            f'Environment="{N}=4" B=2\n'.encode(),
        ),
        # a line left empty is removed: an empty `Environment=` would reset every earlier assignment
        (
            f"Environment=A=1\nEnvironment={N}=3\n".encode(),
            b"Environment=A=1\n",
            f"Environment=A=1\nEnvironment={N}=4\n".encode(),
        ),
        # bytes that are not UTF-8 elsewhere in the file survive
        (b"X=\xff\xfe\n" + f"{N}=3\n".encode(), b"X=\xff\xfe\n", b"X=\xff\xfe\n" + f"{N}=4\n".encode()),
    ],
)
def test_rewrites_only_the_override(tmp_path: Path, before: bytes, unset: bytes, set4: bytes) -> None:
    for value, expected in ((None, unset), (4, set4)):
        folder = tmp_path / str(value)
        folder.mkdir()
        path = write(folder / "env", before, 0o600)
        result = edit(str(path), set_value=value, dry_run=False)
        assert result.error is None and result.changed
        assert path.read_bytes() == expected
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert result.backup and Path(result.backup).read_bytes() == before
        assert listing(folder) == {"env", "env.fa-doctor.bak"}  # no temporary file left behind


def test_untouched_lines_and_comments(tmp_path: Path) -> None:
    text = f'# export {N}=3\necho ${N}\nunset {N}\nexport {N}\n[ -n "${{{N}:-}}" ]\necho "{N} is old"\n'.encode()
    path = write(tmp_path / ".bashrc", text)
    result = edit(str(path), set_value=None, dry_run=False)
    assert (result.changed, result.error, result.backup) == (False, None, None)
    assert path.read_bytes() == text and listing(tmp_path) == {".bashrc"}


@pytest.mark.parametrize("line", [f"set -q {N}", f"FOO={N}", f"launchctl setenv {N} 3", f"declare -n r={N}"])
def test_the_name_elsewhere_is_refused(tmp_path: Path, line: str) -> None:
    """Naming it where fa-doctor cannot prove it harmless (fish's `set`, a name kept for later, a program that
    sets it elsewhere, a reference) is said, not called clean."""
    path = write(tmp_path / ".bashrc", f"A=1\n{line}\n".encode())
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error and f"{path}:2:" in result.error and not result.changed


@pytest.mark.parametrize(
    "line",
    [
        f"{N}=$(touch PWNED)",
        f"{N}=`touch PWNED`",
        f'{N}=3; eval "$X"FOO=1 {N}=3 python -m sglang.launch_server',
        f'export {N}="$OTHER"',
        f'Environment="{N}=3',
        f"set -a {N} 3",
        f"$env:{N} = $other",
        f"{N}+=3",
        "source /etc/sglang.env",
        'eval "$(ssh-agent)"',
    ],
)
def test_unknown_shapes_are_refused_and_the_file_stays(tmp_path: Path, line: str) -> None:
    data = f"A=1\n{line}\nB=2\n".encode()
    path = write(tmp_path / "env", data)
    result = edit(str(path), set_value=None, dry_run=False)
    assert not result.changed and result.error and f"{path}:2:" in result.error and "unchanged" in result.error
    assert path.read_bytes() == data and listing(tmp_path) == {"env"}


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    data = f"SECRET_TOKEN=hunter2\nA=1\n{N}=3\nB=2".encode()
    path = write(tmp_path / "env", data)
    mtime = path.stat().st_mtime_ns
    result = edit(str(path), set_value=None, dry_run=True)
    assert result.changed and result.backup is None and result.error is None
    assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime and listing(tmp_path) == {"env"}
    assert f"\n-{N}=3\n" in result.diff and not [x for x in result.diff.splitlines() if x[:1] == "+" and x[:3] != "+++"]
    assert "hunter2" not in result.diff  # no context lines: env files hold secrets


def test_diff_hides_secrets_on_a_changed_line_and_marks_a_missing_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "unit", f"Environment={N}=3 HF_TOKEN=hf_abc".encode())
    result = edit(str(path), set_value=4, dry_run=True)
    assert "hf_abc" not in result.diff and "HF_TOKEN=<hidden>" in result.diff
    assert "\\ No newline at end of file" in result.diff
    assert any("systemctl daemon-reload" in n for n in result.notes)


def test_absent_variable_does_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "env", b"A=1\r\nB=2")
    for value in (None, 3):
        result = edit(str(path), set_value=value, dry_run=False)
        assert (result.changed, result.diff, result.backup, result.error) == (False, "", None, None)
    assert path.read_bytes() == b"A=1\r\nB=2" and listing(tmp_path) == {"env"}


def test_read_only_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"{N}=3\n".encode(), 0o444)
    result = edit(str(path), set_value=None, dry_run=False)
    assert not result.changed and result.error and "read-only" in result.error
    assert path.read_bytes() == f"{N}=3\n".encode() and listing(tmp_path) == {"env"}


@contextmanager
def read_only_folder(folder: Path) -> Iterator[None]:
    """chmod is no barrier to root: there, make the folder immutable instead (skip where that is not possible)."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False).returncode:
            pytest.skip("running as root without chattr +i: cannot make a folder read-only")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)


def test_read_only_folder_gives_an_error_and_keeps_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = write(folder / "env", f"A=1\n{N}=3\n".encode())
    with read_only_folder(folder):
        result = edit(str(path), set_value=None, dry_run=False)
        assert not result.changed and result.error and "cannot write" in result.error and "unchanged" in result.error
        assert path.read_bytes() == f"A=1\n{N}=3\n".encode() and listing(folder) == {"env"}


def test_symlink_stays_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "dotfiles").mkdir()
    real = write(tmp_path / "dotfiles" / "bashrc", f"alias ll='ls -l'\nexport {N}=3\n".encode(), 0o640)
    link = tmp_path / ".bashrc"
    link.symlink_to(real)
    result = edit(str(link), set_value=None, dry_run=False)
    assert result.changed and result.error is None and result.path == str(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"alias ll='ls -l'\n" and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert result.backup == str(real) + ".fa-doctor.bak"


def test_backups_are_never_overwritten(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"{N}=3\n".encode())
    first = edit(str(path), set_value=4, dry_run=False)
    second = edit(str(path), set_value=None, dry_run=False)
    assert first.backup and second.backup and first.backup != second.backup
    assert Path(first.backup).read_bytes() == f"{N}=3\n".encode()
    assert Path(second.backup).read_bytes() == f"{N}=4\n".encode()
    assert path.read_bytes() == b""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file another owner")
def test_owner_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"{N}=3\nA=1\n".encode(), 0o600)
    os.chown(path, 4321, 4322)
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error is None and result.changed
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4322, 0o600)


def test_non_regular_and_oversized_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block without O_NONBLOCK; it must not even be read
    for target, words in (
        (fifo, "not a regular file"),
        (tmp_path, "not a regular file"),
        (Path("/dev/null"), "not a regular file"),
        (tmp_path / "missing", "does not exist"),
    ):
        result = edit(str(target), set_value=None, dry_run=False)
        assert not result.changed and result.error and words in result.error, result
    assert "not a usable path" in str(edit(str(tmp_path) + "/a\0b", set_value=None, dry_run=False).error)
    big = write(tmp_path / "big", f"{N}=3\n".encode() + b"#" * MAX_BYTES)
    result = edit(str(big), set_value=None, dry_run=False)
    assert result.error and "larger than" in result.error and big.stat().st_size == MAX_BYTES + len(N) + 3


def test_invalid_set_value(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"{N}=3\n".encode())
    for bad in (5, 0, -3):
        result = edit(str(path), set_value=bad, dry_run=False)
        assert result.error and "2, 3 or 4" in result.error and not result.changed
    assert path.read_bytes() == f"{N}=3\n".encode()


def rewrite(text: str, value: str | None) -> tuple[str, list[int]]:
    """The text as the edit writes it back, and the 1-based numbers of the lines that changed."""
    edits = plan(detect("", text), text, value)
    assert not edits.refusals, edits.refusals
    return apply(text, edits.changes), sorted(
        {line_of(text, c.start) for c in edits.changes if text[c.start : c.end] != c.new}
    )


def test_only_lf_splits_lines() -> None:
    # \f, \x1c and U+2028 are not line ends in a shell or dotenv file: a split there would drop bytes
    text = f"A=1\x0cB\u2028C\n{N}=3\n\x1cD=4"
    assert rewrite(text, None) == ("A=1\x0cB\u2028C\n\x1cD=4", [2])


@pytest.mark.parametrize(
    ("shell", "text"),
    [
        ("bash", f"A=1\nexport B=2 {N}='3' C=x\nalias ll='ls -l'\n"),
        ("dash", f'export {N}="3"  # pinned\nexport A=1\n'),
        ("zsh", f"typeset -gx {N}=3\nexport A=1\n"),
    ],
)
def test_edited_profiles_still_source_in_a_real_shell(tmp_path: Path, shell: str, text: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    for value, expected in ((4, "4"), (None, "unset")):
        path = write(tmp_path / f"profile-{value}", text.encode())
        assert edit(str(path), set_value=value, dry_run=False).changed
        script = f'. {path}; if [ -n "${{{N}+x}}" ]; then printf %s "${N}"; else printf unset; fi; printf "|%s" "$A"'
        env = {k: v for k, v in os.environ.items() if k != N}
        done = subprocess.run([shell, "-c", script], capture_output=True, text=True, timeout=30, env=env, check=False)
        assert done.stdout == f"{expected}|1", done.stderr


_TEXT = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30).filter(
    lambda t: N not in t
)
# Lines that mean nothing to the structure but hold any text: comments and single-quoted values.
_SH_OTHER = st.one_of(
    _TEXT.map(lambda t: "# " + t),
    _TEXT.filter(lambda t: "'" not in t).map(lambda t: f"A_1='{t}'"),
    st.just(""),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    before=st.lists(st.tuples(_SH_OTHER, st.sampled_from(["\n", "\r\n"])), max_size=8),
    after=st.lists(st.tuples(_SH_OTHER, st.sampled_from(["\n", "\r\n"])), max_size=8),
    line=st.sampled_from([f"{N}=3", f"export {N}='3'", f'  export {N}="3" # x', f"{N} = 3"]),
    end=st.sampled_from(["\n", "\r\n", ""]),
    last=_SH_OTHER,
)
def test_every_other_byte_is_kept(
    before: list[tuple[str, str]], after: list[tuple[str, str]], line: str, end: str, last: str
) -> None:
    head = "".join(a + b for a, b in before)
    tail = "".join(a + b for a, b in after) + last
    if not end:  # the override is the last line, without a final newline
        tail = ""
    assert rewrite(head + tail, None) == (head + tail, [])
    assert rewrite(head + line + end + tail, None) == (head + tail, [len(before) + 1])
    assert rewrite(head + line + end + tail, "4") == (head + line.replace("3", "4") + end + tail, [len(before) + 1])
