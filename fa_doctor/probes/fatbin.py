"""Which GPU architectures a compiled extension carries, read from its `.nv_fatbin` section.

The section is a run of containers (magic 0xBA55ED50, u16 version, u16 header size, u64 size of what follows),
each a run of entries with a header (kind u16 @0: 1 = PTX, 2 = cubin; header size u32 @4; payload size u64 @8;
arch u32 @28; flags u64 @40) and a payload. Only the headers are read; payloads are skipped by offset, so a
1 GB section costs a few thousand small reads (docs/reference: fa-packages.md section 6).
"""

from __future__ import annotations

import os
import struct
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fa_doctor.probes.elf import ElfInfo, open_regular

FATBIN_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes
KIND_PTX, KIND_CUBIN = 1, 2
_CUBIN_KINDS = frozenset({2, 4, 0x10})  # ELF, old cubin, the ELF variant cuobjdump also lists
# nvcc's compression: 0x1000/0x2000 (LZ4-style, CUDA 11-12), 0x8000 (zstd, --compress-mode).
COMPRESSED = 0x1000 | 0x2000 | 0x8000
# Entry flags of arch-specific (sm_90a, compute_100a) and family-specific (sm_100f, compute_100f) targets. Checked
# against nvcc 13.0 and `cuobjdump -lelf -lptx` (2026-12-02, on an H200 machine): every plain, a and f target of
# sm_80..sm_121, compressed or not, and all 2789 cubins of torch 2.11+cu130's libtorch_cuda.so matched.
ARCH_SPECIFIC = 0x100000
FAMILY_SPECIFIC = 0x200000

MAX_ENTRIES = 200_000
MAX_ENTRY_HEADER = 4096
_MAX_PADDING = 4096  # zero bytes tolerated between two containers


@dataclass(frozen=True, slots=True)
class Arch:
    """One compilation target, as nvcc spells it: sm_90a (cubin) or compute_80 (PTX)."""

    ptx: bool
    number: int  # 90, 100, 121
    suffix: str = ""  # "", "a" (arch-specific) or "f" (family-specific)

    @property
    def name(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.number}{self.suffix}"

    @property
    def capability(self) -> tuple[int, int]:
        return self.number // 10, self.number % 10

    def runs_on(self, capability: tuple[int, int]) -> bool:
        """Whether a GPU of `capability` can run this target (PTX through the driver's JIT).

        A plain or family-specific (`f`) cubin runs on its major with an equal or newer minor; an arch-specific
        (`a`) target only on exactly its capability. Plain PTX JIT-compiles for any GPU at least as new; `a`/`f`
        PTX keeps the same limits as its cubin.
        """
        own = self.capability
        if self.suffix == "a":
            return capability == own
        if self.ptx and not self.suffix:
            return capability >= own
        return capability[0] == own[0] and capability[1] >= own[1]


@dataclass(frozen=True, slots=True)
class FatbinInfo:
    path: str
    present: bool  # has an .nv_fatbin section at all
    cubins: Mapping[str, int] = field(default_factory=dict)  # "sm_90a" -> number of entries
    ptx: Mapping[str, int] = field(default_factory=dict)  # "compute_80" -> number of entries
    archs: tuple[Arch, ...] = ()
    containers: int = 0
    entries: int = 0
    compressed: int = 0  # entries whose payload is compressed
    section_size: int = 0
    error: str | None = None  # the walk stopped early: what was found so far is still listed

    def __post_init__(self) -> None:
        object.__setattr__(self, "cubins", MappingProxyType(dict(self.cubins)))
        object.__setattr__(self, "ptx", MappingProxyType(dict(self.ptx)))

    def serves(self, capability: tuple[int, int]) -> tuple[list[Arch], list[Arch]]:
        """(cubins that run on `capability`, PTX that can be JIT-compiled for it)."""
        cubins = [a for a in self.archs if not a.ptx and a.runs_on(capability)]
        ptx = [a for a in self.archs if a.ptx and a.runs_on(capability)]
        return cubins, ptx


