"""Run the smoke child in the target interpreter (`python -c <source>`: sys.path[0] is the working directory, as for
`python -m sglang...`) and turn whatever happens to it into a SmokeResult. Its JSON lines on a private pipe are read
as they come (live progress; partial results survive a crash) and trusted in nothing: a malformed line is dropped, a
malformed field ignored. fa_doctor.process.proc bounds the run."""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from fa_doctor.catalog import names
from fa_doctor.knowledge.classify import ImportProblem, classify
from fa_doctor.process import proc
from fa_doctor.smoke import APIS, CaseResult, SmokeResult, SmokeTarget, cache_folder, case_specs

# Versions the child looks up only when the import fails, for exact remedies.
_DISTS = {
    "fa2": (names.FLASH_ATTN,),
    "fa3": ("flash_attn_3",),
    "sgl": names.SGL_KERNELS,
    "cute": (names.FLASH_ATTN_4, names.CUTLASS_DSL, names.DSL_CORE, names.QUACK, names.TVM_FFI),
    "vllm": (names.VLLM,),
}
# What the FA4 compile cache's identity records the versions of (see child.cache_identity).
_CACHE_DISTS = (*_DISTS["cute"], names.DSL_BASE, names.SGLANG, names.SGLANG_KERNEL, names.TORCH)
_TAIL = 4096
# Bounds on what the child may send: it runs the target's code, which may write anything on the pipe.
_MAX_LINE = 4 << 20  # the `loaded` event lists every file the child loaded
_MAX_EVENTS = 10000
_MAX_WARNINGS = 50
_MAX_LOADED = 20000  # files a child reports it loaded (torch and triton: ~3,000)
_MAX_TEXT = 8000
_MAX_CHAIN = 20
_NAME = 200


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
    reap_seconds: float = 10.0,
    python_flags: Sequence[str] = (),
    cwd: str | None = None,
) -> SmokeResult:
    """Run the child, at most ``timeout`` s; then it and everything it started are gone. FA4 with ``use_cache``
    caches compiled kernels under ``cache_dir`` (docs/smoke.md, "FA4 compile cache"), never in the user's caches."""
    if target.api not in APIS:
        raise ValueError(f"unknown FA api {target.api!r}; expected one of {', '.join(APIS)}")
    child_env = dict(os.environ if env is None else env)
    notes: list[str] = []
    used_cache: str | None = None
    if target.api == "cute" and use_cache:
        path = os.path.abspath(cache_dir or cache_folder(child_env, "cute-dsl"))
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            used_cache = path
        except OSError as exc:
            notes.append(f"FA4 compile cache disabled: cannot create {path}: {exc}")
    if visible_devices is not None:
        child_env["CUDA_VISIBLE_DEVICES"] = visible_devices
    base = {**asdict(target), "python": python, "timeout": timeout, "visible_devices": visible_devices}
    specs = case_specs(target.api)
    config = {
        "module": target.module,
        "api": target.api,
        "device": device,
        "cases": list(specs),
        "dists": list(_DISTS[target.api]),
        "cache_root": used_cache,
        "cache_dists": list(_CACHE_DISTS) if target.api == "cute" else [],
        "parent": os.getpid(),
    }
    reader = _Reader(target.module, target.api == "cute", progress)
    start = time.perf_counter()
    rfd, wfd = os.pipe()
    try:
        argv = [python, *python_flags, "-c", child_source(), json.dumps({**config, "fd": wfd})]
        child = proc.Child(argv, env=child_env, cwd=cwd, pass_fds=(wfd,))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        os.close(rfd)
        os.close(wfd)
        phases = {"total": time.perf_counter() - start}
        return SmokeResult(status="crashed", phases=phases, stderr_tail=f"cannot start {python}: {exc}", **base)
    os.close(wfd)
    # A child stuck in the kernel (uninterruptible GPU wait) cannot be reaped: it is reported without its status.
    done = child.collect(timeout, max_output=_TAIL, extra={rfd: reader.feed}, reap=reap_seconds)
    return reader.result(base, specs, done, time.perf_counter() - start, notes)


