"""Real shared objects built at test time: gcc for the code, objcopy for a crafted `.nv_fatbin` section.

Nothing binary is committed. The fatbin layout is the one nvcc 13.0 writes (checked with cuobjdump): containers
of entries, each a 64-byte header (kind, header size, payload size, arch, flags) and a payload.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fa_doctor.probes.fatbin import ARCH_SPECIFIC, FAMILY_SPECIFIC, FATBIN_MAGIC

ZSTD = 0x8000
_BASE_FLAGS = 0x11  # 64-bit, Linux: on every entry nvcc writes


def need_toolchain() -> None:
    for tool in ("gcc", "objcopy"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@dataclass(frozen=True)
class Entry:
    arch: str  # "sm_90a", "compute_80", "sm_100f"
    compressed: bool = False
    payload: int = 64  # bytes of payload (zeros, or a zstd frame header when compressed)

    def encode(self) -> bytes:
        kind = 1 if self.arch.startswith("compute_") else 2
        digits = self.arch.split("_", 1)[1]
        suffix = digits[-1] if digits[-1] in "af" else ""
        number = int(digits.rstrip("af"))
        flags = _BASE_FLAGS | (ZSTD if self.compressed else 0)
        flags |= ARCH_SPECIFIC if suffix == "a" else FAMILY_SPECIFIC if suffix == "f" else 0
        body = (b"\x28\xb5\x2f\xfd" if self.compressed else b"\x7fELF").ljust(self.payload, b"\0")
        header = struct.pack(
            "<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(body), 0, 0, 8, 1, number, 0, 0, flags, 0, self.payload
        )
        return header + body


def fatbin(*containers: Sequence[Entry], padding: int = 0) -> bytes:
    """One or more containers, optionally separated by zero padding (as linkers align them)."""
    out = b""
    for entries in containers:
        body = b"".join(e.encode() for e in entries)
        out += struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body + b"\0" * padding
    return out


def compile_so(
    where: Path,
    name: str,
    source: str,
    *,
    libs: Iterable[Path] = (),
    flags: Iterable[str] = (),
    version_script: str | None = None,
) -> Path:
    """`gcc -shared -fPIC` of `source`; `libs` are other built .so files to link against (by path)."""
    where.mkdir(parents=True, exist_ok=True)
    src = where / f"{name}.c"
    src.write_text(source)
    out = where / name
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), *flags]
    if version_script is not None:
        script = where / f"{name}.map"
        script.write_text(version_script)
        cmd.append(f"-Wl,--version-script={script}")
    for lib in libs:
        cmd += [f"-L{lib.parent}", f"-l:{lib.name}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    return out


def add_fatbin(so: Path, data: bytes) -> Path:
    blob = so.with_suffix(".fatbin")
    blob.write_bytes(data)
    subprocess.run(
        ["objcopy", "--add-section", f".nv_fatbin={blob}", str(so)], check=True, capture_output=True, timeout=60
    )
    return so


def extension(
    where: Path,
    name: str,
    *,
    entries: Sequence[Entry] = (),
    calls: Iterable[str] = (),
    libs: Iterable[Path] = (),
    flags: Iterable[str] = (),
) -> Path:
    """An extension-like .so that calls `calls` (undefined C-linkage names, mangled or not) and carries a fatbin."""
    names = list(calls)
    decls = "".join(f"extern void {n}(void);\n" for n in names)
    body = "".join(f"    {n}();\n" for n in names)
    so = compile_so(where, name, f"{decls}void PyInit_ext(void) {{\n{body}}}\n", libs=libs, flags=flags)
    return add_fatbin(so, fatbin(entries)) if entries else so


def library(where: Path, name: str, defines: Iterable[str], *, version: str | None = None) -> Path:
    """A shared library defining `defines` (global functions), optionally all under one symbol version."""
    names = list(defines)
    source = "".join(f"void {n}(void) {{}}\n" for n in names)
    script = f"{version} {{ global: {'; '.join(names)}; local: *; }};\n" if version else None
    soname = [f"-Wl,-soname,{name}"]
    return compile_so(where, name, source, flags=soname, version_script=script)
