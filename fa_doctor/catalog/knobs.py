"""Environment variables that pin or steer an FA version, and their valid values per release.

Each rule was read in the released artifact it names (wheels fetched with `pip download --no-deps`):
- sglang 0.5.23 `srt/environ.py` (EnvBool) and `utils/common.py` (get_bool_env_var);
- flash-attn 2.8.3.post2 `flash_attn_interface.py` (FLASH_ATTENTION_TRITON_AMD_ENABLE == "TRUE");
- vLLM's VLLM_FLASH_ATTN_VERSION and `--attention-config.flash_attn_version`: per release, in servers.py (VLLM);
- flash-attn-4 4.0.0b36 `cute/interface.py` (FLASH_ATTENTION_ARCH) and `cute/cache_utils.py` (the compile cache:
  FLASH_ATTENTION_CUTE_DSL_CACHE_DIR is read only when FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED is exactly "1",
  and then the folder is created at import, so an unwritable one raises PermissionError);
- nvidia-cutlass-dsl-libs-core 4.8.1 `cutlass/base_dsl/enums.py` (`Arch.from_string` is `Arch[name]`: any
  other spelling raises KeyError), `cute/nvgpu/warpgroup/mma.py` (wgmma needs exactly sm_90a) and
  `cute/nvgpu/tcgen05/mma.py` (tcgen05 needs the sm_100f or sm_110f family with an a/f suffix).
"""

from __future__ import annotations

OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"  # our users' deployment-level pin (upstream SGLang does not read it)
OVERRIDE_VALID = (2, 3, 4)

SGLANG_ENVBOOL = ("true", "1", "yes", "y", "false", "0", "no", "n")  # EnvBool.parse, lower-cased
SGLANG_GET_BOOL = ("true", "1", "false", "0")  # get_bool_env_var: only true/1 are true

TRITON_AMD = "FLASH_ATTENTION_TRITON_AMD_ENABLE"
TRITON_AMD_ON = "TRUE"  # compared exactly, no case folding

VLLM_FA_VERSION = "VLLM_FLASH_ATTN_VERSION"  # which releases read it, and what they accept: servers.py VLLM

FA4_ARCH = "FLASH_ATTENTION_ARCH"
FA4_CACHE_ENABLED = "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"
FA4_CACHE_ENABLED_ON = "1"
FA4_CACHE_DIR = "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"

DSL_ARCH = "CUTE_DSL_ARCH"
# Every name `cutlass.base_dsl.Arch` has in DSL 4.8.1 (sm_101* are aliases of sm_110*).
DSL_ARCH_NAMES = frozenset(
    [
        "sm_80",
        "sm_86",
        "sm_87",
        "sm_89",
        "sm_90",
        "sm_90a",
        *(f"sm_{n}{s}" for n in (100, 101, 103, 107, 110, 120, 121) for s in ("", "a", "f")),
    ]
)
# Families whose tcgen05 MMA FA4's SM100 path needs (Arch.is_family_of(sm_100f) or (sm_110f), suffix a or f).
_TCGEN05 = {100: (100, 103), 110: (110, 101)}


def dsl_arch_runs_fa4(name: str, capability: tuple[int, int]) -> str | None:
    """None when FA4's kernels compiled for DSL target `name` run on a GPU of `capability`; else why not."""
    if name not in DSL_ARCH_NAMES:
        return f"the CuTe DSL has no target named {name!r} (it raises KeyError)"
    digits = name[3:].rstrip("af")
    suffix = name[3 + len(digits) :]
    number = int(digits)
    major, minor = number // 10, number % 10
    if number == 101:  # an alias of sm_110
        major, minor = 11, 0
    gpu = capability[0] * 10 + capability[1]
    if major != capability[0] or minor > capability[1] or (suffix == "a" and gpu != major * 10 + minor):
        return f"code for {name} does not run on sm_{gpu}"
    if major == 9 and suffix != "a":
        return "FA4's SM90 kernels use wgmma, which the DSL allows only for sm_90a"
    if major in (10, 11) and not suffix:
        return "FA4's SM100 kernels use tcgen05, which the DSL allows only for a/f-suffixed sm_100/sm_103/sm_110"
    return None


def dsl_arch_for(capability: tuple[int, int]) -> str:
    """The DSL target FA4 needs on this GPU."""
    major, minor = capability
    if major in (9, 10, 11):
        return f"sm_{major}{minor}a"
    return f"sm_{major}{minor}"