def arch_of(kind: int, number: int, flags: int) -> Arch:
    suffix = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY_SPECIFIC else ""
    return Arch(kind == KIND_PTX, number, suffix)


class _Walk:
    def __init__(self, fd: int, start: int, end: int, deadline: float | None) -> None:
        self.fd, self.end, self.deadline = fd, end, deadline
        self.pos = self.start = start
        self.counts: Counter[Arch] = Counter()
        self.containers = self.entries = self.compressed = 0

    def read(self, offset: int, length: int) -> bytes:
        if offset + length > self.end:
            raise ValueError(f"a header at section offset {offset - self.start} runs past the section's end")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise ValueError("short read (the file is shorter than its section table says)")
        return data

    def run(self, base: int) -> None:
        padding = 0
        while self.pos + _CONTAINER.size <= self.end:
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise ValueError("the time budget ran out")
            magic, _, header_size, size = _CONTAINER.unpack(self.read(self.pos, _CONTAINER.size))
            if magic == 0:  # zero padding between containers
                padding += 8
                if padding > _MAX_PADDING:
                    raise ValueError(f"{padding} bytes of zeros at section offset {self.pos - base}")
                self.pos += 8
                continue
            if magic != FATBIN_MAGIC:
                raise ValueError(f"no fatbin magic at section offset {self.pos - base} (found {magic:#010x})")
            padding = 0
            first = self.pos + header_size
            stop = first + size
            if header_size < _CONTAINER.size or stop > self.end:
                raise ValueError(
                    f"the container at section offset {self.pos - base} claims {size} bytes, past the section's end"
                )
            self.containers += 1
            self.entries_in(first, stop)
            self.pos = stop

    def entries_in(self, pos: int, stop: int) -> None:
        while pos + _ENTRY.size <= stop:
            fields = _ENTRY.unpack(self.read(pos, _ENTRY.size))
            kind, header_size, payload, arch, flags = fields[0], fields[2], fields[3], fields[8], fields[11]
            if not _ENTRY.size <= header_size <= MAX_ENTRY_HEADER or pos + header_size + payload > stop:
                raise ValueError(f"a malformed entry header (kind {kind}, header {header_size}, payload {payload})")
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                raise ValueError(f"more than {MAX_ENTRIES} entries")
            if kind == KIND_PTX or kind in _CUBIN_KINDS:
                self.counts[arch_of(KIND_PTX if kind == KIND_PTX else KIND_CUBIN, arch, flags)] += 1
            if flags & COMPRESSED:
                self.compressed += 1
            pos += header_size + payload


def read_fatbin(elf: ElfInfo, *, deadline: float | None = None) -> FatbinInfo:
    """The architectures in `elf`'s `.nv_fatbin`; never raises (a broken walk keeps what it found, with `error`)."""
    sec = elf.section(".nv_fatbin")
    if elf.error is not None:
        return FatbinInfo(elf.path, False, error=elf.error)
    if sec is None:
        return FatbinInfo(elf.path, False)
    error: str | None = None
    walk: _Walk | None = None
    try:
        fd = open_regular(elf.path)
    except OSError as exc:
        return FatbinInfo(elf.path, True, section_size=sec.size, error=f"cannot open it ({exc.strerror or exc})")
    try:
        end = min(sec.offset + sec.size, os.fstat(fd).st_size)
        walk = _Walk(fd, sec.offset, end, deadline)
        walk.run(sec.offset)
    except (ValueError, OSError, struct.error, OverflowError) as exc:
        error = str(exc)
    finally:
        os.close(fd)
    counts = walk.counts if walk else Counter()
    archs = tuple(sorted(counts, key=lambda a: (a.ptx, a.number, a.suffix)))
    return FatbinInfo(
        path=elf.path,
        present=True,
        cubins={a.name: counts[a] for a in archs if not a.ptx},
        ptx={a.name: counts[a] for a in archs if a.ptx},
        archs=archs,
        containers=walk.containers if walk else 0,
        entries=walk.entries if walk else 0,
        compressed=walk.compressed if walk else 0,
        section_size=sec.size,
        error=error,
    )
