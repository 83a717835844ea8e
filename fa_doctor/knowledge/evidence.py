"""The evidence in a paste: named features (what the text shows and the report's structure, never a category),
each with the reason shown to the user; where each usually points (HINTS) is in docs/explain.md."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from fa_doctor.catalog import names
from fa_doctor.knowledge.extract import CUDA_LIBS, first, windows

_R = re.compile
MAX_TOKENS = 600  # distinct words kept of one paste (the last ones: the final error is at the end)
WORD = _R(r"[a-z][a-z0-9_]{2,39}")
_STOP = frozenset(
    [  # English, tracebacks', paths' words
        *("the", "and", "for", "with", "from", "that", "this", "not", "are", "was", "were", "but", "you", "your"),
        *("have", "has", "had", "can", "will", "most", "recent", "last"),
        *("line", "file", "none", "self", "return", "true", "false", "def", "args", "kwargs", "call", "main"),
        *("raise", "error", "traceback"),
        *("lib", "python3", "site", "packages", "dist", "home", "usr", "local", "envs", "bin", "anaconda3"),
        *("miniconda3", "conda", "venv"),
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
_CAP_SPOTS = (("capability", 0, 40), ("found (", 0, 12), ("sm", 2, 8))  # (anchor, before, after)
_HEAD_SPOTS = (("head", 0, 60), ("hdim", 0, 12), ("shape[-1]", 0, 60))
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
_OLD_ANCHORS = ("v100", "t4", "p100", "p40", "k80", "m40", "1080", "2080", "2060", "2070", "1660", "titan", "quadro")
_NEW_ANCHORS = ("50", "b200", "b100", "b300", "gb200", "gb10", "rtx pro", "spark", "thor")
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


_TORCH_LIBS = ("libtorch", "libc10", "libshm", "libcaffe2")
_ROCM_LIBS = ("libamdhip", "libhip", "librocm", "libhsa", "librccl", "libmiopen", "librocblas")
_FA_FILES = ("flash_attn", "flashattn", "_vllm_fa", "flash_ops", "libflash")
_SERVER_FILES = ("common_ops", "_c.abi3", "_moe_c", "_c.cpython", "sgl_kernel", "vllm")

_FA_MODULES = frozenset(
    ["flash_attn", "flash_attn_2_cuda", "flash_attn_cuda", "flash_attn_gpu", "flash_attn_interface", "flash_attn_3",
     "flash_attn_3_cuda", "flashattn_hopper_cuda", "vllm_flash_attn", "flash_attn_v100", "flash_attn_4", "hopper",
     "flash_attn_triton", "flash_attn_cute"]
)  # fmt: skip
_FA_OPTIONAL = frozenset(
    ["rotary_emb", "dropout_layer_norm", "fused_dense_lib", "xentropy_cuda_lib", "fused_softmax_lib", "ft_attention"]
)
_DSL_MODULES = frozenset(["cutlass", "nvidia_cutlass_dsl", "tvm_ffi", "quack", "cuda"])
_SERVER_MODULES = frozenset(["sgl_kernel", "_vllm_fa2_c", "_vllm_fa3_c", "vllm_c", "_c", "_moe_c"])
_BUILD_MODULES = frozenset(["packaging", "psutil", "ninja", "wheel", "setuptools", "pybind11", "cmake"])
# What kind of module Python could not import (vllm._C and sglang._kernels read as "_c": a server's extension).
_MODULE_KINDS = (
    (_FA_MODULES, "fa", "FlashAttention's own module"),
    (_FA_OPTIONAL, "fa-optional", "an optional FlashAttention extension"),
    (_DSL_MODULES, "dsl", "part of the CuTe DSL runtime"),
    (_SERVER_MODULES, "server-ext", "a server's compiled extension"),
    (frozenset(["torch"]), "torch", "torch"),
    (_BUILD_MODULES, "build-dep", "a build tool"),
)
_DEPENDENCY = "a dependency, not FlashAttention itself"

_GPU_HOPPER = _R(r"\b(?:h100|h800|h200|h20|gh200|hopper)\b")
_GPU_AMPERE = _R(r"\b(?:a100|a800|a10g?|a30|a40|a6000|a5000|a4000|rtx ?(?:30[5-9]0|40[6-9]0)(?: ti)?|"
                 r"(?:30|40)[6-9]0(?: ?ti)?|l4|l40s?|l20|ada)\b")  # fmt: skip
_AMPERE_ANCHORS = ("a1", "a2", "a3", "a4", "a5", "a6", "a8", "30", "40", "l4", "l20", "ada")
_GPU_AMD = _R(r"\b(?:mi[1-4]\d{2}x?|radeon|rx ?[5-9]\d{3}(?: xtx?)?|instinct|navi ?\d{1,2}|strix)\b")
_DRIVER_FOUND = _R(r"(?:found version|driver version) ?\(?\d{4,5}\)?")
_EMPTY_VISIBLE = _R(r"cuda_visible_devices ?[=:] ?(?:[\"']{2}|$|\s|-1\b|none\b)")
_REFUSAL = ("only support", "not supported", "requires", "not available", "is unavailable", "unsupported",
            "only be used", "not compatible", "cannot use")  # fmt: skip
_FA3_WORDS = ("fa3", "flash_attn_3", "flashattention-3", "flashattention 3", "flash attention 3", "flashattention3",
              "flashattentionhopper", "flash_attn_interface", "fav3", "flash-attn-3")  # fmt: skip
_REASONS = "is not supported because"
_UNBUILT = ("wasn't build with cuda", "wasn't built with cuda", "can't load c++")
_FA3_GPU = ("hopper", "sm90", "sm_90", "sm 9", "9.0", "(9, 0)", "blackwell", "capability", "h100", "sm80", "sm>=")

# The report's structure (docs/explain.md): rules as RULES's, then the functions below.
SHAPES: tuple[Rule, ...] = (
    ("container", ("docker", "oci runtime", "nvidia-container", "containerd", "podman", "kubernetes", "runc ",
                   "--gpus", "runtime=nvidia", "--runtime nvidia", "compose up", "kubectl", "k8s"), None,
     "the program runs in a container"),
    ("gpu-not-visible", ("could not select device driver", "no platform detected", "unspecifiedplatform",
                         "failed to infer device type", "initialize nvml", "no cuda gpus are available",
                         "no cuda-capable device", "invalid device ordinal", "no supported device detected",
                         "no devices were found", "nvidia-container-cli: initialization error",
                         "device_count() == 0", "device count is 0", "found 0 gpus", "0 gpus available"), None,
     "the process sees no GPU (none passed in, or hidden)"),
    ("cuda-requirement", ("unsatisfied condition: cuda", "--require=cuda", "requirement error: unsatisfied"), None,
     "the container asks for a newer CUDA than the host driver provides"),
    ("xformers-unbuilt", ("wasn't build with cuda support", "wasn't built with cuda support",
                          "can't load c++/cuda extensions", "xformers was built for"), None,
     "xFormers' compiled operators are not usable with this torch"),
    ("kernel-call", (".fwd(", "varlen_fwd(", "_flash_attn_forward", "fwd_kvcache(", "flash_attn_func(",
                     "flash_attn_varlen_func(", "_flash_attn_backward", ".bwd("), None,
     "the attention kernel was called (the import itself worked)"),
)  # fmt: skip


def _family(library: str) -> str:
    name = library.replace("\\", "/").rsplit("/", 1)[-1].lower()
    path = library.lower()
    if name.startswith(CUDA_LIBS):
        return "cuda"
    if name.startswith(_TORCH_LIBS) or "/torch/lib/" in path.replace("\\", "/") or "torch/_c" in path:
        return "torch"
    if name.startswith(_ROCM_LIBS):
        return "rocm"
    if name.startswith(("libc.", "libstdc++", "libgcc", "libm.", "libpthread")):
        return "system"
    if name.startswith(_FA_FILES):
        return "fa"
    if name.startswith(_SERVER_FILES) or "/sgl_kernel/" in path or "/vllm/" in path:
        return "server"
    return "extension"


def _hardware(low: str, has: Callable[[str], bool], out: dict[str, str]) -> None:
    for name, rx, anchors, what in (
        ("gpu-hopper", _GPU_HOPPER, ("h100", "h800", "h200", "h20", "gh200", "hopper"), "a Hopper GPU"),
        ("gpu-ampere", _GPU_AMPERE, _AMPERE_ANCHORS, "an Ampere or Ada GPU"),
        ("gpu-amd", _GPU_AMD, ("mi1", "mi2", "mi3", "mi4", "radeon", "rx", "instinct", "navi", "strix"), "an AMD GPU"),
    ):
        if any(has(a) for a in anchors) and (m := rx.search(low)) is not None:
            out["ev:" + name] = f"{what} ({m.group(0)}) is named"
    if any(has(r) for r in _REFUSAL) and any(has(g) for g in _FA3_GPU):
        for word in (w for w in _FA3_WORDS if has(w)):
            for start, end in windows(low, word, 160, 200):
                near = low[start:end]
                if (after := start + near.find(word) + len(word)) < len(low) and low[after].isalnum():
                    continue  # xFormers' operator fa3F is not FA3 itself refusing
                if any(r in near for r in _REFUSAL) and any(g in near for g in _FA3_GPU):
                    out["ev:fa3-refused"] = "FlashAttention-3 is refused for this GPU or install"
                    return


def _any(has: Callable[[str], bool], literals: tuple[str, ...]) -> str:
    return next((lit for lit in literals if has(lit)), "")


def evidence(flat: str, low: str, found: Mapping[str, str], has: Callable[[str], bool]) -> dict[str, str]:
    """Rule and structure features ("ev:NAME") with their reasons; flat is the case-kept text, low its lower-case
    copy and `found` extract()'s output."""
    out: dict[str, str] = {}
    _rules(RULES, low, has, out)
    _values(flat, low, found, has, out)
    _rules(SHAPES, low, has, out)
    if "symbol" in found and (lib := found.get("library_path")):
        fam = _family(lib)
        out["ev:symbol-in-" + fam] = f"the library asking for the symbol is {fam}'s ({found.get('library', lib)})"
    if "symbol" in found and (version := found.get("symbol_version")):
        fam = _family(version)
        out["ev:symbol-versioned-" + fam] = f"the missing symbol is versioned by {version} ({fam})"
    if (module := found.get("module", "")) and (has("no module named") or has("no such module")):
        parts = module.lower().split(".")
        top = "_c" if parts[0] in ("vllm", "sglang") and len(parts) > 1 and parts[1].startswith("_") else parts[0]
        kind, why = next(((k, w) for group, k, w in _MODULE_KINDS if top in group), ("dependency", _DEPENDENCY))
        out["ev:missing-kind-" + kind] = f"the missing module '{module}' is {why}"
    _hardware(low, has, out)
    if has("driver") and first(low, "driver", _DRIVER_FOUND, 0, 120):
        out["ev:driver-cuda-found"] = "the driver's CUDA version is stated"
    if has("cuda_visible_devices") and first(low, "cuda_visible_devices", _EMPTY_VISIBLE, 0, 30):
        out["ev:visible-devices-empty"] = "CUDA_VISIBLE_DEVICES hides every GPU"
    # A dispatcher's refusal list (xFormers: each operator and its reasons) where the library's compiled part did
    # not load: that reason makes every operator refuse, whatever capability or dtype lines stand beside it.
    if has(_REASONS) and any(has(u) for u in _UNBUILT):
        out["ev:operators-unbuilt"] = "every operator is refused because the library's compiled part did not load"
    return out


