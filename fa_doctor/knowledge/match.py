"""Normalise a pasted error report, match it against the knowledge base and read its features, each at a bounded
cost (docs/explain.md)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from fa_doctor.knowledge.base import GROUP_KEYS, Entry, Pattern, load
from fa_doctor.knowledge.evidence import evidence, relevant, tokens
from fa_doctor.knowledge.extract import demangle, extract, first

MAX_CHARS = 1_000_000  # characters of a paste considered at all (its first 32k and its last 968k)
MAX_LINE = 4_096  # characters kept of one line (its first 1k and its last 3k)
MAX_ANALYSED = 128_000  # characters matched after de-duplication (its first 32k and its last 96k)
_HEAD = 32_000
_BEFORE, _AFTER = 160, 640  # a pattern's regex window around its literal
_EXTRA_BONUS, _MAX_BONUS = 0.02, 0.06

# An OSC (title, hyperlink) ends at BEL or ST; one cut off in a paste (no terminator on its line) loses only its
# introducer and number: it must not swallow the lines after it, where the error is.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)|\x1b\]\d{0,4};?|\x1b")
# Zero-width characters and typographic quotes NFKC keeps (str.translate is slow on non-ASCII text).
_ODD_CHARS = (
    *((c, "") for c in "\u200b\u200c\u200d\u2060\ufeff\u00ad"),
    *((c, "'") for c in "‘’‚‛′"),
    *((c, '"') for c in "“”„″"),
)
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[^\n]*$", re.M)
# Quote, comment and log prefixes: "> ", "# ", "[rank0]: ", "ERROR 07-07 02:22:12 [core.py:588] ",
# "(VllmWorker pid=1) ".
_PREFIX = re.compile(
    r"^[ \t]*(?:(?:[>#]+|\[rank\d{1,5}\]:|\((?:\w{1,40} )?(?:rank|pid|tp)\w{0,10}=[^)\n]{1,60}\)"
    r"|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]\n]{1,80}\])[ \t]*)+",
    re.M,
)
_HOMES = (
    ("/home/", re.compile(r"/home/[^/\s\\'\"]{1,64}(?=/)")),
    ("/Users/", re.compile(r"/Users/[^/\s\\'\"]{1,64}(?=/)")),
    (":\\Users\\", re.compile(r"[A-Za-z]:\\Users\\[^\\\s'\"]{1,64}(?=\\)")),
)
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """One line of plain text: ANSI, markdown, quote/log prefixes, width variants and home folders removed."""
    text = _cut(text, _HEAD, MAX_CHARS)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _distinct_lines(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        for odd, plain in _ODD_CHARS:
            text = text.replace(odd, plain)
    if "```" in text or "~~~" in text:
        text = _FENCE.sub("", text)
    text = _PREFIX.sub("", text)
    text = _distinct_lines(text)  # log lines that differed only by their prefix
    text = text.replace("`", "").replace("\\_", "_").replace("\\*", "*")
    for literal, home in _HOMES:
        if literal in text:
            text = home.sub("~", text)
    return _SPACE.sub(" ", text).strip()


def _distinct_lines(text: str) -> str:
    lines = text.split("\n")
    if max(map(len, lines)) > MAX_LINE:
        lines = [_cut(line, 1024, MAX_LINE, " ") for line in lines]
    return _cut("\n".join(dict.fromkeys(lines)), _HEAD, MAX_ANALYSED)


def _cut(text: str, head: int, size: int, sep: str = "\n") -> str:
    """text, or its first `head` and last `size - head` characters when it is longer than size."""
    return text if len(text) <= size else text[:head] + sep + text[len(text) - (size - head) :]


def lower(flat: str) -> str:
    """Lower-cased with every offset kept (a few characters grow when lower-cased: keep those as they are)."""
    low = flat.lower()
    return low if len(low) == len(flat) else "".join(c if len(c.lower()) != 1 else c.lower() for c in flat)


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    score: float
    groups: dict[str, str]  # named groups of the best pattern's regex, sliced from the case-kept text
    pattern: Pattern  # the best (highest-weight) pattern that matched


def match(entries: tuple[Entry, ...], flat: str, limit: int) -> tuple[list[Hit], dict[str, str]]:
    """Entries whose patterns match, best first, and every variable part found in the paste."""
    low = lower(flat)
    has = cache(low.__contains__)  # whether a literal occurs in low, each literal searched once
    found = extract(flat, low, has)
    hits: list[Hit] = []
    for entry in entries:
        matched = [(p, groups) for p in entry.patterns if (groups := _try(p, flat, low, found, has)) is not None]
        if not matched:
            continue
        best, groups = max(matched, key=lambda pg: pg[0].weight)
        # Independent evidence adds a little; a literal inside another one (or the same literal) is not.
        nested = [p for p, _ in matched if p.find and best.find and (p.find in best.find or best.find in p.find)]
        extra = [p for p, _ in matched if p is not best and p not in nested]
        bonus = min(_MAX_BONUS, _EXTRA_BONUS * len(extra))
        hits.append(Hit(entry, round(min(0.99, best.weight + bonus), 3), groups, best))
    hits.sort(key=lambda h: -h.score)  # stable: ties keep the file's order (specific entries first)
    return hits[:limit], found


def _try(p: Pattern, flat: str, low: str, found: dict[str, str], has: Callable[[str], bool]) -> dict[str, str] | None:
    """The named groups of a pattern that matches, None when it does not."""
    if p.field:
        return {} if found.get(p.field) in p.values else None
    if not has(p.find) or any(has(u) for u in p.unless) or (p.also and not any(has(a) for a in p.also)):
        return None
    if p.regex is None:
        return {}
    m = first(low, p.find, p.regex, _BEFORE, _AFTER)
    return None if m is None else {k: flat[m.start(k) : m.end(k)] for k, v in m.groupdict().items() if v is not None}


def extracted_for(entry: Entry, found: dict[str, str], groups: dict[str, str]) -> dict[str, str]:
    """The variable parts this entry asks for; its own pattern's named groups win over the global ones."""
    merged = {**found, **groups}
    if "symbol" in entry.extract and (demangled := demangle(merged.get("symbol", ""))):
        merged["demangled"] = demangled
    keys = [k for g in entry.extract for k in GROUP_KEYS[g]]
    return {k: merged[k] for k in dict.fromkeys(keys) if merged.get(k)}


