"""Questions about released packages, answered from the generated tables in `releases.py` (imported on the first
question). Every answer is read from a released artifact's metadata (`releases.SOURCES` names it); requirement
lines are parsed with `packaging`, as pip parses them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize as _norm

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version


def _tables() -> Any:
    from fa_doctor.catalog import releases  # 400 KB of tables: loaded on the first question

    return releases


def _key(text: str) -> Version:
    """A sort key: the version, or 0 for text that is none (never in the generated tables)."""
    from packaging.version import Version

    return _version(text) or Version("0")


def _version(text: str) -> Version | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def versions(name: str) -> tuple[str, ...]:
    """Every non-yanked release of `name` on the index, oldest first (empty when the catalog does not track it)."""
    return tuple(_tables().VERSIONS.get(_norm(name), ()))


def known(name: str) -> bool:
    return _norm(name) in _tables().VERSIONS


def exists(name: str, version: str) -> bool:
    """Whether `name==version` (local label ignored) is a non-yanked release on the index."""
    public = version.split("+", 1)[0]
    found = versions(name)
    wanted = _version(public)
    return public in found or (wanted is not None and any(_version(v) == wanted for v in found))


def prerelease_only(name: str) -> bool:
    """True when the index has releases of `name` but every non-yanked one is a pre-release."""
    found = [_version(v) for v in versions(name)]
    return bool(found) and all(v is not None and v.is_prerelease for v in found)


def latest(name: str, *, pre: bool = False) -> str | None:
    """The newest non-yanked release (pre-releases only when `pre`, or when there is nothing else)."""
    found = [(v, text) for text in versions(name) if (v := _version(text)) is not None]
    finals = [item for item in found if not item[0].is_prerelease]
    pool = found if pre or not finals else finals
    return max(pool)[1] if pool else None


@lru_cache(maxsize=4096)
def _requirements(name: str, version: str) -> tuple[Requirement, ...]:
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for line in _tables().REQUIRES.get(_norm(name), {}).get(version, ()):
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return tuple(out)


def _unconditional(req: Requirement, extras: tuple[str, ...] = ()) -> bool:
    """A requirement that applies on a Linux x86-64 CPython install with these extras (the servers' platform)."""
    if req.marker is None:
        return True
    env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}
    return any(req.marker.evaluate({**env, "extra": e}) for e in ("", *extras))


def requirement_on(name: str, version: str, dep: str, extras: tuple[str, ...] = ()) -> str | None:
    """`name==version`'s requirement on `dep` (`dep[extras]<specifier>`), markers applied for Linux x86-64."""
    want = _norm(dep)
    for req in _requirements(name, version):
        if _norm(req.name) == want and _unconditional(req, extras):
            extra = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            return f"{want}{extra}{req.specifier}"
    return None


def pin(name: str, version: str, dep: str) -> str | None:
    """The exact version `name==version` pins `dep` to (`==X`), or None."""
    m = re.search(r"==([^,;\s]+)", requirement_on(name, version, dep) or "")
    return m.group(1) if m and "*" not in m.group(1) else None


def releases_pinning(name: str, dep: str, dep_version: str, python: tuple[int, int] | None = None) -> tuple[str, ...]:
    """Releases of `name` that pin `dep` to `dep_version` (public part compared), newest first; with `python`,
    only those whose Requires-Python admits it."""
    want = _version(dep_version.split("+", 1)[0])
    hits = [
        v
        for v in versions(name)
        if (p := pin(name, v, dep)) and _version(p.split("+", 1)[0]) == want and admits_python(name, v, python)
    ]
    return tuple(sorted(hits, key=_key, reverse=True))


# ---- torch and CUDA ------------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def pypi_torch_cuda(torch_version: str) -> int | None:
    """The CUDA major of PyPI's default torch build of this release (from its nvidia-cuda-runtime pin)."""
    for line in _tables().REQUIRES.get(names.TORCH, {}).get(torch_version.split("+", 1)[0], ()):
        m = re.match(r"\s*nvidia-cuda-runtime-cu(\d+)\b", line)
        # 2.11 and later declare cuda-toolkit[...]==13.0.x
        m = m or re.match(r"\s*(?:nvidia-cuda-runtime|cuda-toolkit)\s*(?:\[[^\]]*\])?\s*\(?\s*==\s*(\d+)\.", line)
        if m:
            return int(m.group(1))
    return None


def kernel_torch(kernel: str, version: str) -> str | None:
    """The torch a kernel release that declares none is built for: the one every sglang release pinning it pins
    (None when they disagree or none pins it)."""
    torches = {t for s in releases_pinning(names.SGLANG, kernel, version) if (t := pin(names.SGLANG, s, names.TORCH))}
    return torches.pop() if len(torches) == 1 else None


def sgl_kernel_cuda(version: str) -> int | None:
    """The CUDA major PyPI's sglang-kernel/sgl-kernel `version` wheel is built for: the CUDA of PyPI's build of
    the torch it pins, or (0.4.0-0.4.6.post1 pin none) of the torch the sglang releases pinning this kernel pin."""
    public = version.split("+", 1)[0]
    own = ((name, public) for name in names.SGL_KERNELS)
    pinning = ((names.SGLANG, s) for name in names.SGL_KERNELS for s in releases_pinning(names.SGLANG, name, public))
    for name, release in itertools.chain(own, pinning):
        torch = pin(name, release, names.TORCH)
        if torch:
            return pypi_torch_cuda(torch)
    return None