def _rules(rules: tuple[Rule, ...], low: str, has: Callable[[str], bool], out: dict[str, str]) -> None:
    for name, literals, rx, reason in rules:
        if (lit := _any(has, literals)) and (rx is None or first(low, lit, rx, 0, 120)):
            out["ev:" + name] = reason


def _values(flat: str, low: str, found: Mapping[str, str], has: Callable[[str], bool], out: dict[str, str]) -> None:
    """Evidence that depends on a value: capabilities, head dims, symbols, modules, long paths."""
    m = first(low, "capability", _OWN_CAP, 30, 20) if has("capability") else None
    if m is None:
        near = (w for anchor, before, after in _CAP_SPOTS if has(anchor) for w in windows(low, anchor, before, after))
        m = next(filter(None, (_CAP_PAIR.search(low, s, e) for s, e in near)), None)
    if m is not None:
        if m.re is _OWN_CAP:
            major, minor = int(m.group(1)), int(m.group(2))
        elif m.group(5):
            major, minor = divmod(int(m.group(5)), 10)
        else:
            major, minor = int(m.group(1) or m.group(3)), int(m.group(2) or m.group(4))
        bucket = "pre-ampere" if major < 8 else {8: "ampere", 9: "hopper"}.get(major, "blackwell")
        out["ev:cap-" + bucket] = f"compute capability {major}.{minor} ({bucket}) is named"
    if has("capability"):
        out["ev:capability"] = "a compute capability is named"
    if _any(has, _OLD_ANCHORS) and (m := _GPU_OLD.search(low)) is not None:
        out["ev:gpu-pre-ampere"] = f"a GPU older than Ampere ({m.group(0)}) is named"
    if _any(has, _NEW_ANCHORS) and (m := _GPU_NEW.search(low)) is not None:
        out["ev:gpu-blackwell"] = f"a Blackwell GPU ({m.group(0)}) is named"
    spots = (w for anchor, before, after in _HEAD_SPOTS if has(anchor) for w in windows(low, anchor, before, after))
    if named := next(((m, end) for start, end in spots if (m := _HEADDIM.search(low, start, end))), None):
        m, end = named  # the head dimension's match and the end of its window
        dim = int(m.group(1) or m.group(2) or m.group(3))
        dims = [int(n) for n in _NUMBER.findall(low, m.start(), min(end + 40, len(low)))]
        out["ev:headdim"] = f"head dimension {dim} is named"
        if _LIMIT.search(low, max(0, m.start() - 60), min(end + 40, len(low))):
            out["ev:headdim-limit"] = "a limit on the head dimension is stated"
        if (biggest := max([dim, *dims])) > 256:
            out["ev:headdim-over-256"] = f"a head dimension of {biggest} is above FlashAttention's 256"
        elif dim % 8:
            out["ev:headdim-odd"] = f"head dimension {dim} is not a multiple of 8"
    if kind := found.get("symbol_kind"):
        out["ev:symbol-" + kind] = f"an undefined {kind} symbol ({found.get('symbol', '')[:80]})"
    if module := found.get("module"):
        out["ev:missing-" + module.split(".")[0].lower()] = f"the module '{module}' is missing"
        if "ev:build-wheel" in out or "ev:build-tool" in out:
            out["ev:missing-in-build"] = f"'{module}' is missing inside a build (pip's build isolation)"
    if lib := found.get("library"):
        out["ev:solib-" + lib.split(".so")[0].split(".")[0].lower()] = f"the library {lib} cannot be loaded"
    if has("site-packages") or has("dist-packages"):
        for pkg in list(dict.fromkeys(_FRAME.findall(low, max(0, len(low) - _TAIL))))[-6:]:
            out["ev:frame-" + pkg] = f"the traceback runs through {pkg}"
    tail = max(0, len(flat) - _TAIL)  # the final exception and the frames near it are at the end
    if ("rror:" in flat or "ion:" in flat) and (excs := _EXC.findall(flat, tail)):
        exc = excs[-1].rsplit(".", 1)[-1]
        out["ev:exc-" + exc.lower()] = f"the final exception is {exc}"
    if ("\\" in low or "/" in low) and max(map(len, low.split()), default=0) >= 200 and _LONG_PATH.search(low):
        out["ev:long-path"] = "a path is longer than 200 characters"
    if found.get("torch"):
        out["ev:torch-version"] = f"torch {found['torch']} is named"
    if fa := found.get("flash_attn"):
        out["ev:fa-version-" + fa[0]] = f"flash-attn {fa} is named"


