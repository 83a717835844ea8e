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
- flash-attn-4 4.0.0b36 wheel and SGLang 0.5.23's vendored copy, `flash_attn/cute/interface.py`
  `_get_device_arch`: `FLASH_ATTENTION_ARCH` picks the kernel path (SM80/SM90/SM100/SM120), parsed by
  `^(?:sm_?|SM_?)?(\\d+)(\\d)([af]?)$` (else `ValueError: Invalid arch format` at the first FA4 call); the
  compilation target is `CUTE_DSL_ARCH` (SGLang's AOT cache falls back to `sm_{major}{minor}` of the GPU).
"""

from __future__ import annotations

import os
import re

from packaging.version import InvalidVersion, Version

from fa_doctor.actions import SetEnv, UnsetEnv
from fa_doctor.checks.override import shown
from fa_doctor.facts import Facts
from fa_doctor.finding import Finding, Remedy, Severity

_ENVBOOL_TRUE = ("true", "1", "yes", "y")
_ENVBOOL_FALSE = ("false", "0", "no", "n")
_GET_BOOL = ("true", "1", "false", "0")
_FA4_ARCH = re.compile(r"^(?:sm_?|SM_?)?(\d+)(\d)([af]?)$")  # re.match, as FA4 does: `$` admits a final \n
_DSL_ARCH = re.compile(r"sm_(\d+)(\d)([af]?)")
_VLLM_LAST_READER = Version("0.15.0")  # first release that no longer reads VLLM_FLASH_ATTN_VERSION


def _unset(name: str, text: str) -> Remedy:
    return Remedy(text, actions=(UnsetEnv(name),))


def _finding(fid: str, severity: Severity, name: str, value: str, title: str, detail: str, **extra: object) -> Finding:
    remedy = extra.pop("remedy", None)
    evidence = {"variable": name, "value": shown(value), **extra}
    return Finding(fid, severity, title, detail, evidence, (remedy,) if isinstance(remedy, Remedy) else ())


def _sgl_fa3_kernel(facts: Facts, value: str) -> list[Finding]:
    name = "SGLANG_USE_SGL_FA3_KERNEL"
    low = value.lower()
    if low not in _ENVBOOL_TRUE + _ENVBOOL_FALSE:
        return [
            _finding(
                "knob.invalid",
                Severity.WARN,
                name,
                value,
                f"{name} is not a boolean: SGLang ignores it",
                f"{name}={shown(value)}: SGLang accepts true/1/yes/y or false/0/no/n in any case. For anything "
                f'else it warns `Invalid value for {name}: "{shown(low)[1:-1]}" is not a valid boolean value, '
                'using default "True"` and uses the default: FA3 from sgl_kernel.',
                expected="true/1/yes/y or false/0/no/n",
                remedy=_unset(name, f"Unset {name} (sgl_kernel's FA3, the default), or set it to true or false."),
            )
        ]
    if low in _ENVBOOL_TRUE:
        return []
    hub = facts.scan.first("kernels") is not None
    detail = (
        "FA3 is loaded from the Hugging Face hub kernel kernels-community/sgl-flash-attn3 instead of "
        "sgl_kernel; it needs the `kernels` package and the hub (or a warm cache / kernels.lock)."
    )
    if not hub:
        detail += " `kernels` is not installed, so SGLang warns and falls back to sgl_kernel."
    return [
        _finding(
            "knob.active",
            Severity.WARN if not hub else Severity.INFO,
            name,
            value,
            f"{name}={shown(value)}: FA3 from the hub",
            detail,
            kernels_installed=hub,
            remedy=_unset(name, "Unset it to use sgl_kernel's FA3 (the default)."),
        )
    ]


def _flashinfer_flag(value: str) -> list[Finding]:
    name = "SGLANG_IS_FLASHINFER_AVAILABLE"
    if value.lower() in _GET_BOOL:
        return []
    return [
        _finding(
            "knob.invalid",
            Severity.WARN,
            name,
            value,
            f"{name}={shown(value)} means false to SGLang",
            "SGLang reads it with get_bool_env_var, which counts only true/1 as true (false/0 as false): any other "
            "value warns `encountered unrecognized value=... and will treat as false`. Flashinfer then counts as "
            "unavailable, and where SGLang would default to flashinfer it picks triton.",
            expected="true/1 or false/0",
            remedy=Remedy(
                f"Unset {name} (the default is true), or set it to exactly false.",
                actions=(UnsetEnv(name),),
            ),
        )
    ]


def _vllm_version(facts: Facts, value: str) -> list[Finding]:
    name = "VLLM_FLASH_ATTN_VERSION"
    vllm = facts.scan.first("vllm")
    flag = "--attention-config.flash_attn_version N"
    if vllm is None:
        return [
            _finding(
                "knob.ignored",
                Severity.INFO,
                name,
                value,
                f"{name} is set but vLLM is not installed here",
                "Nothing in this environment reads it.",
                vllm=None,
                remedy=_unset(name, "Unset it, or leave it for another environment."),
            )
        ]
    try:
        reads = Version(vllm.version) < _VLLM_LAST_READER
    except InvalidVersion:
        reads = False
    common = {"vllm": vllm.version}
    if not reads:
        return [
            _finding(
                "knob.ignored",
                Severity.WARN,
                name,
                value,
                f"{name} is set but vLLM {vllm.version} does not read it",
                f"vLLM 0.14.1 was the last release to read it (as a deprecated alias); 0.15.0 and later ignore it. "
                f"Pass `{flag}` (2, 3 or 4) instead.",
                remedy=_unset(name, f"Unset it and pass `{flag}` to vLLM."),
                **common,
            )
        ]
    remedy = _unset(name, f"Unset it (vLLM picks the version for the GPU), or pass `{flag}` instead.")
    try:
        number = int(value) if len(value) <= 40 else None
    except ValueError:
        number = None
    if number is None:
        return [
            _finding(
                "knob.invalid",
                Severity.FAIL,
                name,
                value,
                f"{name} is not an integer",
                f"vLLM {vllm.version} calls int() on it and stops at start-up with a ValueError.",
                expected="2 or 3 (4 on SM 10.x)",
                remedy=remedy,
                **common,
            )
        ]
    majors = {c[0] for c in facts.capabilities}
    supported = {2: majors and min(majors) >= 8, 3: majors == {9}, 4: majors == {10}}
    if number not in supported:
        problem = "an unsupported version"
    elif majors and number == 3 and majors == {10}:
        return [
            _finding(
                "knob.conflict",
                Severity.WARN,
                name,
                value,
                f"{name}=3 on Blackwell: vLLM uses FA2",
                f'vLLM {vllm.version} warns "Cannot use FA version 3 on Blackwell platform, defaulting to FA '
                'version 2".',
                remedy=remedy,
                **common,
            )
        ]
    elif majors and not supported[number]:
        problem = f"FA{number} on compute capability {', '.join(f'{m}.x' for m in sorted(majors))}"
    else:
        return [
            _finding(
                "knob.active",
                Severity.INFO,
                name,
                value,
                f"{name}={number} pins vLLM's FA{number}",
                f"vLLM {vllm.version} reads it as a deprecated alias of `{flag}`; vLLM 0.15.0 and later ignore it.",
                remedy=remedy,
                **common,
            )
        ]
    return [
        _finding(
            "knob.invalid" if number not in supported else "knob.conflict",
            Severity.FAIL,
            name,
            value,
            f"{name}={number} cannot work here",
            f"vLLM {vllm.version} asserts the pinned version is supported ({problem}); when it is not, "
            "FlashAttention counts as unavailable and the FLASH_ATTN backend fails.",
            expected="2 (SM>=8), 3 (SM 9.x) or 4 (SM 10.x)",
            remedy=remedy,
            **common,
        )
    ]


def _path_major(sm: int) -> int:
    return sm // 10


def _fa4_arch(facts: Facts, value: str) -> list[Finding]:
    name = "FLASH_ATTENTION_ARCH"
    m = _FA4_ARCH.match(value)
    if m is None:
        return [
            _finding(
                "knob.invalid",
                Severity.FAIL,
                name,
                value,
                f"{name} is not an SM number FA4 can parse",
                f"FA4 raises `ValueError: Invalid arch format: {shown(value)[1:-1]}` at its first call. It accepts "
                "sm_90, sm90, SM_100a, 90 or 100 (a lower-case `sm` or upper-case `SM` prefix, no blanks).",
                expected="sm_80, sm_90, sm_100, sm_120 (or the bare number)",
                remedy=_unset(name, f"Unset {name}: FA4 reads the architecture from the GPU."),
            )
        ]
    sm = int(m.group(1)) * 10 + int(m.group(2))
    path = _path_major(sm)
    majors = {c[0] for c in facts.capabilities}
    gpus = ", ".join(f"sm_{c[0]}{c[1]}" for c in facts.capabilities)
    remedy = _unset(name, f"Unset {name}: FA4 picks the kernel path from the GPU.")
    if not majors:
        return [
            _finding(
                "knob.active",
                Severity.INFO,
                name,
                value,
                f"{name}={shown(value)} picks FA4's SM{sm} kernel path",
                "FA4 takes this kernel path whatever the GPU. With no GPU (compiling ahead of time) set the "
                "compilation target too: CUTE_DSL_ARCH.",
                sm=sm,
                remedy=remedy,
            )
        ]
    if majors == {path} or (majors <= {10, 11} and path in (10, 11)):
        return [
            _finding(
                "knob.active",
                Severity.INFO,
                name,
                value,
                f"{name}={shown(value)} matches the GPU",
                f"FA4 would pick the SM{path}x kernel path from the GPU ({gpus}) anyway.",
                sm=sm,
                gpu_sm=gpus,
                remedy=remedy,
            )
        ]
    older = path == 8 and min(majors) >= 8
    return [
        _finding(
            "knob.conflict",
            Severity.WARN if older else Severity.FAIL,
            name,
            value,
            f"{name}={shown(value)} picks a kernel path for another GPU",
            f"FA4 takes its SM{sm} kernel path on {gpus}. "
            + (
                "SM80 code runs on newer GPUs, but without the kernels written for them (slower)."
                if older
                else "That path uses instructions this GPU lacks (wgmma is SM90 only, tcgen05 SM100/SM110 only), "
                "so compiling or launching the kernels fails."
            )
            + " It does not change the compilation target: that is CUTE_DSL_ARCH.",
            sm=sm,
            gpu_sm=gpus,
            remedy=remedy,
        )
    ]


def _dsl_arch(facts: Facts, value: str) -> list[Finding]:
    name = "CUTE_DSL_ARCH"
    m = _DSL_ARCH.fullmatch(value)
    remedy = _unset(name, f"Unset {name}: the CuTe DSL compiles for the GPU it runs on.")
    if m is None:
        return [
            _finding(
                "knob.invalid",
                Severity.FAIL,
                name,
                value,
                f"{name} is not a compilation target",
                "The CuTe DSL (FA4's compiler) expects a target such as sm_90a or sm_100a.",
                expected="sm_80, sm_90a, sm_100a, sm_120a",
                remedy=remedy,
            )
        ]
    major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    caps = facts.capabilities
    # SASS runs on its own major with an equal or higher minor; an `a` target runs only on that exact SM.
    bad = [c for c in caps if c[0] != major or c[1] < minor or (suffix == "a" and c[1] != minor)]
    if not bad:
        return [
            _finding(
                "knob.active",
                Severity.INFO,
                name,
                value,
                f"{name}={shown(value)} sets FA4's compilation target",
                "Meant for compiling without a GPU" + (" (the GPU here can run it)." if caps else "."),
                remedy=remedy,
            )
        ]
    gpus = ", ".join(f"sm_{c[0]}{c[1]}" for c in caps)
    return [
        _finding(
            "knob.conflict",
            Severity.FAIL,
            name,
            value,
            f"{name}={shown(value)} does not match the GPU",
            f"FA4's kernels are compiled for sm_{major}{minor}{suffix}, but the GPU is {gpus}: they will not load "
            "(no kernel image for the device).",
            gpu_sm=gpus,
            remedy=remedy,
        )
    ]


def _triton_amd(facts: Facts, value: str) -> list[Finding]:
    name = "FLASH_ATTENTION_TRITON_AMD_ENABLE"
    nvidia = bool(facts.gpus.devices)
    if value == "TRUE":
        if not nvidia:
            return [
                _finding(
                    "knob.active",
                    Severity.INFO,
                    name,
                    value,
                    f"{name}=TRUE: flash-attn uses its Triton AMD backend",
                    "flash-attn imports flash_attn_triton_amd instead of its CUDA extension (meant for AMD GPUs).",
                    remedy=_unset(name, "Unset it on NVIDIA machines."),
                )
            ]
        return [
            _finding(
                "knob.conflict",
                Severity.FAIL,
                name,
                value,
                f"{name}=TRUE on an NVIDIA GPU",
                "flash-attn then uses its Triton AMD backend instead of the CUDA kernels.",
                remedy=_unset(name, "Unset it on NVIDIA machines."),
            )
        ]
    if value.strip().upper() not in ("TRUE", "1", "YES", "ON", "Y"):
        return []
    return [
        _finding(
            "knob.ignored",
            Severity.INFO if nvidia else Severity.WARN,
            name,
            value,
            f"{name}={shown(value)} does nothing",
            'flash-attn compares it with exactly "TRUE" (upper case): any other spelling leaves the CUDA kernels '
            "in use" + (" (what an NVIDIA GPU needs)." if nvidia else "; to use the Triton AMD backend set TRUE."),
            remedy=Remedy(
                "Unset it" + ("." if nvidia else ", or set exactly TRUE for the Triton AMD backend."),
                actions=(UnsetEnv(name),) if nvidia else (SetEnv(name, "TRUE"),),
            ),
        )
    ]


def check_knobs(facts: Facts) -> list[Finding]:
    env = facts.env
    out: list[Finding] = []
    if "SGLANG_USE_SGL_FA3_KERNEL" in env:
        out += _sgl_fa3_kernel(facts, env["SGLANG_USE_SGL_FA3_KERNEL"])
    if "SGLANG_IS_FLASHINFER_AVAILABLE" in env:
        out += _flashinfer_flag(env["SGLANG_IS_FLASHINFER_AVAILABLE"])
    if "SGLANG_INKLING_FA4_USE_PIP" in env and not (facts.sglang and facts.sglang.reads_inkling_pip):
        value = env["SGLANG_INKLING_FA4_USE_PIP"]
        out.append(
            _finding(
                "knob.ignored",
                Severity.WARN,
                "SGLANG_INKLING_FA4_USE_PIP",
                value,
                "SGLANG_INKLING_FA4_USE_PIP is set but this SGLang ignores it",
                "It existed only in SGLang builds of 2026-07/08 (FA4 from pip flash_attn.cute instead of the vendored "
                "copy); "
                + (f"SGLang {facts.sglang.version} does not read it." if facts.sglang else "SGLang is not installed."),
                remedy=_unset("SGLANG_INKLING_FA4_USE_PIP", "Unset it."),
            )
        )
    if "VLLM_FLASH_ATTN_VERSION" in env:
        out += _vllm_version(facts, env["VLLM_FLASH_ATTN_VERSION"])
    if "FLASH_ATTENTION_ARCH" in env:
        out += _fa4_arch(facts, env["FLASH_ATTENTION_ARCH"])
    if "CUTE_DSL_ARCH" in env:
        out += _dsl_arch(facts, env["CUTE_DSL_ARCH"])
    if "FLASH_ATTENTION_TRITON_AMD_ENABLE" in env:
        out += _triton_amd(facts, env["FLASH_ATTENTION_TRITON_AMD_ENABLE"])
    cache_dir = env.get("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR")
    if cache_dir is not None and (not cache_dir or (os.path.exists(cache_dir) and not os.access(cache_dir, os.W_OK))):
        out.append(
            Finding(
                "knob.invalid",
                Severity.WARN,
                "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR is not writable",
                f"FA4's compile cache cannot be written to {shown(cache_dir, 200)}: every start recompiles.",
                {"variable": "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "value": shown(cache_dir, 200)},
                (
                    Remedy(
                        "Point it at a writable folder, or unset it.",
                        actions=(UnsetEnv("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"),),
                    ),
                ),
            )
        )
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
