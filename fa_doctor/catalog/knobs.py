"""Environment variables that pin or steer an FA version, and their valid values per release: each rule was read in
the released artifact docs/fix.md ("Knob facts") cites."""

from __future__ import annotations

OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"  # our users' deployment-level pin (upstream SGLang does not read it)

FA4_CACHE_ENABLED = "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"
FA4_CACHE_ENABLED_ON = "1"  # exactly: any other value leaves the cache folder unread
FA4_CACHE_DIR = "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"

DSL_ARCH = "CUTE_DSL_ARCH"
# Every name `cutlass.base_dsl.Arch` has in DSL 4.8.1 (sm_101* are aliases of sm_110*).
DSL_ARCH_NAMES = frozenset(
    ["sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"]
    + [f"sm_{n}{s}" for n in (100, 101, 103, 107, 110, 120, 121) for s in ("", "a", "f")]
)


def dsl_arch_runs_fa4(name: str, capability: tuple[int, int]) -> str | None:
    """None when FA4's kernels compiled for DSL target `name` run on a GPU of `capability`; else why not."""
    if name not in DSL_ARCH_NAMES:
        return f"the CuTe DSL has no target named {name!r} (it raises KeyError)"
    digits = name[3:].rstrip("af")
    suffix = name[3 + len(digits) :]
    number = int(digits)
    major, minor = (11, 0) if number == 101 else divmod(number, 10)  # sm_101 is an alias of sm_110
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
    return f"sm_{major}{minor}" + ("a" if major in (9, 10, 11) else "")
