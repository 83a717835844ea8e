"""The structure of a report, read the same way whatever library wrote it.

evidence.py names what the words of a paste show; this module reads the shapes every report shares, so that a
report from a library no rule was written for still lands where its structure points:

- whose symbol is missing and which library could not provide it (torch's, the CUDA runtime's or one of its
  libraries', HIP's, Python's C API, libstdc++), from the symbol's namespace, its version tag
  (`..., version libnvJitLink.so.12`) and the file that asked for it;
- what Python could not import: FlashAttention itself, one of its optional extensions, torch, the CuTe DSL, a
  server's compiled extension, or a dependency deeper in the import chain;
- the hardware named: the GPU's generation from its name (AMD parts too);
- the platform: a container, a GPU the process cannot see, a CUDA requirement the driver does not meet;
- operator reason lists (xFormers' `... is not supported because:`), where a library that did not load makes
  every operator refuse, whatever capability or dtype lines stand beside it.

Like evidence.py it names what the text shows, never a category: HINTS says where each piece usually points
and the fitted counts can outweigh it. Cost: literal look-ups and regexes in windows around literals.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from fa_doctor.knowledge.extract import CUDA_LIBS, windows

_R = re.compile

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

_GPU_HOPPER = _R(r"\b(?:h100|h800|h200|h20|gh200|hopper)\b")
_GPU_AMPERE = _R(r"\b(?:a100|a800|a10g?|a30|a40|a6000|a5000|a4000|rtx ?(?:30[5-9]0|40[6-9]0)(?: ti)?|"
                 r"(?:30|40)[6-9]0(?: ?ti)?|l4|l40s?|l20|ada)\b")  # fmt: skip
_GPU_AMD = _R(r"\b(?:mi[1-4]\d{2}x?|radeon|rx ?[5-9]\d{3}(?: xtx?)?|instinct|navi ?\d{1,2}|strix)\b")
_DRIVER_FOUND = _R(r"(?:found version|driver version) ?\(?\d{4,5}\)?")
_EMPTY_VISIBLE = _R(r"cuda_visible_devices ?[=:] ?(?:[\"']{2}|$|\s|-1\b|none\b)")
_REFUSAL = ("only support", "not supported", "requires", "not available", "is unavailable", "unsupported",
            "only be used", "not compatible", "cannot use")  # fmt: skip
_FA3_WORDS = ("fa3", "flash_attn_3", "flashattention-3", "flashattention 3", "flash attention 3", "flashattention3",
              "flashattentionhopper", "flash_attn_interface", "fav3", "flash-attn-3")  # fmt: skip
_FA3_GPU = ("hopper", "sm90", "sm_90", "sm 9", "9.0", "(9, 0)", "blackwell", "capability", "h100", "sm80", "sm>=")

Rule = tuple[str, tuple[str, ...], str]
# (feature, literals (any), reason shown to the user)
RULES: tuple[Rule, ...] = (
    ("container", ("docker", "oci runtime", "nvidia-container", "containerd", "podman", "kubernetes", "runc ",
                   "--gpus", "runtime=nvidia", "--runtime nvidia", "compose up", "kubectl", "k8s"),
     "the program runs in a container"),
    ("gpu-not-visible", ("could not select device driver", "no platform detected", "unspecifiedplatform",
                         "failed to infer device type", "initialize nvml", "no cuda gpus are available",
                         "no cuda-capable device", "invalid device ordinal", "no supported device detected",
                         "no devices were found", "nvidia-container-cli: initialization error",
                         "device_count() == 0", "device count is 0", "found 0 gpus", "0 gpus available"),
     "the process sees no GPU (none passed in, or hidden)"),
    ("cuda-requirement", ("unsatisfied condition: cuda", "--require=cuda", "requirement error: unsatisfied"),
     "the container asks for a newer CUDA than the host driver provides"),
    ("xformers-unbuilt", ("wasn't build with cuda support", "wasn't built with cuda support",
                          "can't load c++/cuda extensions", "xformers was built for"),
     "xFormers' compiled operators are not usable with this torch"),
    ("kernel-call", (".fwd(", "varlen_fwd(", "_flash_attn_forward", "fwd_kvcache(", "flash_attn_func(",
                     "flash_attn_varlen_func(", "_flash_attn_backward", ".bwd("),
     "the attention kernel was called (the import itself worked)"),
)  # fmt: skip


def structure(flat: str, low: str, found: Mapping[str, str], has: Callable[[str], bool]) -> dict[str, str]:
    """Structural features ("ev:NAME") with their reasons; arguments as evidence.evidence()'s."""
    out: dict[str, str] = {}
    for name, literals, reason in RULES:
        if any(has(lit) for lit in literals):
            out["ev:" + name] = reason
    _symbol(found, out)
    _imports(found, has, out)
    _hardware(low, has, out)
    _platform(low, has, out)
    _operators(low, has, out)
    return out


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


