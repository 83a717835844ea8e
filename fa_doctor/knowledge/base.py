"""The knowledge base's types, and loading errors.json with validation (once per process).

errors.json is data shipped in the package: one entry per failure mode. A malformed entry raises
KnowledgeError at load time; tests/test_explain_kb.py loads it, so a bad edit fails the tests, not a user's run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from fa_doctor.knowledge.problem import CAUSES
from fa_doctor.model.finding import Remedy
from fa_doctor.model.intents import Intent
from fa_doctor.render.shell import remedy_dict

CATEGORIES = (
    "abi-mismatch",
    "arch-unsupported",
    "build-failure",
    "api-mismatch",
    "cuda-runtime",
    "fa4-dsl",
    "glibc",
    "missing-module",
    "dtype-shape",
    "rocm",
    "driver-too-old",
    "no-gpu",
    "fa3-unavailable",
    "selection-override",
)
# The causes fa_doctor.smoke.classify names; each entry maps to one so `check` and `explain` share this table.
SMOKE_CAUSES = CAUSES
# Groups of variable parts an entry may ask for; extract.py fills them.
EXTRACT_GROUPS = ("symbol", "library", "glibc", "module", "versions", "arch", "fa_impl_ver", "wheel", "backend")
# Fields a pattern may test instead of the text (computed from the raw, case-preserved paste).
FIELDS = ("symbol_kind",)

_ID = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9-]+)+$")
_FINDING = re.compile(r"^[a-z]+\.[a-z_]+$")


class KnowledgeError(ValueError):
    """errors.json is malformed (a packaging or editing bug, caught by the tests)."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One way a failure mode shows in a paste.

    `find` is a lower-case literal that must occur (a fast substring search); `regex`, when given, must also
    match within a bounded window around an occurrence (so no regex ever scans the whole paste). `also` needs
    one of its literals anywhere in the paste; `unless` cancels the pattern when one of its literals occurs.
    A `field` pattern tests a value computed from the paste (e.g. symbol_kind) instead of the text.
    """

    weight: float
    find: str = ""
    regex: re.Pattern[str] | None = None
    also: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    field: str = ""
    values: tuple[str, ...] = ()
    label: str = ""  # what fa_doctor.smoke.classify calls this text (its evidence "matched"), when it names it


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    category: str
    title: str
    cause: str
    patterns: tuple[Pattern, ...]
    remedies: tuple[Remedy, ...]
    links: tuple[str, ...]
    confirm_with: tuple[str, ...]
    extract: tuple[str, ...]
    smoke_cause: str
    reinstall: str = ""  # implementation key for facts-dependent commands (checks.remedies.reinstall)


@dataclass(frozen=True, slots=True)
class Match:
    """One ranked explanation of a paste."""

    id: str
    category: str
    title: str
    cause: str
    remedies: tuple[Remedy, ...]
    confidence: float
    extracted: Mapping[str, str] = field(default_factory=dict)
    confirm_with: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # the evidence that weighed most for this category, in words
    standing: str = ""  # "likely" or "guess" (the first answer), "possible" (another one): model.standing
    verdict: str = ""  # with --python: "confirmed" or "ruled out" by this machine ("" when it says nothing)
    verdict_reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "extracted", MappingProxyType(dict(self.extracted)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "title": self.title,
            "cause": self.cause,
            "remedies": [remedy_dict(r) for r in self.remedies],
            "confidence": self.confidence,
            "extracted": dict(self.extracted),
            "confirm_with": list(self.confirm_with),
            "links": list(self.links),
            "reasons": list(self.reasons),
            "standing": self.standing,
            "verdict": self.verdict,
            "verdict_reason": self.verdict_reason,
        }


@lru_cache(maxsize=1)
def load() -> tuple[Entry, ...]:
    """The knowledge base, validated; the same tuple on every call."""
    raw = resources.files("fa_doctor.knowledge").joinpath("errors.json").read_text(encoding="utf-8")
    return parse(json.loads(raw))


def parse(doc: Any) -> tuple[Entry, ...]:
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("entries"), list):
        raise KnowledgeError("errors.json must be {'version': 1, 'entries': [...]}")
    entries = tuple(_entry(e) for e in doc["entries"])
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise KnowledgeError(f"duplicate id {e.id}")
        seen.add(e.id)
    return entries


def _entry(e: Any) -> Entry:
    if not isinstance(e, dict):
        raise KnowledgeError(f"entry is not an object: {e!r:.80}")
    known = {"id", "category", "title", "cause", "patterns", "remedies", "links", "confirm_with", "extract"}
    known |= {"smoke_cause", "reinstall"}
    eid = _str(e, "id")
    if unknown := set(e) - known:
        raise KnowledgeError(f"{eid}: unknown keys {sorted(unknown)}")
    if not _ID.match(eid):
        raise KnowledgeError(f"{eid}: id must be dotted lower-case")
    category = _str(e, "category")
    if category not in CATEGORIES:
        raise KnowledgeError(f"{eid}: unknown category {category}")
    smoke = e.get("smoke_cause", "unknown")
    if smoke not in SMOKE_CAUSES:
        raise KnowledgeError(f"{eid}: unknown smoke_cause {smoke}")
    patterns = tuple(_pattern(eid, p) for p in _list(e, "patterns"))
    remedies = tuple(_remedy(eid, r) for r in _list(e, "remedies"))
    if not patterns or not remedies:
        raise KnowledgeError(f"{eid}: needs at least one pattern and one remedy")
    links = tuple(_strs(e, "links"))
    if any(not link.startswith("https://") for link in links):
        raise KnowledgeError(f"{eid}: links must be https URLs")
    confirm = tuple(_strs(e, "confirm_with"))
    if any(not _FINDING.match(c) for c in confirm):
        raise KnowledgeError(f"{eid}: confirm_with holds finding ids such as package.broken")
    extract = tuple(_strs(e, "extract"))
    if bad := set(extract) - set(EXTRACT_GROUPS):
        raise KnowledgeError(f"{eid}: unknown extract groups {sorted(bad)}")
    return Entry(
        id=eid,
        category=category,
        title=_str(e, "title"),
        cause=_str(e, "cause"),
        patterns=patterns,
        remedies=remedies,
        links=links,
        confirm_with=confirm,
        extract=extract,
        smoke_cause=smoke,
        reinstall=str(e.get("reinstall", "")),
    )


def _pattern(eid: str, p: Any) -> Pattern:
    if not isinstance(p, dict) or set(p) - {"find", "re", "also", "unless", "weight", "field", "in", "label"}:
        raise KnowledgeError(f"{eid}: bad pattern {p!r:.80}")
    weight = p.get("weight")
    if not isinstance(weight, (int, float)) or not 0 < weight < 1:
        raise KnowledgeError(f"{eid}: pattern weight must be in (0, 1)")
    if "field" in p:
        if p["field"] not in FIELDS or not _strs(p, "in") or "find" in p:
            raise KnowledgeError(f"{eid}: field patterns need a known field and 'in' values, and no 'find'")
        return Pattern(weight=float(weight), field=p["field"], values=tuple(_strs(p, "in")))
    find = _str(p, "find")
    also, unless = tuple(_strs(p, "also")), tuple(_strs(p, "unless"))
    if any(s != s.lower() or s != s.strip() or not s for s in (find, *also, *unless)):
        raise KnowledgeError(f"{eid}: literals must be lower-case, trimmed and non-empty: {find!r}")
    regex = None
    if "re" in p:
        try:
            regex = re.compile(_str(p, "re"))
        except re.error as exc:
            raise KnowledgeError(f"{eid}: bad regex {p['re']!r}: {exc}") from exc
    label = _str(p, "label") if "label" in p else ""
    return Pattern(weight=float(weight), find=find, regex=regex, also=also, unless=unless, label=label)


def _remedy(eid: str, r: Any) -> Remedy:
    if not isinstance(r, dict) or set(r) - {"text", "commands", "intent"}:
        raise KnowledgeError(f"{eid}: bad remedy {r!r:.80}")
    commands = tuple(_strs(r, "commands"))
    if any(not _local_build(c) for c in commands if "pip install" in c):
        raise KnowledgeError(f"{eid}: installs are intents (the planner writes them), not commands")
    return Remedy(_str(r, "text"), commands, intent=_intent(eid, r["intent"]) if "intent" in r else None)


def _local_build(command: str) -> bool:
    """A build of a source folder already on disk, which resolves nothing from an index (`--no-deps .`)."""
    words = command.split("pip install", 1)[1].split()
    return "--no-deps" in words and [w for w in words if not w.startswith("-")] == ["."]


def _intent(eid: str, d: Any) -> Intent:
    """`{"install": "fa2"}` or `{"rebuild": "flash-attn", "env": {...}, "from_source": true}`."""
    from fa_doctor.catalog.implementations import BY_KEY
    from fa_doctor.model.intents import Install, Rebuild

    if isinstance(d, dict) and set(d) == {"install"} and d["install"] in BY_KEY:
        return Install(d["install"])
    if isinstance(d, dict) and "rebuild" in d and set(d) <= {"rebuild", "env", "from_source"}:
        env = d.get("env", {})
        if isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            return Rebuild(str(d["rebuild"]), "", tuple(env.items()), bool(d.get("from_source", False)))
    raise KnowledgeError(f"{eid}: bad intent {d!r:.80}")


def _str(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v.strip():
        raise KnowledgeError(f"{d.get('id', '?')}: '{key}' must be a non-empty string")
    return v


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key, [])
    if not isinstance(v, list):
        raise KnowledgeError(f"{d.get('id', '?')}: '{key}' must be a list")
    return v


def _strs(d: dict[str, Any], key: str) -> list[str]:
    v = _list(d, key)
    if any(not isinstance(s, str) or not s for s in v):
        raise KnowledgeError(f"{d.get('id', '?')}: '{key}' must hold non-empty strings")
    return v
