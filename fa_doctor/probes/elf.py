"""Just enough of an ELF64 little-endian shared object to predict an import error, read without loading it: only
headers and tables, each with os.pread under a size limit. Anything malformed becomes `error`, never an exception."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

T = TypeVar("T")

_MAGIC = b"\x7fELF"
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_DYN = struct.Struct("<qQ")
_VERNEED = struct.Struct("<HHIII")
_VERNAUX = struct.Struct("<IHHII")
_VERDEF = struct.Struct("<HHHHIII")
_VERDAUX = struct.Struct("<II")

SHT_DYNSYM, SHT_DYNAMIC, SHT_HASH = 11, 6, 5
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29

# Limits on what one file may make us read; real extensions and libtorch stay far below them.
MAX_SECTIONS = 1 << 16
MAX_TABLE = 64 << 20  # one table (.dynsym, .gnu.version, .gnu.hash)
MAX_STRTAB_WHOLE = 16 << 20  # a larger .dynstr is read name by name
MAX_NAME = 4096
MAX_UNDEFINED = 200_000
MAX_VERSIONS = 10_000
_CHUNK = 1 << 20
_Need = tuple[str, tuple[str, ...]]  # (library, versions) from .gnu.version_r


class ElfFormatError(Exception):
    """The file is not what it claims; becomes `error` at the boundary."""


def open_regular(path: str) -> int:
    """A read-only descriptor of a regular file; a FIFO or device named like a library must not block or stream."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return fd


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    version: str | None  # e.g. GLIBC_2.34 for a versioned undefined symbol
    weak: bool


@dataclass(frozen=True, slots=True)
class ElfInfo:
    path: str
    sections: tuple[Section, ...] = ()
    needed: tuple[str, ...] = ()  # DT_NEEDED, in order
    runpath: tuple[str, ...] = ()  # DT_RUNPATH (or DT_RPATH) entries, $ORIGIN unexpanded
    version_needs: tuple[_Need, ...] = ()
    version_defs: tuple[str, ...] = ()  # .gnu.version_d names (GLIBCXX_3.4.30 in libstdc++)
    undefined: tuple[Symbol, ...] = ()
    error: str | None = None  # not an ELF64 LE object, or unreadable: nothing else is meaningful

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def needs(self, prefix: str) -> list[str]:
        return sorted({v for _, versions in self.version_needs for v in versions if v.startswith(prefix)})


@dataclass(slots=True)
class _Reader:
    fd: int
    size: int
    deadline: float | None

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ElfFormatError(f"{what} lies outside the file (offset {offset}, {length} bytes)")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise ElfFormatError(f"{what}: short read")
        return data

    def check_size(self, sec: Section, what: str) -> None:
        if sec.size > MAX_TABLE:
            raise ElfFormatError(f"{what} is {sec.size} bytes, over the {MAX_TABLE >> 20} MB limit")

    def table(self, sec: Section, what: str) -> bytes:
        self.check_size(sec, what)
        return self.read(sec.offset, sec.size, what)

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ElfFormatError("the time budget for reading it ran out")


class _Strings:
    """A string table, read whole when small, else one name at a time."""

    def __init__(self, reader: _Reader, sec: Section, whole: bool = True) -> None:
        self.reader, self.sec = reader, sec
        small = whole and sec.size <= MAX_STRTAB_WHOLE
        self.blob = reader.read(sec.offset, sec.size, "the string table") if small else None

    def get(self, offset: int) -> str:
        if offset >= self.sec.size:
            raise ElfFormatError(f"a string offset ({offset}) is past its table")
        return self.raw(offset, MAX_NAME).split(b"\0", 1)[0].decode("utf-8", "replace")

    def raw(self, offset: int, length: int) -> bytes:
        if self.blob is not None:
            return self.blob[offset : offset + length]
        length = max(0, min(length, self.sec.size - offset))
        return self.reader.read(self.sec.offset + offset, length, "a name")


def _sections(r: _Reader) -> list[Section]:
    """The section table, after validating the identification bytes and the header."""
    if r.size < _EHDR.size:
        raise ElfFormatError("too short to be an ELF file")
    raw = r.read(0, _EHDR.size, "the ELF header")
    if raw[:4] != _MAGIC:
        raise ElfFormatError("not an ELF file (no \\x7fELF magic)")
    if raw[4] != 2 or raw[5] != 1:
        raise ElfFormatError("not a 64-bit little-endian ELF file")
    _, _, _, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx = _EHDR.unpack(raw)
    if shoff == 0:
        raise ElfFormatError("it has no section headers")
    if shentsize != _SHDR.size:
        raise ElfFormatError(f"odd section header size {shentsize}")
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the real values sit in section 0
        zero = _SHDR.unpack(r.read(shoff, _SHDR.size, "section header 0"))
        shnum = shnum or zero[5]
        shstrndx = zero[6] if shstrndx == 0xFFFF else shstrndx
    if not 0 < shnum <= MAX_SECTIONS:
        raise ElfFormatError(f"implausible section count {shnum}")
    rows = list(_SHDR.iter_unpack(r.read(shoff, shnum * _SHDR.size, "the section headers")))
    if shstrndx >= len(rows):
        raise ElfFormatError("the section-name table index is out of range")
    names_row = rows[shstrndx]
    names = _Strings(r, Section(".shstrtab", names_row[1], names_row[4], min(names_row[5], MAX_TABLE), 0))
    return [Section(names.get(row[0]) if row[0] else "", row[1], row[4], row[5], row[6]) for row in rows]


