"""`fa-doctor explain` through the CLI: TEXT, `-`, --file; the shared envelope with `matches`; bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv

ABI = "ImportError: /x/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"


def test_text_argument_json(cli: Any) -> None:
    run = cli("explain", ABI, "--json")
    assert run.code == 0
    doc = run.doc
    assert doc["command"] == "explain" and doc["schema"] == "fa-doctor.report/1"
    top = doc["matches"][0]
    assert top["category"] == "abi-mismatch" and top["remedies"] and 0 < top["confidence"] <= 1
    assert top["extracted"]["symbol"] == "_ZN3c104cuda9SetDeviceEi"
    assert [f["id"] for f in doc["findings"]] == ["explain.match"] * len(doc["matches"])


def test_stdin_and_file(tmp_path: Path) -> None:
    text = "ValueError: Invalid version: self.fa_impl_ver=5"
    run = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "explain", "-", "--json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and json.loads(run.stdout)["matches"][0]["category"] == "selection-override"
    paste = tmp_path / "paste.txt"
    paste.write_text("```\n> " + text + "\n```\n")
    run = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "explain", "--file", str(paste), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and json.loads(run.stdout)["matches"][0]["category"] == "selection-override"


def test_no_match_says_so_and_suggests_check(cli: Any) -> None:
    run = cli("explain", "everything is fine", "--json")
    assert run.code == 0 and run.doc["matches"] == [] and run.ids() == ["explain.no_match"]
    assert "fa-doctor check" in json.dumps(run.doc["findings"])


def test_unreadable_inputs_are_exit_2(cli: Any, tmp_path: Path) -> None:
    run = cli("explain", "--file", str(tmp_path / "missing.txt"), "--json")
    assert run.code == 2 and "missing.txt" in run.doc["error"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = cli("explain", "--file", str(fifo), "--json")  # refused at once, never blocks
    assert run.code == 2 and "regular file" in run.doc["error"]


def test_python_makes_advice_exact(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch("2.8.0+cu128", "12.8")
    run = cli("explain", ABI, "--json", "--python", fenv.python)
    assert run.code == 0 and run.doc["target"]["executable"] == fenv.python
    assert fenv.python in json.dumps(run.doc["matches"][0]["remedies"])


# Pastes whose entries used to print `pip install --force-reinstall vllm`, `pip install sglang-kernel` or a bare
# `flash-attn-4`: unpinned installs that move torch (a resolver dry run: torch 2.13 -> 2.14).
INSTALL_PASTES = {
    "missing.vllm-extensions": "ModuleNotFoundError: No module named 'vllm._C'",
    "missing.sgl-kernel": "ModuleNotFoundError: No module named 'sgl_kernel'",
    "fa4.dsl-missing": "ModuleNotFoundError: No module named 'cutlass'",
}


@pytest.mark.parametrize("paste", sorted(INSTALL_PASTES.values()))
def test_explain_without_python_prints_no_install(cli: Any, paste: str) -> None:
    """No --python: no torch to hold, so no pip install at all; the check that would plan one instead."""
    run = cli("explain", paste, "--json")
    actions = [a for f in run.doc["findings"] for r in f["remedies"] for a in r["actions"]]
    assert not [a for a in actions if a["kind"] == "pip-install"]
    assert any((a.get("argv") or [])[:3] == ["fa-doctor", "check", "--python"] for a in actions)


def test_explain_with_python_plans_as_check_does(cli: Any, fenv: FakeEnv) -> None:
    """With --python: the same planner as check, so every install holds the target's torch, and the paste's own
    entry installs no bare name (a less likely category's rebuild may add unpinned build tools such as ninja)."""
    fenv.torch("2.13.0+cu126", "12.6")
    run = cli("explain", INSTALL_PASTES["missing.sgl-kernel"], "--json", "--python", fenv.python)
    every = [a for f in run.doc["findings"] for r in f["remedies"] for a in r["actions"] if a["kind"] == "pip-install"]
    assert every and all("torch==2.13.0" in a["constraints"] for a in every)
    first = run.doc["findings"][0]
    assert first["evidence"]["id"] == "missing.sgl-kernel"
    installs = [a for r in first["remedies"] for a in r["actions"] if a["kind"] == "pip-install"]
    assert installs and all(any("==" in r for r in a["requirements"]) for a in installs)  # never a bare name


def test_python_runs_the_checks_and_says_what_the_machine_shows(cli: Any, fenv: FakeEnv) -> None:
    """No GPU in the fake target: check's gpu.none confirms "no GPU", and that answer says so; the exit code
    is explain's (0), not the checks'."""
    fenv.torch("2.8.0+cu128", "12.8")
    paste = "RuntimeError: No CUDA GPUs are available\nflash_attn_2_cuda.fwd(q, k, v)"
    run = cli("explain", paste, "--json", "--python", fenv.python)
    assert run.code == 0 and [f["id"] for f in run.doc["findings"]] == ["explain.match"] * len(run.doc["matches"])
    first = run.doc["matches"][0]
    assert first["category"] == "no-gpu" and first["verdict"] == "confirmed" and "GPU" in first["verdict_reason"]
    assert all(m["verdict"] in ("", "confirmed", "ruled out") for m in run.doc["matches"])
    human = cli("explain", paste, "--python", fenv.python)
    assert "On this machine: confirmed" in human.stdout
