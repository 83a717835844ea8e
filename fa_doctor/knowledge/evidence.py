"""The evidence in a paste, as named features with the reason each one is shown to the user.

Rules here name *what the text shows* (a head dim above 256, a compiler's unknown-switch message, frames in
xformers, a missing `torch` inside a build), never a category: which category a piece of evidence points to is
counted from the labelled corpus (fa_doctor/knowledge/model.json, fitted by benchmarks/explain_fit.py).
Words of the paste are features too (`tok:`), so evidence no rule names still counts.

Cost is bounded like match.py's: literals with str's substring search, regexes in windows around a literal,
and the few whole-text scans (words, exception names, frames) on the already-bounded analysed text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

import fa_doctor.knowledge.structure as structure
from fa_doctor.catalog import names
from fa_doctor.knowledge.extract import windows

_R = re.compile
MAX_TOKENS = 600  # distinct words kept of one paste (the last ones: the final error is at the end)
_WORD = _R(r"[a-z][a-z0-9_]{2,39}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "not",
        "are",
        "was",
        "were",
        "but",
        "you",
        "your",
        "have",
        "has",
        "had",
        "can",
        "will",
        "line",
        "file",
        "none",
        "self",
        "return",
        "true",
        "false",
        "lib",
        "python3",
        "site",
        "packages",
        "dist",
        "home",
        "usr",
        "local",
        "envs",
        "bin",
        "anaconda3",
        "miniconda3",
        "conda",
        "venv",
        "def",
        "args",
        "kwargs",
        "call",
        "main",
        "raise",
        "error",
        "traceback",
        "most",
        "recent",
        "last",
    ]
)
# Words that make a paste about FlashAttention's world at all; without one of them (or a rule's evidence),
# the model says nothing ("the weather is nice" has no category).
_RELEVANT = (
    "flash", "attn", "attention", "cuda", "torch", "nvcc", "gpu", "xformers", "vllm", "sglang", "sgl_kernel",
    "triton", "rocm", "hip", "cutlass", "sm_", "capability", "kernel", "nvidia", "cudnn", "nccl", "glibc",
    "undefined symbol", "shared object", "transformers", "fp16", "bf16", "head_dim", "headdim",
)  # fmt: skip

_CAP_PAIR = _R(r"capability[^0-9]{0,20}(\d{1,2})[ .,]{1,2}(\d)\b|found \((\d{1,2}), ?(\d)\)|\bsm_?(\d{2,3})[af]?\b")
# The GPU's own capability, where a message states both a requirement and what the GPU has.
_OWN_CAP = _R(r"(?:gpu|device) has (?:compute )?capability \(?(\d{1,2})[ .,]{1,2}(\d)")
_HEADDIM = _R(
    r"head[ _-]?(?:dim(?:ension)?s?|size)\b[^0-9\n]{0,40}?(\d{1,4})|\bhdim ?(\d{1,4})"
    r"|shape\[-1\]\)? ?(?:>|!=|==|=|is) ?(\d{1,4})"  # xformers names the head dim query.shape[-1]
)
_LIMIT = _R(
    r"up to|at most|<=|maximum|max\(|only supports?|not supported|must be|should be|divisible|multiple of|> ?\d"
    r"|greater than|larger than|bigger than|exceed|not being|does not support|doesn't support|requires"
)
_NUMBER = _R(r"(?<![\d.])(\d{2,4})(?![\d.])")
_EXC = _R(r"\b((?:[a-z_]\w{0,40}\.){0,4}[A-Z]\w{0,40}(?:Error|Exception|Interrupt)):")
_FRAME = _R(r"(?:site|dist)-packages[/\\]([a-z_][a-z0-9_]{1,40})")
_LONG_PATH = _R(r"[^\s'\"]{200,}")
_VERSION_NEED = _R(
    r"(?:>=|<=|==|~=|\b(?:maximum|minimum|at least|at most|supported|requires?|required)\b[^\n]{0,12}\bversions?\b)"
    r" ?v?\d+\.\d+|versions? (?:is|are|must be|should be)? ?(?:>=|<=|>|<|between|at least|at most)"
)
_GPU_OLD = _R(r"\b(?:v100s?|t4|p100|p40|k80|m40|1080(?: ti)?|2080(?: ti)?|20[67]0|1660|titan (?:v|x|rtx)|quadro)\b")
_GPU_OLD_ANCHORS = (
    "v100",
    "t4",
    "p100",
    "p40",
    "k80",
    "m40",
    "1080",
    "2080",
    "2060",
    "2070",
    "1660",
    "titan",
    "quadro",
)
_GPU_NEW_ANCHORS = ("50", "b200", "b100", "b300", "gb200", "gb10", "rtx pro", "spark", "thor")
_TAIL = 32_000
_GPU_NEW = _R(r"\b(?:rtx ?50[5-9]0|b200|b100|b300|gb200|gb10|rtx pro 6000|dgx spark|thor)\b")

Rule = tuple[str, tuple[str, ...], "re.Pattern[str] | None", str]
# (feature, literals (any), regex tried around a literal or None, reason shown to the user)
RULES: tuple[Rule, ...] = (
    ("build-wheel", ("building wheel", "bdist_wheel", "setup.py", "failed building", "legacy-install-failure",
                     "metadata-generation-failed", "subprocess-exited-with-error", "getting requirements to build"),
     None, "the error happens while building a wheel from source"),
    ("build-tool", ("ninja", "nvcc", "cmake", "cl.exe", "g++", "gcc", "hipcc", "cicc", "ptxas"), None,
     "a compiler or build tool is running"),
    ("compile-error", ("error: command", "fatal error", "compilation terminated", "error compiling",
                       "build stopped", "returned non-zero exit status", "exit code", "-error-"), None,
     "a compiler or build step failed"),
    ("compiler-flag", ("unknown switch", "unknown option", "unrecognized command", "unknown argument",
                       "invalid option", "unrecognised command"), None,
     "a compiler rejected a command-line switch (a different compiler than the build expects)"),
    ("linker", ("undefined reference", "collect2", "ld returned", "cannot find -l", "lnk2019", "lnk1120"), None,
     "the linker failed"),
    ("long-path", ("filename too long", "file name too long", "path too long", "longpathsenabled", "max_path"),
     None, "a path is too long for the file system (Windows' 260-character limit)"),
    ("windows", (":\\", ".pyd", ".dll", "windows", "win_amd64", "msvc", "visual studio"), None,
     "the machine runs Windows"),
    ("unpack", ("values to unpack",), None,
     "a call returned another number of values than the caller expects (code and extension of different versions)"),
    ("signature", ("unexpected keyword argument", "positional argument", "required positional", "got multiple values",
                   "incompatible function arguments"), None,
     "a function was called with arguments it does not take (caller and library of different versions)"),
    ("no-attribute", ("has no attribute",), None, "a module lacks a name the caller uses"),
    ("cannot-import-name", ("cannot import name",), None, "a module lacks a name the caller imports"),
    ("version-requirement", ("flash-attn", "flash_attn", "flash attention", "flashattention", "flash-attention"),
     _VERSION_NEED,
     "a version requirement on FlashAttention is stated"),
    ("version-found", ("but got", "but found", "found version", "installed version", "you have", "is installed"),
     _R(r"\d+\.\d+"), "the installed version is compared with a required one"),
    ("cpu", (" cpu", "cpu ", "cpu-only", "+cpu", "on cpu", "device='cpu'"), None, "the text mentions the CPU"),
    ("torch-cpu", ("+cpu", "cpu-only", "cpu only"), None, "torch is a CPU-only build"),
    ("no-cuda", ("not compiled with cuda", "cuda is not available", "no cuda gpus", "found no nvidia driver",
                 "no nvidia gpu", "cuda_available: false", "is_available() false", "no cuda-capable device"),
     None, "torch sees no usable CUDA GPU"),
    ("driver", ("driver version", "nvidia driver", "driver is too old", "insufficient for cuda", "cuda driver",
                "update your gpu driver", "driver api"), None, "the NVIDIA driver is named"),
    ("cuda-error", ("cuda error", "cudaerror", "illegal memory access", "unspecified launch failure",
                    "device-side assert", "cuda_error", "cublas_status", "cudnn_status"), None,
     "a CUDA call failed at run time"),
    ("no-kernel-image", ("no kernel image",), None, "the binary has no GPU code for this GPU"),
    ("rocm", ("rocm", "hipcc", "hip error", "hiperror", "amdgpu", "radeon", "instinct", "ck_tile", "triton_fa",
              "rocm_flash", "rocmflash", "torch.version.hip", "hip_"), None, "AMD ROCm is in use"),
    ("gfx", ("gfx",), _R(r"gfx\d{3,4}"), "an AMD GPU architecture (gfxNNNN) is named"),
    ("composable-kernel", ("composable_kernel", "aiter"), None, "AMD's kernel library sources are named"),
    ("backend", ("attention-backend", "attention_backend", "attn_implementation", "attn_backend",
                 "vllm_attention_backend", "attention backend", "backend="), None, "an attention backend is chosen"),
    ("invalid-choice", ("invalid choice", "choose from", "not a valid", "unknown backend",
                        "is not supported by", "invalid backend", "valid backends", "valid options",
                        "unknown attention backend"), None, "a chosen value is refused"),
    ("cutlass", ("cutlass", "cute"), None, "CUTLASS or CuTe is named"),
    ("cute-dsl", ("cutlass-dsl", "cutlass_dsl", "cute dsl", "cute-dsl", "cutlass.cute", "flash_attn.cute",
                  "nvidia_cutlass"), None, "the CuTe DSL (FlashAttention-4's runtime) is named"),
    ("fa3", ("flash_attn_3", "hopper", "flashattention-3", "flashattention 3", "fa3",
             "flash_attn3", "fav3", "flash attention 3", "flash-attn-3"), None, "FlashAttention-3 is named"),
    ("fa4", (names.FLASH_ATTN_4, "flash_attn_4", "fa4", "flashattention-4", "flash attention 4"), None,
     "FlashAttention-4 is named"),
    ("fa2-ext", ("flash_attn_2_cuda", "flash_attn_cuda", "flash_attn_gpu", "_vllm_fa2_c", "flash_ops"), None,
     "a FlashAttention compiled extension is named"),
    ("kv-cache-dtype", ("kv_cache_dtype", "kv-cache-dtype", "fp8_e4m3", "fp8_e5m2", "fp8 kv"), None,
     "a KV-cache dtype is chosen"),
    ("dtype", ("fp16", "bf16", "float16", "bfloat16", "float32", "fp32", "dtype", "half precision"), None,
     "a dtype is named"),
    ("dtype-fp32", ("float32", "fp32", "torch.float "), None, "the tensors are float32"),
    ("built-for", ("built for", "compiled for", "was compiled against", "built against"), None,
     "the text says what a binary was built for"),
    ("dll", ("dll load failed", "winerror 126", "winerror 127", "specified module could not be found"), None,
     "Windows could not load a DLL"),
    ("oom", ("killed", "out of memory", "cannot allocate memory", "oom", "memoryerror", "signal 9",
             "bad_alloc", "no space left"), None, "the machine ran out of memory or disk"),
    ("network", ("http error", "httperror", "urlopen", "connection refused", "connection reset", "timed out",
                 "name resolution", "urlerror", "ssl:", "proxy"), None, "a download failed"),
    ("source-tree", ("submodule", "csrc/cutlass", "git clone", ".git/", "is missing", "no such file or directory"),
     None, "files of the source tree are missing"),
    ("no-wheel", ("no matching distribution", "could not find a version", "not a supported wheel",
                  "no wheel", "prebuilt wheel", "precompiled wheel", "cached_wheel"), None,
     "no matching prebuilt wheel"),
    ("install-hint", ("not installed", "please install", "pip install", "is not available", "could not find",
                      "unable to find", "make sure"), None, "the text asks for an install"),
    ("unsupported", ("not supported", "unsupported", "only support", "only supports", "not implemented",
                     "is not available for"), None, "something is refused as unsupported"),
    ("arch-word", ("ampere", "turing", "volta", "pascal", "ada", "hopper", "blackwell"), None,
     "a GPU generation is named"),
    ("cuda-mismatch", ("detected cuda version", "mismatches the version", "cuda_home", "cuda version mismatch",
                       "does not match the version"), None, "two CUDA versions disagree"),
    ("other-accel", ("ascend", "npu", "mps", "xpu", "habana", "hpu"), _R(r"\b(?:ascend|npu|mps|xpu|habana|hpu)\b"),
     "an accelerator other than NVIDIA's"),
    ("cuda-lib", ("libcudart", "libcublas", "libnvrtc", "libcudnn", "libnvjitlink", "libcusparse", "libnccl"),
     None, "a CUDA library is named"),
    ("glibc", ("glibc_", "glibcxx_", "cxxabi_"), None, "a C library version is required"),
)  # fmt: skip


def _any(has: Callable[[str], bool], literals: tuple[str, ...]) -> str:
    return next((lit for lit in literals if has(lit)), "")


def _bucket(major: int, minor: int) -> str:
    if major < 8:
        return "pre-ampere"
    if major == 8:
        return "ampere"
    return "hopper" if major == 9 else "blackwell"


def evidence(flat: str, low: str, found: Mapping[str, str], has: Callable[[str], bool]) -> dict[str, str]:
    """Rule features ("ev:NAME") with their reasons; flat is the case-kept text, low its lower-case copy and
    `found` extract()'s output."""
    out: dict[str, str] = {}
    for name, literals, rx, reason in RULES:
        lit = _any(has, literals)
        if not lit:
            continue
        if rx is not None and not any(rx.search(low, s, e) for s, e in windows(low, lit, 0, 120)):
            continue
        out["ev:" + name] = reason
    _values(flat, low, found, has, out)
    out.update(structure.structure(flat, low, found, has))
    return out


