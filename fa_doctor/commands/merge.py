"""`fa-doctor merge PATH... | -`: node reports (files, folders, JSON Lines on stdin) read as one fleet report."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fa_doctor.fleet.merge import Merger
from fa_doctor.fleet.model import FleetPayload
from fa_doctor.fleet.read import documents
from fa_doctor.fleet.verdict import fleet_result
from fa_doctor.model.result import Result


@dataclass(frozen=True, slots=True)
class MergeOptions:
    paths: tuple[str, ...]
    strict: bool = False
    expect: int | None = None  # the fleet's size: fewer reports fail (fleet.missing)


def run(options: MergeOptions, progress: Callable[[str], None] | None = None, early: Any = None) -> Result:
    start = time.perf_counter()
    stdin = None
    if "-" in options.paths:
        if sys.stdin is None or sys.stdin.isatty():
            why = "`-` reads reports from standard input: pipe them in (cat reports/*.jsonl | fa-doctor merge -)"
            return fleet_result("merge", FleetPayload(), {}, options.strict, why)
        stdin = sys.stdin.buffer
    merger = Merger()
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
