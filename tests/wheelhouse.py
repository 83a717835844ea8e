"""A local wheel folder built at test time: fake wheels that carry real metadata, for pip's own resolver.

Each wheel holds one empty module and a dist-info whose METADATA is either copied from a real wheel
(tests/fixtures/dist-info) or written from the requirements given here; pip reads nothing else when it
resolves `--dry-run --no-index --find-links`. flash-attn is an sdist, as on PyPI, whose setup.py imports torch.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from fakeenv import FIXTURES


def _record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _escape(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name)


def wheel(
    where: Path,
    name: str,
    version: str,
    requires: Iterable[str] = (),
    *,
    metadata: str | None = None,
    extras: Iterable[str] = (),
    module: str | None = None,
) -> Path:
    """`<name>-<version>-py3-none-any.whl` in `where`; `metadata` (real METADATA text) wins over `requires`."""
    if metadata is None:
        metadata = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Provides-Extra: {e}\n" for e in extras)
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        )
    else:
        metadata = re.sub(r"(?m)^Version: .*$", f"Version: {version}", metadata, count=1)
    info = f"{_escape(name)}-{version}.dist-info"
    files = {
        f"{module or _escape(name).lower()}/__init__.py": b"",
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: fa-doctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = [_record_row(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    path = where / f"{_escape(name)}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path


def real(where: Path, fixture: str, version: str | None = None) -> Path:
    """A wheel with the METADATA of a published one (optionally under another version number)."""
    text = (FIXTURES / fixture / "METADATA").read_text()
    name = re.search(r"(?m)^Name: (.*)$", text)
    have = re.search(r"(?m)^Version: (.*)$", text)
    assert name and have
    return wheel(where, name.group(1).strip(), version or have.group(1).strip(), metadata=text)


def flash_attn_sdist(where: Path, version: str = "2.8.3") -> Path:
    """flash-attn as PyPI ships it: source only, with a setup.py that imports torch (so it needs the target's)."""
    base = f"flash_attn-{version}"
    setup = (
        "import torch  # flash-attn's setup.py imports torch at the top, as the real one does\n"
        "from setuptools import setup\n"
        f"setup(name='flash-attn', version='{version}', packages=[], install_requires=['torch', 'einops'])\n"
    )
    pkg_info = f"Metadata-Version: 2.1\nName: flash-attn\nVersion: {version}\n"
    path = where / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in ((f"{base}/setup.py", setup), (f"{base}/PKG-INFO", pkg_info)):
            data = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tf.addfile(entry, io.BytesIO(data))
    return path


CORPUS = Path(__file__).parent / "corpus" / "metadata"
# Released packages whose real METADATA (every version in the corpus) the wheel folder carries: what a remedy
# may install. torch is held by every remedy, so it stays a small fake with two plain dependencies.
CATALOG_PACKAGES = (
    "sglang",
    "sglang-kernel",
    "sgl-kernel",
    "flash-attn-4",
    "nvidia-cutlass-dsl",
    "nvidia-cutlass-dsl-libs-base",
    "nvidia-cutlass-dsl-libs-core",
    "nvidia-cutlass-dsl-libs-cu12",
    "nvidia-cutlass-dsl-libs-cu13",
    "quack-kernels",
    "apache-tvm-ffi",
    "torch-c-dlpack-ext",
)


def _header(text: str, key: str) -> str:
    m = re.search(rf"(?m)^{key}: (.*)$", text)
    assert m, key
    return m.group(1).strip()


def catalog_wheels(where: Path) -> dict[str, set[str]]:
    """A wheel for every released version of CATALOG_PACKAGES whose METADATA the corpus holds, byte for byte,
    plus SGLang's `+cu129` CUDA 12 builds of the sglang-kernel releases whose PyPI wheels are CUDA 13 builds.
    Returns name -> versions made."""
    from fa_doctor.catalog import ecosystem

    made: dict[str, set[str]] = {}
    for name in CATALOG_PACKAGES:
        for path in sorted((CORPUS / name).glob("*.whl.metadata")):
            text = path.read_text(encoding="utf-8")
            dist, version = _header(text, "Name"), _header(text, "Version")
            if version in made.get(name, set()):
                continue  # one wheel per version (several platform wheels share their metadata)
            wheel(where, dist, version, metadata=text)
            made.setdefault(name, set()).add(version)
            if name == "sglang-kernel" and ecosystem.sgl_kernel_cuda(version) == 13:
                wheel(where, dist, f"{version}+cu129", metadata=text)
    return made


def stubs_for_requirements(where: Path, provided: dict[str, set[str]]) -> int:
    """Plain wheels (no requirements of their own) for everything the real METADATA requires that the folder
    lacks, one per distinct version a requirement asks for, so pip's resolver can walk every release's closure
    (sglang's 139 requirements included) offline. Returns how many were made."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    wanted: dict[str, list[Requirement]] = {}
    for path in where.glob("*.whl"):
        with zipfile.ZipFile(path) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            text = zf.read(meta).decode()
        for line in re.findall(r"(?m)^Requires-Dist: (.*)$", text):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name = re.sub(r"[-_.]+", "-", req.name).lower()
            if name not in provided and name not in ("torch",):
                wanted.setdefault(name, []).append(req)
    made = 0
    for name, reqs in sorted(wanted.items()):
        have: set[str] = set()
        for req in reqs:
            bases = [s.version.rstrip(".*") for s in req.specifier] or ["1.0"]
            candidates = [*bases, *(f"{b}.post1" for b in bases), *(f"{b}9" for b in bases), "0.0.1", "99.0"]
            for text in candidates:
                try:
                    ok = req.specifier.contains(Version(text), prereleases=True)
                except InvalidVersion:
                    continue
                if ok:
                    if text not in have:
                        wheel(where, name, text, extras=sorted(req.extras))
                        have.add(text)
                        made += 1
                    break
    return made


def build(where: Path) -> Path:
    """The wheel folder the remedy tests resolve against."""
    where.mkdir(parents=True, exist_ok=True)
    # torch: the index's default build, local builds, and releases the servers pin (all fakes: torch is held).
    torch_deps = ("typing-extensions", "filelock")
    torch_builds = ("2.9.1", "2.11.0", "2.11.0+cu128", "2.11.0+cu130", "2.13.0", "2.13.0+cu126", "2.14.1")
    for version in (*torch_builds, "2.10.0+cu126"):
        wheel(where, "torch", version, torch_deps)
    for version in ("0.26.0", "0.29.1"):
        wheel(where, "torchvision", version, ["torch==2.11.0" if version == "0.26.0" else "torch==2.14.1"])
    made = catalog_wheels(where)
    for name, version, reqs in (
        ("typing-extensions", "4.13.2", ()),
        ("filelock", "3.16.1", ()),
        ("ninja", "1.11.1.4", ()),
        ("packaging", "24.2", ()),
        ("psutil", "7.0.0", ()),
        ("wheel", "0.45.1", ()),
        ("setuptools", "75.8.0", ()),
    ):
        wheel(where, name, version, reqs)
        made.setdefault(name, set()).add(version)
    stubs_for_requirements(where, {**made, "torch": set(), "torchvision": set()})
    flash_attn_sdist(where)
    return where
