"""The constraints every install holds (the installed torch, the server's exact pins on the FA stack) and the pip
actions made under them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize
from fa_doctor.diagnose.derive.requires import applies, exact_pin, installed, name_of, requirement, server
from fa_doctor.model.actions import PipInstall
from fa_doctor.model.facts import Facts

_CLOSURE = frozenset(names.FA_CLOSURE)


class Unheld(ValueError):
    """torch is installed but its version cannot be read, so no install can promise to keep it."""


def server_pins(facts: Facts) -> dict[str, str]:
    """The server's exact pins on the FA stack for this environment: normalised name -> `name==X`."""
    srv = server(facts)
    pins: dict[str, str] = {}
    if srv is None:
        return pins
    for text in srv.requires:
        spec = requirement(text)
        if spec and "==" in spec and applies(facts, text):
            name = name_of(spec)
            bare = re.sub(r"\[[^\]]*\]", "", spec)
            # One exact pin only (`name==X`, X a version): it is printed, and the metadata it comes from is hostile.
            if name in _CLOSURE and name != normalize(srv.name) and exact_pin(bare):
                pins[name] = bare
    return pins


def keep(facts: Facts, *extra: str) -> tuple[str, ...]:
    """Constraint lines: torch as installed, the server's pins (installed ones at their installed version), and
    `extra` distributions at their installed versions."""
    if facts.scan.first(names.TORCH) is not None and installed(facts, names.TORCH) is None:
        raise Unheld(f"the installed torch's version {facts.scan.index.get(names.TORCH)!r} is not a PEP 440 version")
    pins = server_pins(facts)
    out: list[str] = []
    for name in dict.fromkeys([names.TORCH, *pins, *(normalize(n) for n in extra)]):
        have = installed(facts, name)
        if have is not None:
            out.append(f"{name}=={have}")
        elif name in pins:
            out.append(pins[name])
    return tuple(out)


def keep_except(facts: Facts, specs: Iterable[str]) -> tuple[str, ...]:
    """`keep`, less the installed versions of what is being installed (the server's pin on them stays)."""
    moving = {name_of(s) for s in specs}
    pins = server_pins(facts)
    out = []
    for line in keep(facts):
        name = name_of(line)
        if name not in moving:
            out.append(line)
        elif name in pins and name != names.TORCH:
            out.append(pins[name])
    return tuple(out)


def pip_install(
    facts: Facts,
    requirements: Iterable[str],
    options: Iterable[str] = (),
    constraints: Iterable[str] = (),
    env: Iterable[tuple[str, str]] = (),
) -> PipInstall:
    """`pip install` into the interpreter that runs the server."""
    return PipInstall(facts.target.executable, tuple(requirements), tuple(options), tuple(constraints), tuple(env))


def reinstall_same(facts: Facts, *specs: str) -> PipInstall:
    """The same versions again, without touching anything they depend on."""
    return pip_install(facts, specs, ("--force-reinstall", "--no-deps"))


def jobs() -> tuple[tuple[str, str], ...]:
    return (("MAX_JOBS", names.BUILD_JOBS),)
