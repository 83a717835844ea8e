"""`fa-doctor merge` against plain parsing, and its peak memory, in one run.

Inputs (generated in a child, into a temporary folder):
- 10,000 node reports: the golden `check` report (tests/golden/report.json) varied per node, 8 GPUs each with
  the smoke section of one, as `check --json` writes them; two install groups, 1% failing nodes (outliers),
  0.5% warning nodes. Two layouts: a folder of pretty-printed files, plus 10 truncated ones (what the Slurm
  recipe leaves), and one JSON Lines stream on stdin (what `kubectl logs` gives).
- 100,000 node reports in one JSON Lines file (~1 GB: the 10,000 with ten name prefixes): a large fleet.
- 5 MB of `{}` lines on stdin (1.75 million documents, each refused).

Every run is a fresh process (`fa-doctor merge --json`, the whole CLI: start, read, parse, judge, merge, render,
write), timed against a fresh process that only reads the same input and `json.loads` each report ("plain
parsing"). Per case: median wall and CPU (user + system) seconds over the runs, the process's peak RSS (wait4's
ru_maxrss, taken by a small launcher: see LAUNCH), and the ratio merge / plain parsing. CPU time is the figure
to compare on a shared machine: other load stretches wall time, not CPU time. The runs of a case alternate merge
and parsing, so both see the same load.

    python benchmarks/fleet_merge.py [--nodes 10000] [--big 100000] [--runs 5] [--big-runs 2]

Targets (issue 26): 10,000 reports within 3x plain parsing; 100,000 under 500 MB peak. docs/fleet.md (Scale) has
the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fleet_samples import KNOB_WARN, REQUIREMENT, SMOKE_FAILED, report  # noqa: E402

EMPTY_BYTES = 5 << 20
# Plain parsing: the same input read and each report parsed, nothing else.
PARSE_LINES = "import json, sys\nfor line in sys.stdin.buffer:\n    json.loads(line)\n"
PARSE_FILE = "import json, sys\nwith open(sys.argv[1], 'rb') as f:\n    for line in f:\n        json.loads(line)\n"
PARSE_FOLDER = """import json, os, sys
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        data = f.read()
    try:
        json.loads(data)
    except ValueError:  # the truncated files
        pass
"""


def fleet(count: int) -> Iterator[dict[str, Any]]:
    base = report("template")
    smoke = base["smoke"]["results"][0]
    base["smoke"]["results"] = [{**smoke, "device": {**smoke["device"], "index": i}} for i in range(8)]
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
        yield doc


def generate(tmp: Path, count: int, big: int) -> None:
    folder = tmp / "reports"
    folder.mkdir()
    with open(tmp / "all.jsonl", "w") as lines:
        for doc in fleet(count):
            (folder / f"{doc['host']['name']}.json").write_text(json.dumps(doc, indent=2) + "\n")
            lines.write(json.dumps(doc) + "\n")
    for i in range(10):  # nodes that stopped while writing
        text = json.dumps(report(f"cut-{i}"), indent=2)
        (folder / f"cut-{i}.json").write_text(text[: len(text) // 3])
    with open(tmp / "all.jsonl") as src, open(tmp / "big.jsonl", "w") as out:
        source = src.readlines()
        for k in range((big + count - 1) // count):
            for line in source[: big - k * count]:
                out.write(line.replace('"gpu-', f'"n{k}-gpu-').replace("GPU-gpu-", f"GPU-n{k}-gpu-"))
    (tmp / "empty.jsonl").write_text("{}\n" * (EMPTY_BYTES // 3))


# Each measured process is started by this small launcher, not by the benchmark: a child's ru_maxrss starts from
# the high-water mark of the process it was forked from (Linux records the old memory's peak at exec), and the
# benchmark itself grows while it reads 20 MB reports. The launcher is a fresh interpreter of ~10 MB.
LAUNCH = """import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    wall, cpu = time.perf_counter() - start, usage.ru_utime + usage.ru_stime
    json.dump({"wall": wall, "cpu": cpu, "kb": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}, f)
