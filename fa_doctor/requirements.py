"""Requires-Dist lines, read without packaging.requirements (it costs ~50 ms to import on every run).

Version specifiers still go through packaging.specifiers (PEP 440 has too many corners to redo). Markers are
evaluated for the subset that metadata uses in practice; a marker this cannot read answers None ("unknown"),
and callers then say nothing rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^;()]*?)\)?\s*(?:;(.*))?$")
_TOKEN = re.compile(r"\s*(\(|\)|'[^']*'|\"[^\"]*\"|===|==|!=|~=|<=|>=|<|>|not\s+in\b|in\b|and\b|or\b|[A-Za-z_.]+)")
_VERSION_VARS = {"python_version", "python_full_version", "implementation_version"}


@dataclass(frozen=True)
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


def _vt(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", value)[:3])


def _compare(left: str, op: str, right: str, versions: bool) -> bool:
    if op in ("in", "not in"):
        return (left in right) == (op == "in")
    a: object = _vt(left) if versions else left
    b: object = _vt(right) if versions else right
    if op in ("==", "==="):
        return a == b
    if op == "!=":
        return a != b
    if not versions or op not in ("<", "<=", ">", ">=", "~="):
        raise ValueError(op)
    va, vb = _vt(left), _vt(right)
    return {"<": va < vb, "<=": va <= vb, ">": va > vb, ">=": va >= vb, "~=": va >= vb}[op]


def marker_applies(marker: str, env: Mapping[str, str]) -> bool | None:
    """True/False for the marker in this environment, None when it cannot be read."""
    tokens = _TOKEN.findall(marker)
    if "".join(tokens).replace(" ", "") != marker.replace(" ", ""):
        return None
    pos = 0

    def value(tok: str) -> tuple[str, bool]:
        if tok[0] in "'\"":
            return tok[1:-1], False
        if tok not in env:
            raise KeyError(tok)
        return env[tok], tok in _VERSION_VARS

    def atom() -> bool:
        nonlocal pos
        if tokens[pos] == "(":
            pos += 1
            result = expr()
            pos += 1  # ")"
            return result
        (left, lv), op, (right, rv) = value(tokens[pos]), " ".join(tokens[pos + 1].split()), value(tokens[pos + 2])
        pos += 3
        return _compare(left, op, right, lv or rv)

    def conj() -> bool:
        nonlocal pos
        result = atom()
        while pos < len(tokens) and tokens[pos] == "and":
            pos += 1
            result = atom() and result
        return result

    def expr() -> bool:
        nonlocal pos
        result = conj()
        while pos < len(tokens) and tokens[pos] == "or":
            pos += 1
            result = conj() or result
        return result

    try:
        out = expr()
    except (KeyError, IndexError, ValueError):
        return None
    return out if pos == len(tokens) else None
