"""The early GPU probe (started by fa_doctor.entry beside the imports): its answer is taken only by a check that
asks the same question, once; any other check probes again. Driven through a fake nvidia-smi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fakeenv import A100, H200, fake_nvidia_smi, make_env

from fa_doctor.probes import gpu


def test_the_same_question_gets_the_early_answer_once(tmp_path: Path) -> None:
    env = {**os.environ, **fake_nvidia_smi(tmp_path / "bin", [H200])}
    gpu.start_early(sys.executable, env)
    early = gpu.early_answer(sys.executable, env, 10.0, wait=30)
    assert early is not None and early == gpu.probe_gpus(sys.executable, env)
    assert [d.name for d in early.devices] == ["NVIDIA H200"]
    assert gpu.early_answer(sys.executable, env, 10.0, wait=30) is None  # taken


def test_another_question_is_not_answered_early(tmp_path: Path) -> None:
    env = {**os.environ, **fake_nvidia_smi(tmp_path / "bin", [H200])}
    gpu.start_early(sys.executable, env)
    other = {**env, "CUDA_VISIBLE_DEVICES": "1"}
    assert gpu.early_answer(sys.executable, other, 10.0, wait=30) is None
    assert gpu.early_answer("/other/python", env, 10.0, wait=30) is None
    assert gpu.early_answer(sys.executable, env, 5.0, wait=30) is None


def test_exec_probes_the_gpus_its_command_will_see(tmp_path: Path) -> None:
    """`exec -- env PATH=... python` : the entry's early probe asks with COMMAND's environment, the check too;
    the report names the GPU that environment shows (an A100), not the one fa-doctor's own PATH shows (H200)."""
    mine = fake_nvidia_smi(tmp_path / "mine", [H200])
    theirs = fake_nvidia_smi(tmp_path / "theirs", [A100])
    fenv = make_env(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "exec", "--no-smoke", "--json", "--warn-only", "--",
         "env", f"PATH={theirs['PATH']}", fenv.python, "-c", "pass"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **mine},
    )  # fmt: skip
    doc = json.loads(done.stderr[done.stderr.index("{") :])
    assert [g["name"] for g in doc["gpus"]["devices"]] == ["NVIDIA A100-SXM4-80GB"], done.stderr[-2000:]
