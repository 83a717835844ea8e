"""Fetch the corpus of real metadata files: python scripts/fetch_metadata_corpus.py [--cache DIR]

Writes tests/corpus/metadata/<normalised name>/<artifact file name>.metadata (a wheel's METADATA, byte for
byte), .../<sdist file name>/<path in the sdist> (PKG-INFO, *.egg-info/PKG-INFO, *.egg-info/requires.txt) and
.../<wheel file name>/<path in the wheel> (RECORD, WHEEL, entry_points.txt), and MANIFEST.json: for every file
the artifact's URL and name, the member, the sha256 of the file as stored and the date it was fetched (kept
from the previous manifest when the bytes did not change). Which releases: the PLAN below; the wheel whose
METADATA stands for a release is the one the catalog reads (pypi_index.pick_artifact).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pypi_index
import regen_catalog

CORPUS = regen_catalog.ROOT / "tests" / "corpus" / "metadata"
ALL = "all"


def _vs(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# project -> which releases' metadata (ALL, or the listed versions). Sizes kept so the corpus stays ~4-5 MB.
WHEEL_METADATA: dict[str, str | tuple[str, ...]] = {
    "flash-attn-4": ALL,
    "nvidia-cutlass-dsl": ALL,
    "nvidia-cutlass-dsl-libs-base": ALL,
    "nvidia-cutlass-dsl-libs-core": ALL,
    "nvidia-cutlass-dsl-libs-cu12": ALL,
    "nvidia-cutlass-dsl-libs-cu13": ALL,
    "quack-kernels": ALL,
    "apache-tvm-ffi": ALL,
    "torch-c-dlpack-ext": ALL,
    "sglang-kernel": ALL,
    "torch": ALL,
    "sgl-kernel": _vs(
        "0.1.0 0.1.4 0.1.9 0.2.0 0.2.5 0.3.0 0.3.5 0.3.9.post2 0.3.12 0.3.16.post5 0.3.17 0.3.17.post1 "
        "0.3.18.post2 0.3.19 0.3.20 0.3.21"
    ),
    "sglang": _vs(
        "0.4.0 0.4.3.post2 0.4.6 0.4.9 0.5.0rc2 0.5.2rc0 0.5.3 0.5.5 0.5.6 0.5.7 0.5.8 0.5.9 0.5.10rc0 0.5.10 "
        "0.5.10.post1 0.5.11 0.5.12 0.5.12.post1 0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 0.5.16 0.5.17 "
        "0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23"
    ),
    "vllm": _vs("0.6.0 0.7.3 0.8.5 0.9.2 0.10.2 0.11.0 0.15.0 0.20.0 0.27.1 0.30.0 0.33.0 0.34.0"),
    "flashinfer-python": _vs(
        "0.2.0.post1 0.2.5 0.2.14 0.3.1 0.4.1 0.5.0 0.6.0 0.6.16.post3 0.7.0.post1 0.7.2.post1 0.7.4"
    ),
    "transformers": ("4.46.1", "4.57.1", "5.25.0"),
}
# sdists whose PKG-INFO and egg-info files are kept: flash-attn is sdist-only on PyPI; the others carry
# requires.txt sections of every kind ([extra], [:marker], [extra:marker]).
SDISTS: dict[str, tuple[str, ...]] = {
    "flash-attn": ("2.6.3", "2.7.4.post1", "2.8.3", "2.8.3.post2"),
    "sglang": ("0.4.0", "0.5.9"),
    "vllm": ("0.6.0", "0.9.2"),
    "transformers": ("4.46.1",),
    "flashinfer-python": ("0.2.0.post1", "0.4.1"),
}
# (project, version, dist-info members) of small wheels (and entry_points.txt of big ones).
WHEEL_MEMBERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("flash-attn-4", "4.0.0b36", ("RECORD", "WHEEL")),
    ("quack-kernels", "0.6.5", ("RECORD", "WHEEL")),
    ("nvidia-cutlass-dsl", "4.8.1", ("RECORD", "WHEEL")),
    ("torch-c-dlpack-ext", "0.1.5", ("WHEEL",)),
    ("apache-tvm-ffi", "0.1.15.post2", ("WHEEL", "entry_points.txt")),
    ("transformers", "5.25.0", ("entry_points.txt", "WHEEL")),
    ("vllm", "0.34.0", ("entry_points.txt",)),
    ("sglang", "0.5.23", ("entry_points.txt", "WHEEL")),
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _release_files(index: pypi_index.Index, name: str) -> dict[str, list[pypi_index.IndexFile]]:
    out: dict[str, list[pypi_index.IndexFile]] = {}
    for f in index.files(name):
        out.setdefault(f.version, []).append(f)
    return out


def _wheel_for(files: Sequence[pypi_index.IndexFile], name: str) -> pypi_index.IndexFile | None:
    art = pypi_index.pick_artifact(files, name)
    if art is None and all(f.yanked for f in files):  # a yanked-only release (flash-attn-4 0.0.1) is kept too
        art = pypi_index.pick_artifact([_unyanked(f) for f in files], name)
    return art


def _unyanked(f: pypi_index.IndexFile) -> pypi_index.IndexFile:
    return pypi_index.IndexFile(**{**f.__dict__, "yanked": False})


Job = Callable[[], list[tuple[str, pypi_index.IndexFile, str, bytes]]]


def plan(index: pypi_index.Index) -> list[Job]:
    jobs: list[Job] = []
    releases = {n: _release_files(index, n) for n in sorted(set(WHEEL_METADATA) | set(SDISTS))}
    for name, which in WHEEL_METADATA.items():
        versions = list(releases[name]) if which == ALL else list(which)
        for v in versions:
            art = _wheel_for(releases[name][v], name)
            if art is None:
                continue

            def job(
                art: pypi_index.IndexFile = art, name: str = name
            ) -> list[tuple[str, pypi_index.IndexFile, str, bytes]]:
                if art.is_wheel:
                    return [(f"{name}/{art.filename}.metadata", art, "METADATA", index.wheel_metadata(art))]
                got = index.sdist_members(art, lambda n: n.count("/") == 1 and n.endswith("/PKG-INFO"))
                return [(f"{name}/{art.filename}/{m.split('/', 1)[1]}", art, m, b) for m, b in got.items()]

            jobs.append(job)
    for name, versions in SDISTS.items():
        for v in versions:
            sdist = next(f for f in releases[name][v] if f.is_sdist)

            def sjob(
                sdist: pypi_index.IndexFile = sdist, name: str = name
            ) -> list[tuple[str, pypi_index.IndexFile, str, bytes]]:
                got = index.sdist_members(sdist, lambda n: n.endswith(("/PKG-INFO", ".egg-info/requires.txt")))
                return [(f"{name}/{sdist.filename}/{m.split('/', 1)[1]}", sdist, m, b) for m, b in got.items()]

            jobs.append(sjob)
    for name, v, members in WHEEL_MEMBERS:
        files = releases.get(name) or _release_files(index, name)
        wheel = _wheel_for(files[v], name)
        assert wheel is not None and wheel.is_wheel, (name, v)

        def mjob(
            wheel: pypi_index.IndexFile = wheel, name: str = name, members: tuple[str, ...] = members
        ) -> list[tuple[str, pypi_index.IndexFile, str, bytes]]:
            def pick(n: str) -> bool:
                return n.count("/") == 1 and n.split("/")[0].endswith(".dist-info") and n.split("/")[1] in members

            got = index.wheel_members(wheel, pick)
            return [(f"{name}/{wheel.filename}/{m}", wheel, m, b) for m, b in got.items()]

        jobs.append(mjob)
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=CORPUS)
    ap.add_argument("--cache", type=Path, default=None, help="cache folder (outside the repo)")
    ap.add_argument("--listing-max-age", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=pypi_index.TIMEOUT)
    ap.add_argument("--jobs", type=int, default=8)
    args = ap.parse_args(argv)
    index = pypi_index.Index(cache=args.cache, timeout=args.timeout, listing_max_age=args.listing_max_age)
    manifest_path = args.out / "MANIFEST.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    today = datetime.date.today().isoformat()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = [row for rows in pool.map(lambda j: j(), plan(index)) for row in rows]
    manifest: dict[str, dict[str, str]] = {}
    for rel, art, member, data in sorted(results, key=lambda r: r[0]):
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        sha = _sha(data)
        was = old.get(rel, {})
        manifest[rel] = {
            "url": art.url.split("#")[0],
            "artifact": art.filename,
            "artifact_sha256": art.sha256,
            "member": member,
            "sha256": sha,
            "fetched": was["fetched"] if was.get("sha256") == sha else today,
        }
    for stale in sorted(set(old) - set(manifest)):
        (args.out / stale).unlink(missing_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    size = sum((args.out / r).stat().st_size for r in manifest)
    print(f"{args.out}: {len(manifest)} files, {size / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
