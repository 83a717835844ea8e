"""Every recipe in docs/ci.md is validated, so the page cannot drift from fa-doctor or rot.

Each fenced block's info string is `LANGUAGE FILENAME`; the file name picks the validators: the tool that reads
that kind of file where one is installed (check-jsonschema's vendored CI schemas, hadolint, systemd-analyze,
bash -n, ShellCheck), and for every block fa-doctor's own CLI, which must accept each `fa-doctor` command line
in it.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import junitparser
import pytest
import typer.main
import yaml
from markdown_it import MarkdownIt

from fa_doctor.cli.app import UsageError, app

COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]

DOC = Path(__file__).resolve().parent.parent / "docs" / "ci.md"
BIN = Path(sys.executable).parent
_STOP = re.compile(r"^(\|\|?|&&|;|\d?>.*|>.*|<.*)$")


def blocks() -> dict[str, str]:
    out: dict[str, str] = {}
    for token in MarkdownIt("commonmark").parse(DOC.read_text(encoding="utf-8")):
        if token.type == "fence":
            language, _, name = token.info.partition(" ")
            assert name.strip(), f"a {language} block without a file name: the test cannot validate it"
            assert name not in out, f"two blocks named {name}"
            out[name.strip()] = token.content
    return out


BLOCKS = blocks()


def tool(name: str) -> str:
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


# ---- fa-doctor command lines ---------------------------------------------------------------------------------


def invocations(text: str) -> Iterator[list[str]]:
    """The arguments after each `fa-doctor` command in shell-like text (continuation lines joined, comments
    dropped), up to a pipe, a redirection or the next command."""
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            # A command word: first on its line, or a path (`$venv/bin/fa-doctor`, `ExecStartPre=/opt/.../fa-doctor`);
            # not prose ("checked by fa-doctor") nor a package name (`pip install fa-doctor`).
            if (word == "fa-doctor" and i == 0) or ("/" in word and word.rsplit("/", 1)[1] == "fa-doctor"):
                args = words[i + 1 :]
                end = next((j for j, a in enumerate(args) if _STOP.match(a)), len(args))
                yield args[:end]


_COMMAND_KEYS = ("run", "script", "command")  # GitHub step, GitLab job, Kubernetes container


def _lines(node: Any, key: str | None = None) -> Iterator[str]:
    """The shell lines and argv lists under the keys that hold commands, as a shell would see them."""
    if isinstance(node, dict):
        for k, value in node.items():
            yield from _lines(value, k)
    elif isinstance(node, list) and key == "command":
        yield shlex.join(node)
    elif isinstance(node, list):
        for value in node:
            yield from _lines(value, key)
    elif isinstance(node, str) and key in _COMMAND_KEYS:
        yield from node.splitlines()


def check_command_line(args: list[str]) -> None:
    """fa-doctor's own parser accepts it: the subcommand exists, every option exists and its value is valid."""
    assert args and args[0] in COMMANDS, f"not a fa-doctor command: {args}"
    if args[0] == "exec":
        assert "--" in args and args.index("--") < len(args) - 1, f"exec needs `-- COMMAND`: {args}"
    try:  # click parses and checks every value, and runs nothing
        COMMANDS[args[0]].make_context(args[0], args[1:])
    except UsageError as exc:
        raise AssertionError(f"fa-doctor {shlex.join(args)}: {exc.format_message()}") from None


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_fa_doctor_command_line_parses(name: str) -> None:
    text = BLOCKS[name]
    if name == "Dockerfile":  # exec form: ENTRYPOINT and CMD arrays, joined as Docker joins them
        text = shlex.join(_instruction(text, "ENTRYPOINT") + _instruction(text, "CMD"))
    if name.endswith((".yaml", ".yml")):  # the shell lines and argv lists YAML holds, as a shell would see them
        text = "\n".join(_lines(yaml.safe_load(text)))
    found = list(invocations(text))
    assert found, f"{name} runs no fa-doctor command"
    for args in found:
        check_command_line(args)


def test_the_command_line_check_bites() -> None:
    for bad in (["check", "--no-smok"], ["check", "--format", "xml"], ["exec", "python3"], ["chek"]):
        with pytest.raises(AssertionError):
            check_command_line(bad)
    assert list(invocations('srun "$v/bin/fa-doctor" check --junit-xml x.xml 2>&1 | tee log')) == [
        ["check", "--junit-xml", "x.xml"]
    ]


# ---- CI files ------------------------------------------------------------------------------------------------


