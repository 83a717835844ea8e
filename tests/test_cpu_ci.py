"""CPU CI mode (issue 23): a job without a GPU that asks for `--no-smoke` or `--gpu-arch` gets the missing GPU as
information (not a warning that fails `--strict`), and `--gpu-arch` drives SGLang's default-backend choice as
the fleet's GPU would."""

from __future__ import annotations

import json
from typing import Any

from fakeenv import FakeEnv


def healthy_sglang(fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    fenv.sgl_kernel()
    fenv.sglang()


def gpu_none(doc: dict[str, Any]) -> dict[str, Any]:
    return next(f for f in doc["findings"] if f["id"] == "gpu.none")


def test_no_smoke_makes_the_missing_gpu_information_even_under_strict(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    fenv.fa4()
    run = cli("check", "--json", "--no-smoke", "--strict", "--python", fenv.python)
    doc = json.loads(run.stdout)
    assert gpu_none(doc)["severity"] == "info"
    assert all(f["severity"] in ("ok", "info") for f in doc["findings"]), [
        (f["id"], f["severity"]) for f in doc["findings"] if f["severity"] not in ("ok", "info")
    ]
    assert run.code == 0


def test_without_those_options_the_missing_gpu_still_warns(cli: Any, fenv: FakeEnv) -> None:
    healthy_sglang(fenv)
    doc = json.loads(cli("check", "--json", "--python", fenv.python).stdout)
    assert gpu_none(doc)["severity"] == "warn"


def test_gpu_arch_drives_sglangs_default_backend(cli: Any, fenv: FakeEnv) -> None:
    healthy_sglang(fenv)
    hopper = json.loads(cli("check", "--json", "--gpu-arch", "sm_90", "--python", fenv.python).stdout)
    assert gpu_none(hopper)["severity"] == "info" and "--gpu-arch sm_90" in gpu_none(hopper)["detail"]
    assert hopper["selection"]["prefill"]["backend"] == "fa3", hopper["selection"]
    ampere = json.loads(cli("check", "--json", "--gpu-arch", "sm_80", "--python", fenv.python).stdout)
    assert ampere["selection"]["prefill"]["backend"] != "fa3", ampere["selection"]
