"""The other knobs that pin or steer an FA version (reference/fa-selection.md section 7).

Each rule below was read in released code, fetched with `pip download --no-deps` (docs/fix.md has the list):
- sglang 0.5.23 wheel, `sglang/srt/environ.py`: `SGLANG_USE_SGL_FA3_KERNEL = EnvBool(True)`; `EnvBool.parse`
  accepts true/1/yes/y and false/0/no/n (lower-cased), and `EnvField.get` turns any other value into a warning
  `Invalid value for ...: "<value>" is not a valid boolean value, using default "True"` and the default.
  `SGLANG_IS_FLASHINFER_AVAILABLE` is read by `utils/common.py` `get_bool_env_var`, which counts only
  true/1 as true: anything else (yes, on, TRUE is fine since it is lower-cased) warns and means false.
- flash-attn 2.8.3.post2 sdist, `flash_attn/flash_attn_interface.py` L11 (and setup.py L65):
  `os.getenv("FLASH_ATTENTION_TRITON_AMD_ENABLE", "FALSE") == "TRUE"`: exactly `TRUE`, no case folding.
- vllm 0.14.1 wheel: `config/attention.py` L94 copies `VLLM_FLASH_ATTN_VERSION` (`envs.py` L577: `int(value)`)
  into `flash_attn_version` with a deprecation warning; `fa_utils.get_flash_attn_version` then asserts the
  version is supported (2 on SM>=8, 3 on SM 9.x, 4 on SM 10.x; 3 on SM 10.x falls back to 2), and an assertion
  failure makes FlashAttention unavailable. The vllm 0.15.0 and 0.16.0 wheels never read the variable.
- the FA4 4.0.0b36 wheel and SGLang 0.5.23's vendored copy, `flash_attn/cute/interface.py`
  `_get_device_arch`: `FLASH_ATTENTION_ARCH` picks the kernel path (SM80/SM90/SM100/SM120), parsed by
  `^(?:sm_?|SM_?)?(\\d+)(\\d)([af]?)$` (else `ValueError: Invalid arch format` at the first FA4 call); the
  compilation target is `CUTE_DSL_ARCH` (SGLang's AOT cache falls back to `sm_{major}{minor}` of the GPU).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from fa_doctor.catalog import knobs as catalog
from fa_doctor.diagnose.checks.override import shown
from fa_doctor.model.actions import SetEnv, UnsetEnv
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.probes.files import creatable

_ENVBOOL = ("true", "1", "yes", "y", "false", "0", "no", "n")
_GET_BOOL = ("true", "1", "false", "0")
_FA4_ARCH = re.compile(r"^(?:sm_?|SM_?)?(\d+)(\d)([af]?)$")  # re.match, as FA4 does: `$` admits a final \n
_FLAG = "--attention-config.flash_attn_version N"
Make = Callable[..., list[Finding]]


def _unset(name: str, text: str) -> Remedy:
    return Remedy(text, actions=(UnsetEnv(name),))


def _maker(name: str, value: str, remedy: Remedy | None, **common: object) -> Make:
    """A one-finding list for this variable: evidence names it and its (escaped) value, plus `common`."""

    def make(
        fid: str, severity: Severity, title: str, detail: str, fix: Remedy | None = None, **ev: object
    ) -> list[Finding]:
        evidence = {"variable": name, "value": shown(value), **common, **ev}
        chosen = fix or remedy
        return [Finding(fid, severity, title, detail, evidence, (chosen,) if chosen else ())]

    return make


def _sgl_fa3_kernel(facts: Facts, value: str) -> list[Finding]:
    name = "SGLANG_USE_SGL_FA3_KERNEL"
    make = _maker(name, value, _unset(name, "Unset it to use sgl_kernel's FA3 (the default)."))
    low = value.lower()
    if low not in _ENVBOOL:
        return make(
            "knob.invalid",
            Severity.WARN,
            f"{name} is not a boolean: SGLang ignores it",
            f"{name}={shown(value)}: SGLang accepts true/1/yes/y or false/0/no/n in any case. For anything else it "
            f'warns `Invalid value for {name}: "{shown(low)[1:-1]}" is not a valid boolean value, using default '
            '"True"` and uses the default: FA3 from sgl_kernel.',
            _unset(name, f"Unset {name} (sgl_kernel's FA3, the default), or set it to true or false."),
            expected="true/1/yes/y or false/0/no/n",
        )
    if _ENVBOOL.index(low) < 4:
        return []
    hub = facts.scan.first("kernels") is not None
    return make(
        "knob.active",
        Severity.INFO if hub else Severity.WARN,
        f"{name}={shown(value)}: FA3 from the hub",
        "FA3 is loaded from the Hugging Face hub kernel kernels-community/sgl-flash-attn3 instead of sgl_kernel; "
        "it needs the `kernels` package and the hub (or a warm cache / kernels.lock)."
        + ("" if hub else " `kernels` is not installed, so SGLang warns and falls back to sgl_kernel."),
        kernels_installed=hub,
    )


def _flashinfer_flag(value: str) -> list[Finding]:
    name = "SGLANG_IS_FLASHINFER_AVAILABLE"
    if value.lower() in _GET_BOOL:
        return []
    return _maker(name, value, _unset(name, f"Unset {name} (the default is true), or set it to exactly false."))(
        "knob.invalid",
        Severity.WARN,
        f"{name}={shown(value)} means false to SGLang",
        "SGLang reads it with get_bool_env_var, which counts only true/1 as true (false/0 as false): any other value "
        "warns `encountered unrecognized value=... and will treat as false`. Flashinfer then counts as unavailable, "
        "and where SGLang would default to flashinfer it picks triton.",
        expected="true/1 or false/0",
    )


def _vllm_version(facts: Facts, value: str) -> list[Finding]:
    name = "VLLM_FLASH_ATTN_VERSION"
    vllm = facts.scan.first("vllm")
    if vllm is None:
        make = _maker(name, value, _unset(name, "Unset it, or leave it for another environment."), vllm=None)
        return make("knob.ignored", Severity.INFO, f"{name} is set but vLLM is not installed here", "Nothing reads it.")
    from packaging.version import InvalidVersion, Version  # only with vLLM installed

    try:
        reads = Version(vllm.version) < Version(catalog.VLLM_STOPPED_READING)
    except InvalidVersion:
        reads = False
    v = vllm.version
    if not reads:
        accepted = " or ".join(str(n) for n in catalog.VLLM_CONFIG_FA_VERSIONS)
        make = _maker(name, value, _unset(name, f"Unset it and pass `{_FLAG}` ({accepted}) to vLLM."), vllm=v)
        return make(
            "knob.ignored",
            Severity.WARN,
            f"{name} is set but vLLM {v} does not read it",
            f"vLLM 0.14.1 was the last release to read it (a deprecated alias); {catalog.VLLM_STOPPED_READING} and "
            f"later ignore it. Pass `{_FLAG}` instead: it accepts {accepted}"
            + (
                f", not {value.strip()}."
                if value.strip().isdigit() and int(value) not in catalog.VLLM_CONFIG_FA_VERSIONS
                else "."
            ),
        )
    make = _maker(name, value, _unset(name, f"Unset it (vLLM picks for the GPU), or pass `{_FLAG}` instead."), vllm=v)
    try:
        number = int(value) if len(value) <= 40 else None  # vLLM's own int(): " 3" is 3
    except ValueError:
        number = None
    expected = "2 (SM>=8), 3 (SM 9.x) or 4 (SM 10.x)"
    if number is None:
        return make(
            "knob.invalid",
            Severity.FAIL,
            f"{name} is not an integer",
            f"vLLM {v} calls int() on it and stops at start-up with a ValueError.",
            expected=expected,
        )
    majors = {c[0] for c in facts.capabilities}
    runs = {2: min(majors, default=8) >= 8, 3: majors <= {9}, 4: majors <= {10}}
    if number == 3 and majors == {10}:
        return make(
            "knob.conflict",
            Severity.WARN,
            f"{name}=3 on Blackwell: vLLM uses FA2",
            f'vLLM {v} warns "Cannot use FA version 3 on Blackwell platform, defaulting to FA version 2".',
        )
    if runs.get(number):
        return make(
            "knob.active",
            Severity.INFO,
            f"{name}={number} pins vLLM's FA{number}",
            f"vLLM {v} reads it as a deprecated alias of `{_FLAG}`; vLLM 0.15.0 and later ignore it.",
        )
    problem = (
        f"FA{number} on compute capability {', '.join(f'{m}.x' for m in sorted(majors))}"
        if number in runs
        else "an unknown version"
    )
    return make(
        "knob.conflict" if number in runs else "knob.invalid",
        Severity.FAIL,
        f"{name}={number} cannot work here",
        f"vLLM {v} asserts the pinned version is supported ({problem}); when it is not, FlashAttention counts as "
        "unavailable and the FLASH_ATTN backend fails.",
        expected=expected,
    )


def _unaccepted(value: str) -> bool:
    """A version number vLLM >= 0.15's --attention-config.flash_attn_version refuses (4, for one)."""
    text = value.strip()
    return text.isdigit() and len(text) < 4 and int(text) not in catalog.VLLM_CONFIG_FA_VERSIONS


