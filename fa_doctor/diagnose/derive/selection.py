"""Which FA version will run, for prefill and for decode, and why (reference/fa-selection.md 1-2)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from fa_doctor.catalog import names, releases
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.model.facts import Facts

if TYPE_CHECKING:
    from fa_doctor.catalog.server_rules import DefaultRule

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
        out = {("fa_version" if f.name == "version" else f.name): getattr(self, f.name) for f in fields(self)}
        return {**out, "problems": list(self.problems)}


@dataclass(frozen=True, slots=True)
class Selection:
    prefill: PhaseChoice
    decode: PhaseChoice
    sglang_default: str | None
    sglang_default_why: str
    catalog_date: str = ""  # GENERATED_ON of fa-doctor's catalog of releases
    sglang_rules: str = ""  # where the installed SGLang's rules were read: the catalog, or its files (and why)

    @property
    def phases(self) -> tuple[PhaseChoice, PhaseChoice]:
        return self.prefill, self.decode

    def to_dict(self) -> dict[str, object]:
        keys = {"sglang_default": "sglang_default_backend", "catalog_date": "catalog_generated_on"}
        out = {keys.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}
        fa_version = self.prefill.version if self.prefill.version == self.decode.version else None
        return {"fa_version": fa_version, **out, "prefill": self.prefill.to_dict(), "decode": self.decode.to_dict()}


def _refusals(
    facts: Facts, version: int, phase: str | None, flag: str | None
) -> tuple[list[str], list[str], list[str]]:
    """(what stops it, what stops it for some models only, the GPU gates that stop it): the installed SGLang's own
    raises and gates for this backend, phase and flag, in its own words (the catalog's rules, or its files')."""
    sgl = facts.sglang
    rules = sgl.rules if sgl else None
    if sgl is None or rules is None:
        return [], [], []
    from fa_doctor.catalog.server_rules import PHASES

    backend = f"fa{version}"
    stops: list[str] = []
    some: list[str] = []
    gates: list[str] = []
    for ph in (phase,) if phase else PHASES:
        for refusal in rules.refusals_for(ph, backend, flag):
            what = f"`{refusal.where} {backend}`" if refusal.where.startswith("--") else f"{backend} for {ph}"
            text = f"SGLang {sgl.version} raises {refusal.text} with {what}"
            if refusal.models != "any":
                text = f"for {'MLA' if refusal.models == 'mla' else 'non-MLA (MHA)'} models, {text}"
            listed = stops if refusal.models == "any" else some
            if text not in listed:
                listed.append(text)
    gate = rules.gate(backend)
    for major in sorted({c[0] for c in facts.capabilities}) if gate else ():
        assert gate is not None
        if (admits := gate.admits(major)) is None:
            gates.append(
                f"SGLang {sgl.version} refuses {backend} on sm_{major}x at start-up: `{gate.error}` ({gate.file})"
            )
        elif admits == "mha":
            some.append(f"for MLA models on sm_{major}x, SGLang {sgl.version} raises `{gate.error}` at start-up")
    return stops, some, gates


def implementation_for(
    version: int, facts: Facts, states: dict[str, ImplState], phase: str | None = None, flag: str | None = None
) -> tuple[ImplState | None, list[str]]:
    """What the server loads for an FA version, and every reason that cannot work here (for `phase`, chosen by
    `flag`; neither: both phases, as a pin or --attention-backend would)."""
    if (sgl := facts.sglang) is not None:
        if version not in sgl.accepted_versions:
            names_ = " and ".join(f"fa{v}" for v in sorted(sgl.accepted_versions))
            fa2 = "; FA2 is only a fallback inside its FA3 path" if version == 2 else ""
            why = (
                f"SGLang {sgl.version} has no fa{version} backend (its FlashAttention backends: {names_}): "
                f"`--attention-backend fa{version}` stops it at start-up with `invalid choice: 'fa{version}'`{fa2}"
            )
            return None, [why]
        stops, _, gates = _refusals(facts, version, phase, flag)
        reasons: list[str] = []
        if version == 3:
            state = states["fa3-sgl"]
        else:
            switch = sgl.rules.fa4_switch if sgl.rules else None
            pip = switch is not None and facts.env.get(switch[0]) == switch[1]
            state = states["fa4-sglang"] if sgl.fa4_vendored and not pip else states["fa4"]
            if not states["fa3-sgl"].installed:
                reasons.append(
                    "SGLang imports sgl_kernel (merge_state_v2) even for FA4, "
                    f"and {names.SGLANG_KERNEL} is not installed"
                )
            elif sgl.rules and sgl.rules.fa4 == "sgl_kernel.flash_attn" and (phase in (None, "decode")):
                from fa_doctor.catalog import server_rules

                dist = facts.scan.first(*names.SGL_KERNELS)
                kfacts = server_rules.kernel(dist.version) if dist else None
                if kfacts and kfacts.fa4_decode:
                    reasons.append(
                        f"{kfacts.name} {kfacts.version}'s flash_attn_with_kvcache(..., ver=4) raises "
                        f"`{kfacts.fa4_decode}`: FA4 cannot decode with this kernel"
                    )
                elif kfacts is not None and not kfacts.fa4:
                    reasons.append(
                        f"{kfacts.name} {kfacts.version} ships no FA4 copy: sgl_kernel.flash_attn(..., ver=4) "
                        "fails with `FA4 is not available, please check your installation.`"
                    )
        # The server's GPU gate only where the implementation's own GPU check does not already say it.
        stops += [] if state.gpu_reasons else gates
        return state, [*state.problems(), *stops, *reasons]
    # The first usable candidate, else the first installed one (its problems say why), else the first.
    candidates = [states[k] for k in {2: ["fa2"], 3: ["fa3", "fa3-sgl"], 4: ["fa4"]}.get(version, [])]
    if not (ranked := sorted(candidates, key=lambda s: (not s.usable, not s.installed))):
        return None, [f"there is no FA{version}"]
    return ranked[0], ranked[0].problems()


# Assumed for the server fa-doctor checks: no speculative decoding, no hierarchical cache, CUDA, not ROCm, NPU or MPS.
_KNOWN_ATOMS = {"no-spec": True, "hicache": False, "cuda": True, "hip": False, "npu": False, "mps": False}
# Properties of the model, which fa-doctor does not know: (assumed value, the condition in words, negated).
_MODEL_ATOMS: dict[str, tuple[bool, str, str]] = {
    "fa3-arch": (True, "the model's architecture is one of {archs}", "the model's architecture is not one of {archs}"),
    "asymmetric-kv": (False, "the model has asymmetric K/V head sizes", "the model's K/V head sizes are equal"),
    "attention-sinks": (False, "the model has attention sinks", "the model has no attention sinks"),
}


def sglang_default(facts: Facts) -> tuple[str | None, str]:
    """SGLang's default backend for an MHA model without speculative decoding, by the installed release's own rule
    for GPU 0 and this torch; a condition on the model is noted when the rule names an FA backend."""
    first = facts.first_capability  # SGLang reads the current device, GPU 0 of what it sees (else --gpu-arch)
    if first is None:
        return None, "no GPU visible: SGLang picks by GPU (fa3 on Hopper with CUDA >= 12.3)"
    from fa_doctor.catalog.server_rules import FALLBACK_DEFAULT

    rules = facts.sglang.rules if facts.sglang else None
    default = rules.default if rules and rules.default else FALLBACK_DEFAULT
    archs = ", ".join(rules.fa3_archs) if rules else ""
    major, _ = first
    cuda = facts.torch_cuda
    switch = facts.env.get("SGLANG_IS_FLASHINFER_AVAILABLE")
    have_fi = facts.scan.first("flashinfer-python") is not None
    atoms: dict[str, bool] = {
        **_KNOWN_ATOMS,
        "hopper": major == 9 and cuda is not None and cuda >= (12, 3),
        "sm100": major == 10 and cuda is not None and cuda >= (12, 8),
        "blackwell": major in (10, 12),
        # get_bool_env_var (0.5.23) counts only "true" and "1" as true: "yes" switches flashinfer off.
        "flashinfer": have_fi and (switch is None or switch.lower() in ("true", "1")),
    }
    notes = ""
    no_fi = f" (SGLANG_IS_FLASHINFER_AVAILABLE={switch})" if have_fi else " (flashinfer is not installed)"
    for rule in default:
        known = [c for c in rule.conditions if c.lstrip("!") not in _MODEL_ATOMS]
        model = [c for c in rule.conditions if c.lstrip("!") in _MODEL_ATOMS]
        if not all(atoms.get(c.lstrip("!"), False) != c.startswith("!") for c in known):
            continue  # an unknown condition counts as not met
        said = [_MODEL_ATOMS[c.lstrip("!")][1:][c.startswith("!")].format(archs=archs) for c in model]
        if all(_MODEL_ATOMS[c.lstrip("!")][0] != c.startswith("!") for c in model):
            why = _default_why(rule, first, "" if atoms["flashinfer"] else no_fi)
            if said and rule.backend in FA_BACKENDS:
                why += f" (only if {' and '.join(said)}: fa-doctor does not know the model)"
            return rule.backend, why + notes
        if rule.backend in FA_BACKENDS:
            notes += f"; {rule.backend} instead if {' and '.join(said)}"
    return "triton", "no branch of SGLang's rule matched"


def _default_why(rule: DefaultRule, first: tuple[int, int], no_fi: str) -> str:
    """Why the rule's branch holds on GPU 0; `no_fi`: why flashinfer is out, said where the branch is not it."""
    sm = f"sm_{first[0]}{first[1]}"
    if "hopper" in rule.conditions:
        return f"Hopper ({sm}) with torch CUDA >= 12.3"
    if "sm100" in rule.conditions:
        return f"SM100 ({sm}) with torch CUDA >= 12.8"
    if "blackwell" in rule.conditions:
        return f"Blackwell ({sm})"
    gpu = {9: f"{sm} without torch CUDA >= 12.3", 10: f"{sm} without torch CUDA >= 12.8"}.get(first[0])
    note = "" if rule.backend == "flashinfer" else no_fi
    return f"{gpu or sm + ': neither Hopper nor SM100'}, so {rule.backend}{note}"


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
        near = difflib.get_close_matches(simple, sorted(FA_BACKENDS), n=1, cutoff=0.75)
        return (
            f"`{name}` is not an SGLang attention backend: SGLang knows fa3 and fa4 (FA2 is only a fallback inside "
            f"its FA3 path) and non-FA backends such as flashinfer and triton; {refusal}"
            + (f"; did you mean `{near[0]}`?" if near else "")
        )
    close = difflib.get_close_matches(simple, sorted(choices), n=1, cutoff=0.6)
    hint = f"; did you mean `{close[0]}`?" if close else f"; its choices are {', '.join(sorted(choices))}"
    return f"`{name}` is not an SGLang attention backend: {refusal}{hint}"


