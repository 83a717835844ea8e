"""What the verdict cache costs on an unchanged node: the fingerprint, the lookup, and `check` with a held verdict
against the static check (`check --no-smoke`).

The node is fake but its files are real in number and layout: a target venv with torch and FA4 whose
distributions carry the released wheels' RECORDs (tests/fixtures/dist-info: flash-attn-4 4.0.0b36, the CuTe DSL
4.8.1 and its libs, quack-kernels, apache-tvm-ffi, torch-c-dlpack-ext, sglang-kernel; every listed file created), and an
nvidia-smi on PATH answering for H200s. The verdict is stored by one in-process check whose smoke child is
replaced by a passing result (no GPU here); every later `fa-doctor check` finds it and runs no child.

Target (issue 17): check with a held verdict <= the static check + 1 s (on the GPU machine: see
benchmarks/gpu_verdict_proof.sh); the fingerprint a few milliseconds.
Run by hand:  python benchmarks/verdict_cache.py [--runs 21] [--gpus 8] [--out figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeenv import FIXTURES, FakeEnv, fake_nvidia_smi, make_env  # noqa: E402


def healthy_node(root: Path) -> FakeEnv:
    """torch, and FA4 with its runtime from the released RECORDs (every listed file created, empty)."""
    fenv = make_env(root)
    fenv.torch()
    for folder in sorted(FIXTURES.iterdir()):
        if folder.name.endswith(".dist-info") and not folder.name.startswith("sglang"):
            fenv.fixture(folder.name)
    (fenv.site / "nvidia_cutlass_dsl_packages.pth").write_text("./nvidia_cutlass_dsl/dsl_packages\n")
    for name in ("einops", "typing-extensions"):
        fenv.dist(name, "4.12.0", {f"{name.replace('-', '_')}.py": ""})
    return fenv


def h200_rows(count: int) -> list[str]:
    return [f"{i}, GPU-{i:08x}-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771" for i in range(count)]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def in_process(fenv: FakeEnv, runs: int) -> dict[str, Any]:
    """Fingerprint and lookup, timed inside one process (what `exec` adds to the static check)."""
    from fa_doctor.commands import check
    from fa_doctor.diagnose.derive import derive
    from fa_doctor.model.options import CheckOptions
    from fa_doctor.probes.gather import gather
    from fa_doctor.smoke import SmokeResult, SmokeTarget, case_specs, runner, verdict_key, verdicts
    from fa_doctor.smoke.runner import CaseResult
    from fa_doctor.smoke.step import pin_for, smoke_keys

    def passing(python: str, target: SmokeTarget, **kw: Any) -> SmokeResult:
        cases = tuple(
            CaseResult(
                s["name"], s["function"], s["dtype"], s["head_dim"], s["causal"], 0.002, s["tolerance"], True, 0.1, None
            )
            for s in case_specs(target.api)
        )
        module = str(fenv.site / "flash_attn" / "cute" / "__init__.py")
        return SmokeResult(target.key, target.module, target.api, "passed", cases=cases, module_file=module)

    runner.run_smoke = passing  # type: ignore[assignment]  # no GPU here: the stored verdict is a stand-in's
    options = CheckOptions(python=fenv.python)
    stored = check.run(options)
    assert stored.check.smoke is not None and stored.check.smoke.proven is not None, "no verdict was stored"
    facts = gather(options, {})
    derived = derive(facts)
    keys = smoke_keys(derived.selection, derived.states, False)
    targets = [SmokeTarget(k, "flash_attn.cute", "cute") for k in keys]
    devices = list(facts.gpus.devices)
    pins = [pin_for(d, facts) for d in devices]
    compute, load, watch = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        fingerprint = verdict_key.compute(facts, targets, devices, pins)
        t1 = time.perf_counter()
        verdict = verdicts.load(fingerprint.value)
        t2 = time.perf_counter()
        assert verdict is not None
        verdict_key.watch(verdict.watch)
        t3 = time.perf_counter()
        compute.append(t1 - t0)
        load.append(t2 - t1)
        watch.append(t3 - t2)
    files = sum(len(d.files or ()) for d in facts.scan.distributions)
    return {
        "fingerprint_ms": median_ms(compute),
        "load_ms": median_ms(load),
        "watch_ms": median_ms(watch),
        "parts": len(fingerprint.parts),
        "record_files_statted": files,
        "gpus": len(devices),
    }


def interleaved(commands: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():
        subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    for _ in range(runs):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
            samples[name].append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"{cmd} exited {done.returncode}: {done.stdout[-300:]!r} {done.stderr[-300:]!r}")
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fenv = healthy_node(root / "node")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FA_DOCTOR_", "PYTHON", "CUDA_"))}
        env.update(fake_nvidia_smi(root / "bin", h200_rows(args.gpus)))
        env["XDG_CACHE_HOME"] = str(root / "cache")
        os.environ.update({k: env[k] for k in ("PATH", "XDG_CACHE_HOME")})
        figures = in_process(fenv, args.runs)
        script = Path(sys.executable).with_name("fa-doctor")
        fa_doctor = [str(script)] if script.exists() else [sys.executable, "-m", "fa_doctor"]
        base = [*fa_doctor, "check", "--json", "--python", fenv.python]
        commands = {"static check (--no-smoke)": [*base, "--no-smoke"], "check, verdict held": base}
        samples = interleaved(commands, args.runs, env)
        done = subprocess.run(base, capture_output=True, env=env, timeout=120, text=True)
        doc = json.loads(done.stdout)
        assert doc["smoke"]["cached"] is True, "the stored verdict was not reused"
    figures["end_to_end_ms"] = {name: median_ms(s) for name, s in samples.items()}
    static, held = (figures["end_to_end_ms"][n] for n in commands)
    figures["held_minus_static_ms"] = round(held - static, 1)
    for key, value in figures.items():
        print(f"{key:<24} {value}")
    ok = figures["held_minus_static_ms"] <= 1000
    extra = figures["held_minus_static_ms"]
    print(f"\ncheck with a held verdict: static + {extra} ms (target <= +1000)  {'PASS' if ok else 'FAIL'}")
    if args.out:
        args.out.write_text(json.dumps({**figures, "pass": ok}, indent=2) + "\n")


if __name__ == "__main__":
    main()
