"""A hostile round against `fix --unset-override --env-file` (issues 15 and 26): odd files in every dialect,
encodings, links and permissions. Each case says what must happen: "edit" (the override is gone, a second run finds
nothing, the real tool still parses the file and, for shells, sourcing it leaves the variable unset), "refuse" (an
error naming FILE:LINE or a reason, every byte kept, no file left behind) or "same" (nothing to do, nothing
written).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fa_doctor.fix.envfile import edit

N = "SGLANG_FLASHATTENTION_VERSION"
U16 = "\ufeff"

SH = [
    # continuations
    ("sh-cont-before", "p.sh", f"export A=1 \\\n  {N}=3\necho next\n", "edit"),
    ("sh-cont-after", "p.sh", f"export {N}=3 \\\n  A=1\necho next\n", "edit"),
    ("sh-cont-only", "p.sh", f"export \\\n  {N}=3\necho next\n", "edit"),
    ("sh-cont-three", "p.sh", f"export A=1 \\\n {N}=3 \\\n B=2\necho $A$B\n", "edit"),
    ("sh-cont-andlist", "p.sh", f"export {N}=3 \\\n  && echo ok\n", "edit"),
    ("sh-and-newline", "p.sh", f"true &&\n  export {N}=3\necho x\n", "edit"),
    ("sh-pipe-newline", "p.sh", f"true |\n  export {N}=3\n", "edit"),
    ("sh-bang", "p.sh", f"! export {N}=3\n", "edit"),
    # compound statements
    ("sh-if-only", "p.sh", f"if true; then\n  export {N}=3\nfi\n", "edit"),
    ("sh-if-else", "p.sh", f"if false; then\n  :\nelse\n  export {N}=3\nfi\n", "edit"),
    ("sh-elif", "p.sh", f"if false; then :\nelif true; then\n  {N}=3\nfi\n", "edit"),
    ("sh-func", "p.sh", f"f() {{\n  export {N}=3\n}}\nf\n", "edit"),
    ("sh-func-kw", "p.bash", f"function f {{\n  export {N}=3\n}}\n", "edit"),
    ("sh-while", "p.sh", f"while false; do\n  {N}=3\ndone\n", "edit"),
    ("sh-until", "p.sh", f"until true; do export {N}=3; done\n", "edit"),
    ("sh-for", "p.sh", f"for x in a b; do\n  export {N}=3\ndone\n", "edit"),
    ("sh-case", "p.sh", f"case $x in\n  a|b) export {N}=3;;\n  *) :;;\nesac\n", "edit"),
    ("sh-case-paren", "p.sh", f"case $x in\n  (a) export {N}=3\n  ;;\nesac\n", "edit"),
    ("sh-subshell", "p.sh", f"( export {N}=3 )\n", "edit"),
    ("sh-brace-oneline", "p.sh", f"{{ export {N}=3; }}\n", "edit"),
    ("sh-semicolon", "p.sh", f"export {N}=3; echo after\n", "edit"),
    ("sh-background", "p.sh", f"export {N}=3 & wait\n", "edit"),
    ("sh-declare", "p.bash", f"declare -x {N}=3\n", "edit"),
    ("sh-local", "p.bash", f"f() {{ local {N}=3; }}\n", "edit"),
    ("sh-export-many", "p.sh", f"export A=1 {N}='3' B=\"x y\"\necho $A\n", "edit"),
    ("sh-assign-pair", "p.sh", f"A=1 {N}=3\n", "edit"),
    ("sh-crlf", "p.sh", f"A=1\r\nexport {N}=3\r\nB=2\r\n", "edit"),
    ("sh-no-final-newline", "p.sh", f"A=1\nexport {N}=3", "edit"),
    ("sh-comment-after", "p.sh", f"export {N}=3 # pinned; see wiki\n", "edit"),
    ("sh-twice", "p.sh", f"export {N}=3\nexport {N}=2\n", "edit"),
    ("sh-arith-nearby", "p.bash", f"(( x = 1 ))\nexport {N}=3\n", "edit"),
    ("sh-dbracket", "p.bash", f"[[ -n $x && $x != ')' ]] && export {N}=3\n", "edit"),
    ("sh-case-in-subst", "p.sh", f"y=$(case a in a) echo 1;; esac)\nexport {N}=3\n", "edit"),
    ("sh-array-nearby", "p.bash", f"arr=(a 'b c')\nexport {N}=3\n", "edit"),
    # strings, heredocs, substitutions
    ("sh-dq-multiline", "p.sh", f'MSG="x\nexport {N}=3\n"\n', "refuse"),
    ("sh-sq-multiline", "p.sh", f"MSG='x\n{N}=3\n'\n", "refuse"),
    ("sh-heredoc", "p.sh", f"cat >/tmp/x <<EOF\nexport {N}=3\nEOF\n", "refuse"),
    ("sh-heredoc-quoted-dash", "p.sh", f"cat <<-'E'\n\t{N}=3\n\tE\n", "refuse"),
    ("sh-heredoc-read-only", "p.sh", f"export {N}=3\ncat <<EOF\n${N} is old\nEOF\n", "edit"),
    ("sh-ansi-c", "p.bash", f"X=$'a\\'b'\nexport {N}=3\n", "edit"),
    ("sh-subst-value", "p.sh", f"export {N}=$(cat /etc/fa)\n", "refuse"),
    ("sh-backtick-value", "p.sh", f"{N}=`date`\n", "refuse"),
    ("sh-var-value", "p.sh", f'export {N}="$OTHER"\n', "refuse"),
    ("sh-eval", "p.sh", f"eval 'export {N}=3'\n", "refuse"),
    ("sh-prefix-cmd", "p.sh", f"{N}=3 python -m sglang.launch_server\n", "refuse"),
    ("sh-append", "p.bash", f"{N}+=3\n", "refuse"),
    ("sh-redirect", "p.sh", f"export {N}=3 2>/dev/null\n", "refuse"),
    ("sh-unclosed-quote", "p.sh", f"echo 'oops\nexport {N}=3\n", "refuse"),
    ("sh-unclosed-if", "p.sh", f"if true; then\nexport {N}=3\n", "refuse"),
    ("sh-nested-subst-100", "p.sh", "x=" + "$(" * 100 + ")" * 100 + f"\nexport {N}=3\n", "edit"),
    ("sh-nested-subst-5000", "p.sh", "x=" + "$(" * 5000 + ")" * 5000 + f"\nexport {N}=3\n", "refuse"),
    ("sh-only-reads", "p.sh", f'echo "${N}"\nunset {N}\nexport {N}\n', "same"),
    ("sh-unparseable-only-reads", "p.sh", f"if [ ${N} ]; then\n", "refuse"),  # bash runs what comes first
    # issue 26: forms that set it without a plain assignment
    ("sh-default-expansion", "p.sh", f": ${{{N}:=3}}\n", "refuse"),
    ("sh-read", "p.sh", f"read -r {N} <<< 3\n", "refuse"),
    ("sh-printf-v", "p.bash", f"printf -v {N} %s 3\n", "refuse"),
    ("sh-quoted-name", "p.sh", f"export '{N}'=3\n", "refuse"),
    ("sh-split-name", "p.sh", "SGLANG_FLASHATTENTION_\\\nVERSION=3\n", "refuse"),
    ("sh-source", "p.sh", f"export {N}=3\n. /etc/profile.d/fa.sh\n", "refuse"),
    ("sh-eval-computed", "p.sh", 'eval "$(ssh-agent -s)"\n', "refuse"),
    ("sh-eval-static", "p.sh", f"eval 'echo hi'\nexport {N}=3\n", "edit"),
    ("sh-alias-static", "p.bash", f"alias ll='ls -l'\nexport {N}=3\n", "edit"),
    ("sh-declare-computed", "p.bash", 'declare -x "$v=3"\n', "refuse"),
    ("sh-command-computed", "p.sh", "$cmd x\n", "refuse"),
    ("sh-arith-vars", "p.bash", "(( x += y ))\n", "refuse"),
    ("sh-subshell-computed", "p.sh", f"x=$($cmd)\nexport {N}=3\n", "edit"),
    ("sh-comment-only", "p.sh", f"# export {N}=3\n", "same"),
]

OTHER = [
    # shells fa-doctor does not edit: refused, naming the lines
    ("fish-refused", "config.fish", f"set -gx A 1\nset -gx {N} 3\n", "refuse"),
    ("fish-nothing", "config.fish", "set -gx A 1\n", "refuse"),
    ("ps-refused", "profile.ps1", f"$env:{N} = '3'\n", "refuse"),
    ("ps-utf16le", "profile.ps1", (U16 + f"$env:{N} = '3'\r\n").encode("utf-16-le"), "refuse"),
    ("csh-refused", ".cshrc", f"setenv {N} 3\n", "refuse"),
    # their syntax in a file read as sh: refused too
    ("fish-in-sh", "profile", f"set -gx {N} 3\n", "refuse"),
    ("ps-in-sh", "profile", f"$env:{N} = '3'\n", "refuse"),
    ("ps-set-item-in-sh", "profile", f"Set-Item Env:{N} 3\n", "refuse"),
    ("csh-in-sh", "profile", f"setenv {N} 3\n", "refuse"),
    # encodings
    ("env-utf16le-bom", "server.env", (U16 + f"A=1\r\n{N}=3\r\n").encode("utf-16-le"), "edit"),
    ("env-utf16-nobom", "server.env", f"{N}=3\r\n".encode("utf-16-le"), "refuse"),
    ("env-utf16-odd", "server.env", b"\xff\xfe" + f"{N}=3".encode("utf-16-le") + b"\x00", "refuse"),
    # systemd
    ("sd-cont-before", "a.service", f"[Service]\nEnvironment=A=1 \\\n  {N}=3\nExecStart=/bin/true\n", "edit"),
    ("sd-cont-after", "a.service", f"[Service]\nEnvironment={N}=3 \\\n  A=1\nExecStart=/bin/true\n", "edit"),
    ("sd-cont-comment", "a.service", f"[Service]\nEnvironment=A=1 \\\n# c\n  {N}=3\nExecStart=/bin/true\n", "edit"),
    ("sd-quoted", "a.service", f'[Service]\nEnvironment="{N}=3" "B=x y"\nExecStart=/bin/true\n', "edit"),
    ("sd-only", "a.service", f"[Service]\nEnvironment=A=1\nEnvironment={N}=3\nExecStart=/bin/true\n", "edit"),
    ("sd-dropin", "override.conf", f"[Service]\nEnvironment={N}=3\n", "edit"),
    ("sd-execstart-env", "a.service", f"[Service]\nExecStart=/usr/bin/env {N}=3 /bin/true\n", "refuse"),
    ("sd-unbalanced", "a.service", f'[Service]\nEnvironment="{N}=3\nExecStart=/bin/true\n', "refuse"),
    ("sd-unset-only", "a.service", f"[Service]\nUnsetEnvironment={N}\nExecStart=/bin/true\n", "same"),
    # dotenv
    ("env-plain", "server.env", f"A=1\n{N}=3\nB=2\n", "edit"),
    ("env-spaced", ".env", f"{N} = 3\n", "edit"),
    # docker's --env-file reads line by line: there the second line sets it
    ("env-multiline-other", ".env", f'CERT="-----BEGIN\n{N}=3\n-----END"\n', "refuse"),
    ("env-multiline-data", ".env", f'CERT="-----BEGIN\nsee {N}\n-----END"\n', "same"),
    ("env-prev-backslash", ".env", f"A=1 \\\n{N}=3\n", "edit"),  # a shell statement: read as one
    ("env-semicolon", ".env", f"{N}=3; echo hi\n", "edit"),
    ("env-semicolon-dynamic", ".env", f'{N}=3; eval "$X"\n', "refuse"),
    ("env-crlf-bom", ".env", b"\xef\xbb\xbf" + f"A=1\r\n{N}=3\r\n".encode(), "edit"),
    ("env-latin1", ".env", b"A=\xe9t\xe9\n" + f"{N}=3\n".encode(), "edit"),
    ("env-nul", ".env", b"A=\x00\n" + f"{N}=3\n".encode(), "edit"),
    ("env-shell-code", ".env", f"if true; then\n  export {N}=3\nfi\n", "edit"),
]


def _tools(dialect_name: str) -> list[list[str]]:
    if dialect_name.endswith(".bash"):
        return [["bash", "-n"], ["zsh", "-n"]]
    if dialect_name.endswith(".sh"):
        return [["bash", "-n"], ["dash", "-n"], ["zsh", "-n"]]
    return []


def _check_tools(path: Path, name: str, data: bytes) -> None:
    for argv in _tools(name):
        if shutil.which(argv[0]) is None:
            continue
        done = subprocess.run([*argv, str(path)], capture_output=True, text=True, timeout=30, check=False)
        # zsh -n gives 1 without a message for `! cmd` (it negates the status of what it did not run)
        assert done.returncode == 0 or (argv[0] == "zsh" and not done.stderr), f"{argv[0]}: {done.stderr}"
    if name.endswith(".service") and shutil.which("systemd-analyze"):
        done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def _sourced_value(path: Path, name: str, cwd: Path) -> str | None:
    """What sourcing the edited file leaves in the variable, by a real shell (None: no shell to ask)."""
    env = {k: v for k, v in os.environ.items() if k != N}
    env["HOME"] = str(cwd)
    if name.endswith((".sh", ".bash")) and shutil.which("bash"):
        argv = ["bash", "-c", f'. {path} >/dev/null 2>&1 </dev/null; printf %s "${{{N}-unset}}"']
    else:
        return None
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=cwd, env=env, check=False).stdout


@pytest.mark.parametrize(("name", "data", "expect"), [c[1:] for c in SH + OTHER], ids=[c[0] for c in SH + OTHER])
def test_hostile_file(tmp_path: Path, name: str, data: str | bytes, expect: str) -> None:
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / name
    path.write_bytes(raw)
    result = edit(str(path), set_value=None, dry_run=False)
    if expect != "edit":
        assert not result.changed and path.read_bytes() == raw and os.listdir(folder) == [name], result
        assert (result.error is not None) == (expect == "refuse"), result
        assert expect == "same" or str(path) in str(result.error)  # FILE:LINE, or FILE and what it is
        return
    assert result.error is None and result.changed, result
    assert result.backup and Path(result.backup).read_bytes() == raw
    again = edit(str(path), set_value=None, dry_run=False)
    assert (again.changed, again.error) == (False, None), again  # nothing left that sets it
    _check_tools(path, name, raw)
    assert _sourced_value(path, name, tmp_path) in (None, "unset")


@pytest.mark.parametrize(("name", "data", "expect"), [c[1:] for c in SH + OTHER], ids=[c[0] for c in SH + OTHER])
def test_hostile_file_set(tmp_path: Path, name: str, data: str | bytes, expect: str) -> None:
    """`--set 4` on the same files: the same verdict, the value 4 where it was, the file still parses."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    path = tmp_path / name
    path.write_bytes(raw)
    result = edit(str(path), set_value=4, dry_run=False)
    if expect != "edit":
        assert not result.changed and path.read_bytes() == raw
        return
    assert result.error is None and result.changed, result
    _check_tools(path, name, raw)
    got = _sourced_value(path, name, tmp_path)
    # unset: the assignment sat in a branch or function not run; a CRLF file gives bash the \r it always gave
    assert got is None or got.strip() in ("4", "unset"), got


