#!/usr/bin/env python3
"""How much the FA4 smoke test costs over the bare minimum, cold and with a warm compile cache.

Measures, each as the wall time of a fresh child process of --python:
  import_floor  a child that only runs `import flash_attn.cute`
  floor         a child that imports flash_attn.cute and makes the same first calls as the smoke test
                (same shapes and dtypes, compile cache disabled, no reference checks)
  cold          run_smoke(fa4) with a new, empty cache folder
  warm          run_smoke(fa4) again with that folder
and checks the targets cold <= 1.25 x floor and warm <= import_floor + 1 s.

    python benchmarks/smoke_fa4.py --out smoke_fa4.json              # on a GPU machine with flash-attn-4
    python benchmarks/smoke_fa4.py --fake-cpu --out /tmp/dry.json    # dry run: fake FA4 module on the CPU

Exit status: 0 targets met, 1 a target missed, 2 a smoke run did not pass or a child failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fa_doctor.smoke import SmokeTarget, case_specs  # noqa: E402
from fa_doctor.smoke.runner import run_smoke  # noqa: E402

MODULE = "flash_attn.cute"
TARGET = SmokeTarget("fa4", MODULE, "cute")
FAKES = REPO / "tests" / "smoke_fakes"
COLD_FACTOR, WARM_SLACK = 1.25, 1.0

# Like the smoke child, both floors skip interpreter teardown with os._exit so the comparison is fair.
IMPORT_ONLY = f"import os\nimport {MODULE}\nos._exit(0)\n"
FIRST_CALLS = f"""
import json, os, sys
import torch
import {MODULE} as fa
device, specs = sys.argv[1], json.loads(sys.argv[2])
for spec in specs:
    dtype, d = getattr(torch, spec["dtype"]), spec["head_dim"]
    lens = spec["seqlens"]
    total = sum(lens)
    q = torch.randn(total, spec["heads"], d, dtype=dtype, device=device)
    k = torch.randn(total, spec["kv_heads"], d, dtype=dtype, device=device)
    v = torch.randn_like(k)
    cu = torch.tensor([0, *[sum(lens[: i + 1]) for i in range(len(lens))]], dtype=torch.int32, device=device)
    fa.flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                              max_seqlen_k=max(lens), causal=spec["causal"])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
sys.stdout.flush()
os._exit(0)
"""


def timed_child(python: str, code: str, args: list[str], env: Mapping[str, str], timeout: float) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-c", code, *args], env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"floor child failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def measure(python: str, device: str, env: dict[str, str], timeout: float, repeat: int) -> dict[str, Any]:
    specs = [s for s in case_specs("cute") if s["function"] == "flash_attn_varlen_func"]
    floor_env = {**env, "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "0"}
    floor_env.pop("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", None)
    runs: dict[str, list[float]] = {"import_floor": [], "floor": [], "cold": [], "warm": []}
    smoke: dict[str, Any] = {}
    for _ in range(repeat):
        runs["import_floor"].append(timed_child(python, IMPORT_ONLY, [], floor_env, timeout))
        runs["floor"].append(timed_child(python, FIRST_CALLS, [device, json.dumps(specs)], floor_env, timeout))
        with tempfile.TemporaryDirectory(prefix="fa-doctor-bench-") as tmp:
            cache = os.path.join(tmp, "cute-dsl")
            for label in ("cold", "warm"):
                result = run_smoke(python, TARGET, device=device, timeout=timeout, cache_dir=cache, env=env)
                if result.status != "passed":
                    raise RuntimeError(f"{label} smoke run: {result.status}: {result.to_dict()}")
                runs[label].append(result.phases["total"])
                if result.phases["total"] <= min(runs[label]):
                    smoke[label] = result.to_dict()  # the phases shown are those of the best run
    best = {k: min(v) for k, v in runs.items()}
    targets: dict[str, dict[str, Any]] = {
        "cold_vs_floor": {
            "value": best["cold"],
            "limit": COLD_FACTOR * best["floor"],
            "rule": f"cold <= {COLD_FACTOR} x floor",
        },
        "warm_vs_import": {
            "value": best["warm"],
            "limit": best["import_floor"] + WARM_SLACK,
            "rule": f"warm <= import_floor + {WARM_SLACK:g} s",
        },
    }
    for t in targets.values():
        t["ok"] = t["value"] <= t["limit"]
    return {"runs": runs, "best": best, "targets": targets, "smoke": smoke}


def table(report: Mapping[str, Any]) -> str:
    best, smoke = report["best"], report["smoke"]
    rows = [f"{'measure':<14}{'seconds':>9}   phases (run_smoke)"]
    for name in ("import_floor", "floor", "cold", "warm"):
        phases = smoke.get(name, {}).get("phases", {})
        detail = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k != "total")
        rows.append(f"{name:<14}{best[name]:>9.2f}   {detail}")
    for t in report["targets"].values():
        rows.append(f"{'ok  ' if t['ok'] else 'MISS'} {t['rule']}: {t['value']:.2f} s vs {t['limit']:.2f} s")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter with flash-attn-4 (default: this one)")
    parser.add_argument("--out", type=Path, required=True, help="write all figures to this JSON file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per child")
    parser.add_argument(
        "--repeat", type=int, default=3, help="repeat each measurement, keep the best (H200 runs vary by ~20%%)"
    )
    parser.add_argument("--fake-cpu", action="store_true", help="dry run with the fake FA4 module on the CPU")
    parser.add_argument("--fake-compile-seconds", type=float, default=0.5, help="simulated JIT time per shape")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASH_ATTENTION_CUTE_DSL_CACHE")}
    device = "cuda"
    if args.fake_cpu:
        device = "cpu"
        env["PYTHONPATH"] = os.pathsep.join([str(FAKES / "cute"), str(FAKES / "common")])
        env["FAKE_COMPILE_SECONDS"] = str(args.fake_compile_seconds)
    try:
        report = measure(args.python, device, env, args.timeout, max(1, args.repeat))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2
    report.update(
        python=args.python,
        device=device,
        fake_cpu=args.fake_cpu,
        repeat=args.repeat,
        device_name=report["smoke"].get("cold", {}).get("device_name"),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(table(report))
    print(f"figures written to {args.out}")
    return 0 if all(t["ok"] for t in report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
