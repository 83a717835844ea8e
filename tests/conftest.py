from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clirun import invoke as run_cli
from fakeenv import FakeEnv, fake_nvidia_smi, make_env

from fa_doctor.model.facts import Facts
from fa_doctor.model.machine import GpuDevice, GpuFacts
from fa_doctor.probes.environment import KNOBS
from fa_doctor.probes.modules import by_stem, listdir
from fa_doctor.render.shell import remedy_dict

# The suite starts hundreds of Python processes (`python -m fa_doctor`, fake targets, pip, smoke children). Where
# PYTHONDONTWRITEBYTECODE is set (it is on this project's machines), none of them kept its bytecode, so every start
# compiled fa_doctor's sources again (about 0.4 s a process). The suite lets Python keep its caches (`__pycache__`,
# ignored by git), in this process and in every child, as Python does by default.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Property tests run the same examples on every machine and every run (CI must not turn red on a new random
# draw); loaded before any test module is imported, so every @settings(...) inherits it. A random search for new
# falsifying examples is a deliberate act: HYPOTHESIS_PROFILE=explore.
hypothesis_settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
hypothesis_settings.register_profile("explore", derandomize=False, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


# The suite runs as if started from a terminal. Started in a script's background it has SIGINT ignored, under nohup
# SIGHUP too, and fa-doctor keeps what its caller ignored (by design: nohup's SIGHUP stays ignored), so every test
# that delivers those signals in this process would see nothing happen (seen: five fix --apply tests red on a CI
# run started with nohup). Tests of that design set SIG_IGN themselves.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGHUP, signal.SIG_DFL)

# The files that take longest, slowest first (docs/testing.md says why each is slow). They are run first, so that on
# two workers (pyproject's addopts: whole files per worker) none of them is left to run alone at the end; they carry
# the `slow` marker, so `-m "not slow"` leaves them out.
SLOW_FILES = (
    "test_explain_loro.py",  # leave-one-repository-out: a model fitted per fold
    "test_verdict_loaded.py",  # real smoke children (torch), two or three a test
    "test_smoke_harness.py",  # every smoke scenario's real child; the hang waits out its 15 s timeout
    "test_fleet_ray.py",  # a 3-node Ray cluster; a held GPU node waits out the 15 s node timeout
    "test_remedies_pip.py",  # pip's resolver over a folder of ~600 wheels
    "test_hardening_smoke.py",  # nine real smoke children
    "test_cli_signals.py",  # a fa-doctor process per signal and point
    "test_report_files.py",
    "test_fix_apply_hostile.py",
    "test_fix_apply.py",
    "test_verdict_cache.py",
    "test_hardening_signals.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    for item in items:
        if item.path.name in rank:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test sees the developer's knobs, GPUs or caches; directory listings are not cached across tests."""
    for name in KNOBS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "PATH",
        os.pathsep.join(
            p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
        ),
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    listdir.cache_clear()
    by_stem.cache_clear()
    yield
    listdir.cache_clear()
    by_stem.cache_clear()


@pytest.fixture
def fenv(tmp_path: Path) -> FakeEnv:
    return make_env(tmp_path)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    asked: set[str] = field(default_factory=set)  # finding ids a test looked up by name
    args: tuple[str, ...] = ()

    @property
    def doc(self) -> dict[str, Any]:
        return json.loads(self.stdout)  # type: ignore[no-any-return]

    def ids(self) -> list[str]:
        return [f["id"] for f in self.doc["findings"]]

    def finding(self, fid: str) -> dict[str, Any]:
        self.asked.add(fid)
        found = [f for f in self.doc["findings"] if f["id"] == fid]
        assert found, f"{fid} not in {self.ids()}"
        return found[0]  # type: ignore[no-any-return]

    def expect(self, code: int) -> Run:
        """The exit code, with the failing findings in the message when it is not the one expected."""
        assert self.code == code, (self.code, [(f["id"], f["severity"]) for f in self.doc["findings"]])
        return self

    def contract_problems(self) -> list[str]:
        """What is wrong with this run whatever the test asserts (checked for every `cli` call at teardown).

        The exit-code rules are README's for `check`; other commands (exec passes the server's code on) are only
        held to their own JSON and to having no unasked internal.* finding."""
        is_check = bool(self.args) and self.args[0] == "check"
        if is_check and self.code not in (0, 1, 2):
            return [f"exit code {self.code} is outside the documented 0/1/2"]
        try:
            doc = self.doc
        except ValueError:
            return []  # human output: only the exit code range is checkable here
        if not isinstance(doc, dict):
            return []
        findings = doc.get("findings") or []
        out = [
            f"unexpected {f['id']}: {f.get('title')}: {f.get('detail')}"
            for f in findings
            if f["id"].startswith("internal.") and f["id"] not in self.asked
        ]
        if "exit_code" in doc and doc["exit_code"] != self.code:
            out.append(f"the JSON says exit_code {doc['exit_code']}, the process exited {self.code}")
        if is_check and implied_exit_code(doc) != self.code:
            out.append(f"the findings imply exit code {implied_exit_code(doc)}, the process exited {self.code}")
        return out


def implied_exit_code(doc: dict[str, Any]) -> int:
    """README's exit-code contract applied to a JSON document: 2 internal error, 1 failing check, else 0."""
    findings = doc.get("findings") or []
    if doc.get("error") or any(f["id"].startswith("internal.") for f in findings):
        return 2
    severities = {f["severity"] for f in findings}
    return 1 if "fail" in severities or (doc.get("strict") and "warn" in severities) else 0


def commands_of(finding: Any) -> list[list[str]]:
    """Each remedy's commands as a user pastes them, from a JSON finding or a Finding.

    The one place tests read remedy commands: when remedies become typed actions, only this changes.
    """
    remedies = finding["remedies"] if isinstance(finding, dict) else [remedy_dict(r) for r in finding.remedies]
    return [list(r["commands"]) for r in remedies]


def pip_words(command: str) -> list[str]:
    """`<python> -m pip install ...` as the words after `-m pip`: what a user relies on, whatever the quoting."""
    words = shlex.split(command)
    assert words[1:3] == ["-m", "pip"], command
    return words[3:]


def pip_installs(command: str) -> tuple[list[str], list[str]]:
    """(the project names `pip install` is given, its options): what is installed, not how a version is pinned."""
    words = pip_words(command)
    assert words[0] == "install", command
    names = [re.split(r"[\[=<>!~;@ ]", w, maxsplit=1)[0] for w in words[1:] if not w.startswith("-")]
    return names, [w for w in words[1:] if w.startswith("-")]


def gather_facts(fenv: FakeEnv, **env: str) -> Facts:
    """Facts as `check` gathers them from a fake environment, with no GPU and only the given variables."""
    from fa_doctor.model.options import CheckOptions
    from fa_doctor.probes.gather import gather

    listdir.cache_clear()
    by_stem.cache_clear()
    clean = {"PATH": os.environ.get("PATH", ""), "XDG_CACHE_HOME": str(fenv.root / "cache"), **env}
    facts = gather(CheckOptions(python=fenv.python, env=clean, gpu_timeout=2.0), {})
    return dataclasses.replace(facts, gpus=gpus())


def gpus(*capabilities: tuple[int, int] | None) -> GpuFacts:
    """Visible GPUs with these compute capabilities, GPU 0 first."""
    devices = tuple(
        GpuDevice(i, i, f"GPU{i}", cap, 81920, f"GPU-{i:08d}-0000-4000-8000-000000000000")
        for i, cap in enumerate(capabilities)
    )
    return GpuFacts("test", devices, "580.159.04" if devices else None, "13.0" if devices else None, None, ())


def vary(facts: Facts, *, cuda: str | None = "keep", caps: tuple[tuple[int, int] | None, ...] | None = None,
         env: dict[str, str] | None = None, **fields: Any) -> Facts:  # fmt: skip
    """The same facts with other GPUs, torch CUDA, environment variables, or other fields."""
    changes: dict[str, Any] = dict(fields)
    if caps is not None:
        changes["gpus"] = gpus(*caps)
    if cuda != "keep":
        assert facts.torch is not None
        changes["torch"] = dataclasses.replace(facts.torch, cuda=cuda)
    if env is not None:
        changes["env"] = {**facts.env, **env}
    return dataclasses.replace(facts, **changes)


def gpu_env(tmp_path: Path, *rows: str) -> dict[str, str]:
    return fake_nvidia_smi(tmp_path / "bin", rows)


@pytest.fixture
def cli() -> Iterator[Any]:
    """Runs the real CLI. Every run is checked at teardown, so no test forgets: the exit code is 0, 1 or 2 and
    the one its JSON and findings imply, and no internal.* finding appears unless the test asked for it by id."""
    runs: list[Run] = []

    def invoke(*args: str, env: dict[str, str] | None = None) -> Run:
        listdir.cache_clear()
        by_stem.cache_clear()
        result = run_cli(list(args), env=env)
        if result.exception:
            raise result.exception
        run = Run(result.exit_code, result.stdout, result.stderr, args=args)
        runs.append(run)
        return run

    yield invoke
    problems = [f"{i}: {p}" for i, run in enumerate(runs) for p in run.contract_problems()]
    assert not problems, problems


def default_signals() -> None:
    """In a test's child before exec: SIGINT, SIGTERM, SIGHUP at their defaults, whatever this test process
    inherited (a suite started in the background of a script has SIGINT ignored, and Python then raises no
    KeyboardInterrupt in the child)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