# ---- links, permissions, odd targets -----------------------------------------------------------------------


def test_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = edit(str(tmp_path / "a"), set_value=None, dry_run=False)
    assert result.error and not result.changed


def test_dangling_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "missing")
    result = edit(str(tmp_path / "a"), set_value=None, dry_run=False)
    assert result.error and "does not exist" in result.error


def test_hard_link_via_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.env"
    real.write_text(f"{N}=3\n")
    os.link(real, tmp_path / "twin.env")
    (tmp_path / "link.env").symlink_to(real)
    result = edit(str(tmp_path / "link.env"), set_value=None, dry_run=True)
    assert result.error and "hard link" in result.error


def test_setuid_and_sticky_modes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(f"{N}=3\n")
    path.chmod(0o1640)
    assert edit(str(path), set_value=None, dry_run=False).changed
    assert path.stat().st_mode & 0o7777 == 0o1640


def test_many_xattrs_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(f"A=1\n{N}=3\n")
    try:
        for i in range(20):
            os.setxattr(path, f"user.k{i}", bytes([i]) * (i + 1))
    except OSError:
        pytest.skip("no user.* extended attributes here")
    assert edit(str(path), set_value=None, dry_run=False).changed
    assert {n: os.getxattr(path, n) for n in os.listxattr(path)} == {
        f"user.k{i}": bytes([i]) * (i + 1) for i in range(20)
    }


@pytest.mark.skipif(shutil.which("setfacl") is None, reason="setfacl is not installed (apt-get install acl)")
def test_default_and_access_acls_on_a_group_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(f"A=1\n{N}=3\n")
    path.chmod(0o640)
    if subprocess.run(["setfacl", "-m", "u:nobody:r,g:nogroup:r,m:r", str(path)], capture_output=True).returncode:
        pytest.skip("no POSIX ACLs here")
    before = subprocess.run(["getfacl", "-cp", str(path)], capture_output=True, text=True).stdout
    assert edit(str(path), set_value=4, dry_run=False).changed
    assert subprocess.run(["getfacl", "-cp", str(path)], capture_output=True, text=True).stdout == before
