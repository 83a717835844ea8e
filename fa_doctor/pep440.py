"""Version tests for the common case, without importing `packaging` (8 ms of imports and pattern compiling on
every static check): release versions (`4.6.2`, `0.1.15.post2`, `2.11.0+cu130`) against plain specifiers
(`>=4.6.2`, `<0.2,>=0.1.11`, `==2.9.1`, `!=1.0`).

There PEP 440 is integer tuples compared with zeros padded on the right (`1.0 == 1.0.0`), then the post-release
number (`1.0 < 1.0.post0 < 1.0.1`); `>V` refuses the post-releases of V, and `<V`'s rule on pre-releases cannot
apply; a local label (torch's `+cu130`) is ignored against a specifier without one (packaging compares
`.public`). Anything else (pre- and dev-releases, other spellings of a post-release, epochs, a `v` prefix, `~=`,
`===`, wildcards, a specifier with a post-release or a label) goes to `packaging`, and so does any text that is
not a version: the same answers and the same exceptions. `tests/test_pep440.py` compares both on every
specifier of the metadata corpus.
"""

from __future__ import annotations

from fa_doctor.regex import lazy

_NUMBERS = r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,15}"
_VERSION = lazy(rf"({_NUMBERS})(?:\.post([0-9]{{1,9}}))?(?:\+[a-zA-Z0-9]+(?:[-_.][a-zA-Z0-9]+)*)?\Z")
_CLAUSE = lazy(rf"(==|!=|<=|>=|<|>)({_NUMBERS})\Z")


def release(text: str) -> tuple[int, ...] | None:
    """The release tuple of a plain release version (no post-release, no label), else None."""
    m = _VERSION.match(text)
    if m is None or m.group(2) is not None or "+" in text:
        return None
    return _numbers(m.group(1))


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def _holds(op: str, have: tuple[int, ...], post: int | None, spec: tuple[int, ...]) -> bool:
    same_release = _cmp(have, spec)
    c = same_release if same_release or post is None else 1  # V.postN sorts after V, before the next release
    if op == ">":
        return c > 0 and not (same_release == 0 and post is not None)  # not a post-release of V
    return {"==": c == 0, "!=": c != 0, "<=": c <= 0, ">=": c >= 0, "<": c < 0}[op]


def plain_contains(specifier: str, version: str) -> bool | None:
    """The fast path alone: the answer for a release (a canonical `.postN` and a label allowed) against plain
    clauses, else None (for packaging to decide)."""
    m = _VERSION.match(version)
    if m is None:
        return None
    have, post = _numbers(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)
    matched = [_CLAUSE.match(c.strip()) for c in specifier.split(",") if c.strip()]
    if not all(matched):
        return None
    return all(_holds(c.group(1), have, post, _numbers(c.group(2))) for c in matched if c is not None)


def contains(specifier: str, version: str) -> bool | None:
    """`SpecifierSet(specifier).contains(Version(version), prereleases=True)`; None where packaging raises
    InvalidSpecifier or InvalidVersion."""
    fast = plain_contains(specifier, version)
    if fast is not None:
        return fast
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


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
