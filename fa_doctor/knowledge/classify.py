"""The cause of an import- or call-time error (the exception text and its whole __cause__/__context__ chain:
sgl_kernel's "Can not import FA3" hides the real reason there), by the knowledge base's table, so `check`'s smoke
test and `explain` give the same diagnosis; summaries and evidence keys are pinned by tests/test_smoke_classify.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from fa_doctor.knowledge.base import load
from fa_doctor.knowledge.extract import demangle
from fa_doctor.knowledge.match import Hit, match, normalise

_UNKNOWN = "The FlashAttention module raised an error fa-doctor does not recognise; the exact text is below."
_FIXED = {
    "driver_too_old": "The NVIDIA driver is too old for the CUDA version this build uses.",
    "no_kernel_image": "The build contains no GPU code for this GPU's architecture.",
    "gpu_too_old": (
        "This GPU is older than FlashAttention supports (it needs Ampere, compute capability 8.0, or newer)."
    ),
    "no_cuda": "torch in the target interpreter cannot use a GPU (CPU-only build, or no driver).",
    "sgl_kernel_fa3": (
        "sgl_kernel could not load its FA3 extension (flash_ops); the reason is hidden behind a generic message."
    ),
}
_ABI = {
    "cxx11": "The compiled extension was built with the other C++ ABI (cxx11abi TRUE/FALSE) than the installed torch.",
    "torch_version": "The compiled extension was built against a different torch version than the one installed.",
    "unknown": "The compiled extension needs a symbol no loaded library provides: a partial or mismatched build.",
}
# Libraries whose soname major is the CUDA toolkit major (cufft/curand/cusolver number their own).
_CUDA_MAJOR_LIBS = ("libcudart.", "libcublas.", "libcublasLt.", "libnvrtc.", "libnvJitLink.")


@dataclass(frozen=True, slots=True)
class ImportProblem:
    cause: str  # one of base.CAUSES
    summary: str  # one plain sentence for the user
    message: str  # "ExcType: message" of the outermost exception, verbatim
    chain: tuple[str, ...] = ()  # "ExcType: message" of each __cause__/__context__, nearest first
    evidence: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))

    def to_dict(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "chain": list(self.chain), "evidence": dict(self.evidence)}


def classify(exc_type: str, message: str, chain: Sequence[str]) -> ImportProblem:
    head = f"{exc_type}: {message}" if exc_type else message
    hits, found = match(load(), normalise("\n".join([head, *chain])), 1)
    if not hits or hits[0].entry.smoke_cause == "unknown":
        return ImportProblem("unknown", _UNKNOWN, head, tuple(chain), {"exception": exc_type})
    cause = hits[0].entry.smoke_cause
    summary, evidence = _worded(cause, hits[0], {**found, **hits[0].groups})
    return ImportProblem(cause, summary, head, tuple(chain), {"exception": exc_type, **evidence})


def _worded(cause: str, hit: Hit, v: Mapping[str, str]) -> tuple[str, dict[str, object]]:
    if cause == "torch_abi" and "symbol" in v:
        sym = v["symbol"]
        abi = v.get("abi", "unknown")
        ev: dict[str, object] = {"symbol": sym, "abi": abi}
        if abi == "cxx11":
            ev["extension_cxx11abi"] = "__cxx11" in sym
        ev |= _renamed(v, library_path="library")
        if (demangled := demangle(sym)) is not None:
            ev["demangled"] = demangled
        return _ABI[abi], ev
    if cause == "glibc" and "glibc_requires" in v:
        kind = v["glibc_kind"]
        ev = {"requires": v["glibc_requires"], "kind": kind, "version": v["glibc_version"]}
        ev |= _renamed(v, library_path="library", required_by="required_by")
        what = "glibc" if kind == "glibc" else "libstdc++"
        summary = f"The compiled extension needs {what} {v['glibc_version']} or newer, which this system does not have."
        return summary, ev
    if cause == "cuda_runtime" and "library" in v:
        lib = v["library"]
        if lib.startswith("libcuda."):
            return f"The NVIDIA driver library {lib} cannot be found: no driver is installed.", {"library": lib}
        if (major := lib.partition(".so.")[2].split(".")[0]).isdigit() and lib.startswith(_CUDA_MAJOR_LIBS):
            summary = f"The build needs the CUDA {major} runtime ({lib}), which is not installed where it can be found."
            return summary, {"library": lib, "cuda_major": int(major)}
        summary = f"The build needs the CUDA library {lib}, which is not installed where it can be found."
        return summary, {"library": lib}
    if cause == "cute_dsl_missing" and "module" in v:
        mod = v["module"]
        return f"FA4's CuTe DSL runtime is missing or incomplete: Python cannot import '{mod}'.", {"module": mod}
    if cause == "module_missing" and "module" in v:
        mod = v["module"]
        if "name" in v:
            summary = f"'{v['name']}' cannot be imported from '{mod}': the install is incomplete."
            return summary, {"module": mod, "name": v["name"]}
        return f"Python cannot find the module '{mod}' in the target interpreter.", {"module": mod}
    # A cause the table names without the values its wording needs: the entry's own title says it.
    ev = {"matched": hit.pattern.label} if hit.pattern.label else {"symbol": v["symbol"]} if "symbol" in v else {}
    summary = _FIXED.get(cause, hit.entry.title)
    return summary if summary.endswith(".") else summary + ".", ev


def _renamed(v: Mapping[str, str], **keys: str) -> dict[str, object]:
    """The values of v present under keys' names, each under its new name (evidence keys)."""
    return {new: v[old] for old, new in keys.items() if old in v}
