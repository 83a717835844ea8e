"""The other knobs that pin or steer an FA version (reference/fa-selection.md section 7)."""

from __future__ import annotations

import os
import re

from fa_doctor.checks.override import shown
from fa_doctor.facts import Facts
from fa_doctor.finding import Finding, Remedy, Severity

_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")
_ARCH = re.compile(r"(?:sm_?)?(\d{2,3})([af]?)")


def _unset(name: str, text: str) -> Remedy:
    return Remedy(text, (f"unset {name}",))


def _invalid(name: str, value: str, expected: str, consequence: str) -> Finding:
    return Finding(
        "knob.invalid",
        Severity.FAIL,
        f"{name} has an invalid value",
        f"{name}={shown(value)}: expected {expected}. {consequence}",
        {"variable": name, "value": shown(value), "expected": expected},
        (_unset(name, f"Unset {name} (the default applies), or set it to {expected}."),),
    )


def _sgl_fa3_kernel(facts: Facts, value: str) -> list[Finding]:
    name = "SGLANG_USE_SGL_FA3_KERNEL"
    if value.lower() not in _TRUE + _FALSE:
        return [
            _invalid(
                name,
                value,
                "true/1/yes/y or false/0/no/n",
                f'SGLang fails at start-up with `"{value.lower()}" is not a valid boolean value`.',
            )
        ]
    if value.lower() in _TRUE:
        return []
    hub = facts.scan.first("kernels") is not None
    detail = (
        "FA3 is loaded from the Hugging Face hub kernel kernels-community/sgl-flash-attn3 instead of "
        "sgl_kernel; it needs the `kernels` package and the hub (or a warm cache / kernels.lock)."
    )
    if not hub:
        detail += " `kernels` is not installed, so SGLang warns and falls back to sgl_kernel."
    return [
        Finding(
            "knob.active",
            Severity.WARN if not hub else Severity.INFO,
            f"{name}={value}: FA3 from the hub",
            detail,
            {"variable": name, "value": value, "kernels_installed": hub},
            (_unset(name, "Unset it to use sgl_kernel's FA3 (the default)."),),
        )
    ]


def _vllm_version(facts: Facts, value: str) -> list[Finding]:
    name = "VLLM_FLASH_ATTN_VERSION"
    vllm = facts.scan.first("vllm")
    findings = []
    if not re.fullmatch(r"[23]", value):
        findings.append(
            _invalid(
                name,
                value,
                "2 or 3",
                "Older vLLM calls int() on it (ValueError) or asserts it is "
                "2 or 3; when the assert fails FA silently goes undetected.",
            )
        )
    findings.append(
        Finding(
            "knob.ignored",
            Severity.WARN,
            f"{name} is set but current vLLM no longer reads it",
            "vLLM deprecated it on 2025-12-05 and removed it on 2026-01-21; use "
            "`--attention-config.flash_attn_version N` (2, 3 or 4)."
            + (f" Installed: vllm {vllm.version}." if vllm else " vLLM is not installed here."),
            {"variable": name, "value": shown(value), "vllm": vllm.version if vllm else None},
            (_unset(name, "Unset it and pass the version to vLLM as a flag."),),
        )
    )
    return findings


def _arch(facts: Facts, name: str, value: str) -> list[Finding]:
    m = _ARCH.fullmatch(value.strip().lower())
    if m is None:
        return [
            _invalid(
                name,
                value,
                "an SM number such as 90, sm_90 or sm_100a",
                "FA4 cannot tell which architecture to compile for.",
            )
        ]
    sm = int(m.group(1))
    caps = {c[0] * 10 + c[1] for c in facts.capabilities}
    if caps and sm not in caps:
        return [
            Finding(
                "knob.conflict",
                Severity.FAIL,
                f"{name}={value} does not match the GPU",
                f"It forces FA4 to compile for sm_{sm}, but the visible GPUs are "
                f"{', '.join(f'sm_{c}' for c in sorted(caps))}: the kernels will not load (no kernel image).",
                {"variable": name, "value": value, "gpu_sm": sorted(caps)},
                (_unset(name, f"Unset {name}: FA4 reads the architecture from the GPU."),),
            )
        ]
    return [
        Finding(
            "knob.active",
            Severity.INFO,
            f"{name}={value} forces the FA4 compile target",
            "Meant for compiling without a GPU; with a GPU FA4 reads the architecture itself.",
            {"variable": name, "value": value},
            (_unset(name, f"Unset {name} unless you cross-compile."),),
        )
    ]


def check_knobs(facts: Facts) -> list[Finding]:
    env = facts.env
    out: list[Finding] = []
    if "SGLANG_USE_SGL_FA3_KERNEL" in env:
        out += _sgl_fa3_kernel(facts, env["SGLANG_USE_SGL_FA3_KERNEL"])
    if "SGLANG_INKLING_FA4_USE_PIP" in env and not (facts.sglang and facts.sglang.reads_inkling_pip):
        out.append(
            Finding(
                "knob.ignored",
                Severity.WARN,
                "SGLANG_INKLING_FA4_USE_PIP is set but this SGLang ignores it",
                "It existed only in SGLang builds of 2026-07/08 (FA4 from pip flash_attn.cute instead of the vendored "
                "copy); "
                + (f"SGLang {facts.sglang.version} does not read it." if facts.sglang else "SGLang is not installed."),
                {"variable": "SGLANG_INKLING_FA4_USE_PIP", "value": shown(env["SGLANG_INKLING_FA4_USE_PIP"])},
                (_unset("SGLANG_INKLING_FA4_USE_PIP", "Unset it."),),
            )
        )
    if "VLLM_FLASH_ATTN_VERSION" in env:
        out += _vllm_version(facts, env["VLLM_FLASH_ATTN_VERSION"])
    for name in ("FLASH_ATTENTION_ARCH", "CUTE_DSL_ARCH"):
        if name in env:
            out += _arch(facts, name, env[name])
    amd = env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE")
    if amd is not None and amd.upper() == "TRUE" and facts.gpus.devices:
        out.append(
            Finding(
                "knob.conflict",
                Severity.FAIL,
                "FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE on an NVIDIA GPU",
                "flash-attn then uses its Triton AMD backend instead of the CUDA kernels.",
                {"variable": "FLASH_ATTENTION_TRITON_AMD_ENABLE", "value": amd},
                (_unset("FLASH_ATTENTION_TRITON_AMD_ENABLE", "Unset it on NVIDIA machines."),),
            )
        )
    cache_dir = env.get("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR")
    if cache_dir is not None and (not cache_dir or (os.path.exists(cache_dir) and not os.access(cache_dir, os.W_OK))):
        out.append(
            Finding(
                "knob.invalid",
                Severity.WARN,
                "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR is not writable",
                f"FA4's compile cache cannot be written to {shown(cache_dir, 200)}: every start recompiles.",
                {"variable": "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "value": shown(cache_dir, 200)},
                (Remedy("Point it at a writable folder, or unset it.", ("unset FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",)),),
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
