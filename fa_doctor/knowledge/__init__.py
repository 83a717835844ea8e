"""What a pasted error means, what this machine says of it and the remedies: the knowledge base (errors.json) and the
model behind `fa-doctor explain` (docs/explain.md). `check` classifies smoke-test errors with the same table."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING

from fa_doctor.knowledge.base import CATEGORIES, Entry, KnowledgeError, Match, load
from fa_doctor.knowledge.evidence import ENTRY_HINTS, WORD
from fa_doctor.knowledge.match import MAX_CHARS, extracted_for, featurise, normalise
from fa_doctor.knowledge.model import shown, standing, stored
from fa_doctor.model.actions import Action, RunCommand
from fa_doctor.model.finding import Finding, Remedy, Severity

if TYPE_CHECKING:
    from fa_doctor.model.facts import Facts

__all__ = ["CATEGORIES", "MAX_CHARS", "NO_MATCH", "Entry", "KnowledgeError", "Match", "explain", "load"]

NO_MATCH = (
    "fa-doctor does not recognise this error. Run `fa-doctor check` on the machine (add `--python` for the "
    "server's interpreter) to test the install directly."
)


def explain(
    text: str, facts: Facts | None = None, limit: int = 5, findings: Sequence[Finding] | None = None
) -> list[Match]:
    """Ranked explanations of a pasted error, best first (none for text with nothing of FlashAttention's world).
    With facts, remedies are exact for the target; with check's findings too, verdicts reweigh the answers."""
    if limit <= 0 or not text:
        return []
    f = featurise(normalise(text))
    if not f.relevant:
        return []
    ranked = stored().rank(f.patterns, f.evidence, f.words)
    support = {r.category: r.support for r in ranked}
    confidences = {r.category: r.confidence for r in ranked}
    said: dict[str, Verdict] = {}
    if facts is not None and findings is not None:
        said = verdicts(facts, findings)
        confidences = reweigh(confidences, said)
    order = sorted(confidences.items(), key=lambda cp: -cp[1])
    out: list[Match] = []
    for rank, (category, confidence) in enumerate(shown(order, limit)):
        hit = next((h for h in f.hits if h.entry.category == category), None)
        entry = hit.entry if hit else _entry_for(category, f.evidence, f.words)
        extracted = extracted_for(entry, f.found, hit.groups if hit else {})
        reasons = tuple(f.evidence.get(x) or f"the word '{x[4:]}'" for x in support[category])
        verdict = said.get(category)
        out.append(
            Match(
                id=entry.id,
                category=entry.category,
                title=entry.title,
                cause=entry.cause,
                remedies=_remedies(entry, extracted, facts),
                confidence=round(confidence, 3),
                extracted=extracted,
                confirm_with=entry.confirm_with,
                links=entry.links,
                reasons=tuple(dict.fromkeys(reasons)),
                standing=standing(confidence, rank == 0),
                verdict=verdict.state if verdict else "",
                verdict_reason=verdict.reason if verdict else "",
            )
        )
    return out


def _entry_for(category: str, evidence: Mapping[str, str], words: Sequence[str]) -> Entry:
    """The category's entry the evidence names (evidence.ENTRY_HINTS), else the one whose pattern words the text
    shares most (file order breaks ties)."""
    entries = [e for e in load() if e.category == category]
    named = {ENTRY_HINTS[x] for x in evidence if x in ENTRY_HINTS}
    if hinted := next((e for e in entries if e.id in named), None):
        return hinted
    have = {w[4:] for w in words}
    return max(entries, key=lambda e: (len(_words(e) & have), -entries.index(e)))


@cache
def _words(entry: Entry) -> frozenset[str]:
    return frozenset(w for p in entry.patterns for lit in (p.find, *p.also) for w in WORD.findall(lit))


def _remedies(entry: Entry, extracted: Mapping[str, str], facts: Facts | None) -> tuple[Remedy, ...]:
    """Facts-dependent remedies first (exact wheel, this machine's glibc/GPU), then the entry's general ones.
    Installs are intents, written by the planner: exact for the target with facts, and without them only the
    `fa-doctor check --python` that would write them (no torch to hold, so no install is printed)."""
    from fa_doctor.diagnose.plan.planner import unique

    exact = _exact(entry, extracted, facts) if facts is not None else ()
    return tuple(unique([*exact, *(r for remedy in entry.remedies for r in _general(remedy, facts))]))


_SHELL_SYNTAX = ("|", ">", "<", ";", "&&", "$(", "`", "cd ")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _general(remedy: Remedy, facts: Facts | None) -> tuple[Remedy, ...]:
    """An entry's remedy for the target: its intent planned, its plain commands as RunCommand actions (so
    `explain` prints what `check` would, quoted the same way); a command that needs the shell stays text."""
    from fa_doctor.diagnose.plan.expand import expand

    python = facts.target.executable if facts is not None else None
    quoted = shlex.quote(python) if python else "python"
    text = remedy.text.replace("{python}", quoted)
    if remedy.intent is not None:
        return expand(Remedy(text, remedy.commands, intent=remedy.intent), facts)
    actions = tuple(_action(c, python) for c in remedy.commands)
    if remedy.commands and all(a is not None for a in actions):
        return (Remedy(text, (), tuple(a for a in actions if a is not None)),)
    return (Remedy(text, tuple(c.replace("{python}", quoted) for c in remedy.commands)),)


def _action(command: str, python: str | None) -> Action | None:
    if any(op in command for op in _SHELL_SYNTAX):
        return None
    words = shlex.split(command)
    if not words or _ASSIGNMENT.match(words[0]):
        return None  # RunCommand carries no environment: the text says it
    return RunCommand(tuple((python or "python") if w == "{python}" else w for w in words))


def _exact(entry: Entry, extracted: Mapping[str, str], facts: Facts) -> tuple[Remedy, ...]:
    out: list[Remedy] = []
    torch = facts.torch
    if entry.category == "abi-mismatch" and torch is not None and torch.version:
        abi = {True: "TRUE", False: "FALSE", None: "unknown"}[torch.cxx11_abi]
        built = [f"; the paste names {extracted['wheel']}"] if extracted.get("wheel") else []
        if extracted.get("abi") == "cxx11":
            built.append("; the missing symbol is a std::string of the other C++ ABI")
        runs = f"The target runs torch {torch.version} (CUDA {torch.cuda or 'none'}, cxx11abi{abi})" + "".join(built)
        probe = "import torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI)"
        command = f'{shlex.quote(facts.target.executable)} -c "{probe}"'
        out.append(Remedy(runs + ": the extension must be built for exactly this torch and ABI.", (command,)))
    if entry.category == "glibc" and facts.target.libc:
        need = extracted.get("glibc_requires", "a newer version")
        out.append(Remedy(f"This system has {facts.target.libc}; the binary needs {need}.", ("ldd --version",)))
    if entry.category in ("arch-unsupported", "fa3-unavailable") and facts.capabilities:
        caps = ", ".join(f"{a}.{b}" for a, b in facts.capabilities)
        arch = "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv"
        out.append(Remedy(f"The target's GPUs have compute capability {caps}.", (arch,)))
    if entry.reinstall:
        from fa_doctor.diagnose.plan.expand import expand
        from fa_doctor.model.intents import Install

        out.extend(expand(Remedy("", intent=Install(entry.reinstall)), facts))
    return tuple(out)


# What this machine says about each hypothesis, from the target's facts and check's findings: a verdict multiplies
# the model's probability by a hand-set likelihood ratio (docs/explain.md).
CONFIRMED, RULED_OUT = "confirmed", "ruled out"
LIKELIHOOD = {CONFIRMED: 4.0, RULED_OUT: 0.25}

# category -> check findings that, failing (or warning), confirm it on this machine.
_CONFIRMED_BY: dict[str, tuple[str, ...]] = {
    "abi-mismatch": ("binary.undefined_symbol",),
    "arch-unsupported": ("gpu.unsupported", "binary.no_kernel_image"),
    "glibc": ("binary.glibc",),
    "cuda-runtime": ("binary.cudart_mismatch",),
    "no-gpu": ("gpu.none", "torch.cpu_build"),
    "missing-module": ("package.none", "package.broken", "package.shadowed", "torch.missing"),
    "selection-override": ("override.invalid", "override.unavailable", "selection.unavailable", "knob.invalid"),
    "fa3-unavailable": ("override.unavailable", "selection.unavailable"),
    "api-mismatch": ("package.conflict",),
}

# Findings that state a fact of the machine whatever their severity (a missing GPU is info without the kernel test).
_FACTS = frozenset(["gpu.none", "torch.cpu_build"])


@dataclass(frozen=True, slots=True)
class Verdict:
    state: str  # CONFIRMED or RULED_OUT
    reason: str
    findings: tuple[str, ...] = ()  # check's finding ids behind it


def verdicts(facts: Facts, findings: Sequence[Finding]) -> dict[str, Verdict]:
    """category -> what this machine says about it (categories it says nothing about are absent): check's findings
    first, then the target's facts."""
    bad: dict[str, list[Finding]] = {}
    for f in findings:
        if f.severity in (Severity.FAIL, Severity.WARN) or (f.id in _FACTS and f.severity is Severity.INFO):
            bad.setdefault(f.id, []).append(f)
    out: dict[str, Verdict] = {}

    def say(state: str, category: str, reason: str, ids: tuple[str, ...] = ()) -> None:
        out.setdefault(category, Verdict(state, reason, ids))

    yes, no = partial(say, CONFIRMED), partial(say, RULED_OUT)
    for category, ids in _CONFIRMED_BY.items():
        if hit := [i for i in ids if i in bad]:
            yes(category, f"`fa-doctor check` finds it here: {'; '.join(bad[i][0].title for i in hit)}", tuple(hit))
    if requirement := [f for f in bad.get("package.requirement", []) if "torch" in f"{f.title} {f.detail}".lower()]:
        yes("abi-mismatch", f"torch differs from a build's pin: {requirement[0].title}", ("package.requirement",))
    torch, caps = facts.torch, facts.capabilities
    seen = {f.id for f in findings}
    gpus = ", ".join(f"{d.name} ({d.capability[0]}.{d.capability[1]})" for d in facts.gpus.devices if d.capability)
    if torch is not None and torch.hip:
        yes("rocm", f"torch {torch.version} is a ROCm build (HIP {torch.hip})")
    elif torch is not None and torch.cuda and facts.gpus.devices:
        no("rocm", f"torch {torch.version} is a CUDA build and the GPUs are NVIDIA's ({gpus})")
    if torch is not None and torch.cuda and facts.gpus.devices:
        no("no-gpu", f"torch {torch.version} has CUDA {torch.cuda} and sees {gpus}")
    if caps and all(c >= (8, 0) for c in caps) and "binary.archs" in seen:
        no(
            "arch-unsupported",
            f"every GPU is Ampere or newer ({gpus}) and the installed extensions carry code for them",
        )
    if caps and all(c < (9, 0) for c in caps):
        yes("fa3-unavailable", f"FlashAttention-3 needs a Hopper GPU (9.0); this machine has {gpus}")
    if "binary.archs" in seen:  # the compiled extensions were read
        if "binary.undefined_symbol" not in seen and torch is not None:
            no("abi-mismatch", f"every torch symbol the installed extensions need is exported by torch {torch.version}")
        if "binary.glibc" not in seen:
            no("glibc", f"the installed extensions' glibc/libstdc++ needs are met ({facts.target.libc})")
    cuda = facts.gpus.cuda_driver_version
    driver, runtime = _version(cuda), facts.torch_cuda
    if driver and runtime and driver < runtime:
        yes("driver-too-old", f"the driver supports CUDA {cuda}, torch is built for a newer CUDA")
    elif driver and runtime:
        no("driver-too-old", f"the driver supports CUDA {cuda}, enough for torch's CUDA")
    return out


def _version(text: str | None) -> tuple[int, int] | None:
    parts = (text or "").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def reweigh(probabilities: Mapping[str, float], found: Mapping[str, Verdict]) -> dict[str, float]:
    """The model's probabilities times each verdict's likelihood ratio, renormalised."""
    raw = {c: p * (LIKELIHOOD[found[c].state] if c in found else 1.0) for c, p in probabilities.items()}
    total = sum(raw.values()) or 1.0
    return {c: p / total for c, p in raw.items()}
