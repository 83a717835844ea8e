"""Report files, folders and stdin read as a stream of documents, memory bounded whatever the input's length,
every bad input named or counted, none dropped (docs/fleet.md: "How to read it" and "Scale" say how)."""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

from fa_doctor.fleet.model import Refused
from fa_doctor.probes import files

REPORT_LIMIT = 16 << 20  # one document: a real report is 5-50 KB
EXTENSIONS = (".json", ".jsonl")
CHUNK = 1 << 20
_START = "\n{"  # where a next document may start: a line that starts with `{`
_FIRST = frozenset('{["-0123456789tfn')  # what a JSON document can start with
_BLANKS = " \t\r\n"
_BLANK = re.compile(f"[{_BLANKS}]*")
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_FIRST_SIZE, _MIN_SIZE = 64 << 10, 64
# What an error may stand on when the document was only cut short: nothing, or the start of a literal, a number
# or a `\\uXXXX` escape. Anything else is a real error, found without reading on.
_CUT = re.compile(r"[ \t\r\n]*|u[0-9a-fA-F]{0,3}|[-+.eE0-9]{1,6}|tr?u?|fa?l?s?|nu?l?|Na?|-?(?:I[nfity]{0,6})")


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


class Document(NamedTuple):  # one per document read: a tuple is 3x cheaper to make than a frozen dataclass
    source: str  # "reports/a.json", "all.jsonl:12", "stdin:3"
    doc: Any  # the parsed JSON value, not yet judged
    when: float = 0.0  # when it was written: its file's mtime; for stdin, when merge read it (the newest)


_Piece = tuple[int, Any, "str | None"]  # the line it starts on, the document, or why it is not one


