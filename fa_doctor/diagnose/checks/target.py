"""Which interpreter was judged, and why: a check is worth what it is about."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping

from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.contain import collected
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity


@collected
def check_target(facts: Facts, why: str, own_prefix: str, env: Mapping[str, str]) -> Iterator[Finding]:
    """`why`: how the interpreter was chosen; `own_prefix`: fa-doctor's own environment (sys.prefix, real path)."""
    target = facts.target
    evidence = {"python": target.python, "executable": target.executable, "prefix": target.prefix, "why": why}
    yield Finding(
        "target.chosen",
        Severity.INFO,
        f"Judged {target.python} (Python {'.'.join(map(str, target.version))}), chosen by {why or 'the command line'}",
        f"Its prefix is {target.prefix}. A bare check judges --python, else $VIRTUAL_ENV's python, else "
        "$CONDA_PREFIX's, else the first python3 on PATH.",
        evidence,
    )
    active = {v: env[v] for v in ("VIRTUAL_ENV", "CONDA_PREFIX") if posixpath.isabs(env.get(v) or "")}
    others = {v: p for v, p in active.items() if posixpath.normpath(p) != posixpath.normpath(target.prefix)}
    if posixpath.normpath(target.prefix) == posixpath.normpath(own_prefix) and others:
        variable, prefix = next(iter(others.items()))
        python = posixpath.join(prefix, "bin", "python")
        yield Finding(
            "target.own",
            Severity.WARN,
            f"fa-doctor judged its own environment while ${variable} names another",
            f"{target.prefix} is fa-doctor's own installation (a pipx or tools venv is rarely the server's); "
            f"${variable} is {prefix}. The verdict is about fa-doctor's environment, not the server's.",
            {**evidence, "active": active},
            (remedies.run("Check the server's interpreter.", ("fa-doctor", "check", "--python", python)),),
        )
