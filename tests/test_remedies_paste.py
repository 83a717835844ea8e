"""Every command `check` prints, pasted into a real bash and sh, with planted metadata values: nothing planted
runs. The target's python is replaced by a recorder, so nothing is installed; it proves each argv arrives whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import H200, FakeEnv, make_env

PWN = "$(touch PWNED)"
# What a hostile METADATA, version.py or folder name can hold.
PLANTS = [PWN, "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "; touch PWNED", "> PWNED", "ü ✓"]

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["RECORD_TO"], "a") as f:
    f.write(json.dumps({{"argv0": os.path.basename(sys.argv[0]), "argv": sys.argv[1:]}}) + "\\n")
"""


def _recorder(path: Path) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(RECORDER.format(python=sys.executable))
    path.chmod(0o755)


def _commands(cli: Any, fenv: FakeEnv, tmp_path: Path, *args: str, cwd: Path | None = None) -> list[str]:
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        run = cli("check", "--no-smoke", "--json", "--python", fenv.python, *args, env=gpu_env(tmp_path, H200))
    finally:
        os.chdir(old)
    return [c for f in run.doc["findings"] for r in f["remedies"] for c in r["commands"]]


def _paste(lines: list[str], fenv: FakeEnv, tmp_path: Path) -> list[dict[str, Any]]:
    """Each line into bash and into sh, with a recorder for the target python and every other program named."""
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    for name in ("fa-doctor", "nvidia-smi", "git", "printenv", "ldd"):
        _recorder(fake / name)
    _recorder(Path(fenv.python))  # the venv's python: the absolute path every pip command names
    record = tmp_path / "record.jsonl"
    scratch = tmp_path / "paste here"
    scratch.mkdir(exist_ok=True)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "RECORD_TO": str(record), "HOME": str(scratch), "LC_ALL": "C.UTF-8"}
    for shell in ("bash", "sh"):
        for line in lines:
            subprocess.run([shell, "-c", line], cwd=scratch, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=30)  # fmt: skip
            planted = [str(p) for p in tmp_path.rglob("PWNED")]
            assert not planted, f"{shell} ran planted code from {line!r}: {planted}"
    return [json.loads(row) for row in record.read_text().splitlines()] if record.exists() else []


@pytest.fixture
def hostile(tmp_path: Path) -> FakeEnv:
    """A venv whose own path is hostile: every command carries it."""
    root = tmp_path / "we ird $(touch PWNED) `touch PWNED` ü;>x"
    root.mkdir()
    return make_env(root)


def test_planted_versions_and_requirements_never_run(cli: Any, hostile: FakeEnv, tmp_path: Path) -> None:
    fenv = hostile
    fenv.dist(
        "torch",
        "2.13.0" + PWN,
        {"torch/__init__.py": "", "torch/version.py": f"__version__ = '2.13.0{PWN}+cpu'\ncuda = None\nhip = None\n"},
        top_level=["torch"],
    )
    fenv.sgl_kernel(torch_pin="2.11.0" + PWN, flash_ops=False)
    fenv.dist("flash-attn", "2.8.3'; touch PWNED; '", {"flash_attn/__init__.py": ""}, top_level=["flash_attn"])
    fenv.dist(
        "sglang",
        "0.5.23",
        {"sglang/__init__.py": ""},
        top_level=["sglang"],
        requires=[
            "sglang-kernel==0.4.10" + PWN,
            "flash-attn-4>=4.0.0b18",
            "orjson; `touch PWNED`",
            "msgspec>=1 > PWNED",
            *(f"pkg{i}>=1; python_version >= '3' and extra == '{p}'" for i, p in enumerate(PLANTS)),
        ],
    )
    lines = _commands(cli, fenv, tmp_path, "--attention-backend", "fa3")
    assert any("pip install" in line for line in lines), lines
    records = _paste(lines, fenv, tmp_path)
    pip_runs = [r["argv"] for r in records if r["argv0"] == "python" and r["argv"][:2] == ["-m", "pip"]]
    assert pip_runs, records
    for argv in pip_runs:
        assert not any("touch PWNED" in a for a in argv), argv  # refused, not only quoted


def test_planted_paths_are_moved_aside_whole(cli: Any, hostile: FakeEnv, tmp_path: Path) -> None:
    """A stray package in a working directory whose name holds a newline and a command substitution."""
    fenv = hostile
    fenv.torch("2.11.0+cu130")
    cwd = tmp_path / f"proj\n{PWN} '\"; x"
    (cwd / "flash_attn").mkdir(parents=True)
    (cwd / "flash_attn" / "__init__.abi3.so").write_bytes(b"")
    lines = _commands(cli, fenv, tmp_path, cwd=cwd)
    moves = [line for line in lines if line.startswith("mv ")]
    assert moves, lines
    _paste(moves[:1], fenv, tmp_path)
    assert (cwd / "flash_attn.fa-doctor-backup" / "__init__.abi3.so").exists()
    assert cwd.exists() and not (cwd / "flash_attn").exists()