def _missing_flag(flag: str | None, facts: Facts) -> str | None:
    rules = facts.sglang.rules if facts.sglang else None
    if flag is None or rules is None or not rules.flags or flag in rules.flags:
        return None
    return (
        f"SGLang {rules.version} has no {flag} option (it has {', '.join(rules.flags)}): it exits at start-up with "
        f"`unrecognized arguments: {flag}`"
    )


def _fa_choice(
    phase: str, version: int, backend: str | None, source: str, why: str, facts: Facts, states: dict[str, ImplState],
    flag: str | None,
) -> PhaseChoice:  # fmt: skip
    state, problems = implementation_for(version, facts, states, phase, flag)
    if facts.sglang and version in facts.sglang.accepted_versions:  # what stops it for some models only
        why += "".join(f"; {s}" for s in _refusals(facts, version, phase, flag)[1])
    key = state.impl.key if state else None
    return PhaseChoice(
        phase, backend, version, key, source, why, (*filter(None, [_missing_flag(flag, facts)]), *problems)
    )


def _phase(
    phase: str, backend: str | None, source: str, why: str, facts: Facts, states: dict[str, ImplState], flag: str | None
) -> PhaseChoice:
    """One phase's choice; `flag` is the option that named the backend (SGLang checks only those names)."""
    if backend is None:
        return PhaseChoice(phase, None, None, None, "none", why)
    if (version := FA_BACKENDS.get(backend)) is None:
        rejected = (_missing_flag(flag, facts) or rejected_backend(backend, flag, facts)) if flag else None
        if rejected:
            return PhaseChoice(phase, backend, None, None, source, why, (rejected,))
        return PhaseChoice(phase, backend, None, None, source, why + f"; {backend} is not FlashAttention")
    return _fa_choice(phase, version, backend, source, why, facts, states, flag)