def tokens(low: str) -> list[str]:
    """Distinct words (3-40 characters, no stop words), the last MAX_TOKENS of them."""
    return list(dict.fromkeys(w for w in WORD.findall(low) if w not in _STOP and not w.isdigit()))[-MAX_TOKENS:]


# Evidence that by itself makes a paste about FlashAttention's world (a word of _RELEVANT does too).
_STRONG = frozenset(
    [
        *("gpu-not-visible", "cuda-requirement", "xformers-unbuilt", "kernel-call", "fa3-refused"),
        *("compiler-flag", "linker", "long-path", "unpack", "headdim", "headdim-over-256", "built-for", "dll"),
        *("cap-pre-ampere", "cap-ampere", "cap-hopper", "cap-blackwell", "gpu-pre-ampere", "gpu-blackwell"),
        *("glibc", "rocm", "gfx", "no-kernel-image", "kv-cache-dtype", "cute-dsl", "fa3", "fa4", "fa2-ext"),
        *("no-cuda", "driver", "cuda-error", "cuda-lib"),
    ]
)


def relevant(ev: Mapping[str, str], has: Callable[[str], bool]) -> bool:
    """Whether the paste is about FlashAttention's world at all (else the model names no category)."""
    names = {name[3:] for name in ev}
    strong = not names.isdisjoint(_STRONG) or any(n.startswith(("symbol-", "missing-", "solib-")) for n in names)
    return strong or any(has(w) for w in _RELEVANT)


