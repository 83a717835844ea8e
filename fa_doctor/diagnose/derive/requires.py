"""What the installed distributions declare, read safely: versions and requirement lines are hostile text."""

from __future__ import annotations

import re

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize
from fa_doctor.model.facts import Facts
from fa_doctor.model.install import Distribution

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?\Z")


def version_of(text: str | None) -> str | None:
    """`text` if it is a PEP 440 version (a `+local` label included), else None."""
    from packaging.version import InvalidVersion, Version

    if not text or len(text) > 64:
        return None
    try:
        Version(text)
    except InvalidVersion:
        return None
    return text


def requirement(text: str) -> str | None:
    """`name[extras]<specifier>` from a Requires-Dist line, if every part is well formed; markers dropped."""
    from fa_doctor.diagnose import requirements

    req = requirements.parse(text) if len(text) <= 512 else None
    if req is None or not _NAME.match(req.name):
        return None
    extra = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return req.name + extra + str(req.specifier)


def name_of(spec: str) -> str:
    """The normalised distribution name at the head of a requirement."""
    return normalize(re.split(r"[\[=<>!~;\s]", spec.strip(), maxsplit=1)[0])


def applies(facts: Facts, text: str) -> bool:
    from fa_doctor.diagnose import requirements
    from fa_doctor.diagnose.derive.inventory import marker_env

    req = requirements.parse(text)
    return req is not None and requirements.applies(req, marker_env(facts)) is True


def requires(facts: Facts, dist: Distribution, name: str) -> str | None:
    """`dist`'s requirement on `name` for this environment, well formed, or None."""
    want = normalize(name)
    for text in dist.requires:
        m = re.match(r"\s*([A-Za-z0-9._-]+)", text)  # the name: what precedes [extras], a specifier or ;
        if m and normalize(m.group(1)) == want and applies(facts, text):
            return requirement(text)
    return None


def exact_pin(spec: str | None) -> str | None:
    """X from `name==X` (a single exact pin), else None."""
    m = re.fullmatch(r"[A-Za-z0-9._-]+(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.+!]*)", spec or "")
    return version_of(m.group(1)) if m else None


def server(facts: Facts) -> Distribution | None:
    return facts.scan.first(*names.SERVERS)


def installed(facts: Facts, name: str) -> str | None:
    """The installed version of `name` (first on the path), if it is a valid version."""
    return version_of(facts.scan.index.get(normalize(name)))


def public(version: str) -> str:
    return version.split("+", 1)[0]
