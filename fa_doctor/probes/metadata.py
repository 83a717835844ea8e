"""Distribution metadata files read exactly as importlib.metadata (and so pip) reads them.

``importlib.metadata`` parses METADATA / PKG-INFO with ``email.message_from_string`` (policy compat32) and
then re-dedents folded values (``importlib.metadata._adapters.Message``). Importing ``email.parser`` costs
10-20 ms on every run, so this module applies the same rules by hand (email/feedparser.py, compat32):

- lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (nothing else: not ``\\x0c`` nor ``\\u2028``);
- a line starting with a space or a tab continues the previous header, even when it holds only whitespace
  (sglang 0.5.23 folds its whole Apache licence into ``License:`` that way);
- a header line is ``Name:...`` where the name is printable ASCII without spaces; a line starting with
  ``From `` is an mbox envelope: ignored, or the body's first line when it is the block's last line;
- an empty line ends the headers and is dropped; any other line that is neither a header nor a
  continuation also ends them (a defect) and is the first line of the body;
- a value is the text after the colon, leading blanks of its first line removed, continuation lines kept
  with their line ends, trailing ``\\r``/``\\n`` removed; a folded value is then dedented as
  ``textwrap.dedent(" " * 8 + value)`` does;
- a non-empty body is also the last ``Description``.

One difference is kept on purpose: under a ``Content-Type: multipart/*`` or ``message/*`` header, email
parses the body as MIME parts; here the body stays text (no released metadata declares a Content-Type).
``parse`` takes text as email does (``\r`` and ``\r\n`` end lines); ``file_text`` turns a file's bytes into
the text importlib.metadata would parse (universal newlines).
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

from fa_doctor.regex import lazy

_EOL = lazy(r"\r\n|\r|\n")
# The header block: lines that email.feedparser.headerRE accepts (a field, a continuation, an envelope).
_BLOCK = lazy(r"(?:(?:From |[\041-\071\073-\176]*:|[\t ])[^\r\n]*(?:\r\n|\r|\n|\Z))*")
# Where a field starts inside it (after the first line): a line that does not begin with a blank.
_FIELD = lazy(r"(?:\r\n|\r(?!\n)|\n)(?=[^ \t])")


class Metadata(NamedTuple):  # immutable; a NamedTuple costs 0.15 ms to define, a frozen dataclass 0.6 ms
    headers: tuple[tuple[str, str], ...]  # (name as written, value as importlib.metadata returns it), in order
    body: str  # the text after the header block, as email keeps it ('' when none)

    def items(self) -> tuple[tuple[str, str], ...]:
        """The fields as importlib.metadata lists them: the headers, then the body as a last Description."""
        return (*self.headers, ("Description", self.body)) if self.body else self.headers

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of a field (names compare case-insensitively), as ``Message.get``."""
        key = name.lower()
        return next((v for k, v in self.items() if k.lower() == key), default)

    def get_all(self, name: str) -> list[str]:
        """Every value of a field, in order; empty where ``Message.get_all`` answers None."""
        key = name.lower()
        return [v for k, v in self.items() if k.lower() == key]


def _dedent(text: str) -> str:
    """textwrap.dedent, line by line (3x faster on a folded licence): whitespace-only lines become empty, then
    the margin that every other line starts with is removed. Lines are split at "\n" only, as its regexes do."""
    lines = [line if line.strip(" \t") else "" for line in text.split("\n")]
    margin: str | None = None
    for line in lines:
        if not line:
            continue
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if margin is None or margin.startswith(indent):
            margin = indent
        elif not indent.startswith(margin):
            common = 0
            while margin[common] == indent[common]:  # neither is a prefix of the other: they differ before the end
                common += 1
            margin = margin[:common]
    if margin:
        lines = [line[len(margin) :] if line.startswith(margin) else line for line in lines]
    return "\n".join(lines)


def _value(field: str) -> str:
    """A header's value from its lines (the first one from its colon on), as compat32 and the adapter give it."""
    value = field.lstrip(" \t").rstrip("\r\n")
    return _dedent(" " * 8 + value) if "\n" in value else value


def parse(text: str) -> Metadata:
    """The headers and body of a METADATA or PKG-INFO text."""
    block = _BLOCK.match(text)  # always matches, if only the empty string
    end = block.end() if block else 0
    body_start = end + (2 if text.startswith("\r\n", end) else 1 if text.startswith(("\r", "\n"), end) else 0)
    bounds = [0, *(m.end() for m in _FIELD.finditer(text, 0, end)), end] if end else []
    headers: list[tuple[str, str]] = []
    body_prefix = ""
    for start, stop in pairwise(bounds):  # one field with its continuation lines
        if text[start] in " \t":  # continuation lines with no field before them are dropped
            continue
        if text.startswith("From ", start):  # envelope: first line ignored, the block's last line is the body's
            eol = _EOL.search(text, start, stop)
            if start and stop == end and (eol is None or eol.end() == stop):  # one line, and the last
                body_prefix = text[start:stop]
            continue
        colon = text.index(":", start)
        if colon > start:  # ":value" has no name: dropped, and so are its continuation lines
            headers.append((text[start:colon], _value(text[colon + 1 : stop])))
    return Metadata(tuple(headers), body_prefix + text[body_start:])


def file_text(data: bytes) -> str:
    """A metadata file's bytes as importlib.metadata reads them (``Path.read_text(encoding="utf-8")``): UTF-8
    with universal newlines, so a file written with ``\r\n`` parses as one with ``\n``. Bad bytes are
    replaced where importlib.metadata would raise."""
    text = data.decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def requires_txt(text: str) -> list[str]:
    """An egg-info requires.txt as requirement strings, as ``Distribution.requires`` converts its sections:
    ``[extra]``, ``[:marker]`` and ``[extra:marker]`` become markers; nothing else is interpreted (a comment
    line stays a line, as it does for importlib.metadata)."""
    out: list[str] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        extra, _, marker = section.partition(":")
        if extra and marker:
            marker = f"({marker})"
        conditions = [c for c in (marker, extra and f'extra == "{extra}"') if c]
        space = " " if "@" in line else ""  # PEP 508: a URL requirement needs a space before its ';'
        out.append(line + space + ("; " + " and ".join(conditions) if conditions else ""))
    return out


def record_paths(text: str) -> tuple[str, ...]:
    """The paths (first column) of a dist-info RECORD, one csv row per line as importlib.metadata reads it."""
    import csv  # only RECORDs of FA packages are read

    lines = text.splitlines()
    try:
        rows = list(csv.reader(lines))
    except csv.Error:  # importlib.metadata raises here; a broken RECORD still names its files
        rows = [line.split(",") for line in lines]
    return tuple(row[0] for row in rows if row and row[0])


class DirectUrl(NamedTuple):
    url: str | None  # where it was installed from (PEP 610)
    editable_dir: str | None  # the source tree of an editable install from a local directory


def _file_url_path(url: str) -> str | None:
    if not url.startswith("file:"):
        return None
    rest = url[len("file:") :].split("?", 1)[0].split("#", 1)[0]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        rest = slash + path if host in ("", "localhost") else "//" + rest[2:]
    if "%" in rest:
        from urllib.parse import unquote  # rare: only percent-escaped paths need it

        rest = unquote(rest)
    return rest or None


def direct_url(text: str) -> DirectUrl:
    """A PEP 610 direct_url.json; anything malformed gives no facts rather than an error."""
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deeper than the stack
        return DirectUrl(None, None)
    if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not data["url"]:
        return DirectUrl(None, None)
    url: str = data["url"]
    dir_info = data.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return DirectUrl(url, _file_url_path(url) if editable else None)
