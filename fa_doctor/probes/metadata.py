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

import re
from dataclasses import dataclass

_EOL = re.compile(r"\r\n|\r|\n")
_HEADER = re.compile(r"From |[\041-\071\073-\176]*:|[\t ]")  # email.feedparser.headerRE
_BLANK_LINE = re.compile(r"^[ \t]+$", re.MULTILINE)
_INDENT = re.compile(r"(^[ \t]*)(?:[^ \t\n])", re.MULTILINE)


@dataclass(frozen=True)
class Metadata:
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
    """textwrap.dedent: blank out whitespace-only lines, then strip the margin that all other lines share."""
    text = _BLANK_LINE.sub("", text)
    margin: str | None = None
    for indent in _INDENT.findall(text):
        if margin is None or margin.startswith(indent):
            margin = indent
        elif not indent.startswith(margin):
            common = 0
            while common < len(margin) and margin[common] == indent[common]:
                common += 1
            margin = margin[:common]
    return re.sub("(?m)^" + margin, "", text) if margin else text


def _value(lines: list[str]) -> str:
    value = lines[0].split(":", 1)[1].lstrip(" \t") + "".join(lines[1:])
    value = value.rstrip("\r\n")
    return _dedent(" " * 8 + value) if "\n" in value else value


def parse(text: str) -> Metadata:
    """The headers and body of a METADATA or PKG-INFO text."""
    lines: list[str] = []
    pos, end = 0, len(text)
    body_start = end
    while pos < end:
        eol = _EOL.search(text, pos)
        stop = eol.end() if eol else end
        line = text[pos:stop]
        if not _HEADER.match(line):
            body_start = stop if line[0] in "\r\n" else pos  # the separator is dropped, a stray line kept
            break
        lines.append(line)
        pos = stop
    headers: list[tuple[str, str]] = []
    current: list[str] = []
    body_prefix = ""
    for number, line in enumerate(lines):
        if line[0] in " \t":
            if current:  # a continuation with no header before it is dropped
                current.append(line)
            continue
        if current:
            headers.append((current[0].split(":", 1)[0], _value(current)))
            current = []
        if line.startswith("From "):  # envelope: first line ignored, last line is the body's, others dropped
            if number and number == len(lines) - 1:
                body_prefix = line
            continue
        if line[0] != ":":  # ":value" has no name: dropped, and so are its continuation lines
            current = [line]
    if current:
        headers.append((current[0].split(":", 1)[0], _value(current)))
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


@dataclass(frozen=True)
class DirectUrl:
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
