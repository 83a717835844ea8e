"""Where the static check's time goes, phase by phase: `fa-doctor check --no-smoke --json` run N times in a fresh
interpreter each, with the program's own checkpoints (fa_doctor.process.interrupt.checkpoint) and the probe waits
timed from the interpreter's first instruction; medians printed, with the report's own probe timings.

Phases: start (interpreter and site, measured as `python -c pass`), entry (the parser read the line), probe (the
target and GPU probes started), cli (the CLI loaded), run (the command's modules loaded), target wait and GPU
(the probes' answers), delivered (checks, planning, rendering done), exit.
Run by hand (also on the GPU machine):  python benchmarks/static_timeline.py [--runs 15] [--python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_DRIVER = r"""
import sys, time
T0 = time.perf_counter()
marks = {}
import fa_doctor.process.interrupt as it
_cp = it.checkpoint
def cp(name):
    marks.setdefault(name, time.perf_counter() - T0)
    return _cp(name)
it.checkpoint = cp
import fa_doctor.probes.target as tg
_result = tg.TargetProbe.result
def result(self, *a, **k):
    marks["target wait"] = time.perf_counter() - T0
    try:
        return _result(self, *a, **k)
    finally:
        marks["target answered"] = time.perf_counter() - T0
tg.TargetProbe.result = result
import atexit
atexit.register(lambda: sys.stderr.write("TIMELINE " + repr({**marks, "exit": time.perf_counter() - T0}) + "\n"))
sys.argv = ["fa-doctor", *sys.argv[1:]]
from fa_doctor.entry import main
main()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--python", default=sys.executable, help="the interpreter to check (default: this one)")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FA_DOCTOR_", "PYTHON"))}
    cmd = [sys.executable, "-c", _DRIVER, "check", "--no-smoke", "--json", "--python", args.python]
    rows: dict[str, list[float]] = {}
    starts, walls = [], []
    for _ in range(args.runs + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True, env=env, timeout=60)
        starts.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        walls.append(time.perf_counter() - t0)
        line = next((x for x in done.stderr.splitlines() if x.startswith("TIMELINE ")), None)
        if line is None:
            raise SystemExit(f"no timeline (exit {done.returncode}): {done.stderr[-400:]}")
        for name, value in eval(line[len("TIMELINE ") :]).items():  # our own repr of floats
            rows.setdefault(name, []).append(value)
        for name, value in json.loads(done.stdout).get("timings_ms", {}).items():
            rows.setdefault(f"report {name}", []).append(value / 1000)
    skip = 1  # the first run warms the page cache and writes .pyc files
    start = statistics.median(starts[skip:]) * 1000
    print(f"{'python -c pass (start-up)':<28} {start:7.1f} ms")
    for name, values in rows.items():
        print(f"{'  ' + name:<28} +{statistics.median(values[skip:]) * 1000:6.1f} ms")
    print(f"{'whole run (wall)':<28} {statistics.median(walls[skip:]) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
