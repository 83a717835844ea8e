"""Time and memory of the static extension inspection on a generated 1+ GB extension.

The file is a real gcc-built shared object (its dynamic tables, symbol versions and undefined symbols intact)
with a large `.nv_fatbin` section appended the way the linker lays one out: many containers of cubin and PTX
entries whose payloads are holes of a sparse file, so the benchmark needs no free gigabytes. sgl-kernel's
flash_ops.abi3.so is 1.12 GB with 1,116 cubins; the default here is larger and has 20x the entries.

Targets: < 1 s and < 50 MB extra memory. Run by hand:  python benchmarks/binary_inspect.py [--gb 1.2] [--entries 24000]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fa_doctor.diagnose.checks.binary import _TORCH_SYMBOL  # noqa: E402
from fa_doctor.probes.elf import exported, read_elf  # noqa: E402
from fa_doctor.probes.extensions import torch_libraries  # noqa: E402
from fa_doctor.probes.fatbin import ARCH_SPECIFIC, FATBIN_MAGIC, read_fatbin  # noqa: E402

_SHDR = struct.Struct("<IIQQQQIIQQ")
_ARCHS = ((2, 80, 0), (2, 86, 0), (2, 90, ARCH_SPECIFIC), (1, 80, 0))  # kind, arch, flags


def base_object(where: Path) -> bytes:
    src = where / "ext.c"
    src.write_text(
        "extern void _ZN3c104fakeEv(void);\nextern void cudaMalloc(void);\n"
        "void PyInit_flash_ops(void) { _ZN3c104fakeEv(); cudaMalloc(); }\n"
    )
    out = where / "base.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, timeout=60)
    return out.read_bytes()


def generate(path: Path, base: bytes, total: int, entries: int) -> int:
    """Write `base` plus a `.nv_fatbin` of about `total` bytes holding `entries` entries; returns the file size."""
    shoff, shnum, shstrndx = struct.unpack_from("<Q", base, 0x28)[0], *struct.unpack_from("<HH", base, 0x3C)
    headers = [list(_SHDR.unpack_from(base, shoff + i * _SHDR.size)) for i in range(shnum)]
    names = headers[shstrndx]
    shstrtab = base[names[4] : names[4] + names[5]] + b".nv_fatbin\0"
    per_container = 4
    payload = max(64, (total // entries) & ~7)
    with open(path, "wb") as f:
        f.write(base)
        strtab_at = f.tell()
        f.write(shstrtab)
        start = (f.tell() + 15) & ~15
        pos = start
        for c in range(0, entries, per_container):
            n = min(per_container, entries - c)
            f.seek(pos)
            f.write(struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, n * (64 + payload)))
            pos += 16
            for i in range(n):
                kind, arch, flags = _ARCHS[(c + i) % len(_ARCHS)]
                f.seek(pos)
                f.write(
                    struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, payload, 0, 0, 8, 1, arch, 0, 0, flags | 0x11, 0, 0)
                )
                pos += 64 + payload  # the payload stays a hole
        size = pos - start
        names[4], names[5] = strtab_at, len(shstrtab)
        headers[shstrndx] = names
        headers.append([len(shstrtab) - 11, 1, 2, 0, start, size, 0, 0, 16, 0])
        f.seek(pos)
        new_shoff = pos
        for h in headers:
            f.write(_SHDR.pack(*h))
        f.seek(0x28)
        f.write(struct.pack("<Q", new_shoff))
        f.seek(0x3C)
        f.write(struct.pack("<H", len(headers)))
        f.seek(0, 2)
        return f.tell()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.2)
    parser.add_argument("--entries", type=int, default=24_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        path = where / "flash_ops.abi3.so"
        size = generate(path, base_object(where), int(args.gb * (1 << 30)), args.entries)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            elf = read_elf(str(path))
            fb = read_fatbin(elf)
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        fb = read_fatbin(read_elf(str(path)))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        assert fb.error is None and fb.entries == args.entries, (fb.error, fb.entries)
        print(f"file {size / (1 << 30):.2f} GB (sparse), .nv_fatbin {fb.section_size / (1 << 30):.2f} GB")
        print(f"{fb.containers} containers, {fb.entries} entries: cubins {dict(fb.cubins)}, PTX {dict(fb.ptx)}")
        print(f"undefined symbols {len(elf.undefined)}, needed {list(elf.needed)}")
        print(f"time: best {min(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms over {args.runs} runs")
        print(f"memory: Python peak {peak / (1 << 20):.2f} MB, max RSS growth {rss / 1024:.1f} MB")
        torch_lookup()


def torch_lookup() -> None:
    """Where this interpreter has torch: look up what libtorch_python needs from the rest of torch/lib, as the
    undefined-symbol check does for an extension (thousands of names instead of an extension's ~100)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        print("torch lookup: no torch here, skipped")
        return
    libs = torch_libraries(spec.submodule_search_locations[0])
    needs = read_elf(next(p for p in libs if p.endswith("libtorch_python.so")))
    wanted = [s.name for s in needs.undefined if not s.weak and _TORCH_SYMBOL.match(s.name)]
    t0 = time.perf_counter()
    found: set[str] = set()
    for lib in libs:
        found |= exported(lib, [n for n in wanted if n not in found]).found
    took = time.perf_counter() - t0
    print(f"torch lookup: {len(wanted)} names in {len(libs)} libraries, {len(found)} found, {took * 1000:.0f} ms")


if __name__ == "__main__":
    main()
