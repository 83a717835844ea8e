"""What `explain` costs per paste: the real reports of the corpus, and megabyte pastes built to be slow.

For each paste: the median of several runs of fa_doctor.knowledge.explain(text) (normalise, patterns, evidence
rules, words, the model, remedies), after one warm-up run (the model table and errors.json load once per
process; that first load is timed separately).   Run:  python benchmarks/explain_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explain_fit import FOLDERS, ROOT

sys.path.insert(0, str(ROOT))

MB = 1_000_000


def pastes() -> dict[str, str]:
    from fa_doctor.knowledge import load

    anchors = [p.find for e in load() for p in e.patterns if p.find]
    abi = "ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    words = " ".join(f"flash_attn cuda torch word{i} sm_{i % 100} head_dim {i}" for i in range(MB // 50))
    return {
        "one character": "a" * MB,
        "anchor soup": " ".join(anchors * (MB // sum(len(a) + 1 for a in anchors)))[:MB],
        "unique lines": "\n".join(
            f"{anchors[i % len(anchors)]} {i} undefined symbol: _ZN3c10{i}" for i in range(25000)
        ),
        "distinct words": words[:MB],
        "traceback frames": (
            "\n".join(f'  File "/x/site-packages/pkg{i}/m.py", line {i}, in f\nValueError: x{i}' for i in range(15_000))
        )[:MB],
        "error at the end": "log line\n" * (MB // 10) + abi,
    }


def timed(text: str, runs: int) -> float:
    from fa_doctor.knowledge import explain

    explain(text)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        explain(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    start = time.perf_counter()
    from fa_doctor.knowledge import explain

    explain("ImportError: libcudart.so.12: cannot open shared object file")
    print(f"first call (loads errors.json and model.json): {1000 * (time.perf_counter() - start):.1f} ms")
    reports = [p.read_text(encoding="utf-8") for folder in FOLDERS for p in sorted(folder.glob("*.txt"))]
    per = sorted(timed(t, 3) for t in reports)
    print(
        f"{len(reports)} real reports: median {1000 * statistics.median(per):.2f} ms, "
        f"p95 {1000 * per[int(0.95 * len(per))]:.2f} ms, max {1000 * per[-1]:.2f} ms"
    )
    for name, text in pastes().items():
        print(f"{name:20s} {len(text) / MB:5.2f} MB  {1000 * timed(text, 5):7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