def _values(flat: str, low: str, found: Mapping[str, str], has: Callable[[str], bool], out: dict[str, str]) -> None:
    """Evidence that depends on a value: capabilities, head dims, symbols, modules, long paths."""
    own = (m for s, e in windows(low, "capability", 30, 20) if (m := _OWN_CAP.search(low, s, e)) is not None)
    first = next(own, None) if has("capability") else None
    for start, end in ((first.start(), first.end()),) if first else _cap_windows(low, has):
        m = first or _CAP_PAIR.search(low, start, end)
        if m is None:
            continue
        if m.re is _OWN_CAP:
            major, minor = int(m.group(1)), int(m.group(2))
        elif m.group(5):
            major, minor = divmod(int(m.group(5)), 10)
        else:
            major, minor = int(m.group(1) or m.group(3)), int(m.group(2) or m.group(4))
        bucket = _bucket(major, minor)
        out["ev:cap-" + bucket] = f"compute capability {major}.{minor} ({bucket}) is named"
        break
    if has("capability"):
        out["ev:capability"] = "a compute capability is named"
    if _any(has, _GPU_OLD_ANCHORS) and (m := _GPU_OLD.search(low)) is not None:
        out["ev:gpu-pre-ampere"] = f"a GPU older than Ampere ({m.group(0)}) is named"
    if _any(has, _GPU_NEW_ANCHORS) and (m := _GPU_NEW.search(low)) is not None:
        out["ev:gpu-blackwell"] = f"a Blackwell GPU ({m.group(0)}) is named"
    if has("head") or has("hdim") or has("shape[-1]"):
        spots = (*windows(low, "head", 0, 60), *windows(low, "hdim", 0, 12), *windows(low, "shape[-1]", 0, 60))
        for start, end in spots:
            m = _HEADDIM.search(low, start, end)
            if m is None:
                continue
            dim = int(m.group(1) or m.group(2) or m.group(3))
            dims = [int(n) for n in _NUMBER.findall(low, m.start(), min(end + 40, len(low)))]
            out["ev:headdim"] = f"head dimension {dim} is named"
            if _LIMIT.search(low, max(0, m.start() - 60), min(end + 40, len(low))):
                out["ev:headdim-limit"] = "a limit on the head dimension is stated"
            if (biggest := max([dim, *dims])) > 256:
                out["ev:headdim-over-256"] = f"a head dimension of {biggest} is above FlashAttention's 256"
            elif dim % 8:
                out["ev:headdim-odd"] = f"head dimension {dim} is not a multiple of 8"
            break
    if kind := found.get("symbol_kind"):
        out["ev:symbol-" + kind] = f"an undefined {kind} symbol ({found.get('symbol', '')[:80]})"
    if module := found.get("module"):
        top = module.split(".")[0].lower()
        out["ev:missing-" + top] = f"the module '{module}' is missing"
        if "ev:build-wheel" in out or "ev:build-tool" in out:
            out["ev:missing-in-build"] = f"'{module}' is missing inside a build (pip's build isolation)"
    if lib := found.get("library"):
        stem = lib.split(".so")[0].split(".")[0].lower()
        out["ev:solib-" + stem] = f"the library {lib} cannot be loaded"
    if has("site-packages") or has("dist-packages"):
        pkgs = list(dict.fromkeys(m.group(1) for m in _FRAME.finditer(low, max(0, len(low) - _TAIL))))
        for pkg in pkgs[-6:]:
            out["ev:frame-" + pkg] = f"the traceback runs through {pkg}"
    tail = max(0, len(flat) - _TAIL)  # the final exception and the frames near it are at the end
    excs = (
        [m.group(1).rsplit(".", 1)[-1] for m in _EXC.finditer(flat, tail)]
        if ("rror:" in flat or "ion:" in flat)
        else []
    )
    if excs:
        out["ev:exc-" + excs[-1].lower()] = f"the final exception is {excs[-1]}"
    if ("\\" in low or "/" in low) and max(map(len, low.split()), default=0) >= 200 and _LONG_PATH.search(low):
        out["ev:long-path"] = "a path is longer than 200 characters"
    if found.get("torch"):
        out["ev:torch-version"] = f"torch {found['torch']} is named"
    if fa := found.get("flash_attn"):
        out["ev:fa-version-" + fa[0]] = f"flash-attn {fa} is named"


