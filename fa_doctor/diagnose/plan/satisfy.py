"""A distribution's unmet requirements (as `pip check` reports them), installed under torch and the server's pins;
where they cannot be met with this torch, the coherent alternatives. Printed text is bounded (docs/remedies.md)."""

from __future__ import annotations

from collections.abc import Sequence

from fa_doctor.catalog import ecosystem, names
from fa_doctor.diagnose.derive.requires import exact_pin, installed, name_of, public, requirement
from fa_doctor.diagnose.plan.constraints import keep_except, pip_install
from fa_doctor.model import intents as I
from fa_doctor.model.actions import Action, RunCommand
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy

MAX_SPEC = 100  # characters of one requirement as printed (real ones: `orjson>=3.9.0,<4`)
PER_LINE = 12  # requirements on one install line
MAX_SPECS = 48  # requirements listed in all; beyond, `pip check` lists them


def listed(items: Sequence[str], limit: int = 6) -> str:
    """`items` for a sentence, at most `limit` of them, each bounded."""
    shown = [i if len(i) <= MAX_SPEC else i[: MAX_SPEC - 3] + "..." for i in items[:limit]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _pip_check(facts: Facts) -> RunCommand:
    return RunCommand((facts.target.executable, "-m", "pip", "check"))


def _install_lacking(facts: Facts, requirer: str, specs: list[str]) -> Remedy:
    """Install `specs` (torch and the server's pins held), on lines a person can read and paste."""
    fit = [s for s in specs if len(s) <= MAX_SPEC]
    long = len(specs) - len(fit)
    if len(fit) > MAX_SPECS:
        return Remedy(
            f"(2) {requirer} declares {len(specs)} requirements that are not installed: too many to print as "
            "install lines; `pip check` lists them. Install them from the server's own instructions (torch held), "
            "or install its missing dependencies in a fresh environment.",
            actions=(_pip_check(facts),),
        )
    held = keep_except(facts, fit)
    chunks = [fit[i : i + PER_LINE] for i in range(0, len(fit), PER_LINE)]
    actions: list[Action] = [pip_install(facts, c, (), held) for c in chunks]
    note = ""
    if long:
        note = (
            f" {long} requirement(s) longer than {MAX_SPEC} characters are not printed (the metadata is unusual): "
            "`pip check` names them."
        )
        actions.append(_pip_check(facts))
    lines = " (one line per dozen)" if len(chunks) > 1 else ""
    return Remedy(
        f"(2) Install what {requirer} declares and lacks, at its own pins (as `pip check` reports them){lines}; "
        f"torch and the server's pins are held as constraints.{note}",
        actions=tuple(actions),
    )


def satisfy(facts: Facts, intent: I.Satisfy) -> tuple[Remedy, ...]:
    """Install what the server (or another distribution) declares and lacks; torch is never moved here: where a
    requirement needs another torch, the coherent alternatives are offered instead."""
    torch_now = installed(facts, names.TORCH)
    specs: list[str] = []
    bound: list[str] = []  # requirements that cannot be met without another torch
    moved: list[str] = []  # installed at another version: moving them is the user's call
    torch_spec: str | None = None
    for text, have in intent.unmet:
        spec = requirement(text)
        if spec is None:
            continue
        name = name_of(spec)
        if name == names.TORCH:
            torch_spec = spec
            continue
        if have != "not installed":
            moved.append(f"{spec} (found {have})")
            continue
        pin = exact_pin(spec)
        torch_pin = ecosystem.pin(name, public(pin), names.TORCH) if pin else None
        if torch_pin and torch_now and public(torch_pin) != public(torch_now):
            bound.append(f"{spec} (built for torch {torch_pin} exactly)")
        else:
            specs.append(spec)
    out: list[Remedy] = []
    if torch_spec and exact_pin(torch_spec) and specs:
        # Installed around a torch the requirer does not accept, the rest would be built for the wrong torch:
        # the coherent set-ups below come first, and each brings its own requirements.
        specs = []
    if specs:
        out.append(_install_lacking(facts, intent.requirer, specs))
    if moved:
        out.append(
            Remedy(
                f"{intent.requirer} pins other versions than the installed {listed(moved)}: fa-doctor leaves "
                "installed packages as they are; `pip check` lists every mismatch.",
                actions=(_pip_check(facts),),
            )
        )
    if torch_spec or bound:
        out += alternatives(facts, intent.requirer, torch_spec, bound)
    return tuple(out)


def alternatives(facts: Facts, requirer: str, torch_spec: str | None, bound: list[str]) -> list[Remedy]:
    """No install keeps both this torch and the server's pins: say so, then the two coherent ways out."""
    torch_now = installed(facts, names.TORCH)
    needs = listed(([torch_spec] if torch_spec else []) + bound)
    server = facts.scan.first(requirer)
    out = [
        Remedy(
            f"{requirer} requires {needs}, but torch {torch_now or 'is not installed'}"
            + (" is installed" if torch_now else "")
            + ": no install can satisfy both, so fa-doctor plans none that keeps this torch. Choose one of the "
            "consistent set-ups below."
        )
    ]
    if server is not None and torch_now and ecosystem.known(server.normalized):
        python = (facts.target.version[0], facts.target.version[1])  # the release's Requires-Python must admit it
        fits = [
            v
            for v in ecosystem.releases_pinning(server.normalized, names.TORCH, torch_now, python)
            if v != server.version
        ]
        if fits:
            from fa_doctor.diagnose.plan.recipes import resolvable

            spec = f"{server.normalized}=={fits[0]}"
            out.append(
                resolvable(  # never an install pip's resolver refused when fa-doctor's catalog was made
                    facts,
                    Remedy(
                        f"(a) Keep torch {torch_now}: install {spec}, the newest {server.normalized} release built "
                        f"for torch {public(torch_now)} (its own pins follow; torch is held).",
                        actions=(pip_install(facts, (spec,), (), (f"{names.TORCH}=={torch_now}",)),),
                    ),
                )
            )
        else:
            out.append(
                Remedy(
                    f"(a) No {server.normalized} release in fa-doctor's catalog is built for torch "
                    f"{public(torch_now)}: keeping this torch means another server build."
                )
            )
    want = exact_pin(torch_spec)
    if want:
        moves = (f"{names.TORCH}=={want}", *(b.split(" ", 1)[0] for b in bound))
        out.append(
            Remedy(
                f"(b) Move torch to {requirer}'s pin, torch=={want}: this REPLACES torch {torch_now or ''} (and "
                "every package built against it must match); `fa-doctor fix --apply` takes this only with "
                "--allow-torch-change.",
                actions=(pip_install(facts, moves, (), keep_except(facts, moves)),),
                replaces_torch=True,
            )
        )
    return out
