"""The server's own unmet requirements, and which distribution a missing module (`orjson`) belongs to."""

from __future__ import annotations

import re

from fa_doctor.catalog.families import FA_DISTRIBUTIONS, normalize
from fa_doctor.catalog.names import MODULE_OWNERS
from fa_doctor.diagnose.derive.requires import installed, name_of, requires, server
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy


def for_problem(facts: Facts, key: str, problem: object) -> tuple[Remedy, ...]:
    """The reinstall for a smoke-test failure, unless a missing module belongs to another distribution's
    unmet requirements (sglang's `orjson`): then that distribution's requirements are the remedy."""
    from fa_doctor.diagnose.derive.inventory import unmet_requirements
    from fa_doctor.model.intents import Install, Satisfy

    evidence = getattr(problem, "evidence", None) or {}
    module = str(evidence.get("module", "")) if getattr(problem, "cause", None) == "module_missing" else ""
    if module and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,200}", module):
        top = module.split(".", 1)[0]
        provider = MODULE_OWNERS.get(top, normalize(top))
        # The installed distribution (server first) that requires the provider.
        ordered = (*filter(None, [server(facts)]), *facts.scan.distributions)
        owner = next((d for d in ordered if requires(facts, d, provider) is not None), None)
        if owner is not None and provider not in FA_DISTRIBUTIONS and installed(facts, provider) is None:
            # Only the requirement behind the missing module: the smoke test failed on it, and an install of
            # everything the server lacks is package.requirement's remedy (it may need another torch).
            unmet = [u for u in unmet_requirements(owner, facts) if name_of(u[0]) == normalize(provider)]
            head = Remedy(
                f"`import {top}` fails because {provider}, a requirement of {owner.name} "
                f"{owner.version}, is not installed: the FA packages are not the cause."
            )
            return (head, Remedy("", intent=Satisfy(owner.name, tuple(unmet))))
    return (Remedy("", intent=Install(key)),)
