"""Distribution and import names of the FA ecosystem (normalised as PEP 503 does), read from the wheels'
METADATA `Name:` fields and RECORDs (tests/fixtures/dist-info, tests/corpus/metadata)."""

from __future__ import annotations

# ---- servers -------------------------------------------------------------------------------------------------
SGLANG = "sglang"
VLLM = "vllm"
TRANSFORMERS = "transformers"
SERVERS = (SGLANG, VLLM)

# ---- torch ---------------------------------------------------------------------------------------------------
TORCH = "torch"
TORCH_COMPANIONS = ("torchvision", "torchaudio")

# ---- FA implementations --------------------------------------------------------------------------------------
FLASH_ATTN = "flash-attn"  # FA2 (sdist on PyPI; release wheels on GitHub)
FLASH_ATTN_3 = "flash-attn-3"  # FA3 built from flash-attention's hopper/ folder
FLASHATTN_HOPPER = "flashattn-hopper"  # the name older hopper/ builds used
FLASH_ATTN_4 = "flash-attn-4"  # FA4, CuTe DSL (pre-releases only on PyPI)
FA4_ALIASES = ("fa4", "flash-attn-cute")  # names FA4 builds from source have carried
SGLANG_KERNEL = "sglang-kernel"  # FA3 in sgl_kernel.flash_ops (the name since 0.3.x)
SGL_KERNEL = "sgl-kernel"  # the same package's old name
SGL_KERNELS = (SGLANG_KERNEL, SGL_KERNEL)
SGL_FA4 = "sgl-fa4"
VLLM_FLASH_ATTN = "vllm-flash-attn"
KERNELS = "kernels"  # Hugging Face kernel hub
FLASHINFER = "flashinfer-python"

# ---- FA4's runtime: the CuTe DSL and its companions ----------------------------------------------------------
CUTLASS_DSL = "nvidia-cutlass-dsl"  # the metapackage
DSL_BASE = "nvidia-cutlass-dsl-libs-base"
DSL_CORE = "nvidia-cutlass-dsl-libs-core"  # carries the `cutlass` Python package (from 4.6.0 on)
DSL_CU12 = "nvidia-cutlass-dsl-libs-cu12"
DSL_CU13 = "nvidia-cutlass-dsl-libs-cu13"
DSL_PARTS = (DSL_BASE, DSL_CORE, DSL_CU12, DSL_CU13)
QUACK = "quack-kernels"
TVM_FFI = "apache-tvm-ffi"
DLPACK_EXT = "torch-c-dlpack-ext"
CUDA_BINDINGS = ("cuda-bindings", "cuda-python")
FA4_RUNTIME = (CUTLASS_DSL, *DSL_PARTS, QUACK, TVM_FFI, DLPACK_EXT)
EINOPS = "einops"  # flash-attn's one requirement besides torch

# Distributions a repair of an FA package may resolve: a server's exact pins on these are held as constraints.
FA_CLOSURE = (
    TORCH,
    *TORCH_COMPANIONS,
    *SGL_KERNELS,
    FLASH_ATTN,
    FLASH_ATTN_4,
    *FA4_RUNTIME,
    *CUDA_BINDINGS,
    EINOPS,
    "typing-extensions",
)

# Distributions fa-doctor reads besides the implementations (the inventory's "related" rows).
RELATED = (TORCH, SGLANG, VLLM, KERNELS, SGL_FA4, *FA4_RUNTIME, FLASHINFER, TRANSFORMERS)

# The distribution that carries an import name, for "No module named X" (RECORDs of the real wheels).
MODULE_OWNERS = {
    "flash_attn": FLASH_ATTN,
    "flash_attn_2_cuda": FLASH_ATTN,
    "flash_attn_interface": FLASH_ATTN_3,
    "flash_attn_3": FLASH_ATTN_3,
    "cutlass": DSL_CORE,
    "quack": QUACK,
    "tvm_ffi": TVM_FFI,
    "sgl_kernel": SGLANG_KERNEL,
    "sglang": SGLANG,
    "vllm": VLLM,
    "torch": TORCH,
    "einops": "einops",
    "triton": "triton",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "zmq": "pyzmq",
    "google": "protobuf",
    "cv2": "opencv-python",
}

# Top-level import names whose files two distributions must never share.
GUARDED_TOP_LEVEL = ("flash_attn", "flash_attn_interface", "flash_attn_3", "sgl_kernel", "hopper", "triton_kernels")

# Source builds: what flash-attn's and hopper/'s setup.py need in the interpreter (--no-build-isolation).
FA2_BUILD_TOOLS = ("ninja", "packaging", "psutil", "setuptools", "wheel")
BUILD_JOBS = "4"  # MAX_JOBS for nvcc builds: each job takes several GB of RAM
