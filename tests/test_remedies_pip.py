"""Proof with pip's own resolver: every printed pip command, run as `--dry-run --report` against a local wheel
folder, installs only what is broken or missing: never torch, never a new version of what the server pins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wheelhouse
from conftest import gather_facts, gpu_env
from fakeenv import FIXTURES, H200, FakeEnv
from packaging.requirements import Requirement

from fa_doctor.catalog import urls
from fa_doctor.catalog.families import normalize
from fa_doctor.diagnose.derive.requires import requirement, server
from fa_doctor.diagnose.plan import recipes
from fa_doctor.model import actions as A
from fa_doctor.render import shell as S

# sglang 0.5.23's real METADATA (139 requirements: sglang-kernel==0.4.10, torch==2.14.1, flash-attn-4>=4.0.0b18, ...).
SGLANG_METADATA = (FIXTURES / "sglang-0.5.23.dist-info" / "METADATA").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheelhouse.build(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="session")
def pip_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One real venv for the whole session, with the test interpreter's own pip and setuptools (for the flash-attn
    source build) linked in. No ensurepip run (3 s), and the pip of the test extra (>= 24.1): pip 23 (3.11's
    ensurepip) lists the whole wheel folder again for every project it looks up, 4 s of CPU a resolve here,
    against 0.5 s. Old setuptools (3.11's ensurepip) needs `wheel` for any source build, which the remedy installs
    first but a dry run never does; 3.12+ venvs have none at all."""
    venv = tmp_path_factory.mktemp("pipvenv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    _link_in(python, "pip", "setuptools")
    return str(python)


def _link_in(python: Path, *names: str) -> None:
    """What the test interpreter has installed of each distribution (its folders, .pth files and dist-info),
    linked into the site folder of `python`'s venv."""
    from importlib.metadata import PackageNotFoundError, distribution

    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    dst = Path(out.stdout.strip())
    for name in names:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        site = Path(str(dist.locate_file("")))
        for top in sorted({Path(str(f)).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}):
            if (site / top).exists() and not (dst / top).exists():
                (dst / top).symlink_to(site / top)


@pytest.fixture
def env(tmp_path: Path, pip_python: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEnv]:
    """The installed packages of one scenario, in a folder on PYTHONPATH: the pip venv sees them as installed."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(site))
    yield FakeEnv(tmp_path, pip_python, site)


def dry_run(action: A.PipInstall, fenv: FakeEnv, wheels: Path, tmp_path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """The printed POSIX line, pasted into bash, with pip told (through its environment) to only resolve."""
    report = tmp_path / f"report-{abs(hash(action))}.json"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": str(fenv.site),
        "PIP_DRY_RUN": "1",
        "PIP_REPORT": str(report),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_NO_INPUT": "1",
        "PIP_CONFIG_FILE": os.devnull,
    }
    proc = subprocess.run(
        ["bash", "-c", S.render(action, "bash")], env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    items = json.loads(report.read_text())["install"] if report.exists() else []
    return proc.returncode, items, proc.stderr + proc.stdout


def pip_actions(findings: list[dict[str, Any]]) -> list[tuple[str, A.PipInstall]]:
    """(finding id, action) for every pip install printed; the id ends in `!torch` for a remedy that says it
    replaces torch (the alternative fix --apply takes only with --allow-torch-change)."""
    out = []
    for finding in findings:
        for remedy in finding["remedies"]:
            for d in remedy["actions"]:
                if d["kind"] == "pip-install":
                    action = A.PipInstall(
                        d["python"],
                        tuple(d["requirements"]),
                        tuple(d["options"]),
                        tuple(d["constraints"]),
                        tuple(d["env"].items()),
                    )
                    out.append((finding["id"] + ("!torch" if remedy["replaces_torch"] else ""), action))
    return out


def resolvable(action: A.PipInstall) -> bool:
    # A release-wheel URL and a source checkout are not in the wheel folder; everything else must resolve.
    return not any(r.startswith(("https://", "./")) for r in action.requirements)


def prove(cli: Any, fenv: FakeEnv, wheels: Path, tmp_path: Path, *args: str) -> list[str]:
    """Run the real check, then every pip command it prints, and hold each to the rules. Returns the ids seen."""
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, *args, env=gpu_env(tmp_path, H200))
    findings = run.doc["findings"]
    facts = gather_facts(fenv, PYTHONPATH=str(fenv.site))  # the env fixture puts the site on PYTHONPATH
    checked = []
    seen: set[str] = set()
    for fid, action in pip_actions(findings):
        if not resolvable(action) or S.render(action) in seen:
            continue
        seen.add(S.render(action))
        code, items, log = dry_run(action, fenv, wheels, tmp_path)
        assert code == 0, f"{fid}: {S.render(action)}\n{log[-3000:]}"
        installs = {normalize(i["metadata"]["name"]): i["metadata"]["version"] for i in items}
        _hold_to_rules(fid, action, installs, facts)
        checked.append(fid)
    assert checked, "no pip command was proven"
    return checked


def _hold_to_rules(fid: str, action: A.PipInstall, installs: dict[str, str], facts: Any) -> None:
    line = S.render(action)
    if fid.endswith("!torch"):
        # It says it replaces torch: torch goes to the version named, and nothing installed moves but what is named.
        (want,) = [r.split("==", 1)[1] for r in action.requirements if normalize(r.split("==", 1)[0]) == "torch"]
        assert installs["torch"] == want, line
        named = {normalize(re.split(r"[\[=<>!~]", r, maxsplit=1)[0]) for r in action.requirements}
        moved = {n for n, v in installs.items() if facts.scan.index.get(n) not in (None, v) and n not in named}
        assert not moved, f"{fid} moves {moved}: {line}"
        return
    assert "torch" not in installs, f"{fid} would install torch {installs.get('torch')}: {line}"
    named = {normalize(re.split(r"[\[=<>!~]", r, maxsplit=1)[0]) for r in action.requirements}
    srv = server(facts)
    if srv is not None and srv.normalized in named:
        # Alternative (a): another release of the server, the one built for the installed torch. Its own pins
        # replace the old ones; torch stays, and the release named is the one installed.
        (spec,) = [r for r in action.requirements if normalize(r.split("==", 1)[0]) == srv.normalized]
        assert installs.get(srv.normalized) == spec.split("==", 1)[1], line
        return
    if "--no-deps" in action.options:
        assert set(installs) == named, line  # nothing but what is named
    own_pins = fid == "package.requirement" and server(facts) is not None
    for name, version in installs.items():
        have = facts.scan.index.get(name)
        if have is not None and not (
            own_pins and name in named
        ):  # an installed distribution is only ever reinstalled at its own version
            # (the repaired package itself may change build, e.g. a CUDA 12 `+cu129` for a CUDA 13 one)
            same = version == have or (name in named and version.split("+")[0] == have.split("+")[0])
            assert "--force-reinstall" in action.options and same, f"{name} {have} -> {version}: {line}"
    if srv is not None:
        for text in srv.requires:
            spec = requirement(text)
            if spec and "==" in spec:
                req = Requirement(spec)
                name = normalize(req.name)
                if name in installs and (facts.scan.index.get(name) is None or own_pins):
                    # Not installed yet: the server's own pin decides the version.
                    assert req.specifier.contains(installs[name], prereleases=True), line


def _sglang(fenv: FakeEnv, version: str = "0.5.23") -> None:
    """sglang installed with `--no-deps` from its real wheel METADATA (the corpus holds every release read)."""
    if version == "0.5.23":
        text = SGLANG_METADATA
    else:
        (path,) = (wheelhouse.CORPUS / "sglang").glob(f"sglang-{version}-*.whl.metadata")
        text = path.read_text(encoding="utf-8")
    fenv.dist("sglang", version, {"sglang/__init__.py": ""}, top_level=["sglang"], metadata=text)


def test_fa4_broken_next_to_sglang_reinstalls_the_same_versions(cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path):
    env.torch("2.11.0+cu130", "13.0")
    env.fa4(core=False)
    _sglang(env)
    ids = prove(cli, env, wheels, tmp_path)
    assert "package.broken" in ids


def test_nothing_installed_adds_fa4_around_the_installed_torch(cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path):
    env.torch("2.11.0+cu128", "12.8")
    ids = prove(cli, env, wheels, tmp_path)
    assert "package.none" in ids


def test_sglang_missing_requirements_keep_torch(cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path) -> None:
    """sglang 0.5.23 installed without its dependencies next to torch 2.11: its pins are installed, torch stays,
    and sglang-kernel 0.4.10 (built for torch 2.14.1) is named rather than forced."""
    env.torch("2.11.0+cu130", "13.0")
    _sglang(env)
    run = cli("check", "--no-smoke", "--json", "--python", env.python, env=gpu_env(tmp_path, H200))
    req = run.finding("package.requirement")
    assert any("sglang-kernel==0.4.10 (built for torch 2.14.1 exactly)" in r["text"] for r in req["remedies"])
    ids = prove(cli, env, wheels, tmp_path)
    assert "package.requirement" in ids


def test_sglang_kernel_same_version_on_cuda12(cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path) -> None:
    """sglang 0.5.17 pins sglang-kernel==0.4.5 and torch==2.11.0; PyPI's torch 2.11 (and so its 0.4.5) is a
    CUDA 13 build; with a CUDA 12 torch the repair is SGLang's `+cu129` build of the same release."""
    env.torch("2.11.0+cu128", "12.8")
    env.sgl_kernel(version="0.4.5", torch_pin="2.11.0")
    _sglang(env, "0.5.17")
    facts = gather_facts(env, PYTHONPATH=str(env.site))
    (remedy,) = recipes.reinstall(facts, "fa3-sgl")
    (action,) = remedy.actions
    assert isinstance(action, A.PipInstall)
    assert action.requirements == ("sglang-kernel==0.4.5+cu129",) and urls.SGL_CU12_INDEX in action.options
    assert "CUDA 13 build" in remedy.text
    prove(cli, env, wheels, tmp_path)


def test_sglang_kernel_040_is_already_cuda12(env: FakeEnv) -> None:
    """sglang-kernel 0.4.0/0.4.1 (pinned by sglang 0.5.10) are CUDA 12 builds on PyPI (torch 2.9.1 is cu128):
    no `+cu129` build of them exists, and none is asked for."""
    env.torch("2.9.1+cu128", "12.8")
    env.sgl_kernel(version="0.4.1", torch_pin="2.9.1")
    _sglang(env, "0.5.10.post1")
    (remedy,) = recipes.reinstall(gather_facts(env, PYTHONPATH=str(env.site)), "fa3-sgl")
    (action,) = remedy.actions
    assert isinstance(action, A.PipInstall)
    assert action.requirements == ("sglang-kernel==0.4.1",) and not any("cu129" in o for o in action.options)
    assert "pip refuses" not in remedy.text


def test_flash_attn_builds_with_the_target_torch(cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path) -> None:
    """flash-attn is an sdist whose setup.py imports torch: only --no-build-isolation lets it see the target's."""
    env.torch("2.11.0+cu128", "12.8")
    env.fa2(native=False)
    env.fa4()
    ids = prove(cli, env, wheels, tmp_path)
    assert "package.broken" in ids
    facts = gather_facts(env, PYTHONPATH=str(env.site))
    build = [a for r in recipes.reinstall(facts, "fa2") for a in r.actions if isinstance(a, A.PipInstall)]
    assert any("--no-build-isolation" in a.options and a.env == (("MAX_JOBS", "4"),) for a in build)
    assert build[-1].requirements == ("flash-attn-4==4.0.0b36",)  # FA4's flash_attn/cute files win again
    isolated = A.PipInstall(env.python, ("flash-attn==2.8.3",), ("--force-reinstall", "--no-deps"))
    code, _, _log = dry_run(isolated, env, wheels, tmp_path)
    assert code != 0  # without --no-build-isolation the build cannot see torch (or its build tools)


def test_cpu_torch_becomes_the_cuda_build_of_the_same_release(
    cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path
) -> None:
    env.torch("2.13.0+cpu", cuda=None)
    env.fa4()
    run = cli("check", "--no-smoke", "--json", "--python", env.python, env=gpu_env(tmp_path, H200))
    (action,) = [a for fid, a in pip_actions(run.doc["findings"]) if fid.startswith("torch.cpu_build")]
    assert action.requirements == ("torch==2.13.0+cu126",)
    code, items, log = dry_run(action, env, wheels, tmp_path)
    assert code == 0, log
    assert {i["metadata"]["name"]: i["metadata"]["version"] for i in items}["torch"] == "2.13.0+cu126"


@pytest.mark.parametrize(
    "paste",
    [
        "ModuleNotFoundError: No module named 'sgl_kernel'",
        "ModuleNotFoundError: No module named 'cutlass'",
        "ImportError: flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    ],
)
def test_explain_installs_resolve_as_checks_do(
    cli: Any, env: FakeEnv, wheels: Path, tmp_path: Path, paste: str
) -> None:
    """explain --python plans through the same planner: each install it prints resolves, torch held."""
    env.torch("2.14.1+cu130", "13.0")
    _sglang(env)
    env.fa2(native=False)
    run = cli("explain", paste, "--json", "--python", env.python, env=gpu_env(tmp_path, H200))
    proven = 0
    for fid, action in pip_actions(run.doc["findings"]):
        if not resolvable(action):
            continue
        code, items, log = dry_run(action, env, wheels, tmp_path)
        assert code == 0, f"{fid}: {S.render(action)}\n{log[-3000:]}"
        installs = {normalize(i["metadata"]["name"]): i["metadata"]["version"] for i in items}
        assert "torch" not in installs, S.render(action)
        proven += 1
    assert proven, "explain printed no install to prove"