def select(facts: Facts, states: dict[str, ImplState], override: int | None) -> Selection:
    default, default_why = sglang_default(facts) if facts.sglang else (None, "SGLang is not installed")
    flags = facts.flags
    phases: list[PhaseChoice] = []
    for phase, flag in (("prefill", flags.prefill), ("decode", flags.decode)):
        if override is not None:
            # The pin stands for `--attention-backend faN` (what a launcher turns it into).
            why = f"SGLANG_FLASHATTENTION_VERSION={override} pins FA{override}"
            name = f"fa{override}" if facts.sglang and override in FA_BACKENDS.values() else None
            phases.append(_fa_choice(phase, override, name, "override", why, facts, states, None))
        elif chosen := flag or flags.attention:
            which = f"--{phase}-attention-backend" if flag else "--attention-backend"
            phases.append(_phase(phase, chosen, "flag", f"{which} {chosen}", facts, states, which))
        elif facts.sglang is not None:
            why = (
                f"no flag for {phase}: SGLang's default, {default_why}"
                if flags.any
                else f"SGLang's default: {default_why}"
            )
            phases.append(_phase(phase, default, "sglang-default", why, facts, states, None))
        else:
            phases.append(_auto(phase, facts, states))
    return Selection(phases[0], phases[1], default, default_why, *_knowledge(facts))


