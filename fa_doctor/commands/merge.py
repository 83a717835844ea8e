"""`fa-doctor merge PATH... | -`: node reports (files, folders, JSON Lines on stdin) read as one fleet report."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from fa_doctor.fleet.merge import Merger
from fa_doctor.fleet.model import FleetPayload
from fa_doctor.fleet.read import documents
from fa_doctor.fleet.verdict import fleet_result
from fa_doctor.model.result import Result

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class MergeOptions:
    paths: tuple[str, ...]
    strict: bool = False
    expect: int | None = None  # the fleet's size: fewer reports fail (fleet.missing)


_TTY = "`-` reads reports from standard input: pipe them in (cat reports/*.jsonl | fa-doctor merge -)"


def _stdin(paths: tuple[str, ...]) -> BinaryIO | None:
    if "-" not in paths or sys.stdin is None:
        return None
    return None if sys.stdin.isatty() else sys.stdin.buffer


def run(options: MergeOptions, progress: Progress | None = None, early: Any = None) -> Result:
    start = time.perf_counter()
    merger = Merger()
    stdin = _stdin(options.paths)
    if "-" in options.paths and stdin is None:
        return fleet_result("merge", FleetPayload(), {}, options.strict, _TTY)
    # Parsing makes millions of short-lived acyclic objects while the kept summaries grow: the cyclic collector
    # would rescan those summaries again and again (a third of the time at 10,000 reports) and find nothing.
    gc.disable()
    try:
        for item in documents(options.paths, stdin):
            merger.add(item)
    finally:
        gc.enable()
    read = time.perf_counter()
    payload = merger.payload(expected=options.expect)
    timings = {"read": read - start, "merge": time.perf_counter() - read}
    timings["total"] = time.perf_counter() - start
    return fleet_result("merge", payload, timings, options.strict)