def _fa4_arch(facts: Facts, value: str) -> list[Finding]:
    name = "FLASH_ATTENTION_ARCH"
    make = _maker(name, value, _unset(name, f"Unset {name}: FA4 picks the kernel path from the GPU."))
    m = _FA4_ARCH.match(value)
    if m is None:
        return make(
            "knob.invalid",
            Severity.FAIL,
            f"{name} is not an SM number FA4 can parse",
            f"FA4 raises `ValueError: Invalid arch format: {shown(value)[1:-1]}` at its first call. It accepts sm_90, "
            "sm90, SM_100a, 90 or 100 (a lower-case `sm` or upper-case `SM` prefix, no blanks).",
            expected="sm_80, sm_90, sm_100, sm_120 (or the bare number)",
        )
    sm = int(m.group(1)) * 10 + int(m.group(2))
    path = sm // 10
    majors = {c[0] for c in facts.capabilities}
    gpus = ", ".join(f"sm_{c[0]}{c[1]}" for c in facts.capabilities)
    if not majors:
        return make(
            "knob.active",
            Severity.INFO,
            f"{name}={shown(value)} picks FA4's SM{sm} kernel path",
            "FA4 takes this kernel path whatever the GPU. With no GPU (compiling ahead of time) set the compilation "
            "target too: CUTE_DSL_ARCH.",
            sm=sm,
        )
    if majors == {path} or (majors <= {10, 11} and path in (10, 11)):
        return make(
            "knob.active",
            Severity.INFO,
            f"{name}={shown(value)} matches the GPU",
            f"FA4 would pick the SM{path}x kernel path from the GPU ({gpus}) anyway.",
            sm=sm,
            gpu_sm=gpus,
        )
    older = path == 8 and min(majors) >= 8
    return make(
        "knob.conflict",
        Severity.WARN if older else Severity.FAIL,
        f"{name}={shown(value)} picks a kernel path for another GPU",
        f"FA4 takes its SM{sm} kernel path on {gpus}. "
        + (
            "SM80 code runs on newer GPUs, but without the kernels written for them (slower)."
            if older
            else "That path uses instructions this GPU lacks (wgmma is SM90 only, tcgen05 SM100/SM110 only), so "
            "compiling or launching the kernels fails."
        )
        + " It does not change the compilation target: that is CUTE_DSL_ARCH.",
        sm=sm,
        gpu_sm=gpus,
    )


