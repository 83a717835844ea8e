"""Reading report files, folders and JSON Lines on stdin: every read bounded, every bad input named, none dropped.

A file holds one JSON document (what `check --json` writes, pretty-printed) or JSON Lines (one report a line);
a folder contributes its `*.json` and `*.jsonl` files, sorted, not recursing; `-` is JSON Lines (or one
document) on stdin. What cannot be parsed becomes a `Refused` entry with the reason, never an exception.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from fa_doctor.fleet.model import Refused
from fa_doctor.probes import files

SOURCE_LIMIT = 512 << 20  # one file or stdin
REPORT_LIMIT = 16 << 20  # one report: a real one is 5-50 KB
EXTENSIONS = (".json", ".jsonl")


@dataclass(frozen=True)
class Document:
    source: str  # "reports/a.json", "all.jsonl:12", "stdin:3"
    doc: Any  # the parsed JSON value, not yet judged


def _parse(data: bytes) -> tuple[Any, str | None]:
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


def split(source: str, data: bytes, cut: bool) -> Iterator[Document | Refused]:
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
    start = len(data) - len(data.lstrip())
    end = data.find(b"\n", start)
    first = data[start : end if end >= 0 else len(data)]
    if len(first) > REPORT_LIMIT or _parse(first)[1] is not None:  # not JSON Lines either: one bad document
        if cut:
            problem = f"longer than the {SOURCE_LIMIT >> 20} MiB read limit"
        yield Refused(source, problem or "not valid JSON")
        return
    yield from _lines(source, data, cut)


def _lines(source: str, data: bytes, cut: bool) -> Iterator[Document | Refused]:
    """Line by line, without splitting the whole buffer at once (a 500 MB stream is not copied twice)."""
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


def read_file(path: str) -> Iterator[Document | Refused]:
    got = files.read(path, SOURCE_LIMIT)
    if got.data is None:
        yield Refused(path, got.problem or "unreadable")
        return
    yield from split(path, got.data, got.truncated)


def read_stream(stream: BinaryIO, label: str = "stdin") -> Iterator[Document | Refused]:
    try:
        data = stream.read(SOURCE_LIMIT + 1)
    except OSError as exc:
        yield Refused(label, f"unreadable: {exc.strerror or type(exc).__name__}")
        return
    yield from split(label, data[:SOURCE_LIMIT], len(data) > SOURCE_LIMIT)


def _folder(path: str) -> list[str] | None:
    try:
        with os.scandir(path) as entries:
            return sorted(e.path for e in entries if e.name.endswith(EXTENSIONS) and not e.name.startswith("."))
    except (NotADirectoryError, FileNotFoundError):
        return None
    except OSError:
        return []


def read_all(paths: Sequence[str], stdin: BinaryIO | None) -> Iterator[Document | Refused]:
    """Every document of every source, in the order given; a file named twice (also through a folder) once."""
    seen: set[str] = set()
    for path in paths:
        if path == "-":
            if stdin is not None:
                yield from read_stream(stdin)
            continue
        members = _folder(path)
        if members is not None and not members:
            yield Refused(path, "a folder without *.json or *.jsonl files (or unreadable)")
        for member in members if members is not None else [path]:
            key = os.path.realpath(member)
            if key in seen:
                continue
            seen.add(key)
            yield from read_file(member)
