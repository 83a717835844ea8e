"""Where the compiled FA extensions, libtorch and the libstdc++ the target would load lie on disk: from the
distributions' RECORD files first, else by bounded listings of the few directories they live in."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from fa_doctor.model.install import Distribution, Extension
from fa_doctor.probes.modules import resolve

# Relative paths (as RECORD writes them) of each implementation's compiled modules (fa-packages.md section 1).
PATTERNS: dict[str, tuple[str, ...]] = {
    "fa2": (r"flash_attn_2_cuda\.[^/]*so",),
    "fa3": (r"flash_attn_3/_C\.[^/]*so", r"flash_attn_3_cuda\.[^/]*so", r"flashattn_hopper_cuda\.[^/]*so"),
    "fa3-sgl": (r"sgl_kernel/(?:[^/]+/)?flash_ops\.[^/]*so",),
    "vllm-fa": (r"vllm/vllm_flash_attn/_vllm_fa[23]_C\.[^/]*so", r"vllm_flash_attn_2_cuda\.[^/]*so"),
}
# The same modules by import name: found on the target's search path as Python would (source builds, editable
# installs, a copy that shadows the distribution's).
MODULES: dict[str, tuple[str, ...]] = {
    "fa2": ("flash_attn_2_cuda",),
    "fa3": ("flash_attn_3._C", "flash_attn_3_cuda", "flashattn_hopper_cuda"),
    "fa3-sgl": ("sgl_kernel.flash_ops",),
    "vllm-fa": ("vllm.vllm_flash_attn._vllm_fa2_C", "vllm.vllm_flash_attn._vllm_fa3_C", "vllm_flash_attn_2_cuda"),
}
# Where to list when a distribution's RECORD was not read (vllm's is skipped for speed) or is absent.
_DIRS = {"fa2": ("",), "fa3": ("", "flash_attn_3"), "fa3-sgl": ("sgl_kernel",), "vllm-fa": ("vllm/vllm_flash_attn", "")}
_MAX_LISTED = 10_000
_MAX_PER_IMPL = 16
_MAX_LIBRARIES = 64


def _listing(base: str, sub: str) -> list[str]:
    root = os.path.join(base, sub) if sub else base
    out: list[str] = []
    try:
        with os.scandir(root) as it:
            for entry in it:
                if len(out) >= _MAX_LISTED:
                    break
                rel = f"{sub}/{entry.name}" if sub else entry.name
                out.append(rel)
                if sub and entry.is_dir(follow_symlinks=False):  # sgl_kernel/sm90/... one level down
                    with os.scandir(entry.path) as inner:
                        out += [f"{rel}/{e.name}" for _, e in zip(range(_MAX_LISTED), inner, strict=False)]
    except OSError:
        return []
    return out


def _relative(path: str, sys_path: Sequence[str]) -> str:
    """`path` relative to the search-path entry holding it (as RECORD would name it)."""
    tops = [p for p in sys_path if p and path.startswith(p.rstrip("/") + "/")]
    return os.path.relpath(path, max(tops, key=len)) if tops else os.path.basename(path)


def find_extensions(
    installed: Iterable[tuple[str, Distribution]], sys_path: Sequence[str], python: tuple[int, int]
) -> list[Extension]:
    """The compiled modules of each (implementation key, distribution) that exist on disk, deduplicated: those its
    RECORD lists, then those an import would load from the search path."""
    out: list[Extension] = []
    seen: set[str] = set()
    for key, dist in installed:
        for module in MODULES.get(key, ()):
            spot = resolve(module, sys_path, python)
            origin = spot.origin if spot.kind == "extension" else None
            if origin and os.path.isfile(origin) and os.path.realpath(origin) not in seen:
                seen.add(os.path.realpath(origin))
                out.append(Extension(key, f"{dist.name} {dist.version}", origin, _relative(origin, sys_path)))
        patterns = PATTERNS.get(key)
        if not patterns:
            continue
        rx = re.compile("|".join(f"(?:{p})" for p in patterns))
        names = dist.files if dist.files is not None else [r for d in _DIRS[key] for r in _listing(dist.location, d)]
        count = 0
        for rel in names:
            if count >= _MAX_PER_IMPL or not rx.fullmatch(rel):
                continue
            path = os.path.join(dist.location, rel)
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(path):
                continue
            seen.add(real)
            count += 1
            out.append(Extension(key, f"{dist.name} {dist.version}", path, rel))
    return out


def torch_libraries(torch_location: str | None) -> list[str]:
    """Every shared library in torch/lib: where c10/at/torch symbols are exported, wherever one of them lives."""
    if not torch_location:
        return []
    lib = os.path.join(torch_location, "lib")
    try:
        names = sorted(os.listdir(lib))[:_MAX_LISTED]
    except OSError:
        return []
    return [os.path.join(lib, n) for n in names if n.endswith(".so") or ".so." in n][:_MAX_LIBRARIES]


def library_dirs(
    runpath: Sequence[str], origin: str, ld_library_path: str | None, prefix: str, machine: str
) -> list[str]:
    """The directories the dynamic linker would search for one extension's DT_NEEDED libraries, in order:
    LD_LIBRARY_PATH, RUNPATH, a conda-style prefix/lib, the system directories (not /etc/ld.so.cache)."""
    dirs = [d for d in (ld_library_path or "").split(":") if d]
    dirs += [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in runpath]
    dirs.append(os.path.join(prefix, "lib"))
    triplet = f"{machine}-linux-gnu"
    dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    return list(dict.fromkeys(os.path.normpath(d) for d in dirs))


def find_library(name: str, dirs: Iterable[str]) -> str | None:
    return next((path for d in dirs if os.path.isfile(path := os.path.join(d, name))), None)