def _schema(name: str, schema: str, tmp_path: Path) -> None:
    path = tmp_path / Path(name).name
    path.write_text(BLOCKS[name], encoding="utf-8")
    result = run(tool("check-jsonschema"), "--builtin-schema", schema, str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_github_workflow(tmp_path: Path) -> None:
    name = ".github/workflows/fa-doctor.yml"
    doc = yaml.safe_load(BLOCKS[name])
    runs = {job: [s.get("run", "") for s in spec["steps"]] for job, spec in doc["jobs"].items()}
    cpu = [r for r in runs["static"] if "fa-doctor check" in r]
    assert doc["jobs"]["static"]["runs-on"] == "ubuntu-latest" and cpu and "--no-smoke" in cpu[0]
    for job in runs:
        (line,) = (r for r in runs[job] if "fa-doctor check" in r)
        assert {"--format", "github", "--junit-xml", "--step-summary"} <= set(shlex.split(line)), job
    assert "--no-smoke" not in " ".join(runs["gpu"]) and "--require-gpu" in " ".join(runs["gpu"])
    _schema(name, "vendor.github-workflows", tmp_path)


def test_gitlab_job_keeps_its_junit_report(tmp_path: Path) -> None:
    name = ".gitlab-ci.yml"
    doc = yaml.safe_load(BLOCKS[name])
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and "script" in v}
    assert set(jobs) == {"fa-doctor-static", "fa-doctor-gpu"}
    for job in jobs.values():
        (args,) = (a for line in job["script"] for a in invocations(line))
        report = args[args.index("--junit-xml") + 1]
        assert job["artifacts"]["reports"]["junit"] == report and job["artifacts"]["when"] == "always"
    assert "--no-smoke" in " ".join(jobs["fa-doctor-static"]["script"])
    assert jobs["fa-doctor-gpu"]["tags"] == ["gpu"]
    _schema(name, "vendor.gitlab-ci", tmp_path)


# ---- Dockerfile ----------------------------------------------------------------------------------------------


def _instruction(dockerfile: str, keyword: str) -> list[str]:
    """The exec-form (JSON array) argument of the one `keyword` instruction."""
    joined = dockerfile.replace("\\\n", " ")
    (line,) = (ln for ln in joined.splitlines() if ln.split(maxsplit=1)[:1] == [keyword])
    value = json.loads(line.split(maxsplit=1)[1])
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), line
    return value


