"""Static inspection of the compiled FA extensions: predict `no kernel image`, CUDA runtime, GLIBC and
`undefined symbol` failures from the files alone, before anything is imported or run."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from fa_doctor.catalog.names import FLASH_ATTN
from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.install import Extension
from fa_doctor.model.lines import Lines
from fa_doctor.probes.extensions import find_extensions, find_library, library_dirs, torch_libraries

if TYPE_CHECKING:  # the ELF and fatbin readers load only when there is a compiled extension to read
    from fa_doctor.probes.elf import ElfInfo
    from fa_doctor.probes.fatbin import Arch, FatbinInfo

BUDGET_SECONDS = 5.0
_ARCH = re.compile(r"(?:sm_|compute_)?(\d{2,3})[af]?")
_DOTTED = re.compile(r"(\d{1,2})\.(\d)")
_MAX_ARCHS = 64
# Mangled names in namespaces c10, at, torch (also vtables/typeinfo, const methods), and the C shims of the
# LibTorch stable ABI: all exported by torch/lib. Driver symbols (cuGreenCtxDestroy...) are not torch's.
_TORCH_SYMBOL = re.compile(r"_Z(?:T[VIS])?N[rVK]*(?:3c10|2at|5torch)|aoti_torch_|torch_")
_RUNTIME = re.compile(r"lib(cudart|nvrtc|cublas|cublasLt)\.so\.(\d+)$")
_SHOWN = 5


def parse_gpu_arch(text: str) -> tuple[str, ...]:
    """`--gpu-arch sm_90,sm_100` (also `9.0,10.0` or `90,100`) -> ("sm_90", "sm_100"); ValueError when unclear.
    An `a`/`f` suffix (sm_90a) is dropped: an sm_90a GPU is a 9.0 GPU."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(parts):
        raise ValueError(f"--gpu-arch {text[:80]!r}: give comma-separated GPU architectures, e.g. sm_90,sm_100")
    if len(parts) > _MAX_ARCHS:
        raise ValueError(f"--gpu-arch: {len(parts)} architectures; at most {_MAX_ARCHS}")
    out: list[str] = []
    for part in parts:
        dotted, plain = _DOTTED.fullmatch(part), _ARCH.fullmatch(part.lower())
        number = int(dotted[1]) * 10 + int(dotted[2]) if dotted else int(plain[1]) if plain else 0
        if not 30 <= number <= 199:
            raise ValueError(
                f"--gpu-arch: {part[:40]!r} is not a GPU architecture; write sm_90, sm_100 or 9.0, 10.0 "
                "(comma-separated)"
            )
        out.append(f"sm_{number}")
    return tuple(dict.fromkeys(out))


def _targets(facts: Facts, gpu_arch: tuple[str, ...] | None) -> list[tuple[str, tuple[int, int]]]:
    """(label, capability): "GPU 0 (NVIDIA H200, 9.0)" or "--gpu-arch sm_100"."""
    out = [
        (f"GPU {d.index} ({d.name}, {d.capability[0]}.{d.capability[1]})", d.capability)
        for d in facts.gpus.devices
        if d.capability is not None
    ]
    return out + [(f"--gpu-arch {a}", divmod(int(a.removeprefix("sm_")), 10)) for a in gpu_arch or ()]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _serves(arch: Arch) -> str:
    major, minor = arch.capability
    if arch.suffix == "a":
        return f"{major}.{minor} only"
    if arch.ptx and not arch.suffix:
        return f">= {major}.{minor} by JIT"
    return f"{major}.{minor}" + (f"-{major}.9" if minor < 9 else "") + (" by JIT" if arch.ptx else "")


@dataclass(slots=True)
class _Served:
    """What one extension can run on, for the binary.archs summary."""

    dist: str
    impl: str
    fatbin: FatbinInfo
    jit: list[str] = field(default_factory=list)  # targets served only by JIT-compiling PTX

    def line(self, rel: str) -> str:
        fb = self.fatbin
        if not fb.present:
            return f"{rel}: no embedded GPU code (no .nv_fatbin section)"
        runs = ", ".join(sorted({_serves(a) for a in fb.archs})) or "nothing"
        jit = f"; only by JIT on {', '.join(self.jit)}" if self.jit else ""
        cut = f" (the walk stopped early: {fb.error})" if fb.error else ""
        return (
            f"{rel}: {', '.join(fb.cubins) or 'no cubins'}; {', '.join(fb.ptx) or 'no PTX'} -> runs on {runs}{jit}{cut}"
        )

    def to_dict(self) -> dict[str, object]:
        fb = self.fatbin
        out: dict[str, object] = {"distribution": self.dist, "fatbin": fb.present}
        if fb.present:
            out.update(
                cubins=dict(fb.cubins),
                ptx=dict(fb.ptx),
                compressed_entries=fb.compressed,
                entries=fb.entries,
                runs_on=sorted({_serves(a) for a in fb.archs}),
                jit_only=self.jit,
                walk_error=fb.error,
            )
        return out