def torch_channels(torch_mm: tuple[int, int]) -> tuple[str, ...]:
    """download.pytorch.org's CUDA channels for a torch release (`cu126`, ...), oldest CUDA first."""
    return tuple(_tables().TORCH_CHANNELS.get(f"{torch_mm[0]}.{torch_mm[1]}", ()))


# ---- the CuTe DSL (FA4's runtime) ----------------------------------------------------------------------------
def dsl_closure(version: str, cuda_major: int | None) -> tuple[str, ...]:
    """The DSL split packages that `nvidia-cutlass-dsl==version` brings in on Linux x86-64, with the `[cu13]`
    extra for a CUDA 13 torch: read from the released metadata, each checked to exist at that version."""
    extras = ("cu13",) if cuda_major == 13 else ()
    seen: list[str] = []
    todo = [(names.CUTLASS_DSL, extras)]
    while todo:
        name, ex = todo.pop(0)
        for req in _requirements(name, version):
            dep = _norm(req.name)
            if dep.startswith(names.CUTLASS_DSL) and dep not in seen and _unconditional(req, ex):
                if "qnx" in dep or not exists(dep, version):
                    continue
                seen.append(dep)
                todo.append((dep, ()))
    order = {n: i for i, n in enumerate(names.DSL_PARTS)}
    return tuple(sorted(seen, key=lambda n: order.get(n, len(order))))


def fa4_install_spec(
    cuda_major: int | None,
    pins: Mapping[str, str] | None = None,
    wanted: str | None = None,
    python: tuple[int, int] | None = None,
) -> str | None:
    """A requirement for flash-attn-4 that pip resolves: it has only pre-releases, so name one: the newest whose
    requirements admit the server's exact `pins` (name -> version), that the server's own requirement `wanted`
    (">=4.0.0b18") admits, and whose Requires-Python admits `python`. None when no release fits."""
    from packaging.specifiers import SpecifierSet

    extras = ("cu13",) if cuda_major == 13 else ()
    allowed = SpecifierSet(re.sub(r"^[A-Za-z0-9._-]+(\[[^\]]*\])?", "", wanted or ""))

    def clashes(req: Requirement) -> bool:
        pinned = (pins or {}).get(_norm(req.name))
        got = _version(pinned) if pinned else None
        return got is not None and _unconditional(req, extras) and not req.specifier.contains(got, prereleases=True)

    for version in sorted(versions(names.FLASH_ATTN_4), key=_key, reverse=True):
        have = _version(version)
        if (
            have is not None
            and allowed.contains(have, prereleases=True)
            and admits_python(names.FLASH_ATTN_4, version, python)
            and not any(clashes(req) for req in _requirements(names.FLASH_ATTN_4, version))
        ):
            return f"{names.FLASH_ATTN_4}{'[cu13]' if extras else ''}=={version}"
    return None


def admits_python(name: str, version: str, python: tuple[int, int] | None) -> bool:
    """Whether `name==version`'s Requires-Python admits this Python (True when either is unknown)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    spec = _tables().REQUIRES_PYTHON.get(_norm(name), {}).get(version.split("+", 1)[0], "")
    if python is None or not spec:
        return True
    try:
        return SpecifierSet(spec).contains(f"{python[0]}.{python[1]}", prereleases=True)
    except InvalidSpecifier:
        return True


# ---- FA2 release wheels --------------------------------------------------------------------------------------
def fa2_wheel(
    release: str, torch_mm: tuple[int, int], cuda_major: int, cxx11abi: bool, python: tuple[int, int], platform: str
) -> str | None:
    """The URL of flash-attn's GitHub release wheel for this build, when the release matrix has one."""
    matrix = _tables().FA2_WHEELS.get(release)
    if not matrix:
        return None
    torch = f"{torch_mm[0]}.{torch_mm[1]}"
    py = f"{python[0]}.{python[1]}"
    abi = "TRUE" if cxx11abi else "FALSE"
    build = {"python-version": py, "torch-version": torch, "cuda-version": str(cuda_major)}

    def matches(rule: str) -> bool:  # `python-version=3.13 torch-version=2.4`: every pair must hold
        pairs = [p.partition("=") for p in rule.split()]
        return all(build.get(k) == v or (k == "cuda-version" and v.split(".")[0] == build[k]) for k, _, v in pairs)

    if (
        any(matches(rule) for rule in matrix.get("exclude", ()))
        or torch not in matrix.get("torch", ())
        or str(cuda_major) not in {c.split(".")[0] for c in matrix.get("cuda", ())}
        or py not in matrix.get("python", ())
        or abi not in matrix.get("cxx11abi", ())
        or platform not in matrix.get("platform", ())
    ):
        return None
    tag = f"cp{python[0]}{python[1]}"
    wheel = f"flash_attn-{release}+cu{cuda_major}torch{torch}cxx11abi{abi}-{tag}-{tag}-{platform}.whl"
    return str(_tables().FA2_WHEEL_URL.format(tag_name=f"v{release}", wheel_name=wheel, wheel_filename=wheel))


def fa2_has_matrix(release: str) -> bool:
    return release in _tables().FA2_WHEELS


def fa2_release() -> str | None:
    """The newest flash-attn release with a known wheel matrix."""
    return max((v for v in _tables().FA2_WHEELS if _version(v) is not None), key=_key, default=None)


# The oldest CUDA whose torch builds carry code for a GPU generation: torch >= 2.7's cu126 wheels stop at
# sm_90 (`torch.cuda.get_arch_list()`), its cu128 and later wheels add sm_100 and sm_120.
MIN_CUDA_FOR_MAJOR = {10: (12, 8), 11: (12, 8), 12: (12, 8)}
