"""Reading report files, folders and JSON Lines on stdin: every read bounded, every bad input named, none dropped.

A file holds one JSON document (what `check --json` writes, pretty-printed), JSON Lines (one report a line), or
documents one after another (`cat reports/*.json`, `kubectl logs` of many pods); a folder contributes its
`*.json` and `*.jsonl` files, sorted, not recursing; `-` reads any of these on stdin. What cannot be parsed
becomes a `Refused` entry with the reason, never an exception.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from fa_doctor.fleet.model import Refused
from fa_doctor.probes import files

SOURCE_LIMIT = 512 << 20  # one file or stdin
REPORT_LIMIT = 16 << 20  # one report: a real one is 5-50 KB
EXTENSIONS = (".json", ".jsonl")
_CHUNK = 1 << 20
_BLANK = re.compile(rb"\s*")
_WS = re.compile(r"\s*")
_NEXT = re.compile(r"\n\{")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Document:
    source: str  # "reports/a.json", "all.jsonl:12", "stdin:3"
    doc: Any  # the parsed JSON value, not yet judged


def _parse(data: bytes | bytearray) -> tuple[Any, str | None]:
    try:
        return json.loads(data), None
    except RecursionError:
        return None, "nested too deeply"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; truncated?)"
    except ValueError as exc:  # an integer too long to convert, and the like
        return None, f"not valid JSON ({exc})"


def split(source: str, data: bytes | bytearray, cut: bool) -> Iterator[Document | Refused]:
    """One document, or JSON Lines. `cut`: the source was longer than the read limit (its tail is missing)."""
    if not data.strip():
        yield Refused(source, "empty")
        return
    if len(data) <= REPORT_LIMIT:
        doc, problem = _parse(data)
        if problem is None:
            yield Document(source, doc)
            return
    else:
        problem = f"longer than {REPORT_LIMIT >> 20} MiB"
    if jsonl_start(data):
        yield from lines(source, data, cut)
        return
    if _concatenated(data):
        yield from stream(source, data, cut)
        return
    if cut:
        problem = f"longer than the {SOURCE_LIMIT >> 20} MiB read limit"
    yield Refused(source, problem or "not valid JSON")  # one bad document


def _concatenated(data: bytes | bytearray) -> bool:
    """Pretty-printed documents one after another (`cat *.json`, `kubectl logs` of many pods): the first one is
    whole, and something follows it."""
    try:
        text = data[: REPORT_LIMIT + 1].decode("utf-8", "replace")
        _, end = _DECODER.raw_decode(text, _WS.match(text).end())  # type: ignore[union-attr]
    except (ValueError, RecursionError):
        return False
    return end < len(text.rstrip())


def stream(source: str, data: bytes | bytearray, cut: bool) -> Iterator[Document | Refused]:
    """Documents one after another, each named by the line it starts on; what is not JSON between them (a log
    line) is refused up to the next line that starts with `{`."""
    text = data.decode("utf-8", "replace")
    pos, line, counted = 0, 1, 0
    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return
        line += text.count("\n", counted, pos)
        counted = pos
        where = f"{source}:{line}"
        try:
            doc, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            after = _NEXT.search(text, pos + 1)
            why = "not valid JSON" + (f" ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else "")
            if cut and after is None:
                why = f"cut at the {SOURCE_LIMIT >> 20} MiB read limit"
            yield Refused(where, why)
            if after is None:
                return
            pos = after.start() + 1
            continue
        if end - pos > REPORT_LIMIT:
            yield Refused(where, f"longer than {REPORT_LIMIT >> 20} MiB")
        else:
            yield Document(where, doc)
        pos = end


def jsonl_start(data: bytes | bytearray) -> bool:
    """Whether a buffer too long for one report reads as JSON Lines: its first line is a whole document."""
    start = _BLANK.match(data).end()  # type: ignore[union-attr]  # matches always (also nothing)
    end = data.find(b"\n", start)
    first = data[start : end if end >= 0 else len(data)]
    return len(first) <= REPORT_LIMIT and _parse(first)[1] is None


def lines(source: str, data: bytes | bytearray, cut: bool) -> Iterator[Document | Refused]:
    """Line by line, without splitting the whole buffer at once."""
    number, start, size = 0, 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        end = size if end < 0 else end
        number += 1
        line = data[start:end]
        start = end + 1
        if not line.strip():
            continue
        where = f"{source}:{number}"
        if cut and end == size:
            yield Refused(where, f"cut at the {SOURCE_LIMIT >> 20} MiB read limit")
        elif len(line) > REPORT_LIMIT:
            yield Refused(where, f"a line longer than {REPORT_LIMIT >> 20} MiB")
        else:
            doc, problem = _parse(line)
            yield Document(where, doc) if problem is None else Refused(where, problem)


def read_file(path: str, size: int | None = None) -> Iterator[Document | Refused]:
    """`size` (from stat): read exactly that much; a file that grew meanwhile is read again up to the limit.
    (Asking for the whole limit at once makes the reader allocate it: 512 MiB per file.)"""
    limit = SOURCE_LIMIT if size is None else min(SOURCE_LIMIT, size)
    got = files.read(path, limit)
    if got.truncated and limit < SOURCE_LIMIT:
        got = files.read(path, SOURCE_LIMIT)
    if got.data is None:
        yield Refused(path, got.problem or "unreadable")
        return
    yield from split(path, got.data, got.truncated)


def read_stream(stream: BinaryIO) -> tuple[bytearray, bool] | str:
    """All of a stream up to the limit (in chunks: one read of the whole limit would allocate it), and whether
    it went on past it; or what went wrong."""
    data = bytearray()
    try:
        while len(data) <= SOURCE_LIMIT:
            chunk = stream.read(min(_CHUNK, SOURCE_LIMIT + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"
    cut = len(data) > SOURCE_LIMIT
    del data[SOURCE_LIMIT:]
    return data, cut


_Member = tuple[str, "int | None", "tuple[int, int] | None"]


def _members(path: str) -> list[_Member]:
    """(path, size, (device, inode)) of each file to read: a folder's report files, or the path itself."""
    try:
        with os.scandir(path) as entries:
            device = os.stat(path).st_dev
            found = [e for e in entries if e.name.endswith(EXTENSIONS) and not e.name.startswith(".")]
            out: list[_Member] = []
            for e in sorted(found, key=lambda e: e.name):
                try:
                    info = e.stat()
                    out.append((e.path, info.st_size, (info.st_dev, info.st_ino)))
                except OSError:  # vanished, or a dangling link: read() names the problem
                    out.append((e.path, None, (device, e.inode())))
            return out
    except (NotADirectoryError, FileNotFoundError):
        pass
    except OSError:
        return []
    try:
        info = os.stat(path)
        return [(path, info.st_size, (info.st_dev, info.st_ino))]
    except (OSError, ValueError):
        return [(path, None, None)]


def members(paths: Sequence[str]) -> Iterator[tuple[str, int | None] | Refused | None]:
    """Each file to read as (path, size), in the order given, a file named twice (also through a folder) once;
    None where `-` (stdin) stands; a Refused entry for a folder with nothing to read."""
    seen: set[tuple[int, int]] = set()
    for path in paths:
        if path == "-":
            yield None
            continue
        found = _members(path)
        if not found:
            yield Refused(path, "a folder without *.json or *.jsonl files (or unreadable)")
        for member, size, key in found:
            if key is not None:
                if key in seen:
                    continue
                seen.add(key)
            yield member, size


def documents(paths: Sequence[str], stdin: BinaryIO | None) -> Iterator[Document | Refused]:
    """Every document of the paths, in order, one source in memory at a time; `-` reads `stdin`."""
    for member in members(paths):
        if isinstance(member, Refused):
            yield member
        elif member is not None:
            yield from read_file(*member)
        elif stdin is not None:
            got = read_stream(stdin)
            if isinstance(got, str):
                yield Refused("stdin", got)
            else:
                yield from split("stdin", *got)
