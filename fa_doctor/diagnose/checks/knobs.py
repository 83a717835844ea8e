"""The other knobs that pin or steer an FA version (reference/fa-selection.md section 7); where each rule was read
in released code: docs/fix.md, "Knob facts"."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from fa_doctor.catalog import knobs as catalog
from fa_doctor.catalog import names
from fa_doctor.diagnose.checks.override import shown
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.probes.files import creatable

_ENVBOOL = ("true", "1", "yes", "y", "false", "0", "no", "n")
_GET_BOOL = ("true", "1", "false", "0")
_FA4_ARCH = re.compile(r"^(?:sm_?|SM_?)?(\d+)(\d)([af]?)$")  # re.match, as FA4 does: `$` admits a final \n
_FLAG = "--attention-config.flash_attn_version N"
Make = Callable[..., list[Finding]]


def _unset(name: str, text: str) -> Remedy:
    from fa_doctor.model.actions import UnsetEnv  # here: a healthy check builds no remedy

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
    hub = facts.scan.first(names.KERNELS) is not None
    return make(
        "knob.active",
        Severity.INFO if hub else Severity.WARN,
        f"{name}={shown(value)}: FA3 from the hub",
        "FA3 is loaded from the Hugging Face hub kernel kernels-community/sgl-flash-attn3 instead of sgl_kernel; "
        "it needs the `kernels` package and the hub (or a warm cache / kernels.lock)."
        + ("" if hub else " `kernels` is not installed, so SGLang warns and falls back to sgl_kernel."),
        kernels_installed=hub,
    )


def _inkling(facts: Facts, value: str) -> list[Finding]:
    from fa_doctor.catalog import server_rules

    name = "SGLANG_INKLING_FA4_USE_PIP"
    make = _maker(name, value, _unset(name, "Unset it: SGLang then uses its vendored FA4."))
    readers = server_rules.sglang_reading(name)
    span = f"SGLang {readers[0]}-{readers[-1]}" if readers else "no SGLang release in fa-doctor's catalog"
    sgl = facts.sglang
    if sgl is None or not sgl.reads_inkling_pip:
        return make(
            "knob.ignored",
            Severity.WARN,
            f"{name} is set but this SGLang ignores it",
            f"Only {span} read it (FA4 from pip flash_attn.cute instead of the vendored copy); "
            + (f"SGLang {sgl.version} does not." if sgl else "SGLang is not installed."),
        )
    if value != "1":
        return make(
            "knob.ignored",
            Severity.WARN,
            f"{name}={shown(value)} does nothing",
            f'SGLang {sgl.version} compares it with exactly "1": any other value keeps its vendored FA4.',
            expected="1",
        )
    return make(
        "knob.active",
        Severity.INFO,
        f"{name}=1: FA4 from the flash-attn-4 package",
        f"SGLang {sgl.version} imports pip's flash_attn.cute (the flash-attn-4 package) instead of its vendored copy.",
    )


def _flashinfer_flag(_facts: Facts, value: str) -> list[Finding]:
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


def _either(values: tuple[int, ...]) -> str:
    """(2, 3, 4) as "2, 3 or 4"."""
    items = [str(v) for v in values]
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)


def _vllm_version(facts: Facts, value: str) -> list[Finding]:
    from fa_doctor.catalog import server_rules

    name = "VLLM_FLASH_ATTN_VERSION"
    if (vllm := facts.scan.first(names.VLLM)) is None:
        make = _maker(name, value, _unset(name, "Unset it, or leave it for another environment."), vllm=None)
        return make("knob.ignored", Severity.INFO, f"{name} is set but vLLM is not installed here", "Nothing reads it.")
    v = vllm.version
    rules, note = server_rules.vllm(v), ""
    if rules is None:  # judged by the newest release the catalog holds, saying so
        newest = server_rules.vllm_newest()
        rules = server_rules.vllm(newest) if newest else None
        note = (
            f" (vLLM {v} is not in fa-doctor's catalog, generated {server_rules.generated_on()}: judged by "
            f"{newest}, the newest release it holds; `pip install -U fa-doctor` brings a newer catalog)"
        )
    if rules is None:
        return []
    if not rules.env:
        accepted = _either(rules.config) or "2 or 3"
        last = server_rules.vllm_last_reading()
        other = value.strip().isdigit() and len(value) < 4 and int(value) not in rules.config
        make = _maker(name, value, _unset(name, f"Unset it and pass `{_FLAG}` ({accepted}) to vLLM."), vllm=v)
        return make(
            "knob.ignored",
            Severity.WARN,
            f"{name} is set but vLLM {v} does not read it",
            f"vLLM {last} was the last release to read it (a deprecated alias); later releases ignore it{note}. Pass "
            f"`{_FLAG}` instead: it accepts {accepted}" + (f", not {value.strip()}." if other else "."),
        )
    make = _maker(name, value, _unset(name, f"Unset it (vLLM picks for the GPU), or pass `{_FLAG}` instead."), vllm=v)
    try:
        number = int(value) if len(value) <= 40 else None  # vLLM's own int(): " 3" is 3
    except ValueError:
        number = None
    expected = _either(rules.env_accepts) or "an FA version its support check passes"
    if number is None:
        return make(
            "knob.invalid",
            Severity.FAIL,
            f"{name} is not an integer",
            f"vLLM {v} calls int() on it and stops at start-up with a ValueError.",
            expected=expected,
        )
    if rules.env_accepts and number not in rules.env_accepts:
        return make(
            "knob.invalid",
            Severity.FAIL,
            f"{name}={number} is not a version vLLM {v} takes",
            f"vLLM {v} asserts `{name} in {list(rules.env_accepts)}`; the assertion fails, so FlashAttention counts as "
            f"unavailable and the FLASH_ATTN backend fails{note}.",
            expected=expected,
        )
    majors = {c[0] for c in facts.capabilities}
    if number == 3 and majors == {10}:
        return make(
            "knob.conflict",
            Severity.WARN,
            f"{name}=3 on Blackwell: vLLM uses FA2",
            f'vLLM {v} warns "Cannot use FA version 3 on Blackwell platform, defaulting to FA version 2".',
        )
    if str(number) in rules.unsupported and all(rules.runs(number, m) for m in majors):
        return make(
            "knob.active",
            Severity.INFO,
            f"{name}={number} pins vLLM's FA{number}",
            f"vLLM {v} reads it as an alias of `{_FLAG}`; vLLM {server_rules.vllm_last_reading()} was the last "
            f"release to read it{note}.",
        )
    known = str(number) in rules.unsupported
    problem = (
        f"`{rules.unsupported[str(number)]}`, and the GPU here is {', '.join(f'{m}.x' for m in sorted(majors))}"
        if known
        else f"it has no FA{number}"
    )
    return make(
        "knob.conflict" if known else "knob.invalid",
        Severity.FAIL,
        f"{name}={number} cannot work here",
        f"vLLM {v} asserts the pinned version is supported ({problem}); when it is not, FlashAttention counts as "
        f"unavailable and the FLASH_ATTN backend fails{note}.",
        expected=expected,
    )


def _fa4_arch(facts: Facts, value: str) -> list[Finding]:
    name = "FLASH_ATTENTION_ARCH"
    make = _maker(name, value, _unset(name, f"Unset {name}: FA4 picks the kernel path from the GPU."))
    if (m := _FA4_ARCH.match(value)) is None:
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
    if not (bad := {gpu: why for gpu, why in problems.items() if why}):
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
    from fa_doctor.model.actions import SetEnv  # set only with the knob: a healthy check has none

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
    out = [f for name, read in _READERS.items() if name in env for f in read(facts, env[name])]
    return out + [
        Finding(
            "knob.active",
            Severity.INFO,
            f"{name} is set (build time only)",
            "It affects building flash-attn from source, not which FA version runs.",
            {"variable": name, "value": shown(env[name])},
        )
        for name in ("FLASH_ATTENTION_FORCE_BUILD", "FLASH_ATTN_CUDA_ARCHS")
        if name in env
    ]


def _fa4_cache(facts: Facts, folder: str) -> Iterator[Finding]:
    """FA4's compile cache folder: read only when the cache is on, then created at import."""
    enabled = facts.env.get(catalog.FA4_CACHE_ENABLED) == catalog.FA4_CACHE_ENABLED_ON
    evidence = {"variable": catalog.FA4_CACHE_DIR, "value": shown(folder, 200), "cache_enabled": enabled}
    if not enabled:
        yield Finding(
            "knob.ignored",
            Severity.INFO,
            f"{catalog.FA4_CACHE_DIR} is set but FA4's compile cache is off",
            f"FA4 reads the folder only when {catalog.FA4_CACHE_ENABLED}={catalog.FA4_CACHE_ENABLED_ON}; without "
            "it every process compiles in memory.",
            evidence,
        )
    elif not (folder and creatable(folder)):
        from fa_doctor.model.actions import UnsetEnv

        yield Finding(
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
                Remedy(f"Unset {catalog.FA4_CACHE_DIR}.", actions=(UnsetEnv(catalog.FA4_CACHE_DIR),)),
            ),
        )


_READERS: dict[str, Callable[[Facts, str], Iterable[Finding]]] = {
    "SGLANG_USE_SGL_FA3_KERNEL": _sgl_fa3_kernel,
    "SGLANG_IS_FLASHINFER_AVAILABLE": _flashinfer_flag,
    "SGLANG_INKLING_FA4_USE_PIP": _inkling,
    "VLLM_FLASH_ATTN_VERSION": _vllm_version,
    "FLASH_ATTENTION_ARCH": _fa4_arch,
    "CUTE_DSL_ARCH": _dsl_arch,
    "FLASH_ATTENTION_TRITON_AMD_ENABLE": _triton_amd,
    catalog.FA4_CACHE_DIR: _fa4_cache,
}