def _symbol(found: Mapping[str, str], out: dict[str, str]) -> None:
    if "symbol" not in found:
        return
    if lib := found.get("library_path"):
        fam = _family(lib)
        out["ev:symbol-in-" + fam] = f"the library asking for the symbol is {fam}'s ({found.get('library', lib)})"
    if version := found.get("symbol_version"):
        fam = _family(version)
        out["ev:symbol-versioned-" + fam] = f"the missing symbol is versioned by {version} ({fam})"


def _imports(found: Mapping[str, str], has: Callable[[str], bool], out: dict[str, str]) -> None:
    module = found.get("module", "")
    if not module or not (has("no module named") or has("no such module")):
        return
    parts = module.lower().split(".")
    top = parts[0]
    if top in _FA_MODULES:
        kind, why = "fa", "FlashAttention's own module"
    elif top in _FA_OPTIONAL:
        kind, why = "fa-optional", "an optional FlashAttention extension"
    elif top in _DSL_MODULES:
        kind, why = "dsl", "part of the CuTe DSL runtime"
    elif top in _SERVER_MODULES or (top in ("vllm", "sglang") and len(parts) > 1 and parts[1].startswith("_")):
        kind, why = "server-ext", "a server's compiled extension"
    elif top == "torch":
        kind, why = "torch", "torch"
    elif top in _BUILD_MODULES:
        kind, why = "build-dep", "a build tool"
    else:
        kind, why = "dependency", "a dependency, not FlashAttention itself"
    out["ev:missing-kind-" + kind] = f"the missing module '{module}' is {why}"


def _hardware(low: str, has: Callable[[str], bool], out: dict[str, str]) -> None:
    for name, rx, anchors, what in (
        ("gpu-hopper", _GPU_HOPPER, ("h100", "h800", "h200", "h20", "gh200", "hopper"), "a Hopper GPU"),
        (
            "gpu-ampere",
            _GPU_AMPERE,
            ("a1", "a2", "a3", "a4", "a5", "a6", "a8", "30", "40", "l4", "l20", "ada"),
            "an Ampere or Ada GPU",
        ),
        ("gpu-amd", _GPU_AMD, ("mi1", "mi2", "mi3", "mi4", "radeon", "rx", "instinct", "navi", "strix"), "an AMD GPU"),
    ):
        if any(has(a) for a in anchors) and (m := rx.search(low)) is not None:
            out["ev:" + name] = f"{what} ({m.group(0)}) is named"
    if any(has(r) for r in _REFUSAL) and any(has(g) for g in _FA3_GPU):
        for word in (w for w in _FA3_WORDS if has(w)):
            for start, end in windows(low, word, 160, 200):
                near = low[start:end]
                after = start + near.find(word) + len(word)
                if after < len(low) and low[after].isalnum():
                    continue  # xFormers' operator fa3F is not FA3 itself refusing
                if any(r in near for r in _REFUSAL) and any(g in near for g in _FA3_GPU):
                    out["ev:fa3-refused"] = "FlashAttention-3 is refused for this GPU or install"
                    return


