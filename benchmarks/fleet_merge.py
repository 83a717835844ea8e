"""Time and peak memory of `fa-doctor merge` on 10,000 generated node reports.

The reports are the golden `check` report (tests/golden/report.json) varied per node, 8 GPUs each with the
smoke section of one, as `check --json` writes them; the fleet has two install groups, 1% failing nodes
(outliers), 0.5% warning nodes and 10 truncated files. Two layouts: a folder of 10,000 pretty-printed files (what
the Slurm recipe leaves) and one JSON Lines stream on stdin (what `kubectl logs` gives). Each run is the whole
CLI in a fresh process (`fa-doctor merge --json`, output discarded): wall time and the child's peak RSS.

Targets (2-core machine): < 2 s and < 500 MB. Run by hand:  python benchmarks/fleet_merge.py [--nodes 10000]

Measured 2026-12-03 on the 2-core CPU box (7 runs each; other sessions' test suites shared the box, so wall
time moved with their load):
  folder (145 MB): wall median 1.49 s (min 1.32) with the box nearly idle, 1.97-2.29 s medians under load;
                   CPU (both cores) 2.1-3.3 s; peak RSS 54 MB
  stdin (98 MB):   wall median 1.89-2.40 s (min 1.44); peak RSS 224 MB (the stream is held once, and sliced)
Where it goes (one core): parsing ~70-90 µs a report, reading ~20-30 µs, judging ~27 µs, the render boundary
~0.3 s for 10,000 node rows (most of it scrub.py's home-folder lookup per string), the JSON itself ~0.1 s.
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

from fleet_samples import KNOB_WARN, REQUIREMENT, SMOKE_FAILED, report  # noqa: E402


def fleet(count: int) -> list[dict[str, Any]]:
    base = report("template")
    smoke = base["smoke"]["results"][0]
    base["smoke"]["results"] = [{**smoke, "device": {**smoke["device"], "index": i}} for i in range(8)]
    docs = []
    for i in range(count):
        name = f"gpu-{i:05d}"
        if i % 100 == 7:
            doc = report(name, findings=(SMOKE_FAILED,), gpus=7)  # an outlier
        elif i % 200 == 3:
            doc = report(name, findings=(KNOB_WARN,))
        elif i % 10 == 9:
            doc = report(name, fa="4.0.0b40", findings=(REQUIREMENT,))  # the other image: a failing group
        else:
            doc = report(name)
        doc["smoke"] = base["smoke"]
        docs.append(doc)
    return docs


def run(cmd: list[str], stdin: Path | None = None) -> tuple[float, float, float, dict[str, Any]]:
    """Wall seconds, CPU seconds (user + system: what other load on the box does not inflate), peak RSS in MB
    (this child's own, from wait4), and the parsed report."""
    with open(stdin or os.devnull, "rb") as feed, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=feed, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{cmd} exited {proc.returncode}: {err.read().decode()[-600:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, json.loads(out)


def generate(tmp: Path, count: int) -> None:
    folder = tmp / "reports"
    folder.mkdir()
    docs = fleet(count)
    for doc in docs:
        (folder / f"{doc['host']['name']}.json").write_text(json.dumps(doc, indent=2) + "\n")
    for i in range(10):  # nodes that stopped while writing
        text = json.dumps(report(f"cut-{i}"), indent=2)
        (folder / f"cut-{i}.json").write_text(text[: len(text) // 3])
    (tmp / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        generate(args.generate, args.nodes)
        return
    cli = [sys.executable, "-m", "fa_doctor", "merge", "--json"]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        # Generated in a child: a merge forked from a process holding 10,000 parsed reports would inherit its
        # resident size in ru_maxrss.
        subprocess.run([sys.executable, __file__, "--nodes", str(args.nodes), "--generate", name], check=True)
        folder, stream = tmp / "reports", tmp / "all.jsonl"
        size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        print(f"{args.nodes} node reports: folder {size:.0f} MB, JSON Lines {stream.stat().st_size / 2**20:.0f} MB")
        for label, cmd, feed in (("folder", [*cli, str(folder)], None), ("stdin JSON Lines", [*cli, "-"], stream)):
            walls, cpus, peaks = [], [], []
            for _ in range(args.runs):
                wall, cpu, peak, doc = run(cmd, feed)
                walls.append(wall)
                cpus.append(cpu)
                peaks.append(peak)
            summary = doc["summary"]
            print(
                f"{label}: wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
                f"CPU median {statistics.median(cpus):.2f} s, "
                f"peak RSS {max(peaks):.0f} MB; {doc['nodes']} nodes, {len(doc['groups'])} groups, "
                f"{len(doc['outliers'])} outliers, {summary['refused']} refused, "
                f"in-process {doc['timings_ms']['total']:.0f} ms"
            )


if __name__ == "__main__":
    main()