def _dsl_arch(facts: Facts, value: str) -> list[Finding]:
    name = catalog.DSL_ARCH
    make = _maker(name, value, _unset(name, f"Unset {name}: the CuTe DSL compiles for the GPU it runs on."))
    wanted = sorted({catalog.dsl_arch_for(c) for c in facts.capabilities})
    expected = ", ".join(wanted) if wanted else "sm_90a, sm_100a, sm_103a, sm_110a, sm_120, sm_121 (or their f forms)"
    if value not in catalog.DSL_ARCH_NAMES:
        return make(
            "knob.invalid",
            Severity.FAIL,
            f"{name} is not a CuTe DSL target",
            f"The CuTe DSL looks the name up in its Arch table (`Arch[{shown(value)}]`): an unknown name raises "
            "KeyError when FA4 compiles its first kernel.",
            expected=expected,
        )
    problems = {f"sm_{c[0]}{c[1]}": catalog.dsl_arch_runs_fa4(value, c) for c in facts.capabilities}
    bad = {gpu: why for gpu, why in problems.items() if why}
    if not bad:
        return make(
            "knob.active",
            Severity.INFO,
            f"{name}={shown(value)} sets FA4's compilation target",
            "Meant for compiling without a GPU" + (" (the GPU here can run it)." if problems else "."),
        )
    return make(
        "knob.conflict",
        Severity.FAIL,
        f"{name}={shown(value)} cannot compile FA4 for this GPU",
        "; ".join(f"{gpu}: {why}" for gpu, why in sorted(bad.items()))
        + ". FA4's first kernel then fails to compile or to load (no kernel image for the device).",
        gpu_sm=", ".join(sorted(bad)),
        expected=expected,
    )


def _triton_amd(facts: Facts, value: str) -> list[Finding]:
    name = "FLASH_ATTENTION_TRITON_AMD_ENABLE"
    nvidia = bool(facts.gpus.devices)
    make = _maker(name, value, _unset(name, "Unset it on NVIDIA machines."))
    if value == "TRUE":
        if not nvidia:
            return make(
                "knob.active",
                Severity.INFO,
                f"{name}=TRUE: flash-attn uses its Triton AMD backend",
                "flash-attn imports flash_attn_triton_amd instead of its CUDA extension (meant for AMD GPUs).",
            )
        return make(
            "knob.conflict",
            Severity.FAIL,
            f"{name}=TRUE on an NVIDIA GPU",
            "flash-attn then uses its Triton AMD backend instead of the CUDA kernels.",
        )
    if value.strip().upper() not in ("TRUE", "1", "YES", "ON", "Y"):
        return []
    return make(
        "knob.ignored",
        Severity.INFO if nvidia else Severity.WARN,
        f"{name}={shown(value)} does nothing",
        'flash-attn compares it with exactly "TRUE" (upper case): any other spelling leaves the CUDA kernels in use'
        + (" (what an NVIDIA GPU needs)." if nvidia else "; to use the Triton AMD backend set TRUE."),
        None if nvidia else Remedy("Set exactly TRUE for the Triton AMD backend.", actions=(SetEnv(name, "TRUE"),)),
    )


