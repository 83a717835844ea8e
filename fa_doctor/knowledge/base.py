"""The knowledge base's types, and errors.json loaded and validated once per process (a malformed entry raises
KnowledgeError, so a bad edit fails tests/test_explain_kb.py, not a user's run)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

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
# The causes classify.py names; each entry maps to one (smoke_cause) so `check` and `explain` share this table.
CAUSES = (
    "torch_abi",
    "glibc",
    "cuda_runtime",
    "cute_dsl_missing",
    "no_kernel_image",
    "gpu_too_old",
    "driver_too_old",
    "no_cuda",
    "module_missing",
    "sgl_kernel_fa3",
    "unknown",
)
# Groups of variable parts an entry may ask for, and their keys; extract.py fills them.
GROUP_KEYS: dict[str, tuple[str, ...]] = {
    "symbol": ("symbol", "demangled", "symbol_kind", "symbol_version", "abi"),
    "library": ("library",),
    "glibc": ("glibc_requires", "glibc_version", "required_by"),
    "module": ("module", "name"),
    "versions": ("torch", "flash_attn", "cuda", "cuda_tag", "cxx11abi", "python", "driver"),
    "arch": ("arch", "capability", "gpu"),
    "fa_impl_ver": ("fa_impl_ver", "override"),
    "wheel": ("wheel",),
    "backend": ("backend", "override"),
}
# Fields a pattern may test instead of the text (computed from the raw, case-preserved paste).
FIELDS = ("symbol_kind",)

_ID = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9-]+)+$")
_FINDING = re.compile(r"^[a-z]+\.[a-z_]+$")


class KnowledgeError(ValueError):
    """errors.json is malformed (a packaging or editing bug, caught by the tests)."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One way a failure mode shows in a paste (the fields: docs/explain.md)."""

    weight: float
    find: str = ""
    regex: re.Pattern[str] | None = None
    also: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    field: str = ""
    values: tuple[str, ...] = ()
    label: str = ""  # what classify.py calls this text (its evidence "matched"), when it names it


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


_ENTRY_KEYS = frozenset(f.name for f in fields(Entry))  # the keys an entry of errors.json may have


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
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(remedies=[remedy_dict(r) for r in self.remedies], extracted=dict(self.extracted))
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@lru_cache(maxsize=1)
def load() -> tuple[Entry, ...]:
    """The knowledge base, validated; the same tuple on every call."""
    raw = resources.files("fa_doctor.knowledge").joinpath("errors.json").read_text(encoding="utf-8")
    return parse(json.loads(raw))


def parse(doc: Any) -> tuple[Entry, ...]:
    ok = isinstance(doc, dict) and doc.get("version") == 1 and isinstance(doc.get("entries"), list)
    _require(ok, "errors.json must be {'version': 1, 'entries': [...]}")
    entries = tuple(_entry(e) for e in doc["entries"])
    ids = [e.id for e in entries]
    for eid in ids:
        _require(ids.count(eid) == 1, f"duplicate id {eid}")
    return entries


def _require(ok: object, message: str) -> None:
    if not ok:
        raise KnowledgeError(message)


def _entry(e: Any) -> Entry:
    if not isinstance(e, dict):
        raise KnowledgeError(f"entry is not an object: {e!r:.80}")
    eid = _str(e, "id")
    _require(not set(e) - _ENTRY_KEYS, f"{eid}: unknown keys {sorted(set(e) - _ENTRY_KEYS)}")
    _require(_ID.match(eid), f"{eid}: id must be dotted lower-case")
    category = _str(e, "category")
    _require(category in CATEGORIES, f"{eid}: unknown category {category}")
    smoke = e.get("smoke_cause", "unknown")
    _require(smoke in CAUSES, f"{eid}: unknown smoke_cause {smoke}")
    patterns = tuple(_pattern(eid, p) for p in _list(e, "patterns"))
    remedies = tuple(_remedy(eid, r) for r in _list(e, "remedies"))
    _require(patterns and remedies, f"{eid}: needs at least one pattern and one remedy")
    links = tuple(_strs(e, "links"))
    _require(all(link.startswith("https://") for link in links), f"{eid}: links must be https URLs")
    confirm = tuple(_strs(e, "confirm_with"))
    _require(all(map(_FINDING.match, confirm)), f"{eid}: confirm_with holds finding ids such as package.broken")
    extract = tuple(_strs(e, "extract"))
    _require(set(extract) <= set(GROUP_KEYS), f"{eid}: unknown extract groups {sorted(set(extract) - set(GROUP_KEYS))}")
    title, cause, reinstall = _str(e, "title"), _str(e, "cause"), str(e.get("reinstall", ""))
    return Entry(eid, category, title, cause, patterns, remedies, links, confirm, extract, smoke, reinstall)


def _pattern(eid: str, p: Any) -> Pattern:
    if not isinstance(p, dict) or set(p) - {"find", "re", "also", "unless", "weight", "field", "in", "label"}:
        raise KnowledgeError(f"{eid}: bad pattern {p!r:.80}")
    weight: Any = p.get("weight")
    _require(isinstance(weight, (int, float)) and 0 < weight < 1, f"{eid}: pattern weight must be in (0, 1)")
    if "field" in p:
        ok = p["field"] in FIELDS and _strs(p, "in") and "find" not in p
        _require(ok, f"{eid}: field patterns need a known field and 'in' values, and no 'find'")
        return Pattern(float(weight), field=p["field"], values=tuple(_strs(p, "in")))
    find = _str(p, "find")
    also, unless = tuple(_strs(p, "also")), tuple(_strs(p, "unless"))
    ok = all(s == s.lower() and s == s.strip() and s for s in (find, *also, *unless))
    _require(ok, f"{eid}: literals must be lower-case, trimmed and non-empty: {find!r}")
    try:
        regex = re.compile(_str(p, "re")) if "re" in p else None
    except re.error as exc:
        raise KnowledgeError(f"{eid}: bad regex {p['re']!r}: {exc}") from exc
    return Pattern(float(weight), find, regex, also, unless, label=_str(p, "label") if "label" in p else "")


def _remedy(eid: str, r: Any) -> Remedy:
    if not isinstance(r, dict) or set(r) - {"text", "commands", "intent"}:
        raise KnowledgeError(f"{eid}: bad remedy {r!r:.80}")
    commands = tuple(_strs(r, "commands"))
    ok = all(_local_build(c) for c in commands if "pip install" in c)
    _require(ok, f"{eid}: installs are intents (the planner writes them), not commands")
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
    _require(isinstance(v, str) and v.strip(), f"{d.get('id', '?')}: '{key}' must be a non-empty string")
    return str(v)


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key, [])
    _require(isinstance(v, list), f"{d.get('id', '?')}: '{key}' must be a list")
    return list(v)


def _strs(d: dict[str, Any], key: str) -> list[str]:
    v = _list(d, key)
    _require(all(isinstance(s, str) and s for s in v), f"{d.get('id', '?')}: '{key}' must hold non-empty strings")
    return v
