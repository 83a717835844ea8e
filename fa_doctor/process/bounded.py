"""A call with a deadline: probes that could hang on a hostile file system (a FIFO, a dead NFS mount) run in a
daemon thread that is given up on, not waited for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Deadline(Exception):
    """A bounded call did not finish in time."""


def bounded(call: Callable[[], T], seconds: float, what: str) -> T:
    """Run `call` in a daemon thread; give up after `seconds` (the thread is abandoned, not killed)."""
    box: dict[str, object] = {}

    def runner() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=runner, name=f"fa-doctor {what}", daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Deadline(f"{what} did not finish within {seconds:.0f} s (after {time.monotonic() - start:.1f} s)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
