"""Turn an exception text (and its __cause__/__context__ chain) into a named cause a user can act on.

Patterns come from real messages collected in shared/reference/fa-packages.md section 5. Rules are tried in
order over the whole chain, most specific first: a wrapper such as sgl_kernel's "Can not import FA3" hides
the real reason in __context__, so only the chain says what actually broke.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

CAUSES = (
    "torch_abi",
    "glibc",
    "cuda_runtime",
    "cute_dsl_missing",
    "no_kernel_image",
    "gpu_too_old",
    "driver_too_old",
    "no_cuda",
    "module_missing",
    "sgl_kernel_fa3",
    "unknown",
)


@dataclass(frozen=True)
class ImportProblem:
    """A classified import- or call-time error."""

    cause: str  # one of CAUSES
    summary: str  # one plain sentence for the user
    message: str  # "ExcType: message" of the outermost exception, verbatim
    chain: tuple[str, ...] = ()  # "ExcType: message" of each __cause__/__context__, nearest first
    evidence: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))

    def to_dict(self) -> dict[str, object]:
        return {
            "cause": self.cause,
            "summary": self.summary,
            "message": self.message,
            "chain": list(self.chain),
            "evidence": dict(self.evidence),
        }


_UNDEFINED = re.compile(r"(?:(?P<lib>\S+\.so[\w.]*): )?undefined symbol: (?P<sym>[\w.$@]+)")
_VERSION_NOT_FOUND = re.compile(
    r"version [`'\"](?P<tag>(?P<kind>GLIBCXX|GLIBC|CXXABI)_(?P<ver>[\d.]+))['`\"] not found"
    r"(?: \(required by (?P<by>[^)]+)\))?"
)
_LIB_LINE = re.compile(r"(?P<lib>/\S+\.so[\w.]*): version")
_CUDA_LIB = re.compile(
    r"(?P<lib>lib(?P<name>cudart|cublasLt|cublas|nvrtc|nvJitLink|cudnn\w*|cufft|curand|cusparse|cusolver|nccl|cuda)"
    r"\.so(?:\.(?P<major>\d+))?[\d.]*): cannot open shared object file"
)
_TORCH_NAMESPACE = re.compile(r"(?:^_Z|N|K)(?:3c10|2at|5torch|6caffe2)\d")
_DIGITS = frozenset("0123456789")  # ASCII only: str.isdigit() also accepts "¹", which int() rejects
_NO_MODULE = re.compile(r"No module named '(?P<mod>[\w.]+)'")
_NO_SUCH_MODULE = re.compile(r"No such module (?P<mod>[\w.]+)")
_CANNOT_IMPORT = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<mod>[\w.]+)'")
_DSL_ROOTS = ("cutlass", "quack", "tvm_ffi", "cuda", "nvidia_cutlass_dsl", "torch_c_dlpack_ext")
# Libraries whose soname major is the CUDA toolkit major (cufft/curand/cusolver number their own).
_CUDA_MAJOR_LIBS = {"cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink"}


def classify(exc_type: str, message: str, chain: Sequence[str]) -> ImportProblem:
    head = f"{exc_type}: {message}" if exc_type else message
    text = "\n".join([head, *chain])
    for rule in _RULES:
        found = rule(text)
        if found is not None:
            cause, summary, evidence = found
            return ImportProblem(cause, summary, head, tuple(chain), {"exception": exc_type, **evidence})
    return ImportProblem(
        "unknown",
        "The FlashAttention module raised an error fa-doctor does not recognise; the exact text is below.",
        head,
        tuple(chain),
        {"exception": exc_type},
    )


_Found = tuple[str, str, dict[str, object]] | None


def _torch_abi(text: str) -> _Found:
    m = _UNDEFINED.search(text)
    if m is None:
        return None
    sym = m.group("sym")
    evidence: dict[str, object] = {"symbol": sym, "abi": _abi_hint(sym)}
    if m.group("lib"):
        evidence["library"] = m.group("lib")
    demangled = demangle(sym)
    if demangled:
        evidence["demangled"] = demangled
    hint = evidence["abi"]
    if hint == "cxx11":
        evidence["extension_cxx11abi"] = "__cxx11" in sym
        summary = (
            "The compiled extension was built with the other C++ ABI (cxx11abi TRUE/FALSE) than the installed torch."
        )
    elif hint == "torch_version":
        summary = "The compiled extension was built against a different torch version than the one installed."
    else:
        summary = "The compiled extension needs a symbol no loaded library provides: a partial or mismatched build."
    return "torch_abi", summary, evidence


def _abi_hint(symbol: str) -> str:
    residue = _strip_identifiers(symbol)
    # "__cxx11" is an identifier (new-ABI std::string); "Ss" is the old-ABI std::string substitution.
    if "__cxx11" in symbol or "Ss" in residue:
        return "cxx11"
    if _TORCH_NAMESPACE.search(symbol):
        return "torch_version"
    return "unknown"


def _strip_identifiers(symbol: str) -> str:
    """Drop the length-prefixed names of an Itanium mangled symbol so that 'Ss' inside a name is not an ABI tag."""
    out: list[str] = []
    i = 0
    while i < len(symbol):
        # Digits after C/D/S/T/v are ctor, dtor, substitution, template and vector codes, not name lengths.
        if symbol[i] in _DIGITS and i > 0 and symbol[i - 1] not in "CDSTv":
            j = i
            while j < len(symbol) and symbol[j] in _DIGITS:
                j += 1
            i = j + int(symbol[i:j])
            continue
        out.append(symbol[i])
        i += 1
    return "".join(out)


def demangle(symbol: str) -> str | None:
    tool = shutil.which("c++filt")
    if tool is None or not symbol.startswith("_Z"):
        return None
    try:
        done = subprocess.run([tool, symbol], capture_output=True, text=True, timeout=2.0, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out and out != symbol else None


def _glibc(text: str) -> _Found:
    m = _VERSION_NOT_FOUND.search(text)
    if m is None:
        return None
    kind = m.group("kind")
    evidence: dict[str, object] = {"requires": m.group("tag"), "kind": kind.lower(), "version": m.group("ver")}
    lib = _LIB_LINE.search(text)
    if lib:
        evidence["library"] = lib.group("lib")
    if m.group("by"):
        evidence["required_by"] = m.group("by")
    what = "glibc" if kind == "GLIBC" else "libstdc++"
    summary = f"The compiled extension needs {what} {m.group('ver')} or newer, which this system does not have."
    return "glibc", summary, evidence


def _cuda_runtime(text: str) -> _Found:
    m = _CUDA_LIB.search(text)
    if m is None:
        return None
    name, lib = m.group("name"), m.group("lib")
    evidence: dict[str, object] = {"library": lib}
    if name == "cuda":
        return "cuda_runtime", f"The NVIDIA driver library {lib} cannot be found: no driver is installed.", evidence
    major = m.group("major")
    if major and name in _CUDA_MAJOR_LIBS:
        evidence["cuda_major"] = int(major)
        summary = f"The build needs the CUDA {major} runtime ({lib}), which is not installed where it can be found."
    else:
        summary = f"The build needs the CUDA library {lib}, which is not installed where it can be found."
    return "cuda_runtime", summary, evidence


def _cute_dsl(text: str) -> _Found:
    for pattern in (_NO_MODULE, _NO_SUCH_MODULE):
        for m in pattern.finditer(text):
            mod = m.group("mod")
            if mod.split(".")[0] in _DSL_ROOTS:
                summary = f"FA4's CuTe DSL runtime is missing or incomplete: Python cannot import '{mod}'."
                return "cute_dsl_missing", summary, {"module": mod}
    return None


@dataclass(frozen=True)
class _Contains:
    """A rule that matches any of a few fixed phrases, case-insensitively (a class, not a closure: built at import,
    decided at call time)."""

    cause: str
    summary: str
    needles: tuple[str, ...]

    def __call__(self, text: str) -> _Found:
        low = text.lower()
        for needle in self.needles:
            if needle.lower() in low:
                return self.cause, self.summary, {"matched": needle}
        return None


def _module_missing(text: str) -> _Found:
    m = _NO_MODULE.search(text)
    if m is not None:
        mod = m.group("mod")
        return "module_missing", f"Python cannot find the module '{mod}' in the target interpreter.", {"module": mod}
    c = _CANNOT_IMPORT.search(text)
    if c is not None:
        summary = f"'{c.group('name')}' cannot be imported from '{c.group('mod')}': the install is incomplete."
        return "module_missing", summary, {"module": c.group("mod"), "name": c.group("name")}
    return None


_RULES: tuple[Callable[[str], _Found], ...] = (
    _torch_abi,
    _glibc,
    _cuda_runtime,
    _cute_dsl,
    _Contains(
        "driver_too_old",
        "The NVIDIA driver is too old for the CUDA version this build uses.",
        (
            "CUDA driver version is insufficient",
            "cudaErrorInsufficientDriver",
            "NVIDIA driver on your system is too old",
        ),
    ),
    _Contains(
        "no_kernel_image",
        "The build contains no GPU code for this GPU's architecture.",
        ("no kernel image is available",),
    ),
    _Contains(
        "gpu_too_old",
        "This GPU is older than FlashAttention supports (it needs Ampere, compute capability 8.0, or newer).",
        (
            "only supports Ampere GPUs or newer",
            "Unsupported compute capability",
            "only supported on devices with compute capability >= 8",
            "only supported on sm90 and above",
        ),
    ),
    _Contains(
        "no_cuda",
        "torch in the target interpreter cannot use a GPU (CPU-only build, or no driver).",
        (
            "Torch not compiled with CUDA enabled",
            "Found no NVIDIA driver on your system",
            "torch.cuda.is_available() is False",
        ),
    ),
    _module_missing,
    _Contains(
        "sgl_kernel_fa3",
        "sgl_kernel could not load its FA3 extension (flash_ops); the reason is hidden behind a generic message.",
        ("Can not import FA3 in sgl_kernel",),
    ),
)