"""


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mb: float


def run(cmd: list[str], out: Path, stdin: Path | None = None) -> Run:
    """One fresh process, its stdout to `out`: wall seconds, CPU seconds (user + system), peak RSS in MB."""
    stats = out.with_suffix(".stats")
    with open(stdin or os.devnull, "rb") as feed, open(out, "wb") as sink, tempfile.TemporaryFile() as err:
        subprocess.run(
            [sys.executable, "-c", LAUNCH, str(stats), *cmd], stdin=feed, stdout=sink, stderr=err, check=True
        )
        got = json.loads(stats.read_text())
        if got["code"] not in (0, 1, 2):
            err.seek(0)
            raise SystemExit(f"{cmd} exited {got['code']}: {err.read().decode()[-600:]}")
    return Run(got["wall"], got["cpu"], got["kb"] / 1024)


@dataclass
class Case:
    label: str
    merge: list[Run]
    parse: list[Run]
    report: Path  # the last merge's output

    def line(self) -> str:
        def med(runs: list[Run], what: str) -> float:
            return float(statistics.median(getattr(r, what) for r in runs))

        doc = json.loads(self.report.read_bytes())
        parts = [
            f"{self.label}: merge wall {med(self.merge, 'wall'):.2f} s, CPU {med(self.merge, 'cpu'):.2f} s, "
            f"peak RSS {max(r.peak_mb for r in self.merge):.0f} MB"
        ]
        if self.parse:
            wall, cpu, peak = med(self.parse, "wall"), med(self.parse, "cpu"), max(r.peak_mb for r in self.parse)
            parts.append(f"plain parsing wall {wall:.2f} s, CPU {cpu:.2f} s, peak RSS {peak:.0f} MB")
            parts.append(f"ratio wall {med(self.merge, 'wall') / wall:.2f}x, CPU {med(self.merge, 'cpu') / cpu:.2f}x")
        summary = doc["summary"]
        parts.append(
            f"{doc['nodes']} nodes, {len(doc['groups'])} groups, {len(doc['outliers'])} outliers, "
            f"{summary['refused']} refused ({len(doc['refused'])} listed), "
            f"report {self.report.stat().st_size / 1024:.0f} KB, "
            f"in-process {doc['timings_ms'].get('total', 0):.0f} ms ({len(self.merge)} run(s))"
        )
        return ";\n    ".join(parts)


def measure(label: str, merge: list[str], parse: list[str] | None, stdin: Path | None, runs: int, tmp: Path) -> Case:
    case = Case(label, [], [], tmp / "report.json")
    for _ in range(runs):  # alternated: both see the same load
        case.merge.append(run(merge, case.report, stdin))
        if parse:
            case.parse.append(run(parse, tmp / "parsed.out", stdin))
    print(case.line(), flush=True)
    return case


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--big-runs", type=int, default=2)
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        generate(args.generate, args.nodes, args.big)
        return
    py = sys.executable
    cli = [py, "-m", "fa_doctor", "merge", "--json"]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        # Generated in a child: a merge forked from a process holding the reports would inherit its resident size.
        generator = [py, __file__, "--nodes", str(args.nodes), "--big", str(args.big), "--generate", name]
        subprocess.run(generator, check=True)
        folder, stream, big, empty = tmp / "reports", tmp / "all.jsonl", tmp / "big.jsonl", tmp / "empty.jsonl"
        mb = 2**20
        size = sum(p.stat().st_size for p in folder.iterdir()) / mb
        print(
            f"{args.nodes} node reports: folder {size:.0f} MB, JSON Lines {stream.stat().st_size / mb:.0f} MB; "
            f"{args.big} in one file {big.stat().st_size / mb:.0f} MB; "
            f"`{{}}` lines {empty.stat().st_size / mb:.1f} MB; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start",
            flush=True,
        )
        measure("folder", [*cli, str(folder)], [py, "-c", PARSE_FOLDER, str(folder)], None, args.runs, tmp)
        measure("stdin JSON Lines", [*cli, "-"], [py, "-c", PARSE_LINES], stream, args.runs, tmp)
        parse_big = [py, "-c", PARSE_FILE, str(big)]
        measure(f"{args.big} in one file", [*cli, str(big)], parse_big, None, args.big_runs, tmp)
        measure("5 MB of {} on stdin", [*cli, "-"], None, empty, 1, tmp)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
