"""Findings about the selection: what runs for prefill and decode, and whether it can."""

from __future__ import annotations

from collections.abc import Iterator

from fa_doctor.catalog.families import BY_KEY
from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.checks.override import best_valid, proven
from fa_doctor.diagnose.contain import collected
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.diagnose.derive.selection import PhaseChoice, Selection, implementation_for
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.probes.environment import OVERRIDE


def _label(choice: PhaseChoice) -> str:
    if choice.version is None:
        return choice.backend or "no FA"
    impl = BY_KEY.get(choice.implementation or "")
    return impl.label if impl else f"FA{choice.version}"


@collected
def check_selection(
    facts: Facts, states: dict[str, ImplState], sel: Selection, override: int | None
) -> Iterator[Finding]:
    a, b = sel.prefill, sel.decode
    same = (a.backend, a.version, a.implementation, a.problems) == (b.backend, b.version, b.implementation, b.problems)
    phases, label = ([a], "prefill and decode") if same else ([a, b], None)
    evidence = sel.to_dict()
    for choice in phases:
        where = label or choice.phase
        if choice.source == "override":
            continue  # override.unavailable / override.active already say it, with every reason
        if choice.source == "auto" and choice.version is None:
            if any(s.installed for s in states.values()):
                yield Finding(
                    "selection.none",
                    Severity.FAIL,
                    "No installed FlashAttention can run here",
                    f"{choice.why}: " + "; ".join(choice.problems) + ".",
                    evidence,
                    remedies.reinstall("fa4", first=True) + remedies.if_pinned(facts),
                )
            break
        if choice.problems:
            fixes: list[Remedy] = []
            if choice.implementation and not states[choice.implementation].importable:
                fixes += remedies.reinstall(choice.implementation)
            if choice.source == "flag":
                good = best_valid(facts, states)
                alt = f"--attention-backend fa{good}" if good else "--attention-backend triton"
                state = implementation_for(good, facts, states)[0] if good else None
                fixes.append(Remedy(f"Change the flag: {alt} {proven(facts, state.impl.key if state else None)}.", ()))
            fixes += remedies.if_pinned(facts)
            yield Finding(
                "selection.unavailable",
                Severity.FAIL,
                f"{_label(choice)} is selected for {where} but cannot run",
                f"{choice.why}; but: " + "; ".join(choice.problems) + ".",
                evidence,
                tuple(fixes),
            )
        elif choice.version is None:
            yield Finding(
                "selection.not_fa",
                Severity.INFO,
                f"{where}: {choice.backend or 'no backend'} runs, not FlashAttention",
                f"{choice.why}. FA runs only with --attention-backend fa3|fa4"
                + (f" (SGLang's default here is {sel.sglang_default})." if sel.sglang_default else "."),
                evidence,
            )
        else:
            source = facts.sglang.fa4_from if facts.sglang and choice.implementation == "fa4-sglang" else ""
            seen = bool(facts.gpus.devices)
            yield Finding(
                "selection.ok",
                Severity.OK,
                f"FA{choice.version} {'will run' if seen else 'is selected'} for {where}: {_label(choice)}",
                choice.why
                + "."
                + (f" FA4 comes from {source}." if source else "")
                + ("" if seen else f" It {proven(facts, choice.implementation)}."),
                evidence,
            )
    names = [f for f in (facts.flags.attention, facts.flags.prefill, facts.flags.decode) if f]
    if override is not None and any(n != f"fa{override}" for n in names):
        yield Finding(
            "selection.conflict",
            Severity.WARN,
            f"{OVERRIDE}={override} and the backend flags disagree",
            f"The flags ask for {', '.join(sorted(set(names)))}; SGLang itself obeys the flags, so FA{override} "
            "runs only if your launcher rewrites them from the variable. fa-doctor reports the override's choice.",
            {"override": override, "flags": names, "selection": {p.phase: p.to_dict() for p in sel.phases}},
            (
                remedies.unset_override(None),
                Remedy(f"Or make the flags match the override: --attention-backend fa{override}."),
            ),
        )
