"""`fa-doctor merge PATH... | -`: node reports (files, folders, JSON Lines on stdin) read as one fleet report."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from fa_doctor.fleet.merge import Merger
from fa_doctor.fleet.read import read_all
from fa_doctor.fleet.verdict import fleet_result
from fa_doctor.result import CannotRun, Result

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MergeOptions:
    paths: tuple[str, ...]
    strict: bool = False
    expect: int | None = None  # the fleet's size: fewer reports fail (fleet.missing)


def _stdin(paths: tuple[str, ...]) -> BinaryIO | None:
    if "-" not in paths:
        return None
    if sys.stdin is None or sys.stdin.isatty():
        raise CannotRun("`-` reads reports from standard input: pipe them in (cat reports/*.jsonl | fa-doctor merge -)")
    return sys.stdin.buffer


def run(options: MergeOptions, progress: Progress | None = None, early: Any = None) -> Result:
    start = time.perf_counter()
    merger = Merger()
    for item in read_all(options.paths, _stdin(options.paths)):
        merger.add(item)
    read = time.perf_counter()
    payload = merger.payload(expected=options.expect)
    timings = {"read": read - start, "merge": time.perf_counter() - read}
    timings["total"] = time.perf_counter() - start
    return fleet_result("merge", payload, timings, options.strict)
