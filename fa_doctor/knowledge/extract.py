"""The variable parts of a paste (symbol, library, versions, arch, glibc, module, ...): each regex runs in a
bounded window around a literal of the lower-cased text; values are sliced from the case-kept text."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import suppress
from functools import lru_cache

_R = re.compile
_MAX_HITS = 8  # occurrences of an anchor tried per extractor
# A name's length in a mangled symbol: digits after C/D/S/T/v are ctor, dtor, substitution, template and vector codes.
_NAME_LENGTH = _R(r"(?<=[^CDSTv])[0-9]+")
_TORCH_NAMESPACE = _R(r"(?:^_Z|N|K)(?:3c10|2at|5torch|6caffe2)\d")
_STD_LIB = _R(r"_ZN?K?St|_ZSt|__cxa_|__gxx_")
# Whose a plain C symbol is, by its start (the first that matches).
_SYMBOL_KINDS = (
    (_R(r"cu[A-Z]"), "cuda-driver"),
    (_R(r"cuda[A-Z]|__cuda"), "cuda-runtime"),
    (
        _R(r"_{0,2}(?:cublas|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|nvjitlink|cupti|nvtx|cufile)", re.I),
        "cuda-library",
    ),
    (_R(r"_{0,2}(?:hip[A-Z]|hsa_|roc[a-z]{2,}_|amd_comgr)"), "rocm"),
    (_R(r"_?Py[A-Z][a-z]|_?Py_[A-Z]"), "python"),
    (_STD_LIB, "cxx-runtime"),
)
# Libraries whose symbols (or symbol versions) are the CUDA toolkit's: a mismatch among them is a CUDA runtime one.
CUDA_LIBS = ("libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusparse", "libcusolver", "libnccl",
             "libnvrtc", "libnvjitlink", "libcupti", "libnvtoolsext", "libcufile", "libnvidia-ml")  # fmt: skip


def windows(low: str, anchor: str, before: int, after: int) -> Iterator[tuple[int, int]]:
    """(start, end) windows around the first occurrences of anchor."""
    pos, hits = low.find(anchor), 0
    while pos >= 0 and hits < _MAX_HITS:
        yield max(0, pos - before), min(len(low), pos + len(anchor) + after)
        hits += 1
        pos = low.find(anchor, pos + len(anchor))


def first(low: str, anchor: str, rx: re.Pattern[str], before: int, after: int) -> re.Match[str] | None:
    """The first match of rx in a window around one of the first occurrences of anchor."""
    return next(filter(None, (rx.search(low, start, end) for start, end in windows(low, anchor, before, after))), None)


_LOST_UNDERSCORE = re.compile(r"Z[NK]*\d")
_SYMBOL = _R(r"undefined symbol ?: ?([\w.$@]{1,1000})(?:, version (lib[\w.+-]{1,80}))?")
# glibc's loader for a versioned symbol the loaded copy lacks ("symbol X version Y not defined in file Z").
_SYMBOL_VERSION = _R(r"symbol ([\w.$@]{1,400}),? version (lib[\w.+-]{1,80}) not defined in file (lib[\w.+-]{1,80})")
_TOKEN_END = re.compile(r"[\s'\"()\[\]<>]")
_LIB_FILE = _R(r"\.(?:so|pyd|dll)(?:\.[\w.]{1,20})?$")
_OPEN_LIB = _R(r"(lib[\w.+-]{1,80}\.so[\w.]{0,20}): cannot open shared object file")
_DLL = _R(r"dll load failed(?: while importing ([\w.]{1,200}))?")
_GLIBC = _R(
    r"version [`'\"]?((glibcxx|glibc|cxxabi)_([\d.]{1,12}))['`\"]? not found(?: \((?:required by )?([^)\s]{1,400})\))?"
)
_MODULES = (
    ("no module named", _R(r"no module named [`'\"]?([\w.]{1,200})")),
    ("no such module", _R(r"no such module [`'\"]?([\w.]{1,200})")),
)
_CANNOT_IMPORT = _R(r"cannot import name [`'\"]?(\w{1,200})[`'\"]? from [`'\"]?([\w.]{1,200})")
_NOISE_MODULES = frozenset({"numpy", "pynvml", "tensorrt", "apex", "deepspeed", "bitsandbytes", "xformers"})
_FA_IMPL = _R(r"fa_impl_ver ?= ?([^\s,;)\]]{1,40})")
_TORCH = _R(
    # Not the "torch2.4" of a wheel tag (followed by cxx11abi): that is what the wheel was built for.
    r"torch(?:\.__version__|[ _-]?version)?[ :=]{0,3}v?(\d\.\d{1,2}(?:\.\d{1,2})?(?:\.dev\d+)?(?:\+[a-z0-9.]{1,20})?)"
    r"(?!\w|\.\d)"
)
_TORCH_TAG = _R(r"torch(\d\.\d{1,2})cxx11abi")
_FLASH = _R(r"flash[_-]attn(?:[_-]?[234])?(?:==|: | |-)v?(\d\.\d{1,2}\.\d{1,2}(?:\.post\d+|b\d+)?)")
_CUDA = _R(r"cuda(?: version| runtime| toolkit)?[ :]{0,3}v?(\d{2}\.\d)")
_CUDA_TAG = _R(r"\+cu(\d{2,3})")
_PYTHON = _R(r"python ?3\.(\d{1,2})")
_CP = _R(r"cp3(\d{1,2})")
_CXX11 = _R(r"cxx11abi(true|false)")
_DRIVER = _R(r"driver version[ :]{0,3}(\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
_SM = _R(r"sm_?(\d{2,3}[af]?)\b")
_FOUND_CC = _R(r"found \((\d{1,2}), ?(\d)\)")
_CC = _R(r"compute capability(?: is| of|:)? ?(\d{1,2})(?:\.(\d))?")
_GPU = _R(
    r"\b(tesla [tvkpam]\d{1,3}s?|v100s?|t4|a100|a10g?|a30|a40|a800|a6000|h100|h800|h200|h20|b200|b100|b300|gb200|gb10|"
    r"l4|l40s?|l20|rtx ?(?:a?\d{4}|pro \d{4})(?: ti)?d?|quadro rtx \d{4}|titan \w{1,10}|gtx \d{4}|mi\d{3}x?|"
    r"rx \d{4}|dgx spark|jetson \w{1,10})\b"
)
_GPU_ANCHORS = ("rtx", "tesla", "a100", "h100", "h200", "b200", "t4", "v100", "l40", "l4", "mi3", "gb")
_WHEEL = _R(r"((?:flash_attn|sgl_kernel|sglang_kernel|vllm)[\w.+-]{0,160}?\.whl)")
_BACKEND = _R(r"--((?:prefill-|decode-)?attention-backend)[ =]([\w-]{1,20})")
_OVERRIDE = _R(r"sglang_flashattention_version[ =:'\"]{1,4}([^\s'\"]{0,20})")


def extract(flat: str, low: str, has: Callable[[str], bool]) -> dict[str, str]:
    """Every variable part found (keys grouped in GROUP_KEYS); has(anchor) says whether low holds anchor."""

    def search(anchor: str, rx: re.Pattern[str], before: int, after: int) -> re.Match[str] | None:
        return first(low, anchor, rx, before, after) if has(anchor) else None

    def group(m: re.Match[str], n: int = 1) -> str:
        return flat[slice(*m.span(n))]  # "" for a group that did not take part

    out: dict[str, str] = {}
    if m := search("undefined symbol", _SYMBOL, 0, 1100):
        sym = group(m)
        if _LOST_UNDERSCORE.match(sym):  # markdown took the leading "_" of "_ZN...": put it back
            sym = "_" + sym
        out["symbol"] = sym
        if m.group(2):
            out["symbol_version"] = group(m, 2)
        if sym.startswith("_Z"):
            out["abi"] = abi_hint(sym)
        if lib := _file_before(flat, low, ": undefined symbol"):
            out["library_path"] = lib
    elif m := search("not defined in file", _SYMBOL_VERSION, 500, 120):
        out.update(symbol=group(m), symbol_version=group(m, 2), library_path=group(m, 3))
    if "symbol" in out:
        out["symbol_kind"] = symbol_kind(out["symbol"], out.get("symbol_version", ""))
    if "library_path" not in out and (m := search("cannot open shared object", _OPEN_LIB, 120, 30)):
        out["library_path"] = group(m)
    if "library_path" in out:
        out["library"] = re.split(r"[/\\]", out["library_path"])[-1]
    if (m := search("dll load failed", _DLL, 0, 250)) and m.group(1):
        out.setdefault("module", group(m))
    if m := search("glibc", _GLIBC, 40, 450) or search("cxxabi_", _GLIBC, 40, 450):
        out.update(glibc_requires=group(m).upper(), glibc_kind=m.group(2), glibc_version=m.group(3))
        if m.group(4):
            out["required_by"] = group(m, 4)
        if lib := _file_before(flat, low, ": version"):
            out["library_path"] = lib
    found: list[str] = []
    for anchor, rx in _MODULES:
        if has(anchor):
            found += [group(m).rstrip(".") for s, e in windows(low, anchor, 0, 230) if (m := rx.search(low, s, e))]
    if found:
        out.setdefault("module", next((f for f in found if f.split(".")[0].lower() not in _NOISE_MODULES), found[0]))
    if m := search("cannot import name", _CANNOT_IMPORT, 0, 450):
        out["name"] = group(m)
        out.setdefault("module", group(m, 2).rstrip("."))
    # versions: common words (torch, cuda, attn) occur far more often than the windows search() tries, so the
    # (bounded) text is scanned for them
    for key, anchor, rx in (("torch", "torch", _TORCH), ("flash_attn", "attn", _FLASH), ("cuda", "cuda", _CUDA)):
        if has(anchor) and (m := rx.search(low)):
            out[key] = group(m)
    for key, anchor, rx, before, after in (
        ("fa_impl_ver", "fa_impl_ver", _FA_IMPL, 0, 60),
        ("cuda_tag", "+cu", _CUDA_TAG, 0, 8),
        ("cxx11abi", "cxx11abi", _CXX11, 0, 8),
        ("driver", "driver version", _DRIVER, 0, 30),
        ("wheel", ".whl", _WHEEL, 200, 4),
        ("override", "sglang_flashattention_version", _OVERRIDE, 0, 40),
    ):
        if m := search(anchor, rx, before, after):
            out[key] = group(m)
    if "torch" not in out and (m := search("cxx11abi", _TORCH_TAG, 12, 2)):
        out["torch"] = m.group(1)
    if "cxx11abi" in out:
        out["cxx11abi"] = out["cxx11abi"].upper()
    if m := (_PYTHON.search(low) if has("python") else None) or (_CP.search(low) if has("cp3") else None):
        out["python"] = f"3.{m.group(1)}"
    if m := search("attention-backend", _BACKEND, 12, 30):
        out["backend"] = f"--{m.group(1)} {group(m, 2)}"
    if m := search("found (", _FOUND_CC, 0, 12):
        out["capability"] = f"{m.group(1)}.{m.group(2)}"
    elif m := search("compute capability", _CC, 0, 8):
        major, minor = m.group(1), m.group(2)
        if minor is None and len(major) == 2:
            major, minor = major[0], major[1]
        if minor is not None:
            out["capability"] = f"{major}.{minor}"
    if has("sm") and (m := _SM.search(low)):
        out["arch"] = "sm_" + m.group(1)
    if m := next(filter(None, (search(anchor, _GPU, 12, 16) for anchor in _GPU_ANCHORS)), None):
        out["gpu"] = group(m)
    return out


def _file_before(flat: str, low: str, anchor: str) -> str:
    """The path-like token that ends right before anchor (a scan backwards, no regex)."""
    pos = low.find(anchor)
    if pos <= 0:
        return ""
    token = _TOKEN_END.split(flat[max(0, pos - 400) : pos])[-1]
    return token if _LIB_FILE.search(token) else ""


def symbol_kind(symbol: str, version: str = "") -> str:
    """Whose symbol is missing: torch / torch-cxx11 (a C++ ABI switch) / cuda-driver / cuda-runtime /
    cuda-library / rocm (HIP) / python (the C API of another Python) / cxx-runtime (libstdc++) / other.
    `version` is the library a versioned symbol belongs to ("..., version libnvJitLink.so.12")."""
    if symbol.startswith("_Z"):
        if _TORCH_NAMESPACE.search(symbol):
            return "torch-cxx11" if abi_hint(symbol) == "cxx11" else "torch"
        return "cxx-runtime" if _STD_LIB.match(symbol) else "other"
    if version.lower().startswith(CUDA_LIBS):
        return "cuda-runtime" if version.lower().startswith("libcudart") else "cuda-library"
    return next((kind for rx, kind in _SYMBOL_KINDS if rx.match(symbol)), "other")


def abi_hint(symbol: str) -> str:
    """cxx11 (a std::string of the other C++ ABI), torch_version (a torch symbol), or unknown."""
    # Without the length-prefixed names of the mangled symbol, so that 'Ss' inside a name is not an ABI tag.
    residue, i = [], 0
    while m := _NAME_LENGTH.search(symbol, i):
        residue.append(symbol[i : m.start()])
        i = m.end() + int(m.group())
    # "__cxx11" is an identifier (new-ABI std::string); "Ss" is the old-ABI std::string substitution.
    if "__cxx11" in symbol or "Ss" in "".join(residue) + symbol[i:]:
        return "cxx11"
    return "torch_version" if _TORCH_NAMESPACE.search(symbol) else "unknown"


def demangle(symbol: str) -> str | None:
    """c++filt's reading of an Itanium symbol (2 s at most), or None when c++filt is absent or fails."""
    tool = shutil.which("c++filt") if symbol.startswith("_Z") and len(symbol) <= 1000 else None
    if tool is None:
        return None
    with suppress(OSError):
        return _demangle(tool, os.stat(tool).st_mtime_ns, symbol)
    return None


@lru_cache(maxsize=64)
def _demangle(tool: str, stamp: int, symbol: str) -> str | None:
    """Cached per tool (path and modification time): the same paste asks about the same symbol many times."""
    del stamp
    from fa_doctor.process import proc

    try:
        done = proc.run([tool, symbol], 2.0, max_output=4096)
    except (OSError, ValueError):
        return None
    out = done.out().strip()[:2000]
    return out if done.returncode == 0 and not done.timed_out and out and out != symbol else None
