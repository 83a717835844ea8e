"""Time `fa-doctor check --no-smoke --json` against `python -m torch.utils.collect_env`, and against target
environments with 50, 500 and 5,000 installed distributions (each with torch and an FA4 install).

Targets (2-core machine, no GPU): median <= 250 ms; cost flat in the number of distributions
(median at 5,000 <= 1.3 x median at 50). Run by hand:  python benchmarks/static_check.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeenv import make_env  # noqa: E402


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, timeout=600)
        out.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{cmd} failed with {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return out


def build_env(root: Path, count: int, real_torch: Path | None) -> str:
    env = make_env(root)
    if real_torch is not None:  # link the real torch in: as on every server, torch is installed
        for item in real_torch.parent.iterdir():
            if item.name == "torch" or item.name.startswith("torch-"):
                (env.site / item.name).symlink_to(item)
    else:
        env.torch()
    env.fa4()
    for i in range(count - len(list(env.site.glob("*.dist-info")))):
        name = f"filler_pkg_{i:05d}"
        env.dist(name, "1.0.0", {f"{name}/__init__.py": ""}, top_level=[name])
    return env.python


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    fa_doctor = shutil.which("fa-doctor") or sys.exit("install fa-doctor first (pip install -e .)")
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        real_torch = Path(spec.origin).parent if spec and spec.origin else None
    except ImportError:
        real_torch = None
    results: dict[str, dict[str, float]] = {}

    def record(name: str, samples: list[float]) -> None:
        results[name] = {
            "median_ms": statistics.median(samples) * 1000,
            "min_ms": min(samples) * 1000,
            "max_ms": max(samples) * 1000,
            "runs": len(samples),
        }
        print(
            f"{name:<42} median {results[name]['median_ms']:7.1f} ms   min {results[name]['min_ms']:7.1f}   "
            f"max {results[name]['max_ms']:7.1f}",
            flush=True,
        )

    record("fa-doctor check (this interpreter)", timed([fa_doctor, "check", "--no-smoke", "--json"], args.runs))
    if real_torch is not None:
        record(
            "python -m torch.utils.collect_env",
            timed([sys.executable, "-m", "torch.utils.collect_env"], max(3, args.runs // 5)),
        )
    with tempfile.TemporaryDirectory() as tmp:
        for count in (50, 500, 5000):
            python = build_env(Path(tmp) / str(count), count, real_torch)
            record(
                f"fa-doctor check, {count} distributions",
                timed([fa_doctor, "check", "--no-smoke", "--json", "--python", python], args.runs),
            )
    ratio = (
        results["fa-doctor check, 5000 distributions"]["median_ms"]
        / results["fa-doctor check, 50 distributions"]["median_ms"]
    )
    worst = max(v["median_ms"] for k, v in results.items() if k.startswith("fa-doctor"))
    print(f"\nflatness 5000/50: {ratio:.2f}x (target <= 1.30)   worst median: {worst:.0f} ms (target <= 250)")
    verdict = ratio <= 1.3 and worst <= 250
    print("PASS" if verdict else "FAIL")
    if args.out:
        args.out.write_text(json.dumps({"results": results, "flatness": ratio, "pass": verdict}, indent=2))


if __name__ == "__main__":
    main()