def test_every_argv_arrives_whole(cli: Any, hostile: FakeEnv, tmp_path: Path) -> None:
    """Honest metadata: the recorded argv of each pasted pip command is the action's argv, word for word."""
    fenv = hostile
    fenv.torch("2.11.0+cu130")
    fenv.fa4(core=False)
    fenv.sglang()
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=gpu_env(tmp_path, H200))
    wanted = [
        a
        for f in run.doc["findings"]
        for r in f["remedies"]
        for a in r["actions"]
        if a["kind"] in ("pip-install", "pip-uninstall")
    ]
    lines = [c for f in run.doc["findings"] for r in f["remedies"] for c in r["commands"] if "-m pip" in c]
    assert wanted and lines
    records = [r["argv"] for r in _paste(lines, fenv, tmp_path) if r["argv0"] == "python"]
    for action in wanted:
        constraints = ["-c", "/dev/stdin"] if action.get("constraints") else []
        argv = ["-m", "pip", "install", *action["options"], *constraints, *action["requirements"]]
        if action["kind"] == "pip-uninstall":
            argv = ["-m", "pip", "uninstall", "-y", *action["names"]]
        assert argv in records, (argv, records)
    shutil.rmtree(fenv.root / "venv", ignore_errors=True)


# ---- a block is pasted whole: alternatives are separate remedies, and a line carries a bounded amount ----------


def _findings(fenv: FakeEnv, env: dict[str, str]) -> list[dict[str, Any]]:
    """`check --no-smoke --json`'s findings, from the command itself (the remedies as the JSON renderer writes them)."""
    from fa_doctor.commands import check
    from fa_doctor.model.options import CheckOptions
    from fa_doctor.render.shell import finding_dict

    result = check.run(CheckOptions(python=fenv.python, smoke=False, env={**os.environ, **env}))
    return [finding_dict(f) for f in result.findings]


def test_alternatives_are_separate_blocks_each_safe_to_paste_whole(fenv: FakeEnv, tmp_path: Path) -> None:
    """`unset NAME` and `export NAME=N` are two ways out, not two steps: pasting one remedy never sets what it unset."""
    fenv.torch()
    fenv.fa4()
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "5"}
    doc = {"findings": _findings(fenv, env)}
    seen = 0
    for finding in doc["findings"]:
        for remedy in finding["remedies"]:
            kinds = {(a["kind"], a.get("name")) for a in remedy["actions"]}
            names = {n for k, n in kinds if k in ("set-env", "unset-env")}
            for name in names:
                assert not {("set-env", name), ("unset-env", name)} <= kinds, (finding["id"], remedy["commands"])
            seen += bool(names)
            if remedy["fix"] and "--unset-override" in remedy["fix"]:
                # its block, evaluated whole, leaves the variable as the hint says
                script = "\n".join([*remedy["commands"], 'printf %s "${SGLANG_FLASHATTENTION_VERSION-unset}"'])
                done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                                      env={"PATH": "/usr/bin:/bin", "SGLANG_FLASHATTENTION_VERSION": "5"})  # fmt: skip
                want = remedy["fix"].split("--set ")[1].rstrip(')"') if "--set" in remedy["fix"] else "unset"
                assert done.stdout == want, (remedy["commands"], done.stdout)
    (invalid,) = [f for f in doc["findings"] if f["id"] == "override.invalid"]
    assert [r["commands"] for r in invalid["remedies"][:2]] == [
        ["unset SGLANG_FLASHATTENTION_VERSION"],
        ["export SGLANG_FLASHATTENTION_VERSION=4"],
    ]
    assert seen >= 3


@pytest.mark.parametrize("shape", ["many", "too-many", "long"])
def test_a_printed_line_carries_a_bounded_amount_of_metadata(fenv: FakeEnv, tmp_path: Path, shape: str) -> None:
    """sglang's METADATA is the target's, and hostile: 150 missing requirements, or ten of 380 characters each,
    once printed one install line of 3,800 or 5,000 characters. Lines are now bounded, and what pip is given is
    still exactly what the metadata asks (a line per dozen; an over-long requirement is named by `pip check`)."""
    per_line, max_spec = 12, 100  # fa_doctor/diagnose/plan/recipes.py: PER_LINE, MAX_SPEC

    fenv.torch()
    if shape in ("many", "too-many"):
        reqs = [f"package-number-{k}>=1.0" for k in range(30 if shape == "many" else 150)]
    else:
        reqs = [f"pkg{k}>=0.1," + ",".join(f"!=1.{i}" for i in range(70)) for k in range(10)] + ["orjson>=3.9"]
    fenv.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, requires=reqs, top_level=["sglang"])
    (finding,) = [f for f in _findings(fenv, gpu_env(tmp_path, H200)) if f["id"] == "package.requirement"]
    lines = [c for r in finding["remedies"] for c in r["commands"]]
    bound = len(fenv.python) + per_line * (max_spec + 3) + 200
    assert lines and max(map(len, lines)) <= bound, max(map(len, lines))
    installed = [w for c in lines if " -m pip install " in c for w in c.split(" -c /dev/stdin ", 1)[1].split()]
    if shape == "many":
        assert sorted(w.strip("'") for w in installed) == sorted(reqs)
        assert len([c for c in lines if " -m pip install " in c]) == -(-len(reqs) // per_line)
    elif shape == "too-many":  # no wall of install lines: how many, and `pip check` lists them
        assert installed == [] and lines == [f"{fenv.python} -m pip check"]
        assert "150 requirements that are not installed" in finding["remedies"][0]["text"]
    else:
        assert [w.strip("'") for w in installed] == ["orjson>=3.9"]
        assert any(c.endswith("-m pip check") for c in lines) and "not printed" in finding["remedies"][0]["text"]
    assert all(len(r["text"]) < 2000 for r in finding["remedies"])