_ALL_HITS = 1_000  # every entry that matches (the model weighs them all)
# Evidence rules and words read the paste's first 8k and last 32k characters (where the command and the final
# error are); the patterns read all that match.py analyses. Keeps a megabyte paste within a few milliseconds.
_EV_HEAD, _EV_TAIL = 8_000, 32_000


@dataclass(frozen=True, slots=True)
class Features:
    hits: tuple[Hit, ...]  # entries whose patterns match, best first
    found: dict[str, str]  # extract()'s variable parts
    evidence: dict[str, str]  # "ev:NAME" and "entry:ID" -> the reason shown to the user
    words: tuple[str, ...]  # "tok:WORD"
    relevant: bool  # the paste is about FlashAttention's world at all

    @property
    def patterns(self) -> dict[str, float]:
        """category -> the best pattern score in it."""
        best: dict[str, float] = {}
        for h in self.hits:
            best[h.entry.category] = max(best.get(h.entry.category, 0.0), h.score)
        return best


def featurise(flat: str) -> Features:
    """Everything explain reads from a paste (flat: normalise()'s output), computed once."""
    hits, found = match(load(), flat, _ALL_HITS)
    flat = _cut(flat, _EV_HEAD, _EV_HEAD + _EV_TAIL, " ")
    low = lower(flat)
    has = cache(low.__contains__)  # whether a literal occurs in low, each literal searched once
    ev = evidence(flat, low, found, has)
    for h in hits:
        ev.setdefault("entry:" + h.entry.id, f"the text matches {h.entry.id} ('{h.pattern.find or h.pattern.field}')")
    return Features(tuple(hits), found, ev, tuple("tok:" + w for w in tokens(low)), bool(hits) or relevant(ev, has))