def _platform(low: str, has: Callable[[str], bool], out: dict[str, str]) -> None:
    if has("driver") and any(_DRIVER_FOUND.search(low, s, e) for s, e in windows(low, "driver", 0, 120)):
        out["ev:driver-cuda-found"] = "the driver's CUDA version is stated"
    if has("cuda_visible_devices") and any(
        _EMPTY_VISIBLE.search(low, s, e) for s, e in windows(low, "cuda_visible_devices", 0, 30)
    ):
        out["ev:visible-devices-empty"] = "CUDA_VISIBLE_DEVICES hides every GPU"


_REASONS = "is not supported because"
_UNBUILT = ("wasn't build with cuda", "wasn't built with cuda", "can't load c++")


def _operators(low: str, has: Callable[[str], bool], out: dict[str, str]) -> None:
    """A dispatcher's refusal list (xFormers: each operator and its reasons) where the library's compiled part
    did not load: that reason makes every operator refuse, whatever capability or dtype lines stand beside it.
    (Repeated lines are dropped by normalise(), so the list is read for the reason, not counted per operator.)"""
    if has(_REASONS) and any(has(u) for u in _UNBUILT):
        out["ev:operators-unbuilt"] = "every operator is refused because the library's compiled part did not load"


# Where each structural feature usually points (see evidence.HINTS); unlisted ones are counted only.
HINTS: dict[str, str] = {
    **dict.fromkeys(("ev:symbol-in-cuda", "ev:symbol-versioned-cuda", "ev:symbol-cuda-library"), "cuda-runtime"),
    **dict.fromkeys(("ev:symbol-in-torch", "ev:symbol-python"), "abi-mismatch"),
    **dict.fromkeys(("ev:symbol-in-rocm", "ev:symbol-rocm", "ev:gpu-amd"), "rocm"),
    "ev:symbol-cxx-runtime": "glibc",
    **dict.fromkeys(("ev:missing-kind-fa", "ev:missing-kind-fa-optional", "ev:missing-kind-dependency",
                     "ev:missing-kind-server-ext"), "missing-module"),
    "ev:missing-kind-dsl": "fa4-dsl",
    "ev:missing-kind-build-dep": "build-failure",
    **dict.fromkeys(("ev:gpu-not-visible", "ev:visible-devices-empty"), "no-gpu"),
    **dict.fromkeys(("ev:cuda-requirement", "ev:driver-cuda-found"), "driver-too-old"),
    **dict.fromkeys(("ev:xformers-unbuilt", "ev:operators-unbuilt"), "abi-mismatch"),
    "ev:fa3-refused": "fa3-unavailable",
}  # fmt: skip

# Evidence that by itself makes a paste about FlashAttention's world.
STRONG = frozenset(["gpu-not-visible", "cuda-requirement", "xformers-unbuilt", "kernel-call", "fa3-refused"])

# The entry that words a category when no pattern of it matched, by the structure that pointed there.
ENTRY_HINTS: dict[str, str] = {
    **dict.fromkeys(("ev:gpu-not-visible", "ev:visible-devices-empty"), "nogpu.not-visible"),
    **dict.fromkeys(("ev:cuda-requirement", "ev:driver-cuda-found"), "driver.insufficient"),
    **dict.fromkeys(("ev:symbol-in-cuda", "ev:symbol-versioned-cuda"), "cuda.runtime-symbol"),
    **dict.fromkeys(("ev:xformers-unbuilt", "ev:operators-unbuilt"), "abi.xformers-build"),
    "ev:missing-kind-dependency": "missing.dependency",
    "ev:missing-kind-fa-optional": "missing.optional-extension",
    "ev:fa3-refused": "fa3.capability",
}
