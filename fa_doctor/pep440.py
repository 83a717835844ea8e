"""Version tests for the common case, without importing `packaging` (8 ms of imports and pattern compiling on
every static check): plain release versions (`4.6.2`, `0.1.11`) against plain specifiers (`>=4.6.2`,
`<0.2,>=0.1.11`, `==2.9.1`, `!=1.0`).

For plain releases PEP 440 is integer tuples compared with zeros padded on the right (`1.0 == 1.0.0`), and its
exclusive-ordering rules (`<V` refusing pre-releases of V, `>V` post-releases of V) cannot apply; a local label
(`2.11.0+cu130`, torch's) is ignored against a specifier without one, as PEP 440 says. Anything else
(pre-, post- and dev-releases, local labels, epochs, `~=`, `===`, wildcards, a `v` prefix) goes to `packaging`,
and so does any text that is not a version: the same answers and the same exceptions. `tests/test_pep440.py`
compares both on every specifier of the metadata corpus.
"""

from __future__ import annotations

from fa_doctor.regex import lazy

_RELEASE = lazy(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,15}\Z")
# A plain release with a local label (`2.11.0+cu130`): PEP 440 ignores the label for every operator whose version
# has none (packaging compares `prospective.public`), so the release alone decides.
_LOCAL = lazy(r"([0-9]{1,9}(?:\.[0-9]{1,9}){0,15})\+[a-zA-Z0-9]+(?:[-_.][a-zA-Z0-9]+)*\Z")
_CLAUSE = lazy(r"(==|!=|<=|>=|<|>)([0-9]{1,9}(?:\.[0-9]{1,9}){0,15})\Z")


def release(text: str) -> tuple[int, ...] | None:
    """The release tuple of a plain release version, else None."""
    if not _RELEASE.match(text):
        return None
    return tuple(int(part) for part in text.split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


_HOLDS = {
    "==": lambda c: c == 0,
    "!=": lambda c: c != 0,
    "<=": lambda c: c <= 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    ">": lambda c: c > 0,
}


def contains(specifier: str, version: str) -> bool | None:
    """`SpecifierSet(specifier).contains(Version(version), prereleases=True)`; None where packaging raises
    InvalidSpecifier or InvalidVersion."""
    local = _LOCAL.match(version)
    have = release(local.group(1) if local else version)
    clauses = [c.strip() for c in specifier.split(",")] if have is not None else None
    matched = [_CLAUSE.match(c) for c in clauses if c] if clauses is not None else None
    if have is None or matched is None or not all(matched):
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            return SpecifierSet(specifier).contains(Version(version), prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return None
    for m in matched:
        assert m is not None
        if not _HOLDS[m.group(1)](_cmp(have, tuple(int(p) for p in m.group(2).split(".")))):
            return False
    return True


def same(a: str, b: str) -> bool | None:
    """`Version(a) == Version(b)`; None when either is not a version."""
    ra, rb = release(a), release(b)
    if ra is not None and rb is not None:
        return _cmp(ra, rb) == 0
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return None
