"""Every file fa-doctor writes is created exclusively and renamed into place (issue 28): no writer opens an
existing name for writing, so a link planted at any temporary name, or a hard link planted at the destination,
is never written through. Each writer runs in a child with an audit hook that records every open for writing;
links are planted at the names a writer could predict, and the files they point to must not change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv

HOOK = r"""
import json, os, sys
_WRITE = os.O_WRONLY | os.O_RDWR
opened = []
def hook(event, args):
    # a path opened for writing (an int is a descriptor already open: os.fdopen of mkstemp's)
    if event == "open" and len(args) >= 3 and isinstance(args[0], (str, bytes, os.PathLike)) and isinstance(
        args[2], int
    ) and args[2] & _WRITE:
        opened.append([os.fsdecode(args[0]), args[2]])
sys.addaudithook(hook)
import atexit
atexit.register(lambda: open(os.environ["FA_DOCTOR_TEST_OPENS"], "x").write(json.dumps(opened)))
"""


def audited(tmp_path: Path, code: str, env: dict[str, str] | None = None) -> list[tuple[str, int]]:
    record = tmp_path / "opens.json"
    full = {**os.environ, **(env or {}), "FA_DOCTOR_TEST_OPENS": str(record)}
    done = subprocess.run(
        [sys.executable, "-c", HOOK + code], capture_output=True, text=True, timeout=120, env=full, cwd=tmp_path
    )
    assert record.exists(), done.stderr[-3000:]
    opens = json.loads(record.read_text())
    return [(p, f) for p, f in opens if p != str(record)]


def not_exclusive(opens: list[tuple[str, int]], appended: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    """Opens for writing that could follow a planted link: neither O_CREAT|O_EXCL, nor an O_NOFOLLOW append to a
    file someone else named ($GITHUB_STEP_SUMMARY)."""
    excl = os.O_CREAT | os.O_EXCL
    bad = []
    for path, flags in opens:
        if flags & excl == excl:
            continue
        if path in appended and flags & os.O_APPEND and flags & os.O_NOFOLLOW:
            continue
        if path.startswith(("/dev/", "/proc/")):
            continue  # the process's own descriptors (dup2 of /dev/null)
        bad.append((path, flags))
    return bad


def plant(folder: Path, names: list[str], victim: Path) -> None:
    for name in names:
        link = folder / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(victim)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text("precious\n")
    return v


def test_report_files_and_the_step_summary(fenv: FakeEnv, tmp_path: Path, victim: Path) -> None:
    fenv.torch()
    junit, md, summary = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "summary.md"
    os.link(victim, junit)  # a hard link at the destination: replaced, never written through
    plant(tmp_path, ["r.md.tmp", f".r.md.fa-doctor.{os.getpid()}.tmp"], victim)
    code = (
        "from fa_doctor.entry import main\n"
        f"main(['check', '--no-smoke', '--python', {fenv.python!r}, '--junit-xml', {str(junit)!r},"
        f" '--markdown', {str(md)!r}, '--step-summary'])\n"
    )
    opens = audited(tmp_path, code, {"GITHUB_STEP_SUMMARY": str(summary)})
    assert {str(junit), str(md)} <= {p for p, _ in opens} or any(p.startswith(str(tmp_path)) for p, _ in opens)
    assert not_exclusive(opens, appended=(str(summary),)) == []
    assert victim.read_text() == "precious\n" and "<testsuite" in junit.read_text() and summary.read_text()


def test_completion_install(tmp_path: Path, victim: Path) -> None:
    home = tmp_path / "home"
    target = home / ".local" / "share" / "bash-completion" / "completions"
    plant(target, ["fa-doctor.tmp", f".fa-doctor.{os.getpid()}.tmp"], victim)
    code = "from fa_doctor.entry import main\nmain(['--install-completion', 'bash'])\n"
    opens = audited(tmp_path, code, {"HOME": str(home), "XDG_DATA_HOME": ""})
    assert opens and not_exclusive(opens) == []
    assert victim.read_text() == "precious\n"


def test_env_file_edit(tmp_path: Path, victim: Path) -> None:
    env_file = tmp_path / "server.env"
    env_file.write_text("SGLANG_FLASHATTENTION_VERSION=5\nOTHER=1\n")
    plant(tmp_path, ["server.env.tmp", "server.env.fa-doctor.tmp"], victim)
    code = f"from fa_doctor.entry import main\nmain(['fix', '--unset-override', '--env-file', {str(env_file)!r}])\n"
    opens = audited(tmp_path, code)
    assert opens and not_exclusive(opens) == []
    assert victim.read_text() == "precious\n" and "SGLANG_FLASHATTENTION_VERSION" not in env_file.read_text()


def test_apply_journal(tmp_path: Path, victim: Path) -> None:
    journal = tmp_path / "journal.json"
    os.link(victim, journal)
    plant(tmp_path, ["journal.json.tmp"], victim)
    code = (
        "from fa_doctor.fix.journal import Journal\n"
        f"j = Journal({str(journal)!r}, '/usr/bin/python3')\nj.begin(1, 'a step')\nj.write()\n"
    )
    opens = audited(tmp_path, code)
    assert opens and not_exclusive(opens) == []
    assert victim.read_text() == "precious\n" and json.loads(journal.read_text())


def test_verdict_cache(tmp_path: Path, victim: Path) -> None:
    code = r"""
from fa_doctor.smoke import CaseResult, SmokeResult, case_specs
from fa_doctor.smoke import verdicts
cases = tuple(CaseResult(s["name"], s["function"], s["dtype"], s["head_dim"], s["causal"], 0.0, s["tolerance"], True,
                         0.1, None) for s in case_specs("cute"))
r = SmokeResult("fa4", "flash_attn.cute", "cute", "passed", cases=cases, loaded=("/x",))
v = verdicts.Verdict("a" * 64, {}, verdicts.Proven("now", "host", "0", ()), (("0", r),), {"/x": "id"})
assert verdicts.store(v) is None, verdicts.store(v)
"""
    cache = tmp_path / "cache"
    plant(cache / "fa-doctor" / "verdicts", ["a" * 64 + ".json.tmp"], victim)
    opens = audited(tmp_path, code, {"XDG_CACHE_HOME": str(cache)})
    assert opens and not_exclusive(opens) == []
    assert victim.read_text() == "precious\n" and (cache / "fa-doctor" / "verdicts" / ("a" * 64 + ".json")).exists()


def test_the_hook_sees_a_plain_open(tmp_path: Path) -> None:
    """The check itself can fail: a plain open for writing is reported."""
    opens: list[Any] = audited(tmp_path, "open('plain.txt', 'w').write('x')\n")
    assert [p for p, _ in not_exclusive(opens)] == ["plain.txt"]
