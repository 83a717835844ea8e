"""Run the smoke child in the target interpreter and turn whatever happens to it into a SmokeResult.

The child (child.py) is started as `python -c <source>` so that sys.path[0] is the working directory, as it is
for `python -m sglang...`; running it by path would put fa_doctor/smoke/ first on sys.path. It reports JSON
lines on a private pipe; this module reads them in a thread (live progress, partial results survive a crash),
bounds the run with a timeout that kills the child's whole process group, and classifies the errors.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from fa_doctor.smoke import APIS, CaseResult, SmokeResult, SmokeTarget, case_specs
from fa_doctor.smoke.classify import ImportProblem, classify

# Versions the child looks up only when the import fails, for exact remedies.
_DISTS = {
    "fa2": ("flash-attn",),
    "fa3": ("flash_attn_3",),
    "sgl": ("sglang-kernel", "sgl-kernel"),
    "cute": ("flash-attn-4", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-core", "quack-kernels", "apache-tvm-ffi"),
    "vllm": ("vllm",),
}
_TAIL = 4096


def default_cache_dir(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fa-doctor", "cute-dsl")


@functools.cache
def child_source() -> str:
    return Path(__file__).with_name("child.py").read_text(encoding="utf-8")


def run_smoke(
    python: str,
    target: SmokeTarget,
    *,
    device: str = "cuda",
    timeout: float = 300.0,
    use_cache: bool = True,
    cache_dir: str | None = None,
    visible_devices: str | None = None,
    progress: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> SmokeResult:
    if target.api not in APIS:
        raise ValueError(f"unknown FA api {target.api!r}; expected one of {', '.join(APIS)}")
    child_env = dict(os.environ if env is None else env)
    notes: list[str] = []
    used_cache: str | None = None
    warm = False
    if target.api == "cute":
        if use_cache:
            path = os.path.abspath(cache_dir or default_cache_dir(child_env))
            try:
                os.makedirs(path, mode=0o700, exist_ok=True)
                with os.scandir(path) as entries:
                    warm = any(True for _ in entries)
                used_cache = path
            except OSError as exc:
                notes.append(f"FA4 compile cache disabled: cannot create {path}: {exc}")
        child_env["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = "1" if used_cache else "0"
        if used_cache:
            child_env["FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"] = used_cache
    if visible_devices is not None:
        child_env["CUDA_VISIBLE_DEVICES"] = visible_devices
    messages = {
        "import": f"importing {target.module}",
        "first_call": "compiling FA4 kernels (first run)"
        if target.api == "cute" and not warm
        else "running first FA kernel call",
        "check": "checking against fp32 reference",
    }
    base: dict[str, Any] = {
        "key": target.key,
        "module": target.module,
        "api": target.api,
        "python": python,
        "timeout": timeout,
        "visible_devices": visible_devices,
        "cache_dir": used_cache,
    }
    specs = case_specs(target.api)
    config = {
        "module": target.module,
        "api": target.api,
        "device": device,
        "cases": list(specs),
        "seed": 0,
        "dists": list(_DISTS[target.api]),
    }
    reader = _Reader(messages, progress)
    start = time.perf_counter()
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            [python, "-c", child_source(), json.dumps({**config, "fd": wfd})],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(wfd,),
            env=child_env,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        os.close(rfd)
        os.close(wfd)
        phases = {"total": time.perf_counter() - start}
        return SmokeResult(status="crashed", phases=phases, stderr_tail=f"cannot start {python}: {exc}", **base)
    os.close(wfd)
    threads = reader.start(rfd, proc)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # On timeout (or Ctrl-C: the child's own session does not get SIGINT) the child; otherwise any helper
        # processes it left behind.
        _kill_group(proc)
    # A child stuck in the kernel (uninterruptible GPU wait) cannot be reaped: report without its exit status.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)
    for thread in threads:
        thread.join(timeout=2.0)
    total = time.perf_counter() - start
    return reader.result(base, specs, proc.returncode, timed_out, total, notes)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Reader:
    """Collects the child's events and output tails from reader threads."""

    def __init__(self, messages: Mapping[str, str], progress: Callable[[str], None] | None) -> None:
        self.messages = messages
        self.progress = progress
        self.events: list[dict[str, Any]] = []
        self.tails: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.lock = threading.Lock()

    def start(self, rfd: int, proc: subprocess.Popen[bytes]) -> list[threading.Thread]:
        assert proc.stdout is not None and proc.stderr is not None
        jobs: list[Callable[[], None]] = [
            functools.partial(self._events, os.fdopen(rfd, "rb")),
            functools.partial(self._tail, proc.stdout, "stdout"),
            functools.partial(self._tail, proc.stderr, "stderr"),
        ]
        threads = [threading.Thread(target=job, daemon=True, name="fa-doctor-smoke") for job in jobs]
        for thread in threads:
            thread.start()
        return threads

    def _events(self, stream: IO[bytes]) -> None:
        # A reader thread must never die with a traceback on the user's terminal.
        with stream, contextlib.suppress(OSError):
            for line in stream:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                if not isinstance(event, dict):
                    continue
                with self.lock:
                    self.events.append(event)
                if event.get("event") == "phase" and event.get("state") == "start" and self.progress:
                    message = self.messages.get(str(event.get("name")))
                    if message:
                        try:
                            self.progress(message)
                        except Exception:  # a broken progress callback must not lose results
                            self.progress = None

    def _tail(self, stream: IO[bytes], name: str) -> None:
        with stream, contextlib.suppress(OSError):
            while chunk := os.read(stream.fileno(), 65536):
                with self.lock:
                    buf = self.tails[name]
                    buf += chunk
                    del buf[:-_TAIL]

    def result(
        self,
        base: dict[str, Any],
        specs: tuple[dict[str, Any], ...],
        rc: int | None,
        timed_out: bool,
        total: float,
        notes: list[str],
    ) -> SmokeResult:
        with self.lock:
            events = list(self.events)
            stdout = self.tails["stdout"].decode("utf-8", "replace")
            stderr = self.tails["stderr"].decode("utf-8", "replace")
        starts: dict[str, float] = {}
        ends: dict[str, float] = {}
        info: dict[str, Any] = {}
        by_name = {str(s["name"]): s for s in specs}
        cases: list[tuple[CaseResult, bool]] = []
        warns = list(notes)
        failure: dict[str, Any] | None = None
        import_failed = done = False
        for ev in events:
            kind = ev.get("event")
            if kind == "phase":
                (starts if ev.get("state") == "start" else ends)[str(ev.get("name"))] = float(ev.get("t", 0.0))
            elif kind == "info":
                info.update(ev)
            elif kind == "warning":
                warns.append(str(ev.get("text")))
            elif kind == "case" and str(ev.get("name")) in by_name:
                cases.append((_case(by_name[str(ev.get("name"))], ev), ev.get("error") is not None))
            elif kind in ("import_error", "fatal") and failure is None:
                failure, import_failed = ev, kind == "import_error"
            elif kind == "done":
                done = True
        phases = {name: ends[name] - starts[name] for name in ends if name in starts}
        phases["total"] = total
        # import_torch is a part of import: name the outer phase.
        running = [name for name in starts if name not in ends and name != "import_torch"]
        raised = [ev.get("error") for ev in events if ev.get("event") == "case" and ev.get("error")]
        if import_failed:
            status = "import_failed"
        elif timed_out:
            status = "timeout"
        elif failure is not None:
            status = "failed"
        elif not done:
            status = "crashed"
        elif raised:
            status, failure = "failed", raised[0]
        else:
            status = "passed" if all(c.passed for c, _ in cases) else "mismatch"
        sig = None
        if rc is not None and rc < 0 and not timed_out:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
        return SmokeResult(
            status=status,
            phases=phases,
            cases=tuple(c for c, _ in cases),
            error=_problem(failure) if failure is not None and status in ("import_failed", "failed") else None,
            signal=sig,
            returncode=rc,
            stderr_tail=stderr,
            stdout_tail=stdout,
            warnings=tuple(warns),
            module_file=_opt(info.get("module_file")),
            flash_attn_origin=_opt(info.get("flash_attn_origin")),
            device_name=_opt(info.get("device_name")),
            last_phase=running[-1] if running and status in ("crashed", "timeout") else None,
            environment={str(k): str(v) for k, v in dict(info.get("environment") or {}).items()},
            **base,
        )


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _case(spec: Mapping[str, Any], ev: Mapping[str, Any]) -> CaseResult:
    err = ev.get("error")
    text = f"{err.get('type')}: {err.get('message')}" if isinstance(err, dict) else _opt(ev.get("problem"))
    max_err = ev.get("max_abs_err")
    tol = float(spec["tolerance"])
    value = float(max_err) if isinstance(max_err, (int, float)) else None
    seconds = ev.get("seconds")
    return CaseResult(
        name=str(spec["name"]),
        function=str(spec["function"]),
        dtype=str(spec["dtype"]),
        head_dim=int(spec["head_dim"]),
        causal=bool(spec["causal"]),
        max_abs_err=value,
        tolerance=tol,
        passed=text is None and value is not None and value <= tol,
        seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
        error=text,
    )


def _problem(ev: Mapping[str, Any]) -> ImportProblem:
    chain = [str(c) for c in ev.get("chain") or []]
    problem = classify(str(ev.get("type", "")), str(ev.get("message", "")), chain)
    extra = {"traceback": str(ev.get("traceback", "")), "stage": str(ev.get("stage", "call"))}
    return replace(problem, evidence={**problem.evidence, **extra})


__all__ = ["CaseResult", "ImportProblem", "SmokeResult", "SmokeTarget", "case_specs", "classify", "run_smoke"]
