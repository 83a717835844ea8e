"""SGLANG_FLASHATTENTION_VERSION: strictly 2, 3 or 4, and only a value that can work here."""

from __future__ import annotations

from collections.abc import Iterator

from fa_doctor.catalog.families import BY_KEY
from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.contain import collected
from fa_doctor.diagnose.derive import VALID, parse_override
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.diagnose.derive.selection import implementation_for
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.probes.environment import OVERRIDE

_SGLANG_FLAG = {3: "--attention-backend fa3", 4: "--attention-backend fa4"}


def shown(raw: str, limit: int = 40) -> str:
    """A value as it can be printed safely: escapes control and non-ASCII characters, bounded length."""
    text = ascii(raw[:limit])
    return text + (f" ... ({len(raw)} characters)" if len(raw) > limit else "")


def _relation(facts: Facts, version: int) -> str:
    flag = _SGLANG_FLAG.get(version)
    text = (
        f"It corresponds to SGLang's `{flag}`"
        if flag
        else "SGLang has no FA2 backend (FA2 is only a fallback inside its FA3 path), so no SGLang flag matches it"
    )
    if facts.sglang is None:
        return text + "."
    if facts.sglang.reads_override:
        return text + f"; the installed SGLang {facts.sglang.version} reads {OVERRIDE} itself."
    return (
        text + f". The installed SGLang {facts.sglang.version} does not read {OVERRIDE} itself: it takes effect "
        "only where your launcher turns it into that flag."
    )


def proven(facts: Facts, key: str | None) -> str:
    """What a claim that `key` runs rests on: a visible GPU, the --gpu-arch named, or nothing (issue #26)."""
    if facts.gpus.devices:
        return "works here"
    impl = BY_KEY.get(key or "")
    if facts.gpu_arch and impl is not None:
        if not (other := [a for a in facts.gpu_arch if not impl.supports(divmod(int(a.removeprefix("sm_")), 10))]):
            return f"is supported on {', '.join(facts.gpu_arch)} (from --gpu-arch); no GPU here ran it"
        return (
            f"is not proven here: no GPU seen, and {impl.label} runs on {impl.capability_text}, not {', '.join(other)}"
        )
    return "is what the installed packages provide; no GPU seen: not proven here"


def best_valid(facts: Facts, states: dict[str, ImplState]) -> int | None:
    for version in (3, 4, 2):
        state, problems = implementation_for(version, facts, states)
        if state is not None and not problems:
            return version
    return None


@collected
def check_override(facts: Facts, states: dict[str, ImplState]) -> Iterator[Finding]:
    raw = facts.env.get(OVERRIDE)
    try:
        version = parse_override(raw)
    except ValueError:
        assert raw is not None
        yield Finding(
            "override.invalid",
            Severity.FAIL,
            f"{OVERRIDE} has an invalid value",
            f"{OVERRIDE}={shown(raw)} is not one of the documented values 2, 3 or 4 (unset means auto-detection). "
            "A launcher that passes it on ends in errors such as "
            "`ValueError: Invalid version: self.fa_impl_ver=5`.",
            {"variable": OVERRIDE, "value": shown(raw), "valid": list(VALID)},
            (remedies.unset_override(best_valid(facts, states)), remedies.auto_detect()),
        )
        return
    if version is None:
        sgl = facts.sglang
        verb = "reads" if sgl and sgl.reads_override else "does not read"
        reads = f" The installed SGLang {sgl.version} {verb} it itself." if sgl else ""
        yield Finding(
            "override.unset",
            Severity.OK,
            f"{OVERRIDE} is not set: auto-detection decides",
            "When set to 3 or 4 it stands for SGLang's `--attention-backend fa3|fa4`." + reads,
            {"variable": OVERRIDE},
        )
        return
    state, problems = implementation_for(version, facts, states)
    evidence = {
        "variable": OVERRIDE,
        "value": raw,
        "implementation": state.impl.key if state else None,
        "sglang_flag": _SGLANG_FLAG.get(version),
        "sglang_reads_it": facts.sglang.reads_override if facts.sglang else None,
    }
    if problems or state is None:  # implementation_for gives no state only with a reason
        # Never the pinned version itself: best_valid returns only versions without problems.
        again = remedies.reinstall(state.impl.key) if state is not None and not state.importable else ()
        yield Finding(
            "override.unavailable",
            Severity.FAIL,
            f"{OVERRIDE}={version} cannot work here",
            f"FA{version} is pinned, but: " + "; ".join(problems) + ". " + _relation(facts, version),
            {**evidence, "reasons": problems},
            (remedies.unset_override(best_valid(facts, states)), *again, remedies.auto_detect()),
        )
        return
    yield Finding(
        "override.active",
        Severity.INFO,
        f"{OVERRIDE}={version} pins FA{version}",
        f"{state.impl.label} is installed and "
        + ("supports the visible GPUs. " if facts.gpus.devices else f"{proven(facts, state.impl.key)}. ")
        + _relation(facts, version),
        evidence,
    )
