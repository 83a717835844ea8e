"""Structure-aware env-file edits (issues 15 and 26): continuations, compound statements, quoted strings,
heredocs, systemd, dotenv (UTF-16 with a BOM too); ACLs, xattrs and hard links; secrets and eval-inert dry runs.

Every edited file is handed to the real tool that reads it (bash -n, dash -n, zsh -n, systemd-analyze verify)
where that tool is installed; the check is skipped cleanly where it is not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fa_doctor.fix.envfile import edit

N = "SGLANG_FLASHATTENTION_VERSION"
SH_CHECKERS = [("bash", "-n"), ("dash", "-n"), ("zsh", "-n")]


def write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)
    return path


def parses(tool: str, flag: str, path: Path) -> None:
    """The real tool accepts the file (skipped where the tool is absent)."""
    if shutil.which(tool) is None:
        return
    done = subprocess.run([tool, flag, str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"{tool} {flag}: {done.stderr}"


def sd_verify(path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        return
    done = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def unset(path: Path) -> str:
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error is None and result.changed, result
    return path.read_text()


# ---- continuations -----------------------------------------------------------------------------------------


def test_systemd_continuation_does_not_swallow_execstart(tmp_path: Path) -> None:
    unit = write(
        tmp_path / "a.service",
        f"[Unit]\nDescription=x\n[Service]\nEnvironment=A=1 \\\n  {N}=3\nExecStart=/bin/true\n",
    )
    assert unset(unit) == "[Unit]\nDescription=x\n[Service]\nEnvironment=A=1\nExecStart=/bin/true\n"
    sd_verify(unit)


def test_systemd_first_word_before_a_continuation(tmp_path: Path) -> None:
    unit = write(tmp_path / "b.service", f"[Service]\nEnvironment={N}=3 \\\n  A=1\nExecStart=/bin/true\n")
    assert unset(unit) == "[Service]\nEnvironment=A=1\nExecStart=/bin/true\n"
    sd_verify(unit)
    unit = write(tmp_path / "c.service", f"[Service]\nEnvironment={N}=3 \\\n  A=1\nExecStart=/bin/true\n")
    assert edit(str(unit), set_value=4, dry_run=False).changed
    assert unit.read_text() == f"[Service]\nEnvironment={N}=4 \\\n  A=1\nExecStart=/bin/true\n"


def test_systemd_only_assignment_spanning_lines_goes_whole(tmp_path: Path) -> None:
    unit = write(tmp_path / "d.service", f"[Service]\nEnvironment=\\\n  {N}=3\nExecStart=/bin/true\n")
    assert unset(unit) == "[Service]\nExecStart=/bin/true\n"
    sd_verify(unit)


def test_shell_continuation_does_not_swallow_the_next_command(tmp_path: Path) -> None:
    profile = write(tmp_path / "profile.sh", f"export A=1 \\\n  {N}=3\necho next\n")
    assert unset(profile) == "export A=1\necho next\n"
    for tool, flag in SH_CHECKERS:
        parses(tool, flag, profile)
    profile = write(tmp_path / "p2.sh", f"export {N}=3 \\\n  A=1\necho next\n")
    assert unset(profile) == "export A=1\necho next\n"


def test_shell_continuation_into_an_and_list(tmp_path: Path) -> None:
    profile = write(tmp_path / "p.sh", f"export {N}=3 \\\n  && echo ok\n")
    assert unset(profile) == ": \\\n  && echo ok\n"
    for tool, flag in SH_CHECKERS:
        parses(tool, flag, profile)


# ---- compound statements -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (f"if true; then\n  export {N}=3\nfi\n", "if true; then\n  :\nfi\n"),
        (f"f() {{\n  export {N}=3\n}}\n", "f() {\n  :\n}\n"),
        (f"while false; do\n  {N}=3\ndone\n", "while false; do\n  :\ndone\n"),
        (f"case $x in\n  a) export {N}=3;;\nesac\n", "case $x in\n  a) :;;\nesac\n"),
        (f"if true; then export {N}=3; fi\n", "if true; then :; fi\n"),
        (f"true && export {N}=3\n", "true && :\n"),
        (f"true &&\n  export {N}=3\necho x\n", "true &&\n  :\necho x\n"),
    ],
)
def test_shell_compound_keeps_a_neutral_statement(tmp_path: Path, before: str, after: str) -> None:
    profile = write(tmp_path / "profile.sh", before)
    assert unset(profile) == after
    for tool, flag in SH_CHECKERS:
        parses(tool, flag, profile)


# ---- quoted strings and heredocs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f'MSG="hello\nexport {N}=3\n"\necho "$MSG"\n',
        f"MSG='hello\n{N}=3\n'\n",
        f"cat > /tmp/x <<EOF\nexport {N}=3\nEOF\n",
        f"cat <<-'EOF'\n\t{N}=3\n\tEOF\n",
    ],
)
def test_text_inside_a_multiline_string_or_heredoc_is_not_edited(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "profile.sh", text)
    result = edit(str(path), set_value=None, dry_run=False)
    assert not result.changed and result.error and "line" in result.error
    assert path.read_text() == text and sorted(p.name for p in tmp_path.iterdir()) == ["profile.sh"]


def test_dotenv_multiline_value_is_data_where_no_line_reads_as_the_override(tmp_path: Path) -> None:
    text = f'CERT="-----BEGIN\nold {N}\n-----END"\n{N}=3\n'
    path = write(tmp_path / "server.env", text)
    assert unset(path) == f'CERT="-----BEGIN\nold {N}\n-----END"\n'
    # docker's --env-file reads line by line: a line inside a quoted value that starts `N=` sets it there
    text = f'CERT="-----BEGIN\n{N}=3\n-----END"\n'
    path = write(tmp_path / "docker.env", text)
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error and f"{path}:2:" in result.error and "docker" in result.error and path.read_text() == text


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-8-sig"])
def test_env_file_in_utf16_with_bom_keeps_its_encoding(tmp_path: Path, encoding: str) -> None:
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff", "utf-8-sig": b""}[encoding]
    text = f"A=1\r\n{N}=3\r\n# ü\r\n"
    path = write(tmp_path / "server.env", bom + text.encode(encoding))
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error is None and result.changed
    assert path.read_bytes() == bom + "A=1\r\n# ü\r\n".encode(encoding)


@pytest.mark.parametrize(("name", "text"), [("config.fish", f"set -gx {N} 3\n"), ("profile.ps1", f"$env:{N} = '3'\n")])
def test_fish_and_powershell_files_are_refused_with_the_line(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, "# mine\n" + text)
    result = edit(str(path), set_value=None, dry_run=False)
    assert result.error and f"{path}:2:" in result.error and "by hand" in result.error
    assert path.read_text() == "# mine\n" + text and os.listdir(tmp_path) == [name]


def test_heredoc_after_a_real_assignment_is_skipped_over(tmp_path: Path) -> None:
    text = f"export {N}=3\ncat <<EOF\n{N} is old\nEOF\n"
    path = write(tmp_path / "p.sh", text)
    assert unset(path) == f"cat <<EOF\n{N} is old\nEOF\n"


# ---- ACLs, xattrs, hard links ------------------------------------------------------------------------------


def test_user_xattr_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"A=1\n{N}=3\n")
    try:
        os.setxattr(path, "user.fa_doctor_test", b"kept")
    except OSError:
        pytest.skip("this filesystem takes no user.* extended attributes")
    unset(path)
    assert os.getxattr(path, "user.fa_doctor_test") == b"kept"


@pytest.mark.skipif(shutil.which("setfacl") is None, reason="setfacl is not installed (apt-get install acl)")
def test_posix_acl_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"A=1\n{N}=3\n", 0o600)
    if subprocess.run(["setfacl", "-m", "u:nobody:r", str(path)], capture_output=True, check=False).returncode:
        pytest.skip("this filesystem takes no POSIX ACLs")
    before = subprocess.run(["getfacl", "-cp", str(path)], capture_output=True, text=True, check=True).stdout
    unset(path)
    after = subprocess.run(["getfacl", "-cp", str(path)], capture_output=True, text=True, check=True).stdout
    assert "user:nobody:r--" in after and after == before


def test_hard_link_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "env", f"{N}=3\n")
    os.link(path, tmp_path / "other")
    result = edit(str(path), set_value=None, dry_run=False)
    assert not result.changed and result.error and "hard link" in result.error
    assert path.read_text() == f"{N}=3\n" and (tmp_path / "other").read_text() == f"{N}=3\n"


# ---- secrets and dry runs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"export OPENAI_KEY=sk-abc123 {N}=3\n", "sk-abc123"),
        (f"export PRIVATE_KEY='-----BEGIN' {N}=3\n", "BEGIN"),
        (f'[Service]\nEnvironment="DB_PASSWORD=a b c" {N}=3\n', "a b c"),
        (f"[Service]\nEnvironment=SSH_KEY=zzz9 {N}=3\n", "zzz9"),
        (f"export DB_PASS=pw0rd {N}=3\n", "pw0rd"),
    ],
)
def test_dry_run_diff_hides_secret_values(tmp_path: Path, text: str, secret: str) -> None:
    path = write(tmp_path / ("unit.service" if "[Service]" in text else "p.sh"), text)
    result = edit(str(path), set_value=None, dry_run=True)
    assert result.changed and result.diff and secret not in result.diff, result.diff
    assert "<hidden>" in result.diff


def fa_doctor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


@pytest.mark.parametrize("shell", ["bash", "dash", "zsh", "fish"])
def test_dry_run_stdout_is_inert_under_eval(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    folder = tmp_path / "x;touch PWNED;$(touch PWNED2)"
    folder.mkdir()
    env = write(folder / "server.env", f"A=1\n{N}=3\n")
    run = fa_doctor("fix", "--unset-override", "--dry-run", "--env-file", str(env), cwd=tmp_path)
    assert run.returncode == 0 and run.stdout
    assert all(line.startswith("#") for line in run.stdout.splitlines()), run.stdout
    script = tmp_path / "out.txt"
    script.write_text(run.stdout)
    code = f"cat '{script}' | source" if shell == "fish" else f"eval \"$(cat '{script}')\""
    done = subprocess.run([shell, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()


def test_human_dry_run_keeps_the_reason_a_file_was_refused(tmp_path: Path) -> None:
    env = write(tmp_path / "server.env", f"A=1\n{N}=$(date)\n")
    run = fa_doctor("fix", "--unset-override", "--dry-run", "--env-file", str(env), cwd=tmp_path)
    assert run.returncode == 1 and f"{env}:2:" in run.stderr, run.stderr
