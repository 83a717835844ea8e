"""What a run prints around its report: --quiet, the plain progress lines of a log (no terminal), prose wrapped to
a terminal without breaking commands, shell completion, and the exit codes at the foot of --help."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakeenv import H200, FakeEnv, fake_nvidia_smi
from samples import sample
from smoke_fakes.scenarios import FAKES, PYTHON, child_env

from fa_doctor.render.human import HumanRenderer, wrap
from fa_doctor.render.shell import remedy_lines
from fa_doctor.smoke import SmokeResult, SmokeTarget, runner

REAL_RUN_SMOKE = runner.run_smoke
BAD = {"SGLANG_FLASHATTENTION_VERSION": "5"}


def stack(fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.sgl_kernel()
    fenv.sglang()


# ---- --quiet ---------------------------------------------------------------------------------------------


def test_quiet_prints_the_verdict_and_what_fails(cli: Any, fenv: FakeEnv) -> None:
    stack(fenv)
    loud = cli("check", "--no-smoke", "--python", fenv.python, env=BAD)
    quiet = cli("check", "--no-smoke", "-q", "--python", fenv.python, env=BAD)
    assert quiet.code == loud.code == 1
    lines = quiet.stdout.splitlines()
    assert lines[0].startswith("fa-doctor check: FAIL — 1 failing") and lines[0].endswith("(exit 1)")
    assert "override.invalid" in quiet.stdout and "unset SGLANG_FLASHATTENTION_VERSION" in quiet.stdout
    assert "Selected:" not in quiet.stdout and "GPUs:" not in quiet.stdout and "hidden" not in quiet.stdout
    warnings = [line for line in loud.stdout.splitlines() if line.startswith("! ")]
    assert warnings and not any(line.startswith("! ") for line in lines)  # a warning does not fail
    assert quiet.stderr == ""


def test_quiet_shows_warnings_when_they_fail(cli: Any, fenv: FakeEnv) -> None:
    stack(fenv)
    run = cli("check", "--no-smoke", "--quiet", "--strict", "--python", fenv.python)
    assert run.code == 1 and any(line.startswith("! ") for line in run.stdout.splitlines())


def test_quiet_healthy_run_is_one_line(cli: Any, fenv: FakeEnv) -> None:
    stack(fenv)
    run = cli("check", "--no-smoke", "--quiet", "--python", fenv.python)
    assert run.code == 0 and run.stdout.splitlines() == [run.stdout.splitlines()[0]]
    assert run.stdout.startswith("fa-doctor check: WARN — 0 failing")


def test_quiet_json_is_the_whole_document(cli: Any, fenv: FakeEnv) -> None:
    stack(fenv)
    loud = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=BAD)
    quiet = cli("check", "--no-smoke", "--json", "--quiet", "--python", fenv.python, env=BAD)
    assert [f["id"] for f in quiet.doc["findings"]] == [f["id"] for f in loud.doc["findings"]]


def test_quiet_error_is_one_line(cli: Any, tmp_path: Path) -> None:
    run = cli("check", "--quiet", "--python", str(tmp_path / "nothing"))
    assert run.code == 2 and run.stdout == "" and len(run.stderr.strip().splitlines()) == 1
    assert run.stderr.startswith("fa-doctor check: --python")


# ---- progress when the output is a log --------------------------------------------------------------------


def _harness(root: Path, tmp_path: Path) -> Any:
    def run(python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        kw.update(device="cpu", env=child_env(root), cache_dir=str(tmp_path / "cute-dsl"))
        return REAL_RUN_SMOKE(PYTHON, target, **kw)

    return run


@pytest.fixture
def node(fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEnv:
    """A node with an H200 (as nvidia-smi reports it), torch and FA4; the smoke child is the real harness."""
    fenv.torch()
    fenv.fa4()
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path / "bin", [H200])["PATH"])
    monkeypatch.setattr(runner, "run_smoke", _harness(FAKES / "cute", tmp_path))
    return fenv


LINE = re.compile(r"fa-doctor \[ *\d+\.\ds\] (.*)")


def test_a_log_gets_the_static_verdict_then_timed_progress_per_gpu(cli: Any, node: FakeEnv) -> None:
    run = cli("check", "--json", "--python", node.python)
    assert run.code in (0, 1) and run.doc["smoke"]["results"][0]["status"] == "passed"
    lines = run.stderr.splitlines()
    assert lines and all(LINE.fullmatch(line) for line in lines), lines
    said = [LINE.fullmatch(line).group(1) for line in lines]  # type: ignore[union-attr]
    assert said[0].startswith("static checks: ") and said[0].endswith("smoke test next on 1 GPU(s)")
    static = [s for s in said if s.startswith("  ")]
    assert static == [f"  {f['severity']}: {f['title']} [{f['id']}]" for f in run.doc["findings"] if
                      f["severity"] in ("fail", "warn") and not f["id"].startswith("smoke.")]  # fmt: skip
    assert "GPU 0: importing flash_attn.cute" in said
    assert said.index("GPU 0: importing flash_attn.cute") > said.index(said[0])
    seconds = [float(re.search(r"\[ *(\d+\.\d)s\]", line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert seconds == sorted(seconds)


def test_quiet_says_nothing_while_it_runs(cli: Any, node: FakeEnv) -> None:
    run = cli("check", "--json", "--quiet", "--python", node.python)
    assert run.doc["smoke"]["results"] and run.stderr == ""


def test_exec_report_on_stderr_stays_one_document(cli: Any, node: FakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """exec writes its report to stderr: as JSON it is the whole of stderr; as text, the progress comes first."""
    from fa_doctor.commands import exec as exec_command

    monkeypatch.setattr(exec_command, "become", lambda command, env: 0)
    as_json = cli("exec", "--json", "--python", node.python, "--", "true")
    assert json.loads(as_json.stderr)["smoke"]["results"] and as_json.stdout == ""
    human = cli("exec", "--fresh", "--python", node.python, "--", "true")
    first, report = human.stderr.index("static checks: "), human.stderr.index("fa-doctor exec")
    assert first < report and "GPU 0: importing flash_attn.cute" in human.stderr[:report]


def test_no_smoke_prints_no_progress(cli: Any, fenv: FakeEnv) -> None:
    assert cli("check", "--no-smoke", "--json", "--python", fenv.python).stderr == ""


# ---- prose wrapped to a terminal, commands never -----------------------------------------------------------


def test_wrap_keeps_words_and_backquoted_commands_whole() -> None:
    text = 'Unset it (`eval "$(fa-doctor fix --unset-override)"` does it) in /very/long/path/to/some/env.file now.'
    lines = wrap(text, 30, indent=4)
    assert all(line.startswith("    ") for line in lines)
    assert '    (`eval "$(fa-doctor fix --unset-override)"`' in lines  # longer than the width: a line of its own
    assert " ".join(line.strip() for line in lines) == text
    assert all(len(line) <= 30 or " " not in line.strip() for line in lines if "`" not in line)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_a_terminal_report_fits_its_width_and_commands_stay_whole(width: int) -> None:
    result = sample()
    text = HumanRenderer(width=width, wrap=True, verbose=False).render(result)
    commands = {c for f in result.findings for r in f.remedies for c in remedy_lines(r)}
    for line in text.splitlines():
        if line.strip() not in commands:
            assert len(line) <= width or " " not in line.strip(), line
    for command in commands:
        assert any(line.strip() == command for line in text.splitlines()), command
    assert HumanRenderer(width=width).render(result) == HumanRenderer(width=width, wrap=False).render(result)


def test_a_log_keeps_each_item_on_one_line(cli: Any, fenv: FakeEnv) -> None:
    stack(fenv)
    run = cli("check", "--no-smoke", "--python", fenv.python, env=BAD)
    detail = next(line for line in run.stdout.splitlines() if "is not one of the documented values" in line)
    assert detail.rstrip().endswith(".")  # the whole sentence on its line: no terminal, no wrapping


# ---- --help ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["fix", "--help"], ["merge", "--help"]])
def test_help_states_the_exit_codes(cli: Any, args: list[str]) -> None:
    text = " ".join(cli(*args).stdout.split())
    assert "Exit codes: 0 healthy or warnings only; 1 a failing finding" in text and "2 misuse" in text


def test_exec_help_states_its_own_exit_codes(cli: Any) -> None:
    text = " ".join(cli("exec", "--help").stdout.split())
    assert "126 COMMAND is not executable" in text and "127 COMMAND not found" in text


def test_merge_quiet_is_the_verdict_and_what_fails(tmp_path: Path) -> None:
    """`merge -q` was the whole fleet report (issue 26): now the verdict line and each failing finding."""
    from clirun import invoke
    from fleet_samples import REQUIREMENT, report, write

    folder = write(tmp_path / "r", {"a": report("gpu-a", findings=(REQUIREMENT,)), "b": report("gpu-b")})
    full = invoke(["merge", str(folder)])
    quiet = invoke(["merge", "-q", str(folder)])
    assert quiet.exit_code == full.exit_code == 1
    lines = quiet.stdout.splitlines()
    assert lines[0].startswith("fa-doctor merge: FAIL") and "Groups" in full.stdout and "Groups" not in quiet.stdout
    assert f"[{REQUIREMENT['id']}]" in quiet.stdout and len(lines) < len(full.stdout.splitlines())
    healthy = invoke(["merge", "-q", str(write(tmp_path / "h", {"a": report("gpu-a")}))])
    assert healthy.exit_code == 0 and len(healthy.stdout.splitlines()) == 1
