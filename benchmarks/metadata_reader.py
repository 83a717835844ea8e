"""What reading metadata costs: fa_doctor.probes.metadata against the email package importlib.metadata uses.

1. Import cost, in fresh interpreters: the time to import ``fa_doctor.probes.metadata`` and, separately,
   ``email.parser``, each after ``re``, ``dataclasses`` and ``typing`` (which fa-doctor loads anyway), so the
   figure is what the module adds to a run. Bytecode is cached (as after ``pip install``) in a temporary
   PYTHONPYCACHEPREFIX, warmed once.
2. Parse time over every metadata file the differential test reads (tests/corpus/metadata, the fixtures,
   this venv's installed distributions): ``parse(file_text(data))`` against
   ``_adapters.Message(email.message_from_string(text))``, and the real sglang 0.5.23 METADATA alone.
3. scan_distributions over a site of 50, 500 and 5,000 distributions (the real sglang METADATA among them).

Runs alternate between the two readers; medians are reported.  Run:  python benchmarks/metadata_reader.py
"""

from __future__ import annotations

import argparse
import email
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import _adapters
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fa_doctor.probes import metadata  # noqa: E402

_CHILD = (
    "import re, dataclasses, typing, time, fa_doctor.probes\n"
    "t = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)\n"
)


def import_cost(module: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=module)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return float(out.stdout)


def metadata_files() -> list[Path]:
    tests = ROOT / "tests"
    found = [*(tests / "corpus" / "metadata").rglob("*"), *tests.glob("fixtures/*/*/METADATA")]
    for entry in dict.fromkeys(p for p in sys.path if "site-packages" in p and Path(p).is_dir()):
        found += [*Path(entry).glob("*.dist-info/METADATA"), *Path(entry).glob("*.egg-info/PKG-INFO")]
    return sorted(p for p in found if p.name in ("METADATA", "PKG-INFO") or p.name.endswith(".whl.metadata"))


def timed(fn: object, items: list[bytes]) -> float:
    t = time.perf_counter()
    for data in items:
        fn(data)  # type: ignore[operator]
    return time.perf_counter() - t


def ours(data: bytes) -> object:
    return metadata.parse(metadata.file_text(data))


def theirs(data: bytes) -> object:
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")  # Path.read_text's newlines
    return _adapters.Message(email.message_from_string(text))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        modules = {"fa_doctor.probes.metadata": [], "email.parser": []}  # type: dict[str, list[float]]
        for module in modules:
            import_cost(module, env)  # warm the bytecode cache
        for i in range(args.runs):
            for module in sorted(modules, reverse=bool(i % 2)):
                modules[module].append(import_cost(module, env))
    for module, samples in modules.items():
        print(f"import {module:<28} median {statistics.median(samples) * 1e3:6.2f} ms  (min {min(samples) * 1e3:.2f})")

    files = metadata_files()
    blobs = [p.read_bytes() for p in files]
    sglang = [(ROOT / "tests/fixtures/metadata/sglang-0.5.23/METADATA").read_bytes()]
    total = sum(len(b) for b in blobs)
    print(f"\n{len(files)} files, {total / 1e6:.2f} MB")
    for label, items, repeat in (("corpus", blobs, 1), ("sglang 0.5.23 METADATA (29 kB)", sglang, 50)):
        runs: dict[str, list[float]] = {"fa_doctor": [], "email+importlib": []}
        for i in range(args.runs):
            order = [("fa_doctor", ours), ("email+importlib", theirs)]
            for name, fn in order[:: -1 if i % 2 else 1]:
                runs[name].append(timed(fn, items * repeat) / repeat)
        for name, samples in runs.items():
            print(f"parse {label:<32} {name:<16} median {statistics.median(samples) * 1e3:7.3f} ms")
    print()
    scan_cost(args.runs)


def scan_cost(runs: int) -> None:
    """scan_distributions over a site of N distributions holding the real sglang METADATA and the FA fixtures."""
    import shutil

    from fa_doctor.probes.distributions import scan_distributions
    from fa_doctor.probes.modules import listdir

    for count in (50, 500, 5000):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp)
            for info in (ROOT / "tests/fixtures/dist-info").iterdir():
                shutil.copytree(info, site / info.name)
            real = ROOT / "tests/fixtures/metadata/sglang-0.5.23/METADATA"
            shutil.copy(real, site / "sglang-0.5.23.dist-info" / "METADATA")
            for i in range(count - len(list(site.iterdir()))):
                info = site / f"filler_pkg_{i:05d}-1.0.0.dist-info"
                info.mkdir()
                (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: filler-pkg-{i:05d}\nVersion: 1.0.0\n")
            samples = []
            for _ in range(runs):
                listdir.cache_clear()
                t = time.perf_counter()
                scan = scan_distributions([str(site)])
                samples.append(time.perf_counter() - t)
            assert len(scan.first("sglang").requires) == 139  # type: ignore[union-attr]
            print(f"scan {count:>5} distributions: median {statistics.median(samples) * 1e3:6.2f} ms")


if __name__ == "__main__":
    main()
