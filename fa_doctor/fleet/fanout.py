"""`fa-doctor fleet ray`: one `check` on every alive node of a Ray cluster (the cluster multi-node vLLM and SGLang
already run), pinned there with all its GPUs and no CPU, in a bounded child; what has not answered by the deadline
is unreachable (docs/fleet.md: Ray). Ray is imported here only, when the command runs."""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fa_doctor.fleet.model import Unreachable
from fa_doctor.fleet.read import REPORT_LIMIT

_STDERR_TAIL = 600
_CONNECT_SECONDS = 10
_TASK = {"num_cpus": 0, "max_retries": 0, "name": "fa-doctor check"}
_MARGIN = 5.0  # seconds between the child's own deadline and the driver's: the answer still travels back


@dataclass(frozen=True, slots=True)
class Answer:
    node_id: str
    report: bytes  # the check's stdout: one JSON document


class NoRay(Exception):
    """Ray is missing or the cluster cannot be reached: a usage problem (exit 2), said plainly."""


def check_on_node(argv: Sequence[str], node_id: str, timeout: float) -> tuple[int | None, bytes, str]:
    """Runs in a Ray worker on the node: the check in a bounded child, its report on stdout."""
    from fa_doctor.probes.environment import RAY_NODE_VAR
    from fa_doctor.process import proc

    env = {**os.environ, RAY_NODE_VAR: node_id}
    command = [sys.executable, "-m", "fa_doctor", "check", "--format", "json", "--no-color", *argv]
    done = proc.run(command, timeout, env=env, max_output=REPORT_LIMIT)
    return done.returncode, done.stdout, done.err()[-_STDERR_TAIL:]


def label(node: dict[str, Any]) -> str:
    host = node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "?"
    return f"{host} (ray:{str(node.get('NodeID', ''))[:12]})"


def _connect(address: str | None) -> Any:
    try:
        import ray
    except ImportError:
        raise NoRay("fleet ray needs Ray on this machine and the nodes: pip install 'fa-doctor[fleet]'") from None
    # Ray retries a GCS address that does not answer for minutes: a plain TCP connection says so in seconds
    # (ray://... and a name Ray resolves itself are left to Ray).
    host, _, port = (address or "").rpartition(":")
    if address and port.isdigit() and host and "://" not in address:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_SECONDS).close()
        except OSError as exc:
            why = f"nothing answers there ({exc.strerror or type(exc).__name__})"
            raise NoRay(f"cannot connect to a Ray cluster at {address}: {why}") from None
    try:
        ray.init(address=address or "auto", log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # ConnectionError, RuntimeError: Ray's words for "no cluster there"
        where = address or "auto (RAY_ADDRESS, or a cluster started on this machine)"
        raise NoRay(f"cannot connect to a Ray cluster at {where}: {exc}") from None
    return ray


def collect(
    address: str | None, argv: Sequence[str], deadline: float, progress: Callable[[str], None] | None = None
) -> tuple[list[Answer], list[Unreachable]]:
    ray = _connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(check_on_node)
        refs = {}
        for node in nodes:  # pinned there or nowhere; all its GPUs (the smoke test gets them), no CPU
            gpus = float(node.get("Resources", {}).get("GPU", 0))
            there = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            call = task.options(num_gpus=gpus, scheduling_strategy=there, **_TASK)
            refs[call.remote(list(argv), node["NodeID"], max(1.0, deadline - _MARGIN))] = node
        if progress:
            progress(f"fa-doctor fleet: checking {len(nodes)} Ray node(s)")
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=deadline) if refs else ([], [])
        answers, unreachable = [], []
        for ref in ready:
            node = refs[ref]
            try:
                code, out, err = ray.get(ref)
            except Exception as exc:  # the task failed on the node: fa-doctor missing there, worker died, ...
                first = (str(exc).strip().splitlines() or [""])[-1][:_STDERR_TAIL]
                unreachable.append(Unreachable(label(node), f"the check task failed: {type(exc).__name__}: {first}"))
                continue
            if code is None or code < 0 or not out.strip():
                why = f"check ended without a report (exit {code}): {err.strip()[-_STDERR_TAIL:] or 'no output'}"
                unreachable.append(Unreachable(label(node), why))
            else:
                answers.append(Answer(node["NodeID"], out))
        for ref in pending:
            ray.cancel(ref, force=True)
            why = f"no report within {deadline:g} s (its GPUs held by a running server, or the node is stuck)"
            unreachable.append(Unreachable(label(refs[ref]), why))
        order = {node["NodeID"]: number for number, node in enumerate(nodes)}
        answers.sort(key=lambda a: order[a.node_id])
        return answers, sorted(unreachable, key=lambda u: u.node)
    finally:
        ray.shutdown()