class _Reader:
    """One source as text, cut into documents; holds at most one document and one chunk at a time."""

    def __init__(self, stream: BinaryIO, chunk: int, limit: int, regular: bool = False) -> None:
        self.stream, self.chunk, self.limit = stream, chunk, limit
        self.regular = regular  # a regular file: a short read is its end (a pipe may pause)
        self.decoder: codecs.IncrementalDecoder | None = None
        self.text, self.pos, self.line, self.counted, self.eof = "", 0, 1, 0, False
        self.size = _FIRST_SIZE  # how far the first slice of a document reaches (twice the last document's length)

    def _more(self, at_least: int = 0) -> bool:
        """Read on, dropping what was consumed; False at the end of the stream."""
        if self.eof:
            return False
        want = max(self.chunk, at_least)
        data = self.stream.read(want)
        self.eof = not data or (self.regular and len(data) < want)
        if self.decoder is None:  # UTF-8 (a BOM dropped), or UTF-16/32 as json.loads would take them
            encoding = json.detect_encoding(data[:4]) if data else "utf-8"
            self.decoder = codecs.getincrementaldecoder(encoding)("replace")
        self.line += self.text.count("\n", self.counted, self.pos)
        self.text = self.text[self.pos :] + self.decoder.decode(data, final=self.eof)
        self.pos = self.counted = 0
        return not self.eof or bool(self.text)

    def _skip_blank(self) -> bool:
        """To the next non-blank character; False at the end."""
        text, pos = self.text, self.pos
        if pos + 1 < len(text) and text[pos] == "\n" and text[pos + 1] not in _BLANKS:  # JSON Lines: the usual
            self.pos = pos + 1
            return True
        while True:
            self.pos = _BLANK.match(self.text, self.pos).end()  # type: ignore[union-attr]  # matches always
            if self.pos < len(self.text):
                return True
            if not self._more():
                return False

    def _skip_to_start(self, after: int) -> None:
        """Past everything up to the next line that starts with `{`, reading on without keeping what is skipped."""
        while True:
            if (found := self.text.find(_START, max(after, self.pos))) >= 0:
                self.pos = found + 1
                return
            after, self.pos = 0, max(self.pos, len(self.text) - 1)  # keep a last "\n": a "{" may follow it
            if not self._more():
                self.pos = len(self.text)
                return

    def documents(self, source: str, when: float) -> Iterator[Document | Refused]:
        """A source of one document is named by itself; of several, each by `source:line`."""
        if not self._skip_blank():
            yield Refused(source, "empty")
            return
        piece, several = self._one(), False
        while self._skip_blank():
            yield _item(f"{source}:{piece[0]}", piece, when)
            piece, several = self._one(), True
        yield _item(f"{source}:{piece[0]}" if several else source, piece, when)

    def _refuse(self, line: int, problem: str, resume: int) -> _Piece:
        self._skip_to_start(resume)
        self.size = max(_MIN_SIZE, self.size // 2)  # lines of junk: soon slices of a few bytes each
        return line, None, problem

    def _one(self) -> _Piece:
        """The document at the current position (not blank), parsed from a slice twice the last one's length (a
        parse error costs that much); one that goes on past its slice is parsed again from one twice as long."""
        self.line += self.text.count("\n", self.counted, self.pos)
        self.counted = start = self.pos
        line = self.line
        if self.text[start] not in _FIRST:  # a log line, not JSON: no need to read on to know
            return self._refuse(line, "not valid JSON (a line of text, not a JSON document)", start + 1)
        size = self.size
        while True:
            end = min(start + size, len(self.text))
            if end == len(self.text) and not self.eof and end - start <= self.limit:
                self._more(end - start)  # at least as much again: a long document is read a few times, not once a chunk
                start = self.pos
                continue
            piece = self.text[start:end]
            try:
                try:
                    doc, used = _SCAN(piece, 0)  # raw_decode without its frame: the same scanner
                except StopIteration as stop:
                    raise json.JSONDecodeError("Expecting value", piece, stop.value) from None
            except RecursionError:
                return self._refuse(line, "nested too deeply", start + 1)
            except json.JSONDecodeError as exc:
                goes_on = exc.msg.startswith("Unterminated string") or _CUT.fullmatch(piece, exc.pos) is not None
                if goes_on and end - start > self.limit:
                    return self._refuse(line, f"longer than {_size(self.limit)}", end)
                if goes_on and end < len(self.text):  # cut by the slice, not by the end of the input
                    size = 2 * (end - start)
                    continue
                where = f"{exc.msg.removesuffix(' at')} at line {line + exc.lineno - 1} column {exc.colno}"
                return self._refuse(line, f"not valid JSON ({where}{'; truncated?' if goes_on else ''})", start + 1)
            except ValueError as exc:  # an integer too long to convert, and the like
                return self._refuse(line, f"not valid JSON ({exc})", start + 1)
            if used == len(piece) and end < len(self.text) and not isinstance(doc, (dict, list)):
                size = 2 * size  # a number cut by the slice: it may go on
                continue
            self.pos = start + used
            self.size = max(_MIN_SIZE, 2 * used)
            if used > self.limit:
                return line, None, f"longer than {_size(self.limit)}"
            return line, doc, None


def _item(name: str, piece: _Piece, when: float) -> Document | Refused:
    _, doc, problem = piece
    return Document(name, doc, when) if problem is None else Refused(name, problem)


def read_stream(
    source: str, stream: BinaryIO, when: float, chunk: int | None = None, regular: bool = False
) -> Iterator[Document | Refused]:
    """Every document of a stream, in order, however long the stream is."""
    reader = _Reader(stream, chunk or CHUNK, REPORT_LIMIT, regular)
    try:
        yield from reader.documents(source, when)
    except OSError as exc:
        yield Refused(source, f"unreadable: {exc.strerror or type(exc).__name__}")


def split(source: str, data: bytes) -> Iterator[Document | Refused]:
    """The documents of one buffer (`fleet ray`: a node's output)."""
    return read_stream(source, io.BytesIO(data), time.time())


def read_file(path: str) -> Iterator[Document | Refused]:
    try:
        with files.open_regular(path) as fh:
            info = os.fstat(fh.fileno())
            chunk = max(1, min(CHUNK, info.st_size + 1))  # a small file in one read, not a whole chunk allocated
            yield from read_stream(path, fh, info.st_mtime, chunk, regular=True)
    except files.NotRegular as exc:
        yield Refused(path, f"{exc.kind}, not a regular file")
    except (FileNotFoundError, NotADirectoryError):
        yield Refused(path, "no such file")
    except OSError as exc:
        yield Refused(path, f"unreadable: {exc.strerror or type(exc).__name__}")
    except ValueError as exc:
        yield Refused(path, f"unreadable: {exc}")


_Member = tuple[str, "tuple[int, int] | None"]


def _members(path: str) -> list[_Member]:
    """(path, (device, inode)) of each file to read: a folder's report files, sorted, or the path itself."""
    try:
        with os.scandir(path) as entries:
            device = os.stat(path).st_dev
            found = [(e.name, e.inode()) for e in entries if e.name.endswith(EXTENSIONS) and not e.name.startswith(".")]
        return [(os.path.join(path, name), (device, inode)) for name, inode in sorted(found)]
    except (NotADirectoryError, FileNotFoundError):
        pass
    except OSError:
        return []
    try:
        info = os.stat(path)
        return [(path, (info.st_dev, info.st_ino))]
    except (OSError, ValueError):
        return [(path, None)]


def documents(paths: Sequence[str], stdin: BinaryIO | None) -> Iterator[Document | Refused]:
    """Every document of the paths, in order, streamed; `-` reads `stdin`; a file named twice (also through a
    folder) is read once."""
    seen: set[tuple[int, int]] = set()
    for path in paths:
        if path == "-":
            if stdin is not None:
                yield from read_stream("stdin", stdin, time.time())
            continue
        found = _members(path)
        if not found:
            yield Refused(path, "a folder without *.json or *.jsonl files (or unreadable)")
        for member, key in found:
            if key not in seen:
                if key is not None:
                    seen.add(key)
                yield from read_file(member)
