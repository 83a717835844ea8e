"""Reading and judging the reports, on every core when there are many.

Parsing is most of a merge's cost (about 90 µs per 15 KB report), and reports are independent: with hundreds
of files, or a JSON Lines stream of megabytes, worker processes read and judge them and send back only the
small `NodeReport`s, in order. A single core, few reports, or a platform where worker processes cannot start
(no semaphores in a container): the same work in this process.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

from fa_doctor.fleet.model import Refused
from fa_doctor.fleet.node import NodeReport, judge
from fa_doctor.fleet.read import Document, jsonl_start, lines, members, read_file, read_stream, split
from fa_doctor.frozen import frozen

PARALLEL_UNITS = 200  # files (or 64 KiB of JSON Lines): below this, starting workers costs more than it saves
MAX_WORKERS = 8
_SLICE = 4 << 20  # a JSON Lines buffer goes to the workers in slices of about this size
_UNIT_BYTES = 64 << 10

Judged = NodeReport | Refused


@frozen
class FileUnit:
    path: str
    size: int | None


@frozen
class BufferUnit:
    """Lines (or one document) already read: stdin, or a slice of it numbered from `first`."""

    source: str
    data: bytes | bytearray
    cut: bool
    first: int = 0  # 0: the whole buffer (one document or JSON Lines); n: JSON Lines from line n

    @property
    def weight(self) -> int:
        return max(1, len(self.data) // _UNIT_BYTES)


Unit = FileUnit | BufferUnit | Refused


def _judged(items: Iterable[Document | Refused]) -> list[Judged]:
    return [judge(i.source, i.doc) if isinstance(i, Document) else i for i in items]


def work(unit: Unit) -> list[Judged]:
    if isinstance(unit, Refused):
        return [unit]
    if isinstance(unit, FileUnit):
        return _judged(read_file(unit.path, unit.size))
    if unit.first:
        return _judged(lines(unit.source, unit.data, unit.cut, unit.first))
    return _judged(split(unit.source, unit.data, unit.cut))


def _slices(source: str, data: bytearray, cut: bool) -> Iterator[BufferUnit]:
    start, first, size = 0, 1, len(data)
    while start < size:
        end = data.find(b"\n", min(start + _SLICE, size))
        end = size if end < 0 else end + 1
        yield BufferUnit(source, bytes(data[start:end]), cut and end == size, first)
        first += data.count(b"\n", start, end)
        start = end


def units(paths: Sequence[str], stdin: BinaryIO | None) -> Iterator[Unit]:
    for member in members(paths):
        if isinstance(member, Refused):
            yield member
        elif member is not None:
            yield FileUnit(*member)
        elif stdin is not None:
            got = read_stream(stdin)
            if isinstance(got, str):
                yield Refused("stdin", got)
                continue
            data, cut = got
            if len(data) > _SLICE and jsonl_start(data):
                yield from _slices("stdin", data, cut)
            else:
                yield BufferUnit("stdin", data, cut)


def _quiet() -> None:
    """A worker leaves signals to the parent (which ends it); a terminal's Ctrl-C reaches the whole group."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS)


def judged(paths: Sequence[str], stdin: BinaryIO | None, jobs: int | None = None) -> Iterator[Judged]:
    todo = list(units(paths, stdin))
    weight = sum(u.weight if isinstance(u, BufferUnit) else 1 for u in todo)
    workers = _workers() if jobs is None else jobs
    pool = None
    if workers > 1 and weight >= PARALLEL_UNITS:
        import multiprocessing

        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        try:
            pool = context.Pool(workers, initializer=_quiet)
        except (OSError, ImportError, ValueError):  # no /dev/shm for its semaphores, and the like
            pool = None
    if pool is None:
        for unit in todo:
            yield from work(unit)
        return
    with pool:
        chunk = max(1, len(todo) // (workers * 8))
        for batch in pool.imap(work, todo, chunksize=chunk):
            yield from batch
