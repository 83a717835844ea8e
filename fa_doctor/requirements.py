"""Requires-Dist lines, read without packaging.requirements (it costs ~50 ms to import on every run).

Version specifiers still go through packaging.specifiers (PEP 440 has too many corners to redo), and a version
marker is decided the way packaging.markers decides it: as the specifier `<op><value>`. Markers are evaluated for
the subset that metadata uses in practice; a marker this cannot read, or one whose answer differs between
packaging releases (string ordering, `~=` on a plain string), answers None ("unknown"), and callers then say
nothing rather than guess. Markers come from the target's files: length and nesting are bounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fa_doctor.frozen import frozen
from fa_doctor.regex import lazy

_REQ = lazy(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^;()]*?)\)?\s*(?:;(.*))?$")
_TOKEN = lazy(r"\s*(\(|\)|'[^']*'|\"[^\"]*\"|===|==|!=|~=|<=|>=|<|>|not\s+in\b|in\b|and\b|or\b|[A-Za-z_.]+)")
# packaging.markers compares these as versions (MARKERS_REQUIRING_VERSION), every other variable as a string.
_VERSION_VARS = {"python_version", "python_full_version", "implementation_version", "platform_release"}
_OPS = {"===", "==", "!=", "~=", "<=", ">=", "<", ">", "in", "not in"}
MAX_MARKER_LENGTH = 4096
MAX_MARKER_DEPTH = 32  # real metadata nests 2 or 3 deep; 400 "(" would exhaust the stack


@frozen
class Req:
    name: str
    specifier: str
    marker: str | None

    def __str__(self) -> str:
        return self.name + self.specifier + (f"; {self.marker}" if self.marker else "")


def parse(text: str) -> Req | None:
    m = _REQ.match(text)
    if m is None:
        return None
    marker = (m.group(3) or "").strip() or None
    return Req(m.group(1), m.group(2).replace(" ", ""), marker)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _compare(left: str, op: str, right: str, key: str) -> bool | None:
    """One `left op right` with `key` the environment variable involved; None where packaging has no single answer."""
    if key == "extra":  # PEP 685: extra names compare normalised
        left, right = _canonical(left), _canonical(right)
    elif key in _VERSION_VARS:
        from fa_doctor.pep440 import plain_contains

        fast = plain_contains(op + right, left) if op not in ("in", "not in") else None
        if fast is not None:  # python_version < "3.11": plain releases, no packaging needed
            return fast
        from packaging.specifiers import InvalidSpecifier, Specifier
        from packaging.version import InvalidVersion

        try:  # `in` and `not in` never make a specifier: they fall through to the string test, as in packaging
            return Specifier(op + right).contains(left, prereleases=True)
        except InvalidSpecifier:
            pass  # not a version: packaging falls back to comparing strings
        except InvalidVersion:
            return None
    if op in ("in", "not in"):
        return (left in right) == (op == "in")
    if op in ("==", "!="):
        return (left == right) == (op == "==")
    return None  # ordering, `~=` or `===` on plain strings: undefined, or different across packaging releases


class _Unreadable(Exception):
    pass


def marker_applies(marker: str, env: Mapping[str, str]) -> bool | None:
    """True/False for the marker in this environment, None when it cannot be read."""
    if len(marker) > MAX_MARKER_LENGTH:
        return None
    tokens = _TOKEN.findall(marker)
    if "".join(tokens).replace(" ", "") != marker.replace(" ", ""):
        return None
    pos = 0

    def operand(tok: str) -> tuple[str, str | None]:
        """(value, the environment variable it came from, or None for a literal)."""
        if tok[0] in "'\"":
            return tok[1:-1], None
        if tok not in env:
            raise _Unreadable
        return env[tok], tok

    def atom(depth: int) -> bool:
        nonlocal pos
        if tokens[pos] == "(":
            if depth >= MAX_MARKER_DEPTH:
                raise _Unreadable
            pos += 1
            result = expr(depth + 1)
            if tokens[pos] != ")":
                raise _Unreadable
            pos += 1
            return result
        (left, lvar), (right, rvar) = operand(tokens[pos]), operand(tokens[pos + 2])
        op = " ".join(tokens[pos + 1].split())
        pos += 3
        key = lvar or rvar
        if key is None or (lvar is not None and rvar is not None) or op not in _OPS:
            raise _Unreadable
        answer = _compare(left, op, right, key)
        if answer is None:
            raise _Unreadable
        return answer

    def conj(depth: int) -> bool:
        nonlocal pos
        result = atom(depth)
        while pos < len(tokens) and tokens[pos] == "and":
            pos += 1
            right = atom(depth)
            result = result and right
        return result

    def expr(depth: int) -> bool:
        nonlocal pos
        result = conj(depth)
        while pos < len(tokens) and tokens[pos] == "or":
            pos += 1
            right = conj(depth)
            result = result or right
        return result

    try:
        out = expr(0)
    except (_Unreadable, IndexError):
        return None
    return out if pos == len(tokens) else None
