"""Which GPU architectures a compiled extension carries, read from its `.nv_fatbin` section: only the container and
entry headers, payloads skipped by offset (layout: docs/internals.md, "Fatbin")."""

from __future__ import annotations

import os
import struct
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from fa_doctor.probes.elf import ElfInfo, open_regular

FATBIN_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes
KIND_PTX = 1
_CUBIN_KINDS = frozenset({2, 4, 0x10})  # ELF, old cubin, the ELF variant cuobjdump also lists
COMPRESSED = 0x1000 | 0x2000 | 0x8000  # nvcc's LZ4-style (CUDA 11-12) and zstd (--compress-mode)
# Entry flags of arch-specific (sm_90a) and family-specific (sm_100f) targets, checked against nvcc 13.0.
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
        """Whether a GPU of `capability` runs this target: `a` only on its own capability, plain PTX (JIT) on any
        newer one, plain and `f` on its major with an equal or newer minor."""
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

    def serves(self, capability: tuple[int, int]) -> tuple[list[Arch], list[Arch]]:
        """(cubins that run on `capability`, PTX that can be JIT-compiled for it)."""
        cubins = [a for a in self.archs if not a.ptx and a.runs_on(capability)]
        return cubins, [a for a in self.archs if a.ptx and a.runs_on(capability)]


def read_fatbin(elf: ElfInfo, *, deadline: float | None = None) -> FatbinInfo:
    """The architectures in `elf`'s `.nv_fatbin`; never raises (a broken walk keeps what it found, with `error`)."""
    sec = elf.section(".nv_fatbin")
    if elf.error is not None or sec is None:
        return FatbinInfo(elf.path, False, error=elf.error)
    try:
        fd = open_regular(elf.path)
    except OSError as exc:
        return FatbinInfo(elf.path, True, section_size=sec.size, error=f"cannot open it ({exc.strerror or exc})")
    start, error = sec.offset, None
    counts: Counter[Arch] = Counter()
    containers = entries = compressed = 0

    def read(offset: int, length: int) -> bytes:
        if offset + length > end:
            raise ValueError(f"a header at section offset {offset - start} runs past the section's end")
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise ValueError("short read (the file is shorter than its section table says)")
        return data

    try:
        end = min(start + sec.size, os.fstat(fd).st_size)
        pos, padding = start, 0
        while pos + _CONTAINER.size <= end:
            if deadline is not None and time.monotonic() > deadline:
                raise ValueError("the time budget ran out")
            magic, _, header_size, size = _CONTAINER.unpack(read(pos, _CONTAINER.size))
            if magic == 0:  # zero padding between containers
                padding += 8
                if padding > _MAX_PADDING:
                    raise ValueError(f"{padding} bytes of zeros at section offset {pos - start}")
                pos += 8
                continue
            if magic != FATBIN_MAGIC:
                raise ValueError(f"no fatbin magic at section offset {pos - start} (found {magic:#010x})")
            padding, stop = 0, pos + header_size + size
            if header_size < _CONTAINER.size or stop > end:
                raise ValueError(
                    f"the container at section offset {pos - start} claims {size} bytes, past the section's end"
                )
            containers += 1
            pos += header_size
            while pos + _ENTRY.size <= stop:
                fields = _ENTRY.unpack(read(pos, _ENTRY.size))
                kind, header_size, payload, arch, flags = fields[0], fields[2], fields[3], fields[8], fields[11]
                if not _ENTRY.size <= header_size <= MAX_ENTRY_HEADER or pos + header_size + payload > stop:
                    raise ValueError(f"a malformed entry header (kind {kind}, header {header_size}, payload {payload})")
                entries += 1
                if entries > MAX_ENTRIES:
                    raise ValueError(f"more than {MAX_ENTRIES} entries")
                if kind == KIND_PTX or kind in _CUBIN_KINDS:
                    suffix = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY_SPECIFIC else ""
                    counts[Arch(kind == KIND_PTX, arch, suffix)] += 1
                compressed += bool(flags & COMPRESSED)
                pos += header_size + payload
            pos = stop
    except (ValueError, OSError, struct.error, OverflowError) as exc:
        error = str(exc)
    finally:
        os.close(fd)
    archs = tuple(sorted(counts, key=lambda a: (a.ptx, a.number, a.suffix)))
    cubins, ptx = ({a.name: counts[a] for a in archs if a.ptx == kind} for kind in (False, True))
    return FatbinInfo(elf.path, True, cubins, ptx, archs, containers, entries, compressed, sec.size, error)
