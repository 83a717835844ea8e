"""`fa-doctor fleet ENGINE`: run `check` on every node through the engine the cluster runs, and merge the
reports into one fleet report (as `merge` does). ENGINE: `ray`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fa_doctor.model.result import Result

# The check options `fleet` forwards to each node's check (when given), by parameter name.
CHECK_OPTIONS = "no_smoke smoke_all require_gpu no_cache strict python attention prefill decode gpus gpu_arch timeout"


@dataclass(frozen=True, slots=True)
class FleetOptions:
    engine: str
    address: str | None = None
    deadline: float = 600.0  # --node-timeout: a node that has not answered by then is unreachable
    check_args: tuple[str, ...] = ()  # the check options, as each node's `fa-doctor check` gets them
    strict: bool = False


def run(options: FleetOptions, progress: Callable[[str], None] | None = None, early: Any = None) -> Result:
    from fa_doctor.fleet.fanout import NoRay, collect
    from fa_doctor.fleet.merge import Merger
    from fa_doctor.fleet.model import FleetPayload
    from fa_doctor.fleet.read import split
    from fa_doctor.fleet.verdict import fleet_result

    start = time.perf_counter()
    try:
        answers, unreachable = collect(options.address, options.check_args, options.deadline, progress)
    except NoRay as exc:
        return fleet_result("fleet", FleetPayload(engine=options.engine), {}, options.strict, str(exc))
    asked = time.perf_counter()
    merger = Merger()
    for answer in answers:
        for item in split(f"ray:{answer.node_id[:12]}", answer.report):
            merger.add(item)
    payload = merger.payload(unreachable=unreachable, engine=options.engine)
    timings = {"nodes": asked - start, "merge": time.perf_counter() - asked, "total": time.perf_counter() - start}
    return fleet_result("fleet", payload, timings, options.strict)
