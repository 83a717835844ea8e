"""For each FA implementation: installed, would it import, can it run on these GPUs; every reason collected."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from fa_doctor.catalog import ecosystem, names
from fa_doctor.catalog.families import FA4_SGLANG, IMPLEMENTATIONS, Implementation, normalize
from fa_doctor.model.facts import Facts
from fa_doctor.model.install import Distribution, ModuleSpot
from fa_doctor.probes.modules import by_stem, resolve

_MAX_LISTED = 5


@dataclass(frozen=True, slots=True)
class ImplState:
    impl: Implementation
    dist: Distribution | None
    spot: ModuleSpot
    broken: tuple[str, ...] = ()  # why it would not import
    shadowed: str | None = None  # the import resolves to someone else's files
    gpu_reasons: tuple[str, ...] = ()  # why it cannot run on the visible GPUs

    @property
    def installed(self) -> bool:
        return self.dist is not None

    @property
    def importable(self) -> bool:
        return self.installed and not self.broken and self.shadowed is None and self.spot.found

    @property
    def usable(self) -> bool:
        return self.importable and not self.gpu_reasons

    def problems(self) -> list[str]:
        missing = [] if self.installed else [f"{self.impl.label} is not installed"]
        return [*missing, *self.broken, *([self.shadowed] if self.shadowed else []), *self.gpu_reasons]


def owner_roots(dist: Distribution) -> list[str]:
    return [os.path.realpath(r) for r in (dist.location, *filter(None, [dist.editable_dir]))]


def inside(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def missing_files(dist: Distribution) -> list[str]:
    skip = (".pyc", "RECORD.jws", "RECORD.p7s")
    return [
        rel
        for rel in dist.files or ()
        if not (rel.endswith(skip) or rel.startswith(("..", "/")) or "__pycache__" in rel)
        and not os.path.lexists(os.path.join(dist.location, rel))
    ]


def _native_present(spot_dir: str | None, leaf: str, sys_path: Iterable[str]) -> bool:
    """A compiled module `leaf` beside a package dir (or top-level on the path when spot_dir is None)."""
    dirs = [spot_dir] if spot_dir else [p for p in sys_path if p]
    return any(
        name.endswith(".so") or (name == leaf and os.path.isdir(os.path.join(d, leaf)))
        for d in dirs
        for name in by_stem(d).get(leaf, ())
    )


def marker_env(facts: Facts) -> dict[str, str]:
    major, minor, micro = facts.target.version
    return {
        "python_version": f"{major}.{minor}",
        "python_full_version": f"{major}.{minor}.{micro}",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": facts.target.machine,
        "implementation_name": facts.target.implementation,
        "implementation_version": f"{major}.{minor}.{micro}",
        "platform_python_implementation": {"cpython": "CPython", "pypy": "PyPy"}.get(facts.target.implementation, ""),
        "os_name": "posix",
        "extra": "",
    }


def unmet_requirements(dist: Distribution, facts: Facts, only: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(requirement, what is installed) for each runtime requirement that is not satisfied."""
    from fa_doctor.diagnose import requirements

    wanted = {normalize(n) for n in only} if only is not None else None
    env = marker_env(facts)
    out: list[tuple[str, str]] = []
    for text in dist.requires:
        req = requirements.parse(text)
        if req is None or requirements.applies(req, env) is not True:
            continue  # unreadable, or not for this environment (extras included): say nothing
        name = normalize(req.name)
        if wanted is not None and name not in wanted:
            continue
        if (have := facts.scan.index.get(name)) is None:
            out.append((str(req), "not installed"))
        elif requirements.contains(req.specifier, have) is False:  # None: not a version or specifier, say nothing
            out.append((str(req), f"{name} {have}"))
    return out