def check_knobs(facts: Facts) -> list[Finding]:
    env = facts.env
    out: list[Finding] = []
    if "SGLANG_USE_SGL_FA3_KERNEL" in env:
        out += _sgl_fa3_kernel(facts, env["SGLANG_USE_SGL_FA3_KERNEL"])
    if "SGLANG_IS_FLASHINFER_AVAILABLE" in env:
        out += _flashinfer_flag(env["SGLANG_IS_FLASHINFER_AVAILABLE"])
    if "SGLANG_INKLING_FA4_USE_PIP" in env and not (facts.sglang and facts.sglang.reads_inkling_pip):
        name = "SGLANG_INKLING_FA4_USE_PIP"
        out += _maker(name, env[name], _unset(name, "Unset it."))(
            "knob.ignored",
            Severity.WARN,
            f"{name} is set but this SGLang ignores it",
            "It existed only in SGLang builds of 2026-07/08 (FA4 from pip flash_attn.cute instead of the vendored "
            "copy); "
            + (f"SGLang {facts.sglang.version} does not read it." if facts.sglang else "SGLang is not installed."),
        )
    if "VLLM_FLASH_ATTN_VERSION" in env:
        out += _vllm_version(facts, env["VLLM_FLASH_ATTN_VERSION"])
    if "FLASH_ATTENTION_ARCH" in env:
        out += _fa4_arch(facts, env["FLASH_ATTENTION_ARCH"])
    if "CUTE_DSL_ARCH" in env:
        out += _dsl_arch(facts, env["CUTE_DSL_ARCH"])
    if "FLASH_ATTENTION_TRITON_AMD_ENABLE" in env:
        out += _triton_amd(facts, env["FLASH_ATTENTION_TRITON_AMD_ENABLE"])
    out += _fa4_cache(env)
    for name in ("FLASH_ATTENTION_FORCE_BUILD", "FLASH_ATTN_CUDA_ARCHS"):
        if name in env:
            out.append(
                Finding(
                    "knob.active",
                    Severity.INFO,
                    f"{name} is set (build time only)",
                    "It affects building flash-attn from source, not which FA version runs.",
                    {"variable": name, "value": shown(env[name])},
                )
            )
    return out


def _fa4_cache(env: Mapping[str, str]) -> list[Finding]:
    """FA4's persistent compile cache: the folder is read only when the cache is on, and then created at import
    (`import flash_attn.cute` raises PermissionError when it cannot be)."""
    folder = env.get(catalog.FA4_CACHE_DIR)
    enabled = env.get(catalog.FA4_CACHE_ENABLED) == catalog.FA4_CACHE_ENABLED_ON
    if folder is None:
        return []
    unset = Remedy(f"Unset {catalog.FA4_CACHE_DIR}.", actions=(UnsetEnv(catalog.FA4_CACHE_DIR),))
    evidence = {"variable": catalog.FA4_CACHE_DIR, "value": shown(folder, 200), "cache_enabled": enabled}
    if not enabled:
        return [
            Finding(
                "knob.ignored",
                Severity.INFO,
                f"{catalog.FA4_CACHE_DIR} is set but FA4's compile cache is off",
                f"FA4 reads the folder only when {catalog.FA4_CACHE_ENABLED}={catalog.FA4_CACHE_ENABLED_ON}; without "
                "it every process compiles in memory.",
                evidence,
            )
        ]
    if folder and creatable(folder):
        return []
    return [
        Finding(
            "knob.invalid",
            Severity.FAIL,
            f"{catalog.FA4_CACHE_DIR} cannot be created or written",
            f"With the cache on, FA4 creates {shown(folder, 200)} when it is imported: `import flash_attn.cute` "
            "raises PermissionError (or FileNotFoundError for an empty value), so FA4 does not load.",
            evidence,
            (
                Remedy(
                    f"Point {catalog.FA4_CACHE_DIR} at a folder the server's user can write, or turn the cache off.",
                    actions=(UnsetEnv(catalog.FA4_CACHE_ENABLED),),
                ),
                unset,
            ),
        )
    ]
