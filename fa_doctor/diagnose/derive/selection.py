"""Which FA version will run, for prefill and for decode, and why (reference/fa-selection.md 1-2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fa_doctor.catalog import names
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.model.facts import Facts

FA_BACKENDS = {"fa3": 3, "fa4": 4}
# ATTENTION_BACKEND_CHOICES of SGLang 0.5.23 (python/sglang/srt/arg_groups/choices.py, the wheel's file matches
# its RECORD hash), for when the installed SGLang's own list cannot be read or SGLang is not installed.
SGLANG_0_5_23_BACKENDS = frozenset(
    {
        "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed",
        "fa3", "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
        "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer",
        "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
    }
)  # fmt: skip
# FlashAttention-looking names: the hint is fa3/fa4, not the nearest spelling (flash_attn is not minicpm_flashattn).
_FA_LIKE = re.compile(r"^(fa[\W_]?\d*|flash[\W_]?attn[\w-]*|flash[\W_]?attention[\w-]*)$")


@dataclass(frozen=True, slots=True)
class PhaseChoice:
    phase: str  # "prefill" | "decode"
    backend: str | None  # SGLang backend name, or None without SGLang
    version: int | None  # FA version that runs; None when the backend is not FA
    implementation: str | None  # implementation key (families.py)
    source: str  # "override" | "flag" | "sglang-default" | "auto" | "none"
    why: str
    problems: tuple[str, ...] = ()  # every reason it cannot run here

    def to_dict(self) -> dict[str, object]:
        return {
            "phase": self.phase,
            "backend": self.backend,
            "fa_version": self.version,
            "implementation": self.implementation,
            "source": self.source,
            "why": self.why,
            "problems": list(self.problems),
        }


@dataclass(frozen=True, slots=True)
class Selection:
    prefill: PhaseChoice
    decode: PhaseChoice
    sglang_default: str | None
    sglang_default_why: str

    @property
    def phases(self) -> tuple[PhaseChoice, PhaseChoice]:
        return self.prefill, self.decode

    def to_dict(self) -> dict[str, object]:
        versions = {p.version for p in self.phases}
        return {
            "fa_version": versions.pop() if len(versions) == 1 else None,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "sglang_default_backend": self.sglang_default,
            "sglang_default_why": self.sglang_default_why,
        }


def implementation_for(version: int, facts: Facts, states: dict[str, ImplState]) -> tuple[ImplState | None, list[str]]:
    """What the server loads for an FA version, and every reason that cannot work here."""
    sgl = facts.sglang
    if sgl is not None:
        reasons: list[str] = []
        if version not in sgl.accepted_versions:
            reasons.append(
                f"SGLang {sgl.version}'s FlashAttentionBackend accepts fa_impl_ver "
                f"{' and '.join(map(str, sorted(sgl.accepted_versions)))} only (it would raise "
                f"`ValueError: Invalid version: self.fa_impl_ver={version}`); FA2 is only a fallback inside "
                "its FA3 path"
            )
            return None, reasons
        if version == 3:
            state = states["fa3-sgl"]
        else:
            state = states["fa4-sglang"] if sgl.fa4_vendored else states["fa4"]
            kernel = states["fa3-sgl"]
            if not kernel.installed:
                reasons.append(
                    "SGLang imports sgl_kernel (merge_state_v2) even for FA4, "
                    f"and {names.SGLANG_KERNEL} is not installed"
                )
        return state, [*state.problems(), *reasons]
    candidates = {2: ["fa2"], 3: ["fa3", "fa3-sgl"], 4: ["fa4"]}.get(version, [])
    states_v = [states[k] for k in candidates]
    for state in states_v:
        if state.usable:
            return state, []
    best = next((s for s in states_v if s.installed), states_v[0] if states_v else None)
    if best is None:
        return None, [f"there is no FA{version}"]
    return best, best.problems()


def sglang_default(facts: Facts) -> tuple[str | None, str]:
    """SGLang's default backend for a plain MHA model without speculative decoding (fa-selection.md 2.1)."""
    # SGLang reads the capability of the current device, GPU 0 of what it sees.
    first = facts.first_capability  # with no GPU visible, the first --gpu-arch
    if first is None:
        return None, "no GPU visible: SGLang picks by GPU (fa3 on Hopper with CUDA >= 12.3)"
    major, minor = first
    cuda = facts.torch_cuda
    if major == 9 and cuda is not None and cuda >= (12, 3):
        return "fa3", f"Hopper (sm_{major}{minor}) with torch CUDA >= 12.3"
    if major == 10 and cuda is not None and cuda >= (12, 8):
        return "trtllm_mha", "SM100 (fa4 only for models with asymmetric KV)"
    switch = facts.env.get("SGLANG_IS_FLASHINFER_AVAILABLE")
    if facts.scan.first("flashinfer-python") is None:
        backend, note = "triton", " (flashinfer is not installed)"
    elif switch is not None and switch.lower() not in ("true", "1"):
        # sglang's get_bool_env_var (0.5.23) counts only "true" and "1" as true: "yes" switches flashinfer off.
        backend, note = "triton", f" (SGLANG_IS_FLASHINFER_AVAILABLE={switch})"
    else:
        backend, note = "flashinfer", ""
    if major == 9:
        gpu = f"sm_{major}{minor} without torch CUDA >= 12.3"
    elif major == 10:
        gpu = f"sm_{major}{minor} without torch CUDA >= 12.8"
    else:
        gpu = f"sm_{major}{minor}: neither Hopper nor SM100"
    return backend, f"{gpu}, so {backend}{note}"