def _linked_strings(r: _Reader, secs: list[Section], sec: Section, whole: bool = True) -> _Strings:
    if not 0 < sec.link < len(secs):
        raise ElfFormatError(f"{sec.name or 'a table'} links to no string table")
    return _Strings(r, secs[sec.link], whole)


def _dynamic(r: _Reader, secs: list[Section], dyn: Section) -> tuple[list[str], list[str]]:
    raw = r.read(dyn.offset, min(dyn.size, 1 << 20), "the dynamic section")
    strings = _linked_strings(r, secs, dyn)
    needed: list[str] = []
    runpath: list[str] = []
    for tag, value in _DYN.iter_unpack(raw[: len(raw) - len(raw) % _DYN.size]):
        if tag == 0:
            break
        if tag == DT_NEEDED:
            needed.append(strings.get(value))
        elif tag in (DT_RUNPATH, DT_RPATH):
            runpath += [p for p in strings.get(value).split(":") if p]
    return needed, runpath


def _chain(raw: bytes, pos: int, fmt: struct.Struct, limit: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(offset, fields) of each record of a linked list in `raw`, its last field the offset to the next (0 ends it)."""
    for _ in range(limit):
        if pos + fmt.size > len(raw):
            return
        fields = fmt.unpack_from(raw, pos)
        yield pos, fields
        if fields[-1] == 0:
            return
        pos += fields[-1]


def _version_needs(r: _Reader, secs: list[Section], sec: Section) -> tuple[list[_Need], dict[int, str]]:
    raw = r.table(sec, ".gnu.version_r")
    strings = _linked_strings(r, secs, sec)
    out: list[_Need] = []
    by_index: dict[int, str] = {}
    for pos, (_, cnt, file_off, aux, _) in _chain(raw, 0, _VERNEED, MAX_VERSIONS):
        versions: list[str] = []
        for _, (_, _, other, name_off, _) in _chain(raw, pos + aux, _VERNAUX, min(cnt, MAX_VERSIONS)):
            versions.append(strings.get(name_off))
            by_index[other & 0x7FFF] = versions[-1]
        out.append((strings.get(file_off), tuple(versions)))
    return out, by_index


def _version_defs(r: _Reader, secs: list[Section], sec: Section) -> list[str]:
    raw = r.table(sec, ".gnu.version_d")
    strings = _linked_strings(r, secs, sec)
    return [
        strings.get(_VERDAUX.unpack_from(raw, pos + aux)[0])
        for pos, (_, flags, _, cnt, _, aux, _) in _chain(raw, 0, _VERDEF, MAX_VERSIONS)
        if cnt and pos + aux + _VERDAUX.size <= len(raw) and not flags & 1  # VER_FLG_BASE names the file itself
    ]


def _undefined(r: _Reader, secs: list[Section], dynsym: Section, versions: dict[int, str]) -> list[Symbol]:
    r.check_size(dynsym, ".dynsym")
    strings = _linked_strings(r, secs, dynsym)
    versym_sec = next((s for s in secs if s.type == SHT_GNU_VERSYM), None)
    versym = r.table(versym_sec, ".gnu.version") if versym_sec and versions else b""
    count, per_chunk = dynsym.size // _SYM.size, _CHUNK // _SYM.size
    found: list[tuple[int, str | None, bool]] = []  # (name offset, version, weak); names are read once all are counted
    for start in range(0, count, per_chunk):
        r.check_time()
        raw = r.read(dynsym.offset + start * _SYM.size, min(per_chunk, count - start) * _SYM.size, ".dynsym")
        for i, (name, info, _, shndx, _, _) in enumerate(_SYM.iter_unpack(raw), start):
            if shndx == 0 and name and i:
                tag = versym[2 * i : 2 * i + 2]
                version = versions.get(int.from_bytes(tag, "little") & 0x7FFF) if len(tag) == 2 else None
                found.append((name, version, info >> 4 == 2))  # STB_WEAK
                if len(found) > MAX_UNDEFINED:
                    raise ElfFormatError(f"more than {MAX_UNDEFINED} undefined symbols")
    return [Symbol(strings.get(name_off), version, weak) for name_off, version, weak in found]


@contextlib.contextmanager
def _opened(path: str, deadline: float | None) -> Iterator[tuple[_Reader, list[Section]]]:
    """(reader, sections) of `path`; every failure, the file's or the reading's, is an ElfFormatError."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        raise ElfFormatError(f"cannot open it ({exc.strerror or exc})") from None
    try:
        r = _Reader(fd, os.fstat(fd).st_size, deadline)
        yield r, _sections(r)
    except (OSError, ValueError, IndexError, struct.error, MemoryError, OverflowError) as exc:
        raise ElfFormatError(f"unreadable: {type(exc).__name__}: {exc}") from None
    finally:
        os.close(fd)


def read_elf(path: str, *, symbols: bool = True, deadline: float | None = None) -> ElfInfo:
    """Section table, DT_NEEDED/RUNPATH, needed and defined versions and undefined dynamic symbols of `path`."""
    try:
        with _opened(path, deadline) as (r, secs):

            def step(kind: int, read: Callable[[_Reader, list[Section], Section], T]) -> T | None:
                """A broken optional table is skipped, not a failed read: the rest is still worth reporting."""
                sec = next((s for s in secs if s.type == kind), None)
                try:
                    return None if sec is None else read(r, secs, sec)
                except ElfFormatError:
                    return None

            needed, runpath = step(SHT_DYNAMIC, _dynamic) or ([], [])
            needs, by_index = step(SHT_GNU_VERNEED, _version_needs) or ([], {})
            defs = step(SHT_GNU_VERDEF, _version_defs) or []
            undefined = (step(SHT_DYNSYM, partial(_undefined, versions=by_index)) if symbols else None) or []
            found = (tuple(needed), tuple(runpath), tuple(needs), tuple(defs), tuple(undefined))
            return ElfInfo(path, tuple(secs), *found)
    except ElfFormatError as exc:
        return ElfInfo(path, error=str(exc))


@dataclass(frozen=True, slots=True)
class Exports:
    path: str
    found: frozenset[str]
    error: str | None = None


def _gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def _sysv_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


class _Lookup:
    """Name -> defined? through the library's own hash table, as the dynamic linker does: a few small reads."""

    def __init__(self, r: _Reader, secs: list[Section], dynsym: Section) -> None:
        self.r, self.dynsym, self.count = r, dynsym, dynsym.size // _SYM.size
        self.strings = _linked_strings(r, secs, dynsym, whole=False)  # a few names are read, not megabytes
        table = next((s for kind in (SHT_GNU_HASH, SHT_HASH) for s in secs if s.type == kind), None)
        self.kind = None if table is None else table.type
        self.table = r.table(table, "the symbol hash table") if table is not None else b""

    def _defined_as(self, index: int, name: bytes) -> bool:
        if not 0 < index < self.count:
            return False
        st_name, _, _, shndx, _, _ = _SYM.unpack(
            self.r.read(self.dynsym.offset + index * _SYM.size, _SYM.size, "a symbol")
        )
        return shndx != 0 and self.strings.raw(st_name, len(name) + 1) == name + b"\0"

    def defined(self, name: bytes) -> bool:
        t = self.table
        if self.kind == SHT_GNU_HASH:
            nbuckets, symoffset, bloom_size, _ = struct.unpack_from("<IIII", t, 0)
            if nbuckets == 0:
                return False
            base = 16 + bloom_size * 8
            h = _gnu_hash(name)
            (i,) = struct.unpack_from("<I", t, base + 4 * (h % nbuckets))
            for _ in range(self.count):
                if i < symoffset or i >= self.count:
                    return False
                (ch,) = struct.unpack_from("<I", t, base + 4 * nbuckets + 4 * (i - symoffset))
                if (ch | 1) == (h | 1) and self._defined_as(i, name):
                    return True
                if ch & 1:
                    return False
                i += 1
            return False
        if self.kind == SHT_HASH:
            nbucket, nchain = struct.unpack_from("<II", t, 0)
            if nbucket == 0:
                return False
            (i,) = struct.unpack_from("<I", t, 8 + 4 * (_sysv_hash(name) % nbucket))
            for _ in range(min(nchain, self.count)):
                if i == 0 or i >= nchain:
                    return False
                if self._defined_as(i, name):
                    return True
                (i,) = struct.unpack_from("<I", t, 8 + 4 * nbucket + 4 * i)
            return False
        raise ElfFormatError("it has no symbol hash table")


def exported(path: str, names: Iterable[str], *, deadline: float | None = None) -> Exports:
    """Which of `names` `path` defines; an unreadable file gives `error` and an empty set."""
    try:
        with _opened(path, deadline) as (r, secs):
            dynsym = next((s for s in secs if s.type == SHT_DYNSYM), None)
            if dynsym is None:
                return Exports(path, frozenset(), "it has no dynamic symbol table")
            lookup = _Lookup(r, secs, dynsym)
            found = set()
            for name in sorted(set(names)):
                r.check_time()
                if lookup.defined(name.encode("utf-8", "surrogateescape")):
                    found.add(name)
            return Exports(path, frozenset(found))
    except ElfFormatError as exc:
        return Exports(path, frozenset(), str(exc))