class _Reader:
    """Collects the child's events, one JSON object a line (the target may write anything on that pipe)."""

    def __init__(self, module: str, cute: bool, progress: Callable[[str], None] | None) -> None:
        self.module, self.cute, self.progress = module, cute, progress
        self.events: list[dict[str, Any]] = []
        self.pending = bytearray()
        self.skipping = False  # inside a line longer than _MAX_LINE: dropped up to its end
        self.warm = False

    def feed(self, chunk: bytes) -> None:
        self.pending += chunk
        while (end := self.pending.find(b"\n")) >= 0:
            line = bytes(self.pending[:end])
            del self.pending[: end + 1]
            if not self.skipping:
                self._line(line)
            self.skipping = False
        if len(self.pending) > _MAX_LINE:
            self.pending.clear()
            self.skipping = True

    def _line(self, line: bytes) -> None:
        if len(self.events) >= _MAX_EVENTS:
            return
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            return  # a line cut short by a crash, or garbage
        if not isinstance(event, dict):
            return
        self.events.append(event)
        self.warm |= event.get("event") == "info" and event.get("cache_warm") is True
        starts = event.get("event") == "phase" and event.get("state") == "start"
        if starts and self.progress and (message := self._message(event.get("name"))):
            try:
                self.progress(message)
            except Exception:  # a broken progress callback must not lose results
                self.progress = None

    def _message(self, name: object) -> str | None:
        if name == "first_call":
            return (
                "compiling FA4 kernels (first run)" if self.cute and not self.warm else "running first FA kernel call"
            )
        return {"import": f"importing {self.module}", "check": "checking against fp32 reference"}.get(str(name))

    def result(
        self,
        base: dict[str, Any],
        specs: tuple[dict[str, Any], ...],
        done: proc.Completed,
        total: float,
        notes: list[str],
    ) -> SmokeResult:
        rc, timed_out = done.returncode, done.timed_out
        starts: dict[str, float] = {}
        ends: dict[str, float] = {}
        info: dict[str, Any] = {}
        by_name = {str(s["name"]): s for s in specs}
        cases: list[CaseResult] = []
        warns = list(notes)
        failure: dict[str, Any] | None = None
        import_failed = finished = False
        loaded: tuple[str, ...] = ()
        raised: list[dict[str, Any]] = []
        for ev in self.events:
            kind = ev.get("event")
            if kind == "phase":
                t = _finite(ev.get("t"))
                if t is not None and isinstance(ev.get("name"), str):
                    (starts if ev.get("state") == "start" else ends)[ev["name"][:_NAME]] = t
            elif kind == "info":
                info.update(ev)
            elif kind == "warning" and len(warns) < _MAX_WARNINGS:
                warns.append(_text(ev.get("text")) or "")
            elif kind == "case" and isinstance(ev.get("name"), str) and ev["name"] in by_name:
                cases.append(_case(by_name[ev["name"]], ev))
                if ev.get("error") is not None:
                    raised.append(_error(ev.get("error")))
            elif kind in ("import_error", "fatal") and failure is None:
                failure, import_failed = ev, kind == "import_error"
            elif kind == "loaded" and isinstance(ev.get("files"), list):
                loaded = tuple(f for f in ev["files"][:_MAX_LOADED] if isinstance(f, str) and f.startswith("/"))
            elif kind == "done":
                finished = True
        phases = {name: ends[name] - starts[name] for name in ends if name in starts}
        phases["total"] = total
        # import_torch is a part of import: name the outer phase.
        running = [name for name in starts if name not in ends and name != "import_torch"]
        if import_failed:
            status = "import_failed"
        elif timed_out:
            status = "timeout"
        elif failure is not None:
            status = "failed"
        elif not finished:
            status = "crashed"
        elif raised:
            status, failure = "failed", raised[0]
        else:
            status = "passed" if all(c.passed for c in cases) else "mismatch"
        sig = None
        if rc is not None and rc < 0 and not timed_out:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
        environment = info.get("environment")
        environment = environment.items() if isinstance(environment, dict) else ()
        return SmokeResult(
            status=status,
            phases=phases,
            cases=tuple(cases),
            error=_problem(failure) if failure is not None and status in ("import_failed", "failed") else None,
            signal=sig,
            returncode=rc,
            stderr_tail=done.err(),
            stdout_tail=done.out(),
            warnings=tuple(warns),
            module_file=_text(info.get("module_file")),
            flash_attn_origin=_text(info.get("flash_attn_origin")),
            loaded=loaded,
            device_name=_text(info.get("device_name")),
            cache_dir=_text(info["cache_dir"]) if isinstance(info.get("cache_dir"), str) else None,
            last_phase=running[-1] if running and status in ("crashed", "timeout") else None,
            environment={_text(k, _NAME) or "": _text(v) or "" for k, v in environment},
            **base,
        )


def _finite(value: object) -> float | None:
    """A number the report can hold: JSON has no NaN or Infinity, a bool is not a number, and an integer too big
    for a float (10**400 written out) is as invalid as Infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _text(value: object, limit: int = _MAX_TEXT) -> str | None:
    return None if value is None else str(value)[:limit]


def _error(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"type": "Error", "message": _text(value)}


def _case(spec: Mapping[str, Any], ev: Mapping[str, Any]) -> CaseResult:
    err = ev.get("error")
    if isinstance(err, dict):
        text: str | None = f"{_text(err.get('type'), _NAME)}: {_text(err.get('message'))}"
    elif err is not None:
        text = _text(err)
    else:
        text = _text(ev.get("problem"))
    value = _finite(ev.get("max_abs_err"))
    tol = float(spec["tolerance"])
    passed = text is None and value is not None and value <= tol
    ours = {k: spec[k] for k in ("name", "function", "dtype", "head_dim", "causal")}  # from case_specs()
    seconds = _finite(ev.get("seconds"))
    return CaseResult(**ours, max_abs_err=value, tolerance=tol, passed=passed, seconds=seconds, error=text)


def _problem(ev: Mapping[str, Any]) -> ImportProblem:
    chain_in = ev.get("chain")
    chain = [_text(c) or "" for c in chain_in[:_MAX_CHAIN]] if isinstance(chain_in, list) else []
    problem = classify(_text(ev.get("type"), _NAME) or "", _text(ev.get("message")) or "", chain)
    extra = {"traceback": _text(ev.get("traceback")) or "", "stage": _text(ev.get("stage"), _NAME) or "call"}
    return replace(problem, evidence={**problem.evidence, **extra})