def rejected_backend(name: str, flag: str, facts: Facts) -> str | None:
    """Why SGLang refuses to start with `flag name`, or None when the name is one of its choices."""
    choices = (facts.sglang.backend_choices if facts.sglang else None) or SGLANG_0_5_23_BACKENDS
    if name in choices:
        return None
    whose = f"the installed SGLang {facts.sglang.version}" if facts.sglang else "SGLang (0.5.23's list)"
    refusal = f"{whose} exits at start-up with `argument {flag}: invalid choice: {name!r}`"
    simple = name.strip().lower()
    if simple in choices:
        return f"SGLang's backend names are exact and lower-case: `{name}` is rejected, use `{simple}` ({refusal})"
    if _FA_LIKE.match(simple):
        import difflib

        near = difflib.get_close_matches(simple, sorted(FA_BACKENDS), n=1, cutoff=0.75)
        return (
            f"`{name}` is not an SGLang attention backend: SGLang knows fa3 and fa4 (FA2 is only a fallback inside "
            f"its FA3 path) and non-FA backends such as flashinfer and triton; {refusal}"
            + (f"; did you mean `{near[0]}`?" if near else "")
        )
    import difflib

    close = difflib.get_close_matches(simple, sorted(choices), n=1, cutoff=0.6)
    hint = f"; did you mean `{close[0]}`?" if close else f"; its choices are {', '.join(sorted(choices))}"
    return f"`{name}` is not an SGLang attention backend: {refusal}{hint}"


def _phase(
    phase: str,
    backend: str | None,
    source: str,
    why: str,
    facts: Facts,
    states: dict[str, ImplState],
    flag: str | None = None,
) -> PhaseChoice:
    """One phase's choice; `flag` is the option that named the backend (SGLang checks only those names)."""
    if backend is None:
        return PhaseChoice(phase, None, None, None, "none", why)
    version = FA_BACKENDS.get(backend)
    if version is None:
        rejected = rejected_backend(backend, flag, facts) if flag else None
        if rejected:
            return PhaseChoice(phase, backend, None, None, source, why, (rejected,))
        return PhaseChoice(phase, backend, None, None, source, why + f"; {backend} is not FlashAttention")
    state, problems = implementation_for(version, facts, states)
    return PhaseChoice(phase, backend, version, state.impl.key if state else None, source, why, tuple(problems))


def select(facts: Facts, states: dict[str, ImplState], override: int | None) -> Selection:
    default, default_why = sglang_default(facts) if facts.sglang else (None, "SGLang is not installed")
    flags = facts.flags
    phases: list[PhaseChoice] = []
    for phase, flag in (("prefill", flags.prefill), ("decode", flags.decode)):
        if override is not None:
            why = f"SGLANG_FLASHATTENTION_VERSION={override} pins FA{override}"
            state, problems = implementation_for(override, facts, states)
            name = f"fa{override}" if facts.sglang and override in FA_BACKENDS.values() else None
            phases.append(
                PhaseChoice(phase, name, override, state.impl.key if state else None, "override", why, tuple(problems))
            )
        elif flag or flags.attention:
            chosen = flag or flags.attention
            which = f"--{phase}-attention-backend" if flag else "--attention-backend"
            phases.append(_phase(phase, chosen, "flag", f"{which} {chosen}", facts, states, which))
        elif flags.any and facts.sglang is not None:
            phases.append(
                _phase(
                    phase,
                    default,
                    "sglang-default",
                    f"no flag for {phase}: SGLang's default, {default_why}",
                    facts,
                    states,
                )
            )
        elif facts.sglang is not None:
            phases.append(_phase(phase, default, "sglang-default", f"SGLang's default: {default_why}", facts, states))
        else:
            phases.append(_auto(phase, facts, states))
    return Selection(phases[0], phases[1], default, default_why)


def _auto(phase: str, facts: Facts, states: dict[str, ImplState]) -> PhaseChoice:
    """Without SGLang: the newest FA whose install is healthy and supports the GPU (transformers' rule)."""
    usable = sorted(
        (s for s in states.values() if s.usable and s.impl.key not in ("fa4-sglang", "vllm-fa")),
        key=lambda s: s.impl.version,
        reverse=True,
    )
    if usable:
        best = usable[0]
        gpu_note = "" if facts.capabilities else " (no GPU visible to check it against)"
        return PhaseChoice(
            phase,
            None,
            best.impl.version,
            best.impl.key,
            "auto",
            f"auto-detection: the newest healthy FA installed is {best.impl.label}{gpu_note}",
        )
    installed = [s for s in states.values() if s.installed and s.impl.key not in ("fa4-sglang", "vllm-fa")]
    problems = tuple(p for s in installed for p in s.problems())
    return PhaseChoice(
        phase,
        None,
        None,
        None,
        "auto",
        "auto-detection found no usable FA implementation",
        problems or ("no FlashAttention implementation is installed",),
    )