class _Check:
    def __init__(self, facts: Facts, states: Mapping[str, ImplState], gpu_arch: tuple[str, ...] | None) -> None:
        self.facts, self.states = facts, states
        self.targets = _targets(facts, gpu_arch)
        self.deadline = time.monotonic() + BUDGET_SECONDS
        self.findings: list[Finding] = []
        self.served: dict[str, _Served] = {}
        self.skipped: list[str] = []

    def fail(
        self, fid: str, ext: Extension, title: str, detail: str, ev: dict[str, object], fixes: tuple[Remedy, ...] = ()
    ) -> None:
        """A fail finding about `ext`; its remedy, unless given, is reinstalling its implementation."""
        base = {"implementation": ext.impl, "distribution": ext.dist, "file": ext.path}
        fixes = fixes or remedies.reinstall(ext.impl)
        self.findings.append(Finding(fid, Severity.FAIL, title, detail, {**base, **ev}, fixes))

    def arch_remedies(self, ext: Extension, capability: tuple[int, int]) -> tuple[Remedy, ...]:
        major = capability[0]
        if ext.impl in ("fa3", "fa3-sgl") and major not in (8, 9):
            # No FA3 build has Blackwell kernels: reinstalling FA3 cannot help, FA4 can.
            return remedies.if_pinned(self.facts) + remedies.reinstall("fa4")
        if ext.impl == "fa2":
            from fa_doctor.model.intents import Rebuild

            text = f"(2) Build flash-attn here with kernels for {major}.x (FLASH_ATTN_CUDA_ARCHS picks the targets)."
            env = (("FLASH_ATTENTION_FORCE_BUILD", "TRUE"), ("FLASH_ATTN_CUDA_ARCHS", f"{major}0"))
            return (remedies.planned(Rebuild(FLASH_ATTN, text, env, from_source=True)),)
        return remedies.reinstall(ext.impl)

    def kernels(self, ext: Extension, fb: FatbinInfo, cudart: int | None) -> None:
        name = os.path.basename(ext.path)
        row = self.served[ext.relpath] = _Served(ext.dist, ext.impl, fb)
        driver = _version(self.facts.gpus.cuda_driver_version or "")
        cubin_list = ", ".join(f"{n} x{c}" for n, c in fb.cubins.items()) or "no cubins"
        ptx_list = ", ".join(f"{n} x{c}" for n, c in fb.ptx.items()) or "no PTX"
        by_capability: dict[tuple[int, int], list[str]] = {}
        for label, capability in self.targets:  # eight H200s make one finding, not eight
            by_capability.setdefault(capability, []).append(label)
        for capability, labels in by_capability.items():
            cubins, ptx = fb.serves(capability)
            if cubins:
                continue
            if ptx and (not driver or cudart is None or driver[0] >= cudart):
                row.jit += labels
                continue
            cap = f"{capability[0]}.{capability[1]}"
            why = (
                f"its PTX ({', '.join(a.name for a in ptx)}) needs a driver for CUDA {cudart}, this one supports "
                f"CUDA {self.facts.gpus.cuda_driver_version}"
                if ptx
                else "no cubin runs there and there is no PTX to JIT-compile"
            )
            self.fail(
                "binary.no_kernel_image",
                ext,
                f"{name} has no GPU code for compute capability {cap} ({', '.join(labels)})",
                f"{ext.relpath} ({ext.dist}) carries {cubin_list}; {ptx_list}: {why}, so its first kernel launch fails "
                f"with 'CUDA error: no kernel image is available for execution on the device' on {', '.join(labels)}.",
                {"targets": labels, "capability": cap, "cubins": dict(fb.cubins), "ptx": dict(fb.ptx)},
                self.arch_remedies(ext, capability),
            )

    def runtime(self, ext: Extension, elf: ElfInfo) -> int | None:
        libs = {m.group(1): int(m.group(2)) for n in elf.needed if (m := _RUNTIME.match(n))}
        cudart = libs.get("cudart")
        torch, torch_cuda = self.facts.torch, self.facts.torch_cuda
        if torch is None or torch_cuda is None or not libs:
            return cudart
        if wrong := {lib: major for lib, major in libs.items() if major != torch_cuda[0]}:
            needed = ", ".join(f"lib{lib}.so.{major}" for lib, major in sorted(wrong.items()))
            cuda = torch.cuda
            self.fail(
                "binary.cudart_mismatch",
                ext,
                f"{os.path.basename(ext.path)} is built for CUDA {next(iter(wrong.values()))}, torch for CUDA {cuda}",
                f"{ext.relpath} ({ext.dist}) links {needed} but torch {torch.version} is built for CUDA {cuda}: the "
                f"import fails with '{needed.split(', ')[0]}: cannot open shared object file', or two CUDA runtimes "
                "end up in one process.",
                {"needed": sorted(f"lib{k}.so.{v}" for k, v in libs.items()), "torch_cuda": cuda},
            )
        return cudart

    def libc(self, ext: Extension, elf: ElfInfo) -> None:
        problems: list[str] = []
        evidence: dict[str, object] = {}
        system = self.facts.target.libc or ""
        needed = elf.needs("GLIBC_")
        if needed and system.startswith("glibc "):
            have = _version(system)
            if too_new := [v for v in needed if _version(v) > have]:
                top = max(too_new, key=_version)
                users = sorted({s.name for s in elf.undefined if s.version in too_new})[:_SHOWN]
                problems.append(
                    f"it needs {top} but the system has {system}" + (f" (for {', '.join(users)})" if users else "")
                )
                evidence.update(glibc_needed=top, glibc_system=system, symbols=users)
        if cxx := elf.needs("GLIBCXX_") + elf.needs("CXXABI_"):
            dirs = library_dirs(
                elf.runpath,
                os.path.dirname(ext.path),
                self.facts.env.get("LD_LIBRARY_PATH"),
                self.facts.target.prefix,
                self.facts.target.machine,
            )
            path = find_library("libstdc++.so.6", dirs)
            from fa_doctor.probes.elf import read_elf

            lib = read_elf(path, symbols=False, deadline=self.deadline) if path else None
            if lib is None or lib.error is not None or not lib.version_defs:
                why = f"{path}: {lib.error or 'no version definitions'}" if lib else "libstdc++.so.6 not found"
                self.skipped.append(f"{ext.relpath}: GLIBCXX needs not checked ({why})")
            else:
                if missing := [v for v in cxx if v not in set(lib.version_defs)]:
                    top = max(missing, key=_version)
                    family = top.split("_", 1)[0] + "_"
                    have_top = max((v for v in lib.version_defs if v.startswith(family)), key=_version, default="none")
                    problems.append(f"it needs {top} but {path} defines up to {have_top}")
                    evidence.update(glibcxx_missing=missing, libstdcxx=path)
        if problems:
            self.fail(
                "binary.glibc",
                ext,
                f"{os.path.basename(ext.path)} needs a newer C/C++ runtime than this system has",
                f"{ext.relpath} ({ext.dist}): " + "; ".join(problems) + ". The import fails with "
                '"version `...\' not found (required by ...)"; it was built on a newer Linux than this one.',
                evidence,
                (
                    remedies.run(
                        "(2) Use a build made for this system (a wheel whose manylinux tag is not newer than "
                        f"{system or 'this glibc'}, or a source build here), or run the server in a newer OS image. "
                        "`ldd --version` shows the system's glibc.",
                        ("ldd", "--version"),
                    ),
                    *remedies.reinstall(ext.impl),
                ),
            )

    def torch_symbols(self, ext: Extension, elf: ElfInfo) -> None:
        if self.facts.torch is None:
            return
        if not (wanted := sorted({s.name for s in elf.undefined if not s.weak and _TORCH_SYMBOL.match(s.name)})):
            return
        from fa_doctor.probes.elf import exported

        libs = torch_libraries(self.facts.torch.location)
        found: set[str] = set()
        unread: list[str] = []
        for lib in libs:
            result = exported(lib, [n for n in wanted if n not in found], deadline=self.deadline)
            found |= result.found
            if result.error is not None:
                unread.append(f"{os.path.basename(lib)} ({result.error})")
        if not (missing := [n for n in wanted if n not in found]):
            return
        if unread or not libs:  # the symbols may live in what could not be read: say so, claim nothing
            where = "; ".join(unread) or f"no libraries in {self.facts.torch.location}/lib"
            self.skipped.append(f"{ext.relpath}: torch symbols not checked: {where}")
            return
        torch_v = self.facts.torch.version or "?"
        state = self.states.get(ext.impl)
        declared = state.dist.requires if state is not None and state.dist is not None else ()
        pin = next((r for r in declared if r.replace(" ", "").startswith("torch==")), None)
        why = f"; it declares {pin}" if pin else ""
        self.fail(
            "binary.undefined_symbol",
            ext,
            f"{os.path.basename(ext.path)} was built against another torch than {torch_v}",
            f"{ext.relpath} ({ext.dist}) uses {len(missing)} of {len(wanted)} c10/at/torch symbols that torch "
            f"{torch_v} does not export{why}. The import fails with 'undefined symbol: {missing[0]}'.",
            {"missing": missing[:_SHOWN], "missing_count": len(missing), "torch": torch_v, "libraries": libs},
        )

    def run(self) -> list[Finding]:
        installed = [(k, s.dist) for k, s in self.states.items() if s.dist is not None]
        py = (self.facts.target.version[0], self.facts.target.version[1])
        for ext in find_extensions(installed, self.facts.target.sys_path, py):
            if time.monotonic() > self.deadline:
                self.skipped.append(f"{ext.relpath}: not inspected (the {BUDGET_SECONDS:.0f} s budget ran out)")
                continue
            from fa_doctor.probes.elf import read_elf
            from fa_doctor.probes.fatbin import read_fatbin

            elf = read_elf(ext.path, deadline=self.deadline)
            if elf.error is not None:
                self.findings.append(_unreadable(ext, elf.error))
                continue
            cudart = self.runtime(ext, elf)
            fb = read_fatbin(elf, deadline=self.deadline)
            if fb.present and not fb.archs and fb.error:
                self.findings.append(_unreadable(ext, f".nv_fatbin: {fb.error}"))
            elif fb.present:
                self.kernels(ext, fb, cudart)
            else:
                self.served[ext.relpath] = _Served(ext.dist, ext.impl, fb)
            self.libc(ext, elf)
            self.torch_symbols(ext, elf)
        if self.served or self.skipped:
            self.findings.append(self.summary())
        return self.findings

    def summary(self) -> Finding:
        jit = {row.dist: row.impl for row in self.served.values() if row.jit}
        fixes: list[Remedy] = []
        if not self.targets:
            fixes.append(
                remedies.run(
                    "No GPU is visible: name the GPUs the server will run on (a CI runner building an image) to have "
                    "each extension judged against them.",
                    ("fa-doctor", "check", "--gpu-arch", "sm_90,sm_100"),
                )
            )
        for dist, impl in jit.items():
            for fix in remedies.reinstall(impl):
                text = f"{dist} has only PTX for some GPUs, JIT-compiled at the first call (slow). {fix.text}"
                fixes.append(replace(fix, text=text))
        judged = ", ".join(t[0] for t in self.targets) or "no GPU and no --gpu-arch: nothing to judge against"
        return Finding(
            "binary.archs",
            Severity.INFO if fixes else Severity.OK,
            "What the compiled FA extensions can run on",
            Lines([*(r.line(rel) for rel, r in self.served.items()), f"Judged against: {judged}", *self.skipped]),
            {
                "extensions": {rel: row.to_dict() for rel, row in self.served.items()},
                "targets": [t[0] for t in self.targets],
                "skipped": self.skipped,
            },
            tuple(fixes),
        )


def _unreadable(ext: Extension, error: str) -> Finding:
    return Finding(
        "binary.unreadable",
        Severity.WARN,
        f"{os.path.basename(ext.path)} could not be inspected",
        f"{ext.relpath} ({ext.dist}): {error}. A truncated or foreign file also fails to import "
        "('invalid ELF header' or 'file too short').",
        {"implementation": ext.impl, "distribution": ext.dist, "file": ext.path, "error": error},
        remedies.reinstall(ext.impl),
    )


def check_binaries(facts: Facts, states: Mapping[str, ImplState], gpu_arch: tuple[str, ...] | None) -> list[Finding]:
    """Findings `binary.*` for every compiled extension of an installed FA implementation (none if there is none)."""
    return _Check(facts, states, gpu_arch).run()