def _cap_windows(low: str, has: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    for anchor, after in (("capability", 40), ("found (", 12), ("sm", 8)):
        if has(anchor):
            yield from windows(low, anchor, 2 if anchor == "sm" else 0, after)


def tokens(low: str) -> list[str]:
    """Distinct words (3-40 characters, no stop words), the last MAX_TOKENS of them."""
    words = dict.fromkeys(w for w in _WORD.findall(low) if w not in _STOP and not w.isdigit())
    keys = list(words)
    return keys[-MAX_TOKENS:]


# Evidence that by itself makes a paste about FlashAttention's world (a word of _RELEVANT does too).
_STRONG = frozenset(
    [
        "compiler-flag",
        "linker",
        "long-path",
        "unpack",
        "headdim",
        "headdim-over-256",
        "cap-pre-ampere",
        "cap-ampere",
        "cap-hopper",
        "cap-blackwell",
        "gpu-pre-ampere",
        "gpu-blackwell",
        "glibc",
        "rocm",
        "gfx",
        "no-kernel-image",
        "kv-cache-dtype",
        "cute-dsl",
        "fa3",
        "fa4",
        "fa2-ext",
        "built-for",
        "dll",
        "no-cuda",
        "driver",
        "cuda-error",
        "cuda-lib",
    ]
)


def relevant(ev: Mapping[str, str], has: Callable[[str], bool]) -> bool:
    """Whether the paste is about FlashAttention's world at all (else the model names no category)."""
    names = {name[3:] for name in ev}
    if names & (_STRONG | structure.STRONG) or any(n.startswith(("symbol-", "missing-", "solib-")) for n in names):
        return True
    return any(has(w) for w in _RELEVANT)


# What each kind of evidence usually means, written from how the libraries fail (not counted from the corpus):
# the model adds HINT_DOCS pseudo-reports of this category to the feature's counts, so evidence seen in few
# reports still points somewhere sensible. The counted corpus can outweigh every hint.
HINT_DOCS = 2
HINTS: dict[str, str] = {
    **dict.fromkeys(
        ("ev:build-wheel", "ev:build-tool", "ev:compile-error", "ev:compiler-flag", "ev:linker", "ev:long-path",
         "ev:network", "ev:no-wheel", "ev:source-tree", "ev:cuda-mismatch", "ev:missing-in-build", "ev:oom"),
        "build-failure",
    ),
    **dict.fromkeys(("ev:unpack", "ev:signature", "ev:version-requirement", "ev:cannot-import-name"), "api-mismatch"),
    **dict.fromkeys(("ev:torch-cpu", "ev:no-cuda"), "no-gpu"),
    **dict.fromkeys(("ev:driver", "ev:symbol-cuda-driver"), "driver-too-old"),
    **dict.fromkeys(("ev:cuda-error", "ev:symbol-cuda-runtime", "ev:cuda-lib"), "cuda-runtime"),
    **dict.fromkeys(
        ("ev:no-kernel-image", "ev:cap-pre-ampere", "ev:gpu-pre-ampere", "ev:gpu-blackwell", "ev:cap-blackwell"),
        "arch-unsupported",
    ),
    **dict.fromkeys(("ev:rocm", "ev:gfx"), "rocm"),
    **dict.fromkeys(("ev:invalid-choice", "ev:backend"), "selection-override"),
    **dict.fromkeys(("ev:cute-dsl", "ev:missing-cutlass"), "fa4-dsl"),
    "ev:fa3": "fa3-unavailable",
    **dict.fromkeys(
        ("ev:kv-cache-dtype", "ev:dtype", "ev:headdim", "ev:headdim-over-256", "ev:headdim-odd", "ev:dtype-fp32",
         "ev:headdim-limit"),
        "dtype-shape",
    ),
    **dict.fromkeys(("ev:built-for", "ev:symbol-torch", "ev:symbol-torch-cxx11"), "abi-mismatch"),
    "ev:glibc": "glibc",
    **dict.fromkeys(("ev:missing-flash_attn", "ev:missing-flash_attn_2_cuda"), "missing-module"),
    **structure.HINTS,
}  # fmt: skip

# The entry that words a category when no pattern of it matched, by the evidence that pointed there.
ENTRY_HINTS: dict[str, str] = {
    **dict.fromkeys(("ev:headdim-limit", "ev:headdim-over-256", "ev:headdim-odd", "ev:headdim"), "shape.head-dim"),
    **dict.fromkeys(("ev:dtype-fp32", "ev:dtype"), "shape.dtype"),
    "ev:kv-cache-dtype": "shape.kv-cache-dtype",
    "ev:missing-in-build": "build.torch-isolation",
    "ev:oom": "build.out-of-memory",
    "ev:compiler-flag": "build.compiler-version",
    "ev:source-tree": "build.source-tree",
    "ev:cuda-mismatch": "build.cuda-mismatch",
    **dict.fromkeys(("ev:network", "ev:no-wheel"), "build.no-wheel"),
    **dict.fromkeys(("ev:unpack", "ev:signature", "ev:version-requirement"), "api.keyword-drift"),
    **dict.fromkeys(("ev:cap-pre-ampere", "ev:gpu-pre-ampere"), "arch.pre-ampere"),
    **dict.fromkeys(("ev:cap-blackwell", "ev:gpu-blackwell"), "arch.gpu-not-supported"),
    "ev:no-kernel-image": "arch.no-kernel-image",
    **dict.fromkeys(("ev:torch-cpu", "ev:no-cuda"), "nogpu.cpu-torch"),
    **structure.ENTRY_HINTS,
}
