"""Requires-Dist lines, read with packaging, and their markers decided for the target: None where a line is
overlong (packaging recurses), refused or undecidable; callers then say nothing rather than guess."""

from __future__ import annotations

from collections.abc import Mapping

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

MAX_REQUIREMENT_LENGTH = 4096


def parse(text: str) -> Requirement | None:
    if len(text) > MAX_REQUIREMENT_LENGTH:
        return None
    try:
        return Requirement(text)
    except (InvalidRequirement, RecursionError):
        return None


def applies(req: Requirement, env: Mapping[str, str]) -> bool | None:
    """True/False for the requirement's marker in `env` (True without a marker), None when undecidable."""
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate(dict(env)))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, InvalidVersion, InvalidSpecifier):
        return None


def contains(specifier: str | SpecifierSet, version: str) -> bool | None:
    """Whether `version` satisfies `specifier` (pre-releases allowed); None when either is not well formed."""
    try:
        spec = specifier if isinstance(specifier, SpecifierSet) else SpecifierSet(specifier)
        return spec.contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None
