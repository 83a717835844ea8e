"""The .nv_fatbin walk on real gcc-built objects with crafted sections, and the CUDA arch-matching rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from binfake import Entry, add_fatbin, compile_so, extension, fatbin, need_toolchain
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.probes.elf import read_elf
from fa_doctor.probes.fatbin import Arch, read_fatbin


@pytest.fixture(autouse=True)
def toolchain() -> None:
    need_toolchain()


def archs_of(path: Path) -> tuple[dict[str, int], dict[str, int], int]:
    fb = read_fatbin(read_elf(str(path)))
    assert fb.error is None, fb.error
    return dict(fb.cubins), dict(fb.ptx), fb.compressed


def test_cubins_and_ptx_compressed_or_not(tmp_path: Path) -> None:
    so = extension(
        tmp_path,
        "flash_ops.abi3.so",
        entries=[
            Entry("sm_80"),
            Entry("sm_86", compressed=True),
            Entry("sm_90a", compressed=True),
            Entry("sm_100f"),
            Entry("compute_90"),
            Entry("compute_120a", compressed=True),
        ],
    )
    cubins, ptx, compressed = archs_of(so)
    assert cubins == {"sm_80": 1, "sm_86": 1, "sm_90a": 1, "sm_100f": 1}
    assert ptx == {"compute_90": 1, "compute_120a": 1}
    assert compressed == 3


def test_many_containers_with_padding_are_counted(tmp_path: Path) -> None:
    so = compile_so(tmp_path, "ext.so", "int x;\n")
    add_fatbin(so, fatbin(*[[Entry("sm_80"), Entry("sm_90a")]] * 50, padding=8))
    cubins, ptx, _ = archs_of(so)
    assert cubins == {"sm_80": 50, "sm_90a": 50} and ptx == {}


def test_no_section_is_not_an_error(tmp_path: Path) -> None:
    fb = read_fatbin(read_elf(str(compile_so(tmp_path, "plain.so", "int x;\n"))))
    assert not fb.present and fb.error is None and fb.archs == ()


@pytest.mark.parametrize(
    ("garbage", "message"),
    [
        (b"\x11" * 64, "no fatbin magic"),
        (fatbin([Entry("sm_80")])[:40], "past the section's end"),  # container claims more than the section holds
        (b"\0" * 8192, "bytes of zeros"),
    ],
    ids=["garbage", "truncated", "zeros"],
)
def test_broken_sections_keep_what_was_found(tmp_path: Path, garbage: bytes, message: str) -> None:
    so = compile_so(tmp_path, "ext.so", "int x;\n")
    add_fatbin(so, fatbin([Entry("sm_90a")]) + garbage)
    fb = read_fatbin(read_elf(str(so)))
    assert fb.present and dict(fb.cubins) == {"sm_90a": 1}
    assert fb.error is not None and message in fb.error


def test_entry_claiming_a_huge_payload_stops_cleanly(tmp_path: Path) -> None:
    data = bytearray(fatbin([Entry("sm_80"), Entry("sm_90")]))
    data[16 + 8 : 16 + 16] = (1 << 62).to_bytes(8, "little")  # the first entry's payload size
    so = add_fatbin(compile_so(tmp_path, "ext.so", "int x;\n"), bytes(data))
    fb = read_fatbin(read_elf(str(so)))
    assert fb.error is not None and "malformed entry" in fb.error and fb.archs == ()


def test_time_budget_is_respected(tmp_path: Path) -> None:
    so = extension(tmp_path, "ext.so", entries=[Entry("sm_80")])
    fb = read_fatbin(read_elf(str(so)), deadline=0.0)
    assert fb.error == "the time budget ran out"


@given(st.binary(max_size=2048))
@settings(max_examples=200, deadline=None)
def test_random_section_contents_never_raise(tmp_path_factory: pytest.TempPathFactory, blob: bytes) -> None:
    base = tmp_path_factory.getbasetemp() / "fuzz_fatbin"
    so = base / "ext.so"
    if not so.exists():
        compile_so(base, "ext.so", "int x;\n")
    target = base / f"f{os.getpid()}.so"
    target.write_bytes(so.read_bytes())
    add_fatbin(target, blob)
    fb = read_fatbin(read_elf(str(target)))
    assert fb.present


# The matching rules: CUDA C++ Programming Guide (binary compatibility), NVIDIA's CUDA 12.9 blog on
# family-specific targets; fa-packages.md section 3.
@pytest.mark.parametrize(
    ("arch", "gpu", "runs"),
    [
        (Arch(False, 80), (8, 6), True),  # same major, newer minor
        (Arch(False, 86), (8, 0), False),  # never an older minor
        (Arch(False, 90), (10, 0), False),  # never across a major
        (Arch(False, 90, "a"), (9, 0), True),
        (Arch(False, 100, "a"), (10, 3), False),  # arch-specific: that capability only
        (Arch(False, 100, "f"), (10, 3), True),  # family-specific: the family's newer members too
        (Arch(False, 120, "f"), (12, 1), True),
        (Arch(False, 120, "f"), (11, 0), False),
        (Arch(True, 80), (12, 0), True),  # plain PTX JIT-compiles forward
        (Arch(True, 100), (9, 0), False),
        (Arch(True, 90, "a"), (10, 0), False),  # arch-specific PTX stays on its capability
        (Arch(True, 100, "f"), (10, 3), True),
        (Arch(True, 100, "f"), (12, 0), False),
    ],
)
def test_arch_matching(arch: Arch, gpu: tuple[int, int], runs: bool) -> None:
    assert arch.runs_on(gpu) is runs


def test_names() -> None:
    assert [Arch(False, 90, "a").name, Arch(True, 80).name, Arch(False, 121, "f").name] == [
        "sm_90a",
        "compute_80",
        "sm_121f",
    ]