def test_dockerfile(tmp_path: Path) -> None:
    text = BLOCKS["Dockerfile"]
    assert _instruction(text, "ENTRYPOINT")[:3] == ["fa-doctor", "exec", "--"]
    health = [ln for ln in text.replace("\\\n", " ").splitlines() if ln.startswith("HEALTHCHECK")]
    assert len(health) == 1 and "CMD" in health[0]
    path = tmp_path / "Dockerfile"
    path.write_text(text, encoding="utf-8")
    result = run(tool("hadolint"), "--no-color", str(path))
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_hadolint_bites(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM python:latest\nRUN pip install fa-doctor\n", encoding="utf-8")
    assert run(tool("hadolint"), "--no-color", str(path)).returncode != 0


# ---- Kubernetes ----------------------------------------------------------------------------------------------


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def test_kubernetes_init_container() -> None:
    doc = yaml.safe_load(BLOCKS["kubernetes/sglang-deployment.yaml"])
    assert (doc["apiVersion"], doc["kind"]) == ("apps/v1", "Deployment")
    assert doc["spec"]["selector"]["matchLabels"].items() <= doc["spec"]["template"]["metadata"]["labels"].items()
    pod = _pod(doc)
    (init,) = pod["initContainers"]
    (server,) = pod["containers"]
    assert init["command"][:2] == ["fa-doctor", "check"] and "--no-smoke" not in init["command"]
    assert init["image"] == server["image"]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == server["resources"]["limits"]["nvidia.com/gpu"]
    backend = server["args"][server["args"].index("--attention-backend") + 1]
    assert init["command"][init["command"].index("--attention-backend") + 1] == backend
    for container in (init, server):  # the fields the API server requires of a container
        assert isinstance(container["name"], str) and isinstance(container["image"], str)
        assert all(isinstance(a, str) for a in container.get("command", []) + container.get("args", []))


# ---- systemd -------------------------------------------------------------------------------------------------


def test_systemd_unit(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze")
    text = BLOCKS["sglang.service"]
    assert re.search(r"^ExecStartPre=/\S+/fa-doctor check ", text, re.M), "the check must not be ignored (`-`)"
    # verify wants the executables to exist: point the unit at stand-ins in the same layout.
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for exe in ("fa-doctor", "python"):
        (bin_dir / exe).write_text("#!/bin/sh\n")
        (bin_dir / exe).chmod(0o755)
    unit = tmp_path / "sglang.service"
    unit.write_text(text.replace("/opt/sglang/venv/bin/", f"{bin_dir}/"), encoding="utf-8")
    result = run(analyze, "verify", str(unit))
    about_unit = [ln for ln in (result.stdout + result.stderr).splitlines() if "sglang.service" in ln]
    assert result.returncode == 0 and not about_unit, result.stdout + result.stderr


def test_systemd_analyze_bites(tmp_path: Path) -> None:
    unit = tmp_path / "bad.service"
    unit.write_text("[Service]\nExecStartt=/bin/true\n", encoding="utf-8")
    result = run(tool("systemd-analyze"), "verify", str(unit))
    assert result.returncode != 0 or "bad.service" in result.stdout + result.stderr


# ---- shell ---------------------------------------------------------------------------------------------------

SHELL = sorted(name for name in BLOCKS if name.endswith((".sh", ".sbatch")))


def test_there_are_shell_recipes() -> None:
    assert SHELL == ["prolog-fa-doctor.sh", "sglang.sbatch"]


@pytest.mark.parametrize("name", SHELL)
def test_shell_recipe(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(BLOCKS[name], encoding="utf-8")
    assert BLOCKS[name].startswith("#!/bin/bash\n")
    syntax = run("bash", "-n", str(path))
    assert syntax.returncode == 0, syntax.stderr
    lint = run(tool("shellcheck"), "--shell=bash", "--severity=style", str(path))
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_slurm_prolog_drains_only_on_a_failing_finding(tmp_path: Path) -> None:
    """Run the prolog with a stand-in fa-doctor that exits 0, 1 or 2: only 1 may fail it (and drain the node)."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    script = tmp_path / "prolog.sh"
    text = BLOCKS["prolog-fa-doctor.sh"].replace("/opt/sglang/venv", str(tmp_path / "venv"))
    assert "export PATH=/usr/sbin:/usr/bin:/sbin:/bin " in text  # Slurm gives prologs no PATH
    script.write_text(text.replace("export PATH=", f"export PATH={tmp_path / 'bin'}:"))  # the stand-in logger
    logger = tmp_path / "bin"
    logger.mkdir()
    (logger / "logger").write_text('#!/bin/sh\ncat >> "$LOG"\n')
    (logger / "logger").chmod(0o755)
    log = tmp_path / "log"
    for code, expect in ((0, 0), (2, 0), (1, 1)):  # the stand-in fails last: the no-GPU run below must not call it
        (venv / "fa-doctor").write_text(f'#!/bin/sh\necho "fa-doctor $* on $CUDA_VISIBLE_DEVICES"\nexit {code}\n')
        (venv / "fa-doctor").chmod(0o755)
        env = {"LOG": str(log), "SLURM_JOB_GPUS": "1,3", "SLURM_JOB_ID": "7"}  # no PATH, as Slurm runs it
        result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
        assert result.returncode == expect, (code, result.stderr)
    assert "check --require-gpu" in log.read_text() and "on 1,3" in log.read_text()
    no_gpus = subprocess.run(["bash", str(script)], env={}, capture_output=True, timeout=30)
    assert no_gpus.returncode == 0  # a CPU job never drains the node


# ---- the CPU-runner recipes, run ------------------------------------------------------------------------------


def _recipe_args(name: str) -> list[str]:
    (args,) = (a for a in invocations("\n".join(_lines(yaml.safe_load(BLOCKS[name])))) if "--no-smoke" in a)
    return args


@pytest.mark.parametrize("name", [".github/workflows/fa-doctor.yml", ".gitlab-ci.yml"])
def test_cpu_recipe_runs_once_and_writes_every_report(name: str, cli: Any, fenv: Any, tmp_path: Path) -> None:
    """The CPU-runner command exactly as the page gives it, against a broken install (FA2 and FA4 both own
    flash_attn/cute): stdout in the chosen format, the JUnit file and the Markdown beside it, one exit code."""
    fenv.torch()
    fenv.fa2()
    fenv.fa4()
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    args = _recipe_args(name)
    args[args.index("--python") + 1] = fenv.python
    for option in ("--junit-xml", "--markdown"):
        if option in args:
            args[args.index(option) + 1] = str(tmp_path / args[args.index(option) + 1])
    run = cli(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert run.code == 1
    suite = next(iter(junitparser.JUnitXml.fromfile(str(tmp_path / "fa-doctor.xml"))))
    failed = {case.name.split(":")[0] for case in suite if not case.is_passed and not case.is_skipped}
    assert "package.conflict" in failed and suite.failures == len(failed)
    if name.startswith(".github"):
        assert "::error title=" in run.stdout and "package.conflict" in run.stdout
        assert summary.read_text().startswith("earlier step\n## ❌ fa-doctor check: FAIL")  # appended
    else:
        assert (tmp_path / "fa-doctor.md").read_text().startswith("## ❌ fa-doctor check: FAIL")
        assert summary.read_text() == "earlier step\n"
