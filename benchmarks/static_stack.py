"""The static check against the stack it is built on (issue 24), interleaved in one run on one machine state.

- floor: a two-command typer+rich app that prints one line (`python app.py hello`): what any CLI on this stack
  costs before it does anything. Target: the static check of a healthy FA4 install <= 1.3x the floor.
- flat: the same check on a target with 50 and with 5,000 installed distributions. Target: <= 1.25x.
- torch: `python -m torch.utils.collect_env` in the same interpreter (what users run to describe an install).
  Target: the static check >= 10x faster.

Runs alternate (floor, check-50, check-5000, collect_env, floor, ...) so that load hits all alike; figures are
medians. The floor depends on the typer release, so the output names it: typer 0.29.2 loads pydantic when it
parses, 0.27.2 does not (a lighter floor: 1.30x against 1.70x for the same check on one H100, see
docs/gpu-runs/2026-12-06-h100-typer-floor).
Run by hand: python benchmarks/static_stack.py [--runs 21] [--out figures.json]
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

APP = """import typer
from rich.console import Console

app = typer.Typer()


@app.command()
def hello(name: str = "world") -> None:
    Console().print(f"hello {name}")


@app.command()
def bye() -> None:
    Console().print("bye")


if __name__ == "__main__":
    app()
"""
TARGETS = {"static / floor": 1.3, "5000 dists / 50 dists": 1.25, "collect_env / static": 10.0}


def target(root: Path, extra: int) -> str:
    fenv = make_env(root)
    fenv.torch()
    fenv.fa4()
    for i in range(extra):
        info = fenv.site / f"filler_{i:05d}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: filler-{i:05d}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{info.name}/METADATA,,\n")
    return fenv.python


def once(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, timeout=300, env=env, cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed with {done.returncode}: {done.stderr.decode()[-600:]}")
    if "check" in cmd:  # exit 1 is also what a missing module gives: time only a check that reported
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = {}
        if report.get("command") != "check" or report.get("error") is not None:
            raise SystemExit(f"{cmd} gave no check report (exit {done.returncode}): {done.stderr.decode()[-600:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FA_DOCTOR_", "PYTHON"))}
    script = Path(sys.executable).with_name("fa-doctor")
    doctor = [str(script)] if script.exists() else [sys.executable, "-m", "fa_doctor"]
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "app.py"
        app.write_text(APP)
        small, large = target(Path(tmp) / "t50", 50 - 5), target(Path(tmp) / "t5000", 5000 - 5)
        commands = {
            "floor: typer+rich app": [sys.executable, str(app), "hello"],
            "check, 50 dists": [*doctor, "check", "--no-smoke", "--json", "--python", small],
            "check, 5000 dists": [*doctor, "check", "--no-smoke", "--json", "--python", large],
            "torch collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():
            once(cmd, env)  # warm the page cache and .pyc files; not counted
        for _ in range(args.runs):
            for name, cmd in commands.items():
                samples[name].append(once(cmd, env))
        run_app = "import runpy, sys\nsys.argv = ['app.py', 'hello']\ntry:\n"
        run_app += f"    runpy.run_path({str(app)!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
        run_app += "import typer\nprint(typer.__version__, 'pydantic' in sys.modules)"
        done = subprocess.run([sys.executable, "-c", run_app], capture_output=True, text=True, timeout=300)
        words = done.stdout.split() if done.returncode == 0 else []
        stack = words[-2:] if len(words) >= 2 else ["?", "?"]  # the app's run failed: the stack is not named
    med = {name: statistics.median(s) * 1000 for name, s in samples.items()}
    print(f"floor stack: typer {stack[0]}, pydantic loaded by its run: {stack[1] == 'True'}")
    for name, s in samples.items():
        q = statistics.quantiles(s, n=4)
        print(f"{name:<24} median {med[name]:8.1f} ms  (q1 {q[0] * 1000:.1f}, q3 {q[2] * 1000:.1f}, {len(s)} runs)")
    ratios = {
        "static / floor": med["check, 50 dists"] / med["floor: typer+rich app"],
        "5000 dists / 50 dists": med["check, 5000 dists"] / med["check, 50 dists"],
        "collect_env / static": med["torch collect_env"] / med["check, 50 dists"],
    }
    verdicts = {}
    for name, ratio in ratios.items():
        limit = TARGETS[name]
        ok = ratio >= limit if name.startswith("collect_env") else ratio <= limit
        verdicts[name] = ok
        sign = ">=" if name.startswith("collect_env") else "<="
        print(f"{name:<24} {ratio:6.2f}x  (target {sign} {limit})  {'PASS' if ok else 'FAIL'}")
    if args.out:
        doc = {"medians_ms": med, "ratios": ratios, "pass": verdicts, "runs": args.runs, "floor_stack": stack}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
