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


def build(where: Path) -> Path:
    """The wheel folder the remedy tests resolve against."""
    where.mkdir(parents=True, exist_ok=True)
    # torch: the index's default build, a +cu128 local build, a newer release (what sglang-kernel 0.4.10 pins),
    # and CUDA builds of releases a CPU torch may need.
    torch_deps = ("typing-extensions", "filelock")
    for version in ("2.11.0", "2.11.0+cu128", "2.11.0+cu130", "2.14.1", "2.13.0+cu126", "2.10.0+cu126"):
        wheel(where, "torch", version, torch_deps)
    for version in ("0.26.0", "0.29.1"):
        wheel(where, "torchvision", version, ["torch==2.11.0" if version == "0.26.0" else "torch==2.14.1"])
    # FA4 and its CuTe DSL runtime, with their published requirements.
    real(where, "flash_attn_4-4.0.0b36.dist-info")
    real(where, "flash_attn_4-4.0.0b36.dist-info", "4.0.0b37")
    for version in ("4.8.1", "4.8.0"):
        for fixture in (
            "nvidia_cutlass_dsl-4.8.1.dist-info",
            "nvidia_cutlass_dsl_libs_base-4.8.1.dist-info",
            "nvidia_cutlass_dsl_libs_core-4.8.1.dist-info",
            "nvidia_cutlass_dsl_libs_cu12-4.8.1.dist-info",
            "nvidia_cutlass_dsl_libs_cu13-4.8.1.dist-info",
        ):
            text = (FIXTURES / fixture / "METADATA").read_text().replace("==4.8.1", f"=={version}")
            name = re.search(r"(?m)^Name: (.*)$", text)
            assert name
            wheel(where, name.group(1).strip(), version, metadata=text)
    real(where, "quack_kernels-0.6.5.dist-info")
    real(where, "apache_tvm_ffi-0.1.15.post2.dist-info")
    real(where, "apache_tvm_ffi-0.1.15.post2.dist-info", "0.1.11")
    real(where, "torch_c_dlpack_ext-0.1.5.dist-info")
    # sglang-kernel 0.4.10 as published (torch==2.14.1), its CUDA 12 build, and a release built for torch 2.11.
    real(where, "sglang_kernel-0.4.10.dist-info")
    real(where, "sglang_kernel-0.4.10.dist-info", "0.4.10+cu129")
    kernel = (FIXTURES / "sglang_kernel-0.4.10.dist-info" / "METADATA").read_text()
    for version in ("0.4.9", "0.4.9+cu129"):
        wheel(where, "sglang-kernel", version, metadata=kernel.replace("torch==2.14.1", "torch==2.11.0"))
    # Plain dependencies.
    for name, version, reqs in (
        ("typing-extensions", "4.13.2", ()),
        ("filelock", "3.16.1", ()),
        ("einops", "0.8.1", ()),
        ("cuda-bindings", "13.0.3", ()),
        ("protobuf", "5.29.3", ()),
        ("orjson", "3.10.15", ()),
        ("ninja", "1.11.1.4", ()),
        ("packaging", "24.2", ()),
        ("psutil", "7.0.0", ()),
        ("wheel", "0.45.1", ()),
        ("setuptools", "75.8.0", ()),
    ):
        wheel(where, name, version, reqs)
    flash_attn_sdist(where)
    return where