def _knowledge(facts: Facts) -> tuple[str, str]:
    """(the catalog's date, where the installed SGLang's rules were read)."""
    date = releases.GENERATED_ON  # regen_catalog.py writes releases.py and servers.py together
    if (sgl := facts.sglang) is None:
        return date, ""
    if sgl.source == "catalog" and sgl.rules is not None:
        wheel = sgl.rules.wheel.split(" ", 1)[0]
        return date, f"SGLang {sgl.version}'s rules from fa-doctor's catalog (read from {wheel})"
    return date, sgl.note or f"SGLang {sgl.version}'s rules read from its installed files"


def _auto(phase: str, facts: Facts, states: dict[str, ImplState]) -> PhaseChoice:
    """Without SGLang: the newest FA whose install is healthy and supports the GPU (transformers' rule)."""
    own = [s for s in states.values() if s.impl.key not in ("fa4-sglang", "vllm-fa")]
    if (best := max((s for s in own if s.usable), key=lambda s: s.impl.version, default=None)) is not None:
        note = "" if facts.capabilities else " (no GPU visible to check it against)"
        why = f"auto-detection: the newest healthy FA installed is {best.impl.label}{note}"
        return PhaseChoice(phase, None, best.impl.version, best.impl.key, "auto", why)
    problems = tuple(p for s in own if s.installed for p in s.problems())
    why = "auto-detection found no usable FA implementation"
    return PhaseChoice(
        phase, None, None, None, "auto", why, problems or ("no FlashAttention implementation is installed",)
    )
