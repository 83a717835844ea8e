"""The static check against its floor: `fa-doctor check --no-smoke --json` vs `python -c "import typer, rich"`.

fa-doctor cannot start faster than the two libraries its CLI is built on; everything above that floor is ours.
Runs alternate (floor, check, floor, check, ...) so that load on the machine hits both alike; the figure is the
ratio of the medians. Two targets: a fake healthy FA4 install (torch + FA4 + the CuTe DSL, tests/fakeenv.py:
nothing to repair, so no remedy is planned) and fa-doctor's own interpreter (no FA installed: a failing finding
whose remedy the planner writes).

Target (issue 17): healthy ratio <= 1.15 on the 2-core CPU box.
Run by hand:  python benchmarks/static_floor.py [--runs 41] [--out figures.json] [--source DIR ...] [--python PY]
`--source DIR` (repeatable) adds `python -m fa_doctor` from another source tree (a `git archive` of an older commit)
to the same interleaved runs, for a before/after on one machine state.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeenv import make_env  # noqa: E402

TARGET_RATIO = 1.15


def fa_doctor_argv() -> list[str]:
    """The console script beside this interpreter (what users run), else `python -m fa_doctor`."""
    script = Path(sys.executable).with_name("fa-doctor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "fa_doctor"]


def once(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    # From a neutral folder: `python -m` puts the working directory first on sys.path, and run from the checkout
    # it would import this tree's fa_doctor whatever PYTHONPATH says (--source measured the wrong code).
    done = subprocess.run(cmd, capture_output=True, timeout=120, env=env, cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed with {done.returncode}: {done.stderr.decode()[-400:]}")
    return seconds


def interleaved(commands: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():  # warm the page cache and .pyc files; not counted
        once(cmd, env)
    for _ in range(runs):
        for name, cmd in commands.items():
            samples[name].append(once(cmd, env))
    return samples


def healthy_target(root: Path) -> str:
    fenv = make_env(root)
    fenv.torch()
    fenv.fa4()
    return fenv.python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=41)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--source", type=Path, action="append", default=[], help="another fa_doctor source tree")
    ap.add_argument("--python", help="a real healthy install to check (the GPU machine's), instead of the fake one")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FA_DOCTOR_", "PYTHON"))}
    check = [*fa_doctor_argv(), "check", "--no-smoke", "--json"]
    with tempfile.TemporaryDirectory() as tmp:
        python = args.python or healthy_target(Path(tmp))
        commands = {
            "floor: import typer, rich": [sys.executable, "-c", "import typer, rich"],
            "check, healthy FA4 target": [*check, "--python", python],
            "check, this interpreter (remedy planned)": check,
        }
        for source in args.source:  # PYTHONPATH comes before the editable install's finder (run from a neutral cwd)
            tree = ["env", f"PYTHONPATH={source.resolve()}", sys.executable, "-m", "fa_doctor"]
            where = subprocess.run(
                [*tree[:3], "-c", "import fa_doctor; print(fa_doctor.__file__)"],
                capture_output=True, text=True, timeout=60, env=env, cwd=tempfile.gettempdir(),
            ).stdout.strip()  # fmt: skip
            if not where.startswith(str(source.resolve())):
                raise SystemExit(f"--source {source}: fa_doctor is imported from {where}, not from that tree")
            commands[f"check, healthy FA4 target, {source.name}"] = [
                *tree,
                *check[len(fa_doctor_argv()) :],
                "--python",
                python,
            ]
        samples = interleaved(commands, args.runs, env)
    medians = {name: statistics.median(s) * 1000 for name, s in samples.items()}
    floor = medians["floor: import typer, rich"]
    results = {}
    for name, s in samples.items():
        q = statistics.quantiles(s, n=4)
        results[name] = {
            "median_ms": round(medians[name], 1),
            "q1_ms": round(q[0] * 1000, 1),
            "q3_ms": round(q[2] * 1000, 1),
            "ratio": round(medians[name] / floor, 3),
            "runs": len(s),
        }
        r = results[name]
        print(
            f"{name:<42} median {r['median_ms']:7.1f} ms  (q1 {r['q1_ms']:.1f}, q3 {r['q3_ms']:.1f})  {r['ratio']:.2f}x"
        )
    healthy = results["check, healthy FA4 target"]["ratio"]
    verdict = healthy <= TARGET_RATIO
    print(f"\nhealthy check / floor: {healthy:.2f}x (target <= {TARGET_RATIO})  {'PASS' if verdict else 'FAIL'}")
    if args.out:
        args.out.write_text(json.dumps({"results": results, "pass": verdict}, indent=2) + "\n")


if __name__ == "__main__":
    main()
