"""The ELF reader on real gcc-built objects, and on garbage: a clean error value, never an exception."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from binfake import compile_so, extension, library, need_toolchain
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.probes.elf import exported, read_elf


@pytest.fixture(autouse=True)
def toolchain() -> None:
    need_toolchain()


def test_needed_runpath_and_undefined(tmp_path: Path) -> None:
    dep = library(tmp_path / "deps", "libcudart.so.12", ["cudaMalloc"])
    so = extension(
        tmp_path,
        "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so",
        calls=["cudaMalloc", "_ZN3c104fakeEv"],
        libs=[dep],
        flags=["-Wl,-rpath,$ORIGIN/deps", "-Wl,--enable-new-dtags"],
    )
    info = read_elf(str(so))
    assert info.error is None
    assert info.needed == ("libcudart.so.12",)
    assert info.runpath == ("$ORIGIN/deps",)
    assert {s.name for s in info.undefined} >= {"cudaMalloc", "_ZN3c104fakeEv"}
    assert info.section(".dynsym") is not None


def test_symbol_versions_needed_and_defined(tmp_path: Path) -> None:
    newc = library(tmp_path / "deps", "libnewc.so.6", ["gnu_new_thing"], version="GLIBC_2.99")
    assert read_elf(str(newc)).version_defs == ("GLIBC_2.99",)
    so = extension(tmp_path, "ext.so", calls=["gnu_new_thing"], libs=[newc])
    info = read_elf(str(so))
    assert "GLIBC_2.99" in info.needs("GLIBC_")
    assert ("libnewc.so.6", ("GLIBC_2.99",)) in info.version_needs
    (sym,) = [s for s in info.undefined if s.name == "gnu_new_thing"]
    assert sym.version == "GLIBC_2.99" and not sym.weak


def test_weak_undefined_symbols_are_marked(tmp_path: Path) -> None:
    source = "extern void maybe(void) __attribute__((weak));\nvoid f(void) { if (maybe) maybe(); }\n"
    info = read_elf(str(compile_so(tmp_path, "weak.so", source)))
    (sym,) = [s for s in info.undefined if s.name == "maybe"]
    assert sym.weak


@pytest.mark.parametrize("style", ["gnu", "sysv", "both"])
def test_exports_through_either_hash_table(tmp_path: Path, style: str) -> None:
    names = [f"_ZN3c104fn{i}Ev" for i in range(300)]
    src = "".join(f"void {n}(void) {{}}\n" for n in names) + "extern void _ZN2at7missingEv(void);\n"
    src += "void g(void) { _ZN2at7missingEv(); }\n"
    lib = compile_so(tmp_path, "libc10.so", src, flags=[f"-Wl,--hash-style={style}"])
    wanted = [*names[::7], "_ZN2at7missingEv", "_ZN3c104fn1Ev_nope", "_ZN3c10", ""]
    result = exported(str(lib), wanted)
    assert result.error is None
    assert result.found == frozenset(names[::7])  # undefined and absent names are not exports


def test_exports_of_garbage_is_an_error_value(tmp_path: Path) -> None:
    bad = tmp_path / "libtorch.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 10)
    result = exported(str(bad), ["x"])
    assert result.found == frozenset() and result.error


def elf_header(**fields: int) -> bytes:
    ident = b"\x7fELF" + bytes([fields.get("cls", 2), fields.get("data", 1), 1]) + b"\0" * 9
    return ident + struct.pack(
        "<HHIQQQIHHHHHH",
        3,
        62,
        1,
        0,
        0,
        fields.get("shoff", 64),
        0,
        64,
        0,
        0,
        fields.get("shentsize", 64),
        fields.get("shnum", 1),
        fields.get("shstrndx", 0),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "too short"),
        (b"not an elf at all" * 8, "no \\x7fELF magic"),
        (elf_header(cls=1), "not a 64-bit little-endian"),
        (elf_header(data=2), "not a 64-bit little-endian"),
        (elf_header(shoff=0), "no section headers"),
        (elf_header(shentsize=40), "odd section header size"),
        (elf_header(shoff=1 << 40), "outside the file"),
        (elf_header(shnum=0xFFFF, shoff=1 << 20), "outside the file"),
        (elf_header(), "outside the file"),  # one section header promised, none there
    ],
    ids=["empty", "text", "32-bit", "big-endian", "no-sections", "shentsize", "far-offset", "many", "truncated"],
)
def test_garbage_gives_an_error_value(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.so"
    path.write_bytes(content)
    info = read_elf(str(path))
    assert info.error is not None and message in info.error, info.error


def test_missing_file_directory_and_fifo(tmp_path: Path) -> None:
    assert "cannot open" in (read_elf(str(tmp_path / "nope.so")).error or "")
    assert read_elf(str(tmp_path)).error
    fifo = tmp_path / "libtorch.so"
    os.mkfifo(fifo)  # would block a plain open() forever
    assert "not a regular file" in (read_elf(str(fifo)).error or "")
    assert "not a regular file" in (exported(str(fifo), ["x"]).error or "")
    assert read_elf("/dev/zero").error


@given(st.integers(min_value=0, max_value=4095), st.binary(min_size=1, max_size=64))
@settings(max_examples=300, deadline=None)
def test_corrupted_tables_never_raise(tmp_path_factory: pytest.TempPathFactory, offset: int, patch: bytes) -> None:
    """Overwrite bytes anywhere in the headers and tables of a real extension: the reader still returns."""
    base = tmp_path_factory.getbasetemp() / "fuzz_elf"
    so = base / "ext.so"
    if not so.exists():
        dep = library(base / "deps", "libnewc.so.6", ["gnu_new_thing"], version="GLIBC_2.99")
        extension(base, "ext.so", calls=["gnu_new_thing", "_ZN3c104fakeEv"], libs=[dep])
    data = bytearray(so.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    where = offset if offset < 2048 else shoff + (offset - 2048) % max(1, len(data) - shoff)
    data[where : where + len(patch)] = patch
    target = base / f"m{os.getpid()}.so"
    target.write_bytes(bytes(data))
    info = read_elf(str(target))
    assert info.error is None or isinstance(info.error, str)
    assert isinstance(exported(str(target), ["_ZN3c104fakeEv", "gnu_new_thing"]).found, frozenset)