# Where each kind of evidence usually points, written from how the libraries fail (docs/explain.md).
HINT_DOCS = 2
HINTS: dict[str, str] = {
    **dict.fromkeys(
        ("ev:build-wheel", "ev:build-tool", "ev:compile-error", "ev:compiler-flag", "ev:linker", "ev:long-path",
         "ev:network", "ev:no-wheel", "ev:source-tree", "ev:cuda-mismatch", "ev:missing-in-build", "ev:oom",
         "ev:missing-kind-build-dep"),
        "build-failure",
    ),
    **dict.fromkeys(("ev:unpack", "ev:signature", "ev:version-requirement", "ev:cannot-import-name"), "api-mismatch"),
    **dict.fromkeys(("ev:torch-cpu", "ev:no-cuda", "ev:gpu-not-visible", "ev:visible-devices-empty"), "no-gpu"),
    **dict.fromkeys(("ev:driver", "ev:symbol-cuda-driver", "ev:cuda-requirement", "ev:driver-cuda-found"),
                    "driver-too-old"),
    **dict.fromkeys(("ev:cuda-error", "ev:symbol-cuda-runtime", "ev:cuda-lib", "ev:symbol-in-cuda",
                     "ev:symbol-versioned-cuda", "ev:symbol-cuda-library"), "cuda-runtime"),
    **dict.fromkeys(
        ("ev:no-kernel-image", "ev:cap-pre-ampere", "ev:gpu-pre-ampere", "ev:gpu-blackwell", "ev:cap-blackwell"),
        "arch-unsupported",
    ),
    **dict.fromkeys(("ev:rocm", "ev:gfx", "ev:symbol-in-rocm", "ev:symbol-rocm", "ev:gpu-amd"), "rocm"),
    **dict.fromkeys(("ev:invalid-choice", "ev:backend"), "selection-override"),
    **dict.fromkeys(("ev:cute-dsl", "ev:missing-cutlass", "ev:missing-kind-dsl"), "fa4-dsl"),
    **dict.fromkeys(("ev:fa3", "ev:fa3-refused"), "fa3-unavailable"),
    **dict.fromkeys(
        ("ev:kv-cache-dtype", "ev:dtype", "ev:headdim", "ev:headdim-over-256", "ev:headdim-odd", "ev:dtype-fp32",
         "ev:headdim-limit"),
        "dtype-shape",
    ),
    **dict.fromkeys(("ev:built-for", "ev:symbol-torch", "ev:symbol-torch-cxx11", "ev:symbol-in-torch",
                     "ev:symbol-python", "ev:xformers-unbuilt", "ev:operators-unbuilt"), "abi-mismatch"),
    **dict.fromkeys(("ev:glibc", "ev:symbol-cxx-runtime"), "glibc"),
    **dict.fromkeys(("ev:missing-flash_attn", "ev:missing-flash_attn_2_cuda", "ev:missing-kind-fa",
                     "ev:missing-kind-fa-optional", "ev:missing-kind-dependency", "ev:missing-kind-server-ext"),
                    "missing-module"),
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
    **dict.fromkeys(("ev:gpu-not-visible", "ev:visible-devices-empty"), "nogpu.not-visible"),
    **dict.fromkeys(("ev:cuda-requirement", "ev:driver-cuda-found"), "driver.insufficient"),
    **dict.fromkeys(("ev:symbol-in-cuda", "ev:symbol-versioned-cuda"), "cuda.runtime-symbol"),
    **dict.fromkeys(("ev:xformers-unbuilt", "ev:operators-unbuilt"), "abi.xformers-build"),
    "ev:missing-kind-dependency": "missing.dependency",
    "ev:missing-kind-fa-optional": "missing.optional-extension",
    "ev:fa3-refused": "fa3.capability",
}