def _cute_runtime_problems(facts: Facts) -> list[str]:
    """FA4 needs the CuTe DSL: from DSL 4.6.0 on `cutlass` comes from the libs-core split package via a .pth file
    (before, from the metapackage's own wheel: catalog.ecosystem says which versions have which parts)."""
    out: list[str] = []
    py = facts.target.version
    path = facts.target.sys_path
    dsl = facts.scan.first(names.CUTLASS_DSL)
    split = dsl is None or not ecosystem.known(names.DSL_CORE) or ecosystem.exists(names.DSL_CORE, dsl.version)
    core = facts.scan.first(names.DSL_CORE)
    if core and not facts.scan.named(names.DSL_CU12, names.DSL_CU13):
        # The metapackage pulls libs-cu12 (and libs-cu13 with [cu13]): one of them must be there.
        out.append(f"neither {names.DSL_CU12} nor -libs-cu13 is installed: the CuTe DSL has no CUDA runtime")
    if resolve("cutlass.cute", path, (py[0], py[1])).found:
        return out
    dsl_dirs = [
        os.path.join(d.location, "nvidia_cutlass_dsl", "dsl_packages")
        for d in facts.scan.named(names.DSL_CORE, names.DSL_BASE)
    ]
    if core is None and split:
        out.append(
            f"{names.DSL_CORE} is not installed, so `import cutlass.cute` fails "
            "(it carries the cutlass Python package; libs-base/libs-cu13 hold only compiled parts)"
        )
    elif any(os.path.isdir(d) for d in dsl_dirs) and not any(d in path for d in dsl_dirs):
        out.append(
            "nvidia_cutlass_dsl/dsl_packages is not on sys.path: the nvidia_cutlass_dsl_packages.pth file was not "
            "processed (installed with --target into PYTHONPATH, or python -S), so `import cutlass` fails"
        )
    else:
        out.append("`cutlass.cute` cannot be found on the search path (No module named 'cutlass')")
    return out


def _assess(impl: Implementation, facts: Facts) -> ImplState:
    py = (facts.target.version[0], facts.target.version[1])
    path = facts.target.sys_path
    dist = facts.scan.first(*impl.distributions)
    module = impl.module
    if impl is FA4_SGLANG:
        if facts.sglang is None or not facts.sglang.fa4_vendored:
            return ImplState(impl, None, ModuleSpot(module, "missing", None))
        module = facts.sglang.fa4_module
    spot = resolve(module, path, py)
    broken: list[str] = []
    shadowed: str | None = None
    if dist is not None:
        if dist.problem:
            broken.append(f"{dist.name}: {dist.problem} ({dist.metadata_dir})")
        if gone := missing_files(dist):
            more = f" and {len(gone) - _MAX_LISTED} more" if len(gone) > _MAX_LISTED else ""
            shown = ", ".join(gone[:_MAX_LISTED]) + more
            broken.append(f"{dist.name} {dist.version}: {len(gone)} file(s) listed in RECORD are missing: {shown}")
        if not spot.found:
            broken.append(
                f"{dist.name} {dist.version} is installed but `import {module}` would fail: "
                f"{spot.note or 'no such module on the search path'}"
            )
        elif spot.origin and impl is not FA4_SGLANG and not inside(spot.origin, owner_roots(dist)):
            shadowed = (
                f"`import {module}` resolves to {spot.origin}, not to {dist.name} {dist.version} in "
                f"{dist.editable_dir or dist.location}"
            )
        for native in impl.native:
            parent, _, leaf = native.rpartition(".")
            pspot = resolve(parent, path, py) if parent else None
            pdir = os.path.dirname(pspot.origin) if pspot and pspot.kind == "package" and pspot.origin else None
            if (pdir or not parent) and not _native_present(pdir, leaf, path):
                broken.append(
                    f"compiled module {native} is missing (the CUDA build of {dist.name} was skipped or removed)"
                )
        if impl.key == "fa3" and (
            not any(_native_present(None, n, path) for n in ("flash_attn_3_cuda", "flashattn_hopper_cuda"))
            and not resolve("flash_attn_3._C", path, py).found
        ):
            broken.append("compiled module flash_attn_3._C (or flash_attn_3_cuda) is missing")
    if impl.version == 4 and (dist is not None or impl is FA4_SGLANG):
        broken += _cute_runtime_problems(facts)
    owner = dist if impl is not FA4_SGLANG else facts.scan.first("sglang")
    return ImplState(impl, owner, spot, tuple(broken), shadowed, tuple(gpu_reasons(impl, facts)))


def gpu_reasons(impl: Implementation, facts: Facts) -> list[str]:
    out = [
        f"GPU {d.index} ({d.name}) has compute capability {d.capability[0]}.{d.capability[1]}; "
        f"{impl.label} runs on {impl.capability_text}"
        for d in facts.gpus.devices
        if d.capability is not None and not impl.supports(d.capability)
    ]
    cuda = facts.torch_cuda
    if facts.gpus.devices and impl.min_torch_cuda and cuda is not None and cuda < impl.min_torch_cuda:
        need = ".".join(map(str, impl.min_torch_cuda))
        out.append(f"torch is built for CUDA {facts.torch.cuda if facts.torch else '?'}; {impl.label} needs >= {need}")
    return out


def assess_all(facts: Facts) -> dict[str, ImplState]:
    return {impl.key: _assess(impl, facts) for impl in IMPLEMENTATIONS}
